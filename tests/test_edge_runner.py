"""The bundle runner alone (dsprof/edge/runner.py): its timing loop (the profiler's), Python 3.6 floor, imports,
TFLite benchmark_model flags and output parser. No model is exported here."""

from __future__ import annotations

import ast
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from dsprof.edge import runner
from dsprof.edge.export import copy_runner
from dsprof.profiler import TimingConfig, fingerprint, time_interleaved
from dsprof.portable import cpu_share, hardware, sessions, timing_loop
from fake_machine import FakeMachine, sample_order

RUNNER = Path(runner.__file__)
TIMING_LOOP = Path(timing_loop.__file__)
HARDWARE = Path(hardware.__file__)
CARRIED = [Path(m.__file__) for m in (timing_loop, hardware, cpu_share, sessions)]
FIXTURE = Path(__file__).parent / "fixtures" / "benchmark_model_output.txt"
FAKE_MACHINE = Path(__file__).with_name("fake_machine.py")

#: Four workloads of different costs (ns per call); a group of n takes the first n.
COSTS = [("a", 400_000), ("b", 150_000), ("c", 2_500_000), ("d", 900_000)]
#: The sample order of the first rounds, written out by hand: one workload alone; two keep one order for the first
#: half of the rounds (issue #27: "ab ba" times each right after itself every other round), then, after one sample of
#: the first that is not kept, the other; three and four rotate by one place a round.
ROUNDS = {
    1: ["a", "a", "a", "a"],
    2: ["a", "b", "a", "b", "a", "b", "a", "b"],
    3: ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"],
    4: ["a", "b", "c", "d", "b", "c", "d", "a", "c", "d", "a", "b", "d", "a", "b", "c"],
}
#: Settings that end the loop for each reason: no noise meets any precision at min_samples; a precision no noisy
#: sample can meet runs into a small budget, or, with a budget too large to reach, into max_samples.
STOPS = {
    "precision": (TimingConfig(warmup_s=0.01, min_samples=6, max_samples=300, budget_s=0.2, min_sample_s=2e-3), 0.0),
    "budget": (TimingConfig(warmup_s=0.01, min_samples=6, max_samples=10_000, budget_s=0.05, min_sample_s=2e-3,
                            target_precision=1e-6), 0.5),
    "max_samples": (TimingConfig(warmup_s=0.01, min_samples=6, max_samples=13, budget_s=1e6, min_sample_s=2e-3,
                                 target_precision=1e-6), 0.5),
}


def _python36() -> str | None:
    """A Python 3.6 that runs, where this machine has one (under pyenv, or on PATH), else None."""
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    for exe in [*sorted(glob.glob(os.path.join(root, "versions", "3.6*", "bin", "python3.6"))), shutil.which("python3.6")]:
        if exe and subprocess.run([exe, "-c", "import sys; assert sys.version_info[:2] == (3, 6)"],
                                  capture_output=True).returncode == 0:
            return exe
    return None


def _bundle_loop(python: str, folder: Path, costs: list, config: TimingConfig, noise: float, seed: int) -> dict:
    """The loop of a bundle's runner, run as on a device: the runner and timing_loop.py copied as `dsprof export`
    copies them, driven by tests/fake_machine.py in ``python -S -E`` (the standard library only: no dsprof)."""
    copy_runner(folder)
    shutil.copyfile(FAKE_MACHINE, folder / FAKE_MACHINE.name)
    done = subprocess.run([python, "-S", "-E", str(folder / FAKE_MACHINE.name), str(folder), json.dumps(costs),
                           json.dumps(asdict(config)), repr(noise), str(seed)], capture_output=True, text=True,
                          timeout=300, cwd=folder)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("python", ["this", "3.6"])
