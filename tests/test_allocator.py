"""The steady allocator: PyTorch's CPU activations stop paying page faults that depend on the process's
history (the context effect of issue #14). Page faults are counted by the kernel, not timed."""

import subprocess
import sys
import textwrap

import pytest

from dsprof.models import get_model
from dsprof.profiler import TimingConfig, measure
from dsprof.profiler.fingerprint import ENV_ID_FIELDS

# Three 12 MB tensors made and freed per step, as a forward pass makes and frees activations. glibc
# raises its mmap threshold after the first free, and its trim threshold to twice that, so the top of
# the heap (24 MB free) is handed back to the system after every step and faulted in again.
_STEPS = textwrap.dedent(
    """
    import resource, sys, torch
    if sys.argv[1] == "steady":
        from dsprof.profiler.allocator import steady_allocator
        print(steady_allocator(), file=sys.stderr)
    def step():
        a = torch.ones(3_000_000); b = torch.ones(3_000_000); c = a + b
        del a, b, c
    for _ in range(3):
        step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        step()
    print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10)
    """
)


def _faults_per_step(mode: str) -> float:
    done = subprocess.run([sys.executable, "-c", _STEPS, mode], capture_output=True, text=True, timeout=120, check=True)
    return float(done.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc thresholds: Linux only")
def test_steady_allocator_removes_the_page_faults_of_freed_activations():
    # 3 x 12 MB = 36 MB of fresh pages is 8,789 faults of 4 KiB: the default pays nearly all of them
    # every step, the steady allocator none after the first steps.
    assert _faults_per_step("default") > 4000
    assert _faults_per_step("steady") < 50


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc thresholds: Linux only")
def test_measure_records_the_allocator(tmp_path):
    timing = TimingConfig(warmup_s=0.002, warmup_max_s=0.05, min_samples=3, max_samples=5, budget_s=0.02, min_sample_s=2e-4)
    result = measure(get_model("mobilenet_v2", resolution=32, depths=[1] * 7), name="tiny", variants=(),
                     model_variants=("original",), blocks=None, out=tmp_path, progress=False, timing=timing)
    record = result.measurements[0]
    assert record.environment["allocator"] == "glibc malloc: mmap threshold 32 MiB, trim threshold 1024 MiB"
    assert "allocator" not in ENV_ID_FIELDS  # records before and after the change stay in one LUT context
