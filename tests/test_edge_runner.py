"""The bundle runner alone (dsprof/edge/runner.py): timing loop, statistics, Python 3.6 floor, imports,
TFLite benchmark_model flags and output parser. No model is exported here."""

from __future__ import annotations

import ast
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from dsprof.edge import runner
from dsprof.profiler import TimingConfig, median_relative_halfwidth, time_interleaved

RUNNER = Path(runner.__file__)
FIXTURE = Path(__file__).parent / "fixtures" / "benchmark_model_output.txt"


class FakeMachine:
    """A fake nanosecond clock; each workload call advances it by a seeded, noisy duration."""

    def __init__(self, costs_ns: dict[str, int], noise: float, seed: int) -> None:
        self.now, self.costs, self.noise, self.rng = 0, costs_ns, noise, random.Random(seed)

    def clock(self) -> int:
        return self.now

    def fn(self, name: str):
        def call() -> None:
            self.now += int(self.costs[name] * (1 + self.noise * self.rng.random()))

        return call


@pytest.mark.parametrize("noise,seed", [(0.0, 0), (0.3, 1), (2.0, 2)])
def test_runner_timing_loop_gives_the_profilers_samples(noise, seed):
    """Same clock, same calls: the runner's loop and the profiler's take the same samples and stop alike."""
    config = TimingConfig(warmup_s=0.01, min_samples=5, max_samples=300, budget_s=0.2, min_sample_s=2e-3)
    costs = {"original": 400_000, "merged": 150_000, "flops_matched": 2_500_000}
    a = FakeMachine(costs, noise, seed)
    theirs = time_interleaved({n: a.fn(n) for n in costs}, config, clock=a.clock)
    b = FakeMachine(costs, noise, seed)
    ours = runner.time_interleaved([(n, b.fn(n)) for n in costs], dict(vars(config)), clock=b.clock)
    for name in costs:
        assert ours[name]["samples_s"] == pytest.approx(list(theirs[name].samples_s), rel=1e-12)
        assert ours[name]["iterations_per_sample"] == theirs[name].iterations_per_sample
        assert ours[name]["warmup_iterations"] == theirs[name].warmup_iterations
        assert ours[name]["stop_reason"] == theirs[name].stop_reason


def test_runner_timing_loop_on_exact_costs():
    """1 ms and 3 ms per call, no noise: samples are exactly those, 5 and 2 calls fill a 5 ms sample,
    and the precision rule stops at min_samples."""
    m = FakeMachine({"a": 1_000_000, "b": 3_000_000}, 0.0, 0)
    config = dict(runner.TIMING_DEFAULTS, min_samples=7)
    out = runner.time_interleaved([("a", m.fn("a")), ("b", m.fn("b"))], config, clock=m.clock)
    assert out["a"]["samples_s"] == pytest.approx([1e-3] * 7, rel=1e-12)
    assert out["b"]["samples_s"] == pytest.approx([3e-3] * 7, rel=1e-12)
    assert (out["a"]["iterations_per_sample"], out["b"]["iterations_per_sample"]) == (5, 2)
    assert out["a"]["stop_reason"] == "precision"


def test_runner_timing_defaults_are_the_profilers():
    from dataclasses import asdict

    assert runner.TIMING_DEFAULTS == asdict(TimingConfig())


def test_runner_median_interval_is_the_profilers():
    rng = random.Random(3)
    for n in (2, 5, 6, 7, 10, 31, 100, 1000):
        samples = [rng.lognormvariate(0, 0.3) for _ in range(n)]
        for confidence in (0.9, 0.95, 0.99):
            assert runner.median_relative_halfwidth(samples, confidence) == pytest.approx(
                median_relative_halfwidth(samples, confidence), rel=1e-12)
    assert runner._z(0.95) == pytest.approx(1.959963984540054, abs=1e-12)  # the normal 97.5 % quantile
    assert math.isinf(runner.median_relative_halfwidth([1.0]))