@pytest.mark.parametrize("stop", sorted(STOPS))
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_profiler_and_bundle_runner_time_in_the_same_order_and_stop_alike(tmp_path, n, stop, python):
    """One loop: `dsprof.profiler.time_interleaved` here and the loop of a bundle's runner (a Python with the
    standard library only) make the same calls on the same fake machine, in the round order written out in
    `ROUNDS`, and stop after the same round for the expected reason."""
    exe = sys.executable if python == "this" else _python36()
    if exe is None:
        pytest.skip("no Python 3.6 on this machine (PATH or pyenv); vermin checks the floor instead")
    config, noise = STOPS[stop]
    costs, names = COSTS[:n], [name for name, _ in COSTS[:n]]
    ours = FakeMachine(costs, noise, seed=n)
    profiler = time_interleaved({name: ours.fn(name) for name in names}, config, clock=ours.clock)
    device = _bundle_loop(exe, tmp_path, costs, config, noise, seed=n)

    assert not any(m == "dsprof" or m.startswith("dsprof.") for m in device["modules"])
    assert device["calls"] == ours.calls  # every call, warm-up included, in the same order
    for name in names:
        theirs, mine = device["results"][name], profiler[name]
        assert theirs["samples_s"] == pytest.approx(list(mine.samples_s), rel=1e-12)
        assert (theirs["stop_reason"], theirs["iterations_per_sample"], theirs["warmup_iterations"]) == (
            mine.stop_reason, mine.iterations_per_sample, mine.warmup_iterations)
        assert mine.stop_reason == stop
    order = sample_order(ours.calls, names, {k: asdict(v) for k, v in profiler.items()})
    rounds = len(profiler["a"].samples_s)
    if n == 2:  # half the rounds each way, one sample of a not kept between (its samples hold the others)
        assert rounds % 2 == 0 and order == ["a", "b"] * (rounds // 2) + ["a"] + ["b", "a"] * (rounds // 2)
        rounds //= 2  # what the stopping rule counted
    else:
        cycle = ROUNDS[n][: n * (n if n > 2 else 1)]  # the rounds before the order repeats
        assert order == (cycle * rounds)[: rounds * n]
    if stop == "precision":
        assert rounds == config.min_samples  # no noise: every median is exact as soon as the loop may stop
    elif stop == "max_samples":
        assert rounds == config.max_samples // (2 if n == 2 else 1)


def test_runner_timing_loop_on_exact_costs():
    """1 ms and 3 ms per call, no noise: samples are exactly those; both take the 2 calls the slower needs to fill a
    5 ms sample (one count for the group), and the precision rule stops at min_samples, then as many rounds follow in
    the other order."""
    m = FakeMachine([("a", 1_000_000), ("b", 3_000_000)], 0.0, 0)
    config = dict(runner.TIMING_DEFAULTS, min_samples=7)
    out = runner.time_interleaved([("a", m.fn("a")), ("b", m.fn("b"))], config, clock=m.clock)
    assert out["a"]["samples_s"] == pytest.approx([1e-3] * 14, rel=1e-12)
    assert out["b"]["samples_s"] == pytest.approx([3e-3] * 14, rel=1e-12)
    assert (out["a"]["iterations_per_sample"], out["b"]["iterations_per_sample"]) == (2, 2)
    assert out["a"]["stop_reason"] == "precision"


def test_the_runner_and_the_profiler_share_one_timing_loop():
    """The runner inside dsprof runs the profiler's loop; a bundle carries the very file; `TimingConfig` has the
    loop's settings, with its defaults."""
    assert runner.time_interleaved is timing_loop.time_interleaved
    assert runner.TIMING_DEFAULTS is timing_loop.DEFAULTS
    assert asdict(TimingConfig()) == timing_loop.DEFAULTS


def test_bundle_carries_the_timing_loop_and_the_machine_reader_verbatim(tmp_path):
    copied = copy_runner(tmp_path)
    assert copied == tmp_path / "run_bundle.py" and os.access(copied, os.X_OK)
    assert copied.read_bytes() == RUNNER.read_bytes()
    for path in CARRIED:  # the profiler's own files, byte for byte
        assert (tmp_path / path.name).read_bytes() == path.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cpu_share.py", "hardware.py", "run_bundle.py", "sessions.py",
                                                           "timing_loop.py"]


