"""The timing of the tests that measure real models: as short as a run can be while every workload still gets a few
samples and paired rounds. A test asserts what was measured and how the records are shaped, never how fast (sizes
of errors are benchmark figures), so these settings are one place for the whole suite."""

from __future__ import annotations

from dataclasses import replace

from dsprof.profiler import TimingConfig

#: Five or six samples a workload, no warm-up beyond one call.
FAST = TimingConfig(warmup_s=0.0, warmup_min_iters=1, warmup_max_s=0.01, first_warmup_s=0.0,
                    min_samples=5, max_samples=6, budget_s=0.02, min_sample_s=0.0)
#: Three or four: where a test times many workloads and reads only that they were timed.
FEWER = replace(FAST, min_samples=3, max_samples=4, budget_s=0.01)