def test_runner_needs_python_3_6_at_most():
    """vermin computes the lowest Python that runs the file (it reads the syntax and the stdlib calls)."""
    vermin = str(Path(sys.executable).with_name("vermin"))  # installed by the test extra
    done = subprocess.run([vermin, "--no-tips", "--violations", "-t=3.6-", str(RUNNER)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = subprocess.run([vermin, "--no-tips", str(RUNNER)], capture_output=True, text=True)
    minimum = next((line for line in shown.stdout.splitlines() if line.startswith("Minimum required versions:")), None)
    assert minimum is not None, shown.stdout  # "Minimum required versions: 3.5"
    major, minor = (int(v) for v in minimum.split(":")[1].strip().split(",")[-1].strip().split("."))
    assert (major, minor) <= (3, 6), minimum


def test_runner_imports_only_the_standard_library_numpy_and_runtimes():
    allowed = set(sys.stdlib_module_names) | {"numpy", "onnxruntime", "openvino", "ai_edge_litert", "tflite_runtime",
                                              "torch", "pkg_resources"}
    tree = ast.parse(RUNNER.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "the runner is copied alone: no relative imports"
            imported.add(node.module.split(".")[0])
    assert imported - allowed == set()
    assert "dsprof" not in imported


# -- benchmark_model ---------------------------------------------------------------------------------------


def test_benchmark_model_output_parsed_in_seconds():
    """Fixture written in the format of TFLite's benchmark_model.cc (Run: count= line after each
    'Running benchmark for at least' line; OnBenchmarkEnd: 'Inference timings in us'), op profiling on."""
    got = runner.parse_benchmark_model_output(FIXTURE.read_text())
    assert got["runs"] == 50
    assert got["avg_s"] == pytest.approx(98.42e-6, rel=1e-12)  # not the profiler table's avg=96.1
    assert (got["min_s"], got["max_s"], got["std_s"]) == pytest.approx((94e-6, 131e-6, 5.61e-6), rel=1e-12)
    assert got["warmup_runs"] == 3
    assert got["warmup_avg_s"] == pytest.approx(201.333e-6, rel=1e-12)
    assert got["init_s"] == pytest.approx(3215e-6, rel=1e-12)


def test_benchmark_model_all_same_runs_and_missing_timings():
    text = ("Running benchmark for at least 1 iterations and at least 0 seconds but terminate if exceeding 3600 seconds.\n"
            "count=1 curr=500\n\n"
            "Running benchmark for at least 4 iterations and at least 0 seconds but terminate if exceeding 3600 seconds.\n"
            "count=4 curr=250(all same)\n\n"
            "Inference timings in us: Init: 1000, First inference: 500, Warmup (avg): 500, Inference (avg): 250\n")
    got = runner.parse_benchmark_model_output(text)
    assert (got["runs"], got["avg_s"], got["std_s"], got["warmup_runs"]) == (4, pytest.approx(250e-6), 0.0, 1)
    with pytest.raises(runner.BenchmarkModelError, match="no timings"):
        runner.parse_benchmark_model_output("ERROR: Could not open '/data/local/tmp/x.tflite'.\n")


def test_benchmark_model_flags_are_checked_against_what_it_echoes():
    args = runner.benchmark_model_args("/data/local/tmp/dsprof/w0.tflite", 1, 50, 3, 0.0, op_profiling=True)
    assert args == ["--graph=/data/local/tmp/dsprof/w0.tflite", "--num_threads=1", "--warmup_runs=3",
                    "--warmup_min_secs=0.0", "--num_runs=50", "--min_secs=0.0", "--max_secs=3600.0",
                    "--enable_op_profiling=true"]
    text = FIXTURE.read_text()
    runner.check_benchmark_model_output(text, args)  # every flag echoed with its value
    # a misspelt warm-up flag (nn-Meter's story) is refused before anything runs ...
    with pytest.raises(runner.BenchmarkModelError, match="unknown benchmark_model flag.*warmup_run"):
        runner.benchmark_model_args("w0.tflite", 1, 50, extra={"warmup_run": 10})
    # ... and a flag the binary did not take is caught in its output
    with pytest.raises(runner.BenchmarkModelError, match="ignored flag.*--warmup_run=10"):
        runner.check_benchmark_model_output("WARN: Unconsumed cmdline flags: --warmup_run=10\n" + text, args)
    with pytest.raises(runner.BenchmarkModelError, match=r"Min warmup runs \[1\], not the --warmup_runs=3"):
        runner.check_benchmark_model_output(text.replace("Min warmup runs: [3]", "Min warmup runs: [1]"), args)
    with pytest.raises(runner.BenchmarkModelError, match="did not echo 'Num threads'"):
        runner.check_benchmark_model_output(text.replace("INFO: Num threads: [1]\n", ""), args)


def test_results_file_cut_short_is_an_error_unless_resuming(tmp_path):
    path = tmp_path / "r.jsonl"
    line = '{"format":"%s","workload":"w0"}\n' % runner.RESULTS_FORMAT
    path.write_text(line + line[:20])
    with pytest.raises(runner.RunnerError, match="cut short"):
        runner.read_results(str(path))
    assert runner.read_results(str(path), repair=True) == [{"format": runner.RESULTS_FORMAT, "workload": "w0"}]
    assert path.read_text() == line


def test_runner_fingerprint_reads_this_cpu_as_the_profiler_does():
    """The runner re-implements the profiler's CPU fingerprint in Python 3.6 (it cannot import dsprof); on the
    same machine both must say the same, or one device would get two descriptions."""
    from dsprof.profiler import fingerprint

    ours, theirs = runner.environment("onnxruntime"), fingerprint.environment()
    assert {k: v for k, v in ours["cpu"].items() if k != "board"} == theirs["cpu"]
    assert ours["jetson"] == theirs["jetson"] and ours["gpu"] == []
    assert set(ours) == set(theirs)
    assert ours["versions"]["onnxruntime"] == theirs["versions"]["onnxruntime"]