def test_the_runner_reads_and_opens_as_the_profiler_does():
    """One copy of each: the runner's fingerprint, CPU share and sessions are the profiler's modules."""
    assert runner.hardware is hardware and runner.cpu_share is cpu_share and runner.sessions is sessions
    assert not hasattr(runner, "_switches") and not hasattr(runner, "_version")


@pytest.mark.parametrize("missing", ["timing_loop", "hardware", "cpu_share", "sessions"])
def test_a_runner_copied_without_a_module_it_imports_says_so_in_one_line(tmp_path, missing):
    copy_runner(tmp_path)
    (tmp_path / f"{missing}.py").unlink()
    done = subprocess.run([sys.executable, "-S", "-E", str(tmp_path / "run_bundle.py"), "--runtime", "onnxruntime"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith(f"run_bundle: error: no {missing}.py beside"), done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_the_runner_and_the_profiler_describe_this_machine_alike():
    """The fields the environment id hashes that describe the machine (cpu, jetson) read the same way inside dsprof
    and in a bundle, so records imported from a bundle key the same LUT context as `dsprof measure` here."""
    here, bundle = fingerprint.environment(), runner.environment("onnxruntime")
    assert bundle["cpu"] == here["cpu"] and bundle["jetson"] == here["jetson"]
    assert here["cpu"]["logical_cores"] == os.cpu_count() and here["cpu"]["machine"] == platform.machine()
    assert set(runner.device_state("cpu")) == set(fingerprint.device_state("cpu")) <= {"load_avg_1m", "cpu_freq_hz"}


@pytest.mark.parametrize("path", [RUNNER, *CARRIED], ids=lambda p: p.name)
def test_runner_and_timing_loop_need_python_3_6_at_most(path):
    """vermin computes the lowest Python that runs the file (it reads the syntax and the stdlib calls)."""
    vermin = str(Path(sys.executable).with_name("vermin"))  # installed by the test extra
    done = subprocess.run([vermin, "--no-tips", "--violations", "-t=3.6-", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = subprocess.run([vermin, "--no-tips", str(path)], capture_output=True, text=True)
    minimum = next((line for line in shown.stdout.splitlines() if line.startswith("Minimum required versions:")), None)
    assert minimum is not None, shown.stdout  # "Minimum required versions: 3.5"
    major, minor = (int(v) for v in minimum.split(":")[1].strip().split(",")[-1].strip().split("."))
    assert (major, minor) <= (3, 6), minimum


def _imports(path: Path) -> tuple[set[str], list[str]]:
    """Top-level packages ``path`` imports absolutely, and the modules it imports relatively (with their dots)."""
    absolute, relative = set(), []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            absolute |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                relative += ["." * node.level + (node.module or "") + ":" + a.name for a in node.names]
            else:
                absolute.add(node.module.split(".")[0])
    return absolute, relative


def test_runner_imports_only_the_standard_library_numpy_runtimes_and_the_carried_modules():
    allowed = set(sys.stdlib_module_names) | {"numpy", "onnxruntime", "openvino", "ai_edge_litert", "tflite_runtime",
                                              "torch", "pkg_resources", "timing_loop", "hardware", "cpu_share", "sessions"}
    absolute, relative = _imports(RUNNER)
    assert absolute - allowed == set()
    assert "dsprof" not in absolute
    assert sorted(relative) == ["..portable:cpu_share", "..portable:hardware", "..portable:sessions",
                                "..portable:timing_loop"]  # inside dsprof; a bundle imports the copies
    # hardware asks torch for its CUDA, if any, and pkg_resources for versions on Python < 3.8; sessions is given the
    # runtime's module, it imports none
    for carried, optional in zip(CARRIED, (set(), {"torch", "pkg_resources"}, set(), set())):
        absolute, relative = _imports(carried)
        assert absolute - set(sys.stdlib_module_names) == optional and relative == []  # copied alone: the standard library


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


@pytest.mark.parametrize("text", ["first line\nlast line", "only line", "\u00e9t\u00e9\nnotes"])
def test_an_out_that_is_not_a_results_file_is_refused_untouched(tmp_path, text):
    """--out naming a notes file whose last line has no newline: refused before anything is cut (issue #45)."""
    path = tmp_path / "notes.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(runner.RunnerError, match="not"):
        runner.read_results(str(path), repair=True)
    assert path.read_text(encoding="utf-8") == text


def test_runner_fingerprint_reads_this_cpu_as_the_profiler_does():
    """The runner re-implements the profiler's CPU fingerprint in Python 3.6 (it cannot import dsprof); on the
    same machine both must say the same, or one device would get two descriptions."""
    from dsprof.profiler import fingerprint

    ours, theirs = runner.environment("onnxruntime"), fingerprint.environment()
    assert {k: v for k, v in ours["cpu"].items() if k != "board"} == theirs["cpu"]
    assert ours["jetson"] == theirs["jetson"] and ours["gpu"] == []
    assert set(ours) == set(theirs)
    assert ours["versions"]["onnxruntime"] == theirs["versions"]["onnxruntime"]


# -- runtime sessions: one set-up (portable/sessions.py) for the profiler's backends and the runner (issue #44) --------

@pytest.fixture(scope="module")
def conv_onnx(tmp_path_factory):
    """A 3x3 convolution (4 -> 6 channels, 9 x 9 input, seeded weights) as ONNX, with its float64 output."""
    import torch

    from dsprof.models.onnx_export import export_onnx

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(4, 6, 3, padding=1).eval()
    path = export_onnx(conv, (1, 4, 9, 9), tmp_path_factory.mktemp("sessions") / "conv.onnx")
    x = runner._random_input((1, 4, 9, 9))  # the runner's input: what both sides feed below
    with torch.no_grad():
        expected = conv.double()(torch.from_numpy(x).double()).numpy()
    return path, x, expected


def test_onnxruntime_opens_as_the_profiler_sets_it_and_computes_the_convolution(conv_onnx):
    import numpy as np
    import onnxruntime as ort

    path, x, expected = conv_onnx
    session = sessions.onnxruntime_session(ort, path, 2)
    options = session.get_session_options()
    assert (options.intra_op_num_threads, options.inter_op_num_threads) == (2, 1)
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert session.get_providers() == ["CPUExecutionProvider"]
    run, sync = sessions.onnxruntime_run(ort, session, x)
    assert sync is None
    np.testing.assert_allclose(run()[0], expected, rtol=1e-5, atol=1e-5)
    # the runner opens the file through the same function: the same output
    fn, timer = runner._prepare_onnxruntime(str(path), "cpu", 2)
    np.testing.assert_allclose(fn()[0], expected, rtol=1e-5, atol=1e-5)
    assert timer(fn, 3) > 0


@pytest.mark.openvino
def test_openvino_compiles_with_the_profilers_settings_in_the_profiler_and_the_runner(conv_onnx):
    import numpy as np
    import openvino as ov

    from dsprof.profiler.backends.openvino import openvino_config

    path, x, expected = conv_onnx
    compiled = sessions.openvino_compile(ov, ov.Core(), path, 2)
    said = sessions.openvino_read_back(compiled)
    assert (said["performance_hint"], said["inference_num_threads"], said["inference_precision"],
            said["cpu_pinning"]) == ("LATENCY", 2, "f32", False)
    assert openvino_config(2) == sessions.openvino_config(ov, 2)  # the backend's config is this one
    fn, _ = runner._prepare_openvino(str(path), "cpu", 2)
    assert {k: fn.info[k] for k in said} == said  # the runner records the same reading
    out = fn()
    np.testing.assert_allclose(np.asarray(next(iter(out.values()))), expected, rtol=1e-4, atol=1e-4)
