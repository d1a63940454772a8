"""The steady allocator: PyTorch's CPU activations stop paying page faults that depend on the process's
history (the context effect of issue #14). Page faults are counted by the kernel, not timed."""

import os
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

import dsprof
from dsprof.models import ModelRef, get_model
from dsprof.profiler import TimingConfig, Workloads, measure
from dsprof.profiler.fingerprint import ENV_ID_FIELDS

# Two 40 MB tensors made and freed per step, as a forward pass on a batch makes and frees activations.
# glibc maps requests above its mmap threshold (which it raises after frees, but never above 32 MiB)
# with fresh pages and unmaps them when freed: every step faults all 80 MB in again. (Smaller ones fault
# or not depending on the heap's history: 300 to 8,800 faults a step in runs of the same script.)
# Faults are counted by the kernel: no timing involved.
_STEPS = textwrap.dedent(
    """
    import resource, statistics, sys, torch
    if sys.argv[1] != "default":
        from dsprof.profiler.allocator import steady_allocator
        print(steady_allocator(), file=sys.stderr)
    def step():
        a = torch.ones(10_000_000); b = a + 1
        del a, b
    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(3):
        step()
    counts = []
    for _ in range(15):
        before = faults()
        step()
        counts.append(faults() - before)
    print(statistics.median(counts))  # the median step: the heap may still grow once or twice in a few steps
    """
)


def _faults_per_step(mode: str, **env: str) -> tuple[float, str]:
    done = subprocess.run([sys.executable, "-c", _STEPS, mode], capture_output=True, text=True, timeout=120, check=True,
                          env={**os.environ, **env})
    return float(done.stdout.strip()), done.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc thresholds: Linux only")
def test_steady_allocator_removes_the_page_faults_of_freed_activations():
    # 2 x 40 MB of fresh pages is 19,531 faults of 4 KiB: the default pays them every step, the steady
    # allocator none after the first steps.
    assert _faults_per_step("default")[0] > 0.9 * 19_531
    faults, said = _faults_per_step("steady")
    assert faults < 50 and "glibc malloc: no mmap" in said
    # DSPROF_ALLOCATOR=system keeps glibc's own behaviour, faults included
    faults, said = _faults_per_step("steady", DSPROF_ALLOCATOR="system")
    assert faults > 0.9 * 19_531 and "DSPROF_ALLOCATOR=system" in said


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc thresholds: Linux only")
def test_measure_records_the_allocator(tmp_path):
    timing = TimingConfig(warmup_s=0.002, warmup_max_s=0.05, min_samples=3, max_samples=5, budget_s=0.02, min_sample_s=2e-4)
    result = measure(ModelRef.of(get_model("mobilenet_v2", resolution=32, depths=[1] * 7), name="tiny"),
                     workloads=Workloads(variants=(), model_variants=("original",), blocks=None), out=tmp_path,
                     progress=False, timing=timing)
    record = result.measurements[0]
    assert record.environment["allocator"] == "glibc malloc: no mmap, trim threshold 1024 MiB"
    assert "allocator" not in ENV_ID_FIELDS  # records before and after the change stay in one LUT context
    devices = pd.read_csv(dsprof.report([result.path], tmp_path / "report").index.parent / "tables" / "devices.csv")
    assert list(devices["allocator"]) == ["glibc malloc: no mmap, trim threshold 1024 MiB"]  # the report's device table says so
