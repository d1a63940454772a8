"""The drift probe: a small fixed workload every `measure` run times between its groups (issue #21).

A machine's speed moves (a shared VM drifted 10-37 % over minutes, benchmarks/RESULTS.md): a LUT built in a
fast moment predicts too fast later. Every measurement run therefore times the same reference workload
after each of its groups, in the run's own backend and device, and records the samples as ordinary
measurement records of scope ``probe`` (name `PROBE_NAME`, variant ``original``). `build-lut` pools them
into one entry per context; `dsprof predict --probe SECONDS` times the reference again now, and
`probe_ratio` (now over the LUT's median) scales the prediction.

The reference is one MobileNetV2 inverted-residual block (`PROBE_NAME`), chosen from
``benchmarks/probe_choice.py``: of the candidates below it tracked the whole models' round-to-round
drift best on a drifting 2-core VM (docs/predictions.md, benchmarks/RESULTS.md "issue #21"). It runs
in the run's backend (not always PyTorch eager on the CPU) so that it sees what slows that backend's
models: a GPU's clock on CUDA, ONNX Runtime's thread pool.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from ..device_context import DeviceContext
from ..errors import DeviceError, UsageError
from ..models import count_macs, count_params
from .backends import BackendSettings, get_backend
from .fingerprint import environment, environment_id
from ..records.measurement import PROBE_NAME, PROBE_SCOPE
from .timing import TimingConfig, time_interleaved
from .workloads import Workload

__all__ = ["PROBE_NAME", "PROBE_SCOPE", "PROBE_BUDGET_S", "PROBE_SAMPLE_S", "candidate_probes", "probe_now", "probe_timing",
           "probe_workload", "time_probe"]
#: Seconds each timing of the probe lasts in a run (after each group) at most: short next to the groups.
PROBE_BUDGET_S = 0.25
#: Seconds one probe sample lasts at least: several scheduler time slices, so that a machine shared with other
#: processes slows the median by the share of the core it leaves (a 2 ms sample is either untouched or preempted).
PROBE_SAMPLE_S = 0.02


def probe_timing(timing: TimingConfig) -> TimingConfig:
    """The timing of the probe within a run with ``timing``: its budget and warm-up capped (`PROBE_BUDGET_S`), its
    samples at least `PROBE_SAMPLE_S` long (unless the run asks for no minimum, as the tests' fast runs do)."""
    return replace(timing, budget_s=min(timing.budget_s, PROBE_BUDGET_S), warmup_s=min(timing.warmup_s, 0.05),
                   min_sample_s=max(timing.min_sample_s, PROBE_SAMPLE_S) if timing.min_sample_s > 0 else 0.0)


def _seeded(module: nn.Module) -> nn.Module:
    """Deterministic weights (the timing does not depend on them, but a probe should be the same everywhere)."""
    gen = torch.Generator().manual_seed(21)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
    return module.eval()


class _AddOne(nn.Module):
    """A memory-bound pass: read and write a 16 MB tensor (more than the caches)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1.0


def candidate_probes() -> dict[str, tuple[nn.Module, tuple[int, int, int, int]]]:
    """The candidates ``benchmarks/probe_choice.py`` compares: name -> (module, input shape with batch 1)."""
    ir = nn.Sequential(
        nn.Conv2d(32, 192, 1), nn.ReLU6(),
        nn.Conv2d(192, 192, 3, padding=1, groups=192), nn.ReLU6(),
        nn.Conv2d(192, 32, 1),
    )
    return {
        PROBE_NAME: (_seeded(ir), (1, 32, 56, 56)),
        "probe-conv3x3": (_seeded(nn.Conv2d(64, 64, 3, padding=1)), (1, 64, 56, 56)),
        "probe-memory": (_AddOne().eval(), (1, 64, 256, 256)),
    }


def probe_workload() -> Workload:
    """The reference as a workload (scope ``probe``) for any backend; ``input_shape`` without the batch."""
    module, shape = candidate_probes()[PROBE_NAME]
    size = shape[2:]
    return Workload(PROBE_SCOPE, PROBE_NAME, "original", module, shape[1:], count_macs(module, size, shape[1]),
                    count_params(module))


def time_probe(prepare: Callable[[nn.Module, tuple[int, int, int, int], Path], Any], batch: int, workdir: Path,
               seconds: float) -> list[float]:
    """Samples (seconds per call) of the probe for about ``seconds``, prepared by a backend's ``prepare``
    (module, input shape with batch, folder)."""
    w = probe_workload()
    prepared = prepare(w.module, (batch, *w.input_shape), workdir)
    try:
        timing = TimingConfig(budget_s=seconds, warmup_s=min(0.2, seconds / 4), min_samples=5, max_samples=10_000,
                              target_precision=1e-6, min_sample_s=PROBE_SAMPLE_S)  # run to the budget
        with torch.inference_mode():
            result = time_interleaved({"probe": prepared.run}, timing, prepared.timer)["probe"]
        return list(result.samples_s)
    finally:
        prepared.close()


def probe_now(context: DeviceContext, seconds: float = 2.0) -> list[float]:
    """Samples (seconds per call) of the drift probe timed here for about ``seconds``, in ``context``'s
    backend, device, dtype, layout, batch and threads (the process's torch thread count is restored). A context
    of another environment (another machine, driver or library version) is refused: the probe compares this
    machine now with itself when the LUT was measured."""
    if not seconds > 0:
        raise UsageError(f"the probe needs a time in seconds > 0, got {seconds}")
    here = environment_id(environment())
    if context.env_id != here:
        raise DeviceError(
            f"the LUT context {context} was measured in environment {context.env_id}, this machine is {here}: the "
            "drift probe compares this machine now with itself then. Predict without `probe=`, or measure here "
            "(`dsprof measure`) and build a LUT of this environment"
        )
    settings = BackendSettings(context.backend, context.device, context.dtype, context.layout == "channels_last",
                               context.threads or None, context.compile)
    saved = torch.get_num_threads()
    try:
        backend = get_backend(settings)
        with tempfile.TemporaryDirectory(prefix="dsprof-probe-") as tmp:
            return time_probe(backend.prepare, context.batch, Path(tmp), seconds)
    finally:
        torch.set_num_threads(saved)
