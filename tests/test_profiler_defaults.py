"""Stable CPU defaults and the contention warning (issue #14).

The contention test makes the machine busy for real: a second process spins on the same core as
this one (both pinned to it), bounded in time, and `measure` must say so before its summary.
"""

import dataclasses
import os
import subprocess
import sys
import time

import pytest
import torch

from dsprof.cli import main
from dsprof.profiler import BackendSettings, TimingConfig, Workloads, measure
from dsprof.models import ModelRef
from dsprof.profiler.runner import CPU_SHARE_WARNING, DEFAULT_CPU_THREADS, contention_message, threads_note
from fast_timing import FEWER

pytestmark = pytest.mark.usefixtures("one_thread")
SPIN_LIMIT_S = 30  # the spinner ends on its own after this, whatever happens to the test


def test_default_threads_is_one_and_recorded(tmp_path):
    torch.set_num_threads(2)  # the process's count must not leak into the timing
    try:
        result = measure(ModelRef.of("mobilenet_v2", resolution=32),
                         workloads=Workloads(blocks="features.1", model_variants=()), timing=FEWER,
                         out=tmp_path / "m.jsonl", progress=False)
    finally:
        torch.set_num_threads(1)
    assert DEFAULT_CPU_THREADS == 1
    assert result.threads == 1 and not result.threads_given
    assert all(r.threads == 1 for r in result.measurements)
    assert "the default" in threads_note(result.threads, result.threads_given)
    assert "`settings=BackendSettings(threads=)`" in threads_note(2, True) and "2" in threads_note(2, True)  # `dsprof measure` says --threads


@pytest.mark.parametrize("backend", ["torch", "onnxruntime", "openvino"])
def test_the_default_one_thread_is_the_count_the_runtime_times_with(backend, tmp_path):
    """Not only recorded: the runtime runs on one thread. A record's CPU share is the CPU time the process got over
    what its recorded threads could use, so one thread reads at most 1 (plus a little bookkeeping), where two threads
    on two cores read near 2 (each runtime spins or splits its convolutions; measured 1.99 before the fix)."""
    torch.set_num_threads(2)  # the process's count (this machine's cores): what an unset count fell back to
    try:
        result = measure(ModelRef.of("mobilenet_v2", resolution=64), settings=BackendSettings(backend),
                         workloads=Workloads(blocks=None, variants=(), model_variants=("original",)),
                         timing=dataclasses.replace(FEWER, min_samples=10, max_samples=20, budget_s=0.3),
                         out=tmp_path / "m.jsonl", progress=False)
    finally:
        torch.set_num_threads(1)
    (record,) = [r for r in result.measurements if r.scope == "model"]
    assert record.threads == 1 and result.threads == 1
    # at most one thread's worth (how far below 1 it reads depends on how busy the machine is: not asserted)
    assert 0 < record.state_after["process_cpu_share"] < 1.15


def _with_signals(record, share, switches, load=None):
    state = {"process_cpu_share": share, "involuntary_switches_per_s": switches}
    if load is not None:
        state["load_avg_1m"] = load
    return dataclasses.replace(record, state_after=state)


def test_contention_rule(tmp_path):
    record = measure(ModelRef.of("mobilenet_v2", resolution=32), settings=BackendSettings(threads=1),
                     workloads=Workloads(blocks="features.1", variants=("original",), model_variants=()), timing=FEWER,
                     out=tmp_path / "m.jsonl", progress=False).measurements[0]
    quiet = [_with_signals(record, 0.97, 40.0)] * 3
    assert contention_message(quiet, 1) is None
    busy_one = [_with_signals(record, 0.5, 60.0, load=3.5)] * 3
    message = contention_message(busy_one, 1)
    assert message is not None and "50%" in message and "load average 3.5" in message
    # several threads: a low share alone may be serial code; it also takes frequent preemption
    assert contention_message([_with_signals(record, 0.5, 60.0)] * 3, 2) is None
    assert "`settings=BackendSettings(threads=1)`" in contention_message([_with_signals(record, 0.5, 300.0)] * 3, 2)
    # the median over groups decides: one contended group of three does not
    assert contention_message(quiet[:2] + busy_one[:1], 1) is None
    assert contention_message([], 1) is None


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity")
def test_contention_warning_with_a_spinning_process(tmp_path, capsys):
    saved = os.sched_getaffinity(0)
    core = min(saved)
    spinner = subprocess.Popen(
        [sys.executable, "-c",
         f"import os, time\nos.sched_setaffinity(0, {{{core}}})\nend = time.time() + {SPIN_LIMIT_S}\n"
         "while time.time() < end:\n    pass\n"]
    )
    try:
        os.sched_setaffinity(0, {core})  # this process and the spinner now share one core
        time.sleep(0.2)  # let the spinner start spinning
        timing = TimingConfig(warmup_s=0.05, warmup_min_iters=2, warmup_max_s=0.2, first_warmup_s=0.05,
                              min_samples=20, max_samples=200, target_precision=1e-6, budget_s=0.4, min_sample_s=0.002)
        args = ["measure", "--resolution", "32", "--blocks", "features.1,features.2", "--model-variants", "none",
                "--variants", "original,merged", "--out", str(tmp_path / "c.jsonl"), "--no-progress",
                "--budget", "0.4", "--min-samples", "20", "--target-precision", "0.000001", "--min-sample-time", "0.002"]
        assert main(args) == 0
        captured = capsys.readouterr()
        result = measure(ModelRef.of("mobilenet_v2", resolution=32),
                         workloads=Workloads(blocks="features.1", variants=("original", "merged"), model_variants=()),
                         timing=timing, out=tmp_path / "d.jsonl", progress=False)
    finally:
        os.sched_setaffinity(0, saved)
        spinner.kill()
        spinner.wait(timeout=10)
    shares = [r.state_after["process_cpu_share"] for r in result.measurements if r.scope != "probe"]
    assert max(shares) < CPU_SHARE_WARNING  # two runnable processes on one core: about half each
    assert result.contention is not None and "contended" in result.contention
    # the command line says so before the summary (stderr is written before the table on stdout)
    assert "warning: the machine is contended" in captured.err
    assert captured.out.splitlines()[0].startswith("CPU threads: 1 (the default")
