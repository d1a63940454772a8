#!/usr/bin/env python3
"""Time the workloads of a dsprof bundle on a device that cannot host dsprof (copied as ``run_bundle.py``).

One file, no dependency but the standard library, NumPy and the runtime it times; runs on Python 3.6
and later (a Jetson TX2 on JetPack 4.6, a Raspberry Pi, a workstation driving a phone over adb).
The timing loop is dsprof's profiler's own file, ``timing_loop.py`` (``dsprof/portable/timing_loop.py``,
standard library only), which the bundle carries beside this one: the workloads of a group are warmed up in
rounds until each one's call time settles, then timed in interleaved rounds (the order rotates; two workloads
keep one order for half of the rounds), each sample lasting at least ``min_sample_s``; the loop stops once
every median is known to the target precision, or when the budget or the sample cap is spent. Raw samples
(seconds per forward pass) are written as JSON Lines, one line per workload, a group at a time, flushed to
disk; a run started again on the same results file skips what it holds (resume), after checking it was
written with the same settings. ``dsprof import`` turns the file into dsprof measurement records. The bundle
carries three more of the profiler's own standard-library files, so that a board is read and timed as
``dsprof measure`` reads and times it:
``hardware.py`` (the machine and the environment record), ``cpu_share.py`` (the CPU share a group got) and
``sessions.py`` (how ONNX Runtime, OpenVINO and TFLite are opened).

Runtimes: ``onnxruntime`` (CPU, or ``--device cuda`` with its CUDA provider), ``openvino`` (the bundle's ONNX
files on OpenVINO's CPU plugin, with the profiler's settings: latency hint, the threads given, f32, no pinning),
``tflite`` (the LiteRT interpreter ``ai_edge_litert`` or ``tflite_runtime``), ``torchscript`` (PyTorch >= 1.8, CPU
or CUDA timed with CUDA events) and ``benchmark_model`` (TFLite's benchmark binary, on a phone over ``adb``
or run locally; its output is parsed, and the flags it was given are checked against what it echoes).

    python3 run_bundle.py --runtime onnxruntime --threads 1
    python3 run_bundle.py --runtime benchmark_model --adb SERIAL --benchmark-model /data/local/tmp/benchmark_model
"""

import argparse
import hashlib
import json
import os
import random
import re
import shlex
import statistics
import subprocess
import sys

if __package__:  # dsprof.edge.runner, inside dsprof
    from ..portable import cpu_share, hardware, sessions, timing_loop
else:  # run_bundle.py in a bundle: `dsprof export` copies the profiler's modules it imports beside it (CARRIED)
    _HERE = os.path.dirname(os.path.abspath(__file__))
    if _HERE not in sys.path:
        sys.path.insert(0, _HERE)
    try:
        import cpu_share
        import hardware
        import sessions
        import timing_loop
    except ImportError as exc:  # one line and exit status 2, as every other error of the runner
        sys.stderr.write("run_bundle: error: no %s.py beside %s; copy the whole bundle folder that `dsprof export` "
                         "wrote\n" % (getattr(exc, "name", None) or "timing_loop", os.path.abspath(__file__)))
        sys.exit(2)

CpuTimer = timing_loop.CpuTimer
#: The timing settings and their defaults (the profiler's `TimingConfig`); a bundle's manifest overrides them.
TIMING_DEFAULTS = timing_loop.DEFAULTS
time_interleaved = timing_loop.time_interleaved

__all__ = [
    "BENCHMARK_MODEL_FLAGS",
    "RESULTS_FORMAT",
    "RUNNER_VERSION",
    "RUNTIMES",
    "BenchmarkModelError",
    "benchmark_model_args",
    "check_benchmark_model_output",
    "device_state",
    "environment",
    "main",
    "parse_benchmark_model_output",
    "read_results",
    "time_interleaved",
]

RUNNER_VERSION = "1"
RESULTS_FORMAT = "dsprof.edge-results/1"
BUNDLE_FORMAT = "dsprof.bundle/1"
#: Runtime -> (model file format in the bundle, memory layout of the input as run).
RUNTIMES = {
    "onnxruntime": ("onnx", "nchw"),
    "openvino": ("onnx", "nchw"),
    "tflite": ("tflite", "nhwc"),
    "torchscript": ("torchscript", "nchw"),
    "benchmark_model": ("tflite", "nhwc"),
}


class RunnerError(Exception):
    """Bad input to the runner: printed as one line, exit status 2."""


# -- fingerprint (the profiler's `fingerprint.environment` keys: cpu, gpu, jetson, versions; the machine itself is
#    read by `hardware`, the profiler's own file) ----------------------------------------------------------------


def _versions(runtime):
    versions = {"dsprof-runner": RUNNER_VERSION}
    names = {"onnxruntime": [("onnxruntime", "onnxruntime"), ("onnxruntime-gpu", None)],
             "openvino": [("openvino", "openvino")],
             "tflite": [("ai-edge-litert", None), ("tflite-runtime", None), ("tensorflow", None)],
             "torchscript": [("torch", "torch")], "benchmark_model": []}[runtime]
    for distribution, module in [("numpy", "numpy")] + names:
        version = hardware.version(distribution, module)
        if version:
            versions[distribution] = version
    if runtime == "torchscript":
        versions.update(hardware.torch_cuda())
    return versions


def environment(runtime="onnxruntime"):
    """What does not change during a run: cpu, gpu (always empty: no NVML here), jetson, versions, host, time
    (`hardware.environment`, as the profiler writes it)."""
    return hardware.environment(_versions(runtime))


def device_state(device="cpu"):
    """What changes: 1-minute load average, CPU frequency; on a Jetson the GPU clock and a tegrastats line
    (`hardware.device_state`, as the profiler reads it where it has no NVML)."""
    return hardware.device_state(device)


# -- runtimes: a model file -> (run, timer, threads) -----------------------------------------------------------


def _random_input(shape, dtype="float32"):
    import numpy as np
    return np.random.RandomState(0).standard_normal([int(d) for d in shape]).astype(dtype)


def _prepare_onnxruntime(path, device, threads):
    """An ONNX Runtime session with the profiler's settings (`sessions.onnxruntime_session`)."""
    import onnxruntime as ort
    if device.startswith("cuda") and "CUDAExecutionProvider" not in ort.get_available_providers():
        raise RunnerError("device %r needs onnxruntime's CUDAExecutionProvider (install onnxruntime-gpu); "
                          "this one has %s" % (device, ", ".join(ort.get_available_providers())))
    session = sessions.onnxruntime_session(ort, path, threads, device)
    run, sync = sessions.onnxruntime_run(ort, session, _random_input(session.get_inputs()[0].shape), device)
    return run, CpuTimer(sync=sync)


def _prepare_openvino(path, device, threads):
    """OpenVINO's CPU plugin with the profiler's settings (`sessions.openvino_config`): latency hint, ``threads``
    threads, f32, threads not pinned; the compiled model's reading of them is kept (``fn.info``)."""
    if device != "cpu":
        raise RunnerError("the openvino runtime runs on the CPU here; use --device cpu")
    try:
        import openvino as ov
    except ImportError:
        raise RunnerError("no OpenVINO: pip install openvino")
    core = ov.Core()
    compiled = sessions.openvino_compile(ov, core, path, threads)
    request = compiled.create_infer_request()
    request.set_input_tensor(ov.Tensor(_random_input(compiled.input(0).get_shape())))

    def run():
        return request.infer()

    run.info = {"openvino": ov.get_version(),
                "device_name": str(core.get_property(sessions.OPENVINO_DEVICE, "FULL_DEVICE_NAME"))}
    run.info.update(sessions.openvino_read_back(compiled))
    return run, CpuTimer()


def _prepare_tflite(path, device, threads):
    """The LiteRT (or tflite_runtime) interpreter with the profiler's settings (`sessions.tflite_interpreter`)."""
    if device != "cpu":
        raise RunnerError("the tflite runtime runs on the CPU; use --device cpu")
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        try:
            from tflite_runtime.interpreter import Interpreter
        except ImportError:
            raise RunnerError("no TFLite interpreter: pip install ai-edge-litert (or tflite-runtime on old systems)")
    interpreter = sessions.tflite_interpreter(Interpreter, path, threads, _random_input)
    return interpreter.invoke, CpuTimer()


def _prepare_torchscript(path, device, threads, shape):
    import torch
    torch.set_num_threads(threads)
    module = torch.jit.load(path, map_location=device).eval()
    x = torch.from_numpy(_random_input(shape)).to(device)

    def run():
        with torch.no_grad():
            return module(x)

    if not device.startswith("cuda"):
        return run, CpuTimer()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def timer(fn, number):  # CUDA events around the calls, as the profiler's CudaEventTimer
        torch.cuda.synchronize(device)
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e-3 / number

    return run, timer


# -- TFLite's benchmark_model --------------------------------------------------------------------------------

#: Flags we pass and the line benchmark_model echoes each under (``<label>: [<value>]``); booleans echo as 1/0.
BENCHMARK_MODEL_FLAGS = {
    "graph": "Graph", "num_threads": "Num threads", "warmup_runs": "Min warmup runs",
    "warmup_min_secs": "Min warmup runs duration (seconds)", "num_runs": "Min num runs",
    "min_secs": "Min runs duration (seconds)", "max_secs": "Max runs duration (seconds)",
    "enable_op_profiling": "Enable op profiling", "use_xnnpack": "Use xnnpack", "use_gpu": "Use gpu",
}


class BenchmarkModelError(RunnerError):
    """benchmark_model failed, ignored a flag, or printed no timing."""


def benchmark_model_args(graph, num_threads, num_runs, warmup_runs=1, warmup_min_secs=0.0, op_profiling=False,
                         extra=None):
    """The ``--flag=value`` list for one benchmark_model run of exactly ``num_runs`` timed runs
    (``min_secs=0`` so that no minimum duration adds runs). Unknown flag names raise `BenchmarkModelError`
    before anything runs (nn-Meter passed a misspelt warm-up flag that benchmark_model silently ignored)."""
    flags = [("graph", graph), ("num_threads", int(num_threads)), ("warmup_runs", int(warmup_runs)),
             ("warmup_min_secs", float(warmup_min_secs)), ("num_runs", int(num_runs)), ("min_secs", 0.0),
             ("max_secs", 3600.0)]
    if op_profiling:
        flags.append(("enable_op_profiling", "true"))
    for name, value in sorted((extra or {}).items()):
        flags.append((name, value))
    unknown = [name for name, _ in flags if name not in BENCHMARK_MODEL_FLAGS]
    if unknown:
        raise BenchmarkModelError("unknown benchmark_model flag(s) %s; known: %s"
                                  % (", ".join(unknown), ", ".join(sorted(BENCHMARK_MODEL_FLAGS))))
    if int(num_runs) < 1 or int(num_threads) < 1 or int(warmup_runs) < 0:
        raise BenchmarkModelError("need num_runs >= 1, num_threads >= 1 and warmup_runs >= 0")
    return ["--%s=%s" % (name, value) for name, value in flags]


def _echoed(value):
    if value in ("true", "false"):
        return "1" if value == "true" else "0"
    return value


def check_benchmark_model_output(text, args):
    """Raise `BenchmarkModelError` unless benchmark_model consumed every flag in ``args`` and echoed its value."""
    unconsumed = re.search(r"Unconsumed cmdline flags:(.*)", text)
    if unconsumed:
        raise BenchmarkModelError("benchmark_model ignored flag(s)%s: this build does not know them; "
                                  "its --help lists the flags it takes" % unconsumed.group(1).rstrip())
    echoed = dict(re.findall(r"^(?:[A-Z]+: )?([^\n:\[\]]+): \[([^\]\n]*)\]\s*$", text, re.M))
    for arg in args:
        name, _, value = arg[2:].partition("=")
        label = BENCHMARK_MODEL_FLAGS[name]
        got = echoed.get(label)
        if got is None:
            raise BenchmarkModelError("benchmark_model did not echo '%s' for --%s: it did not take the flag" % (label, name))
        try:
            same = float(got) == float(_echoed(value))
        except ValueError:
            same = got == _echoed(value)
        if not same:
            raise BenchmarkModelError("benchmark_model ran with %s [%s], not the --%s=%s passed" % (label, got, name, value))


def parse_benchmark_model_output(text):
    """The timings benchmark_model prints, in seconds.

    Reads the ``count=... first=... curr=... min=... max=... avg=... std=...`` line that follows each
    ``Running benchmark for at least ...`` line (warm-up, then the timed runs; ``count=N curr=X`` when all
    runs took the same time; op-profiling tables print more count= lines, which are not read), all in
    microseconds, and the line
    ``Inference timings in us: Init: ..., First inference: ..., Warmup (avg): ..., Inference (avg): ...``.
    Returns {"runs", "avg_s", "min_s", "max_s", "std_s", "warmup_runs", "warmup_avg_s", "init_s"}.
    """
    stats = []  # the first count= line after each "Running benchmark for at least ..." line: warm-up, timed runs
    for chunk in re.split(r"Running benchmark for at least", text)[1:]:
        match = re.search(r"count=(\d+)((?: [a-z]+=[-+0-9.eE]+)*)(\(all same\))?", chunk)
        if match is None or int(match.group(1)) == 0:
            continue
        fields = dict((k, float(v)) for k, v in re.findall(r"([a-z]+)=([-+0-9.eE]+)", match.group(2)))
        if "avg" not in fields:  # all runs took the same time
            fields.update(avg=fields["curr"], min=fields["curr"], max=fields["curr"], std=0.0)
        fields["count"] = int(match.group(1))
        stats.append(fields)
    summary = re.search(r"Inference timings in us: Init: ([0-9.eE+-]+), First inference: ([0-9.eE+-]+), "
                        r"Warmup \(avg\): ([0-9.eE+-]+|nan|-nan), Inference \(avg\): ([0-9.eE+-]+)", text)
    if summary is None or not stats:
        tail = " | ".join(text.strip().splitlines()[-3:])
        raise BenchmarkModelError("no timings in benchmark_model's output (it ends: %s)" % tail[-300:])
    timed = stats[-1]
    if abs(timed["avg"] - float(summary.group(4))) > 1e-6 * max(1.0, timed["avg"]) + 0.5:
        raise BenchmarkModelError("benchmark_model's output is inconsistent: avg=%s but Inference (avg): %s"
                                  % (timed["avg"], summary.group(4)))
    warm = stats[0] if len(stats) > 1 else None
    return {
        "runs": int(timed["count"]), "avg_s": timed["avg"] * 1e-6, "min_s": timed["min"] * 1e-6,
        "max_s": timed["max"] * 1e-6, "std_s": timed["std"] * 1e-6,
        "warmup_runs": int(warm["count"]) if warm else 0, "warmup_avg_s": warm["avg"] * 1e-6 if warm else None,
        "init_s": float(summary.group(1)) * 1e-6,
    }


class BenchmarkModel(object):
    """Runs benchmark_model on one model file per call: locally, or on a phone through ``adb -s SERIAL shell``."""

    def __init__(self, binary, adb=None, remote_dir="/data/local/tmp/dsprof", taskset=None, op_profiling=False,
                 log_dir=None):
        self.binary, self.adb, self.remote_dir = binary, adb, remote_dir
        self.taskset, self.op_profiling, self.log_dir = taskset, op_profiling, log_dir
        self.threads = 1
        self.calls = 0

    def _adb(self, *args):
        return ["adb", "-s", self.adb] + list(args)

    def push(self, local_path):
        """The path benchmark_model reads ``local_path`` from (pushed to the phone with adb push)."""
        if self.adb is None:
            return local_path
        remote = self.remote_dir + "/" + os.path.basename(local_path)
        for command in (self._adb("shell", "mkdir", "-p", self.remote_dir), self._adb("push", local_path, remote)):
            done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if done.returncode != 0:
                raise BenchmarkModelError("%s failed: %s" % (" ".join(command), done.stdout.decode("utf-8", "replace")[-300:]))
        return remote

    def run(self, graph, number, warmup_runs=1):
        """One benchmark_model process timing ``number`` runs of ``graph``: seconds per run (their mean)."""
        args = benchmark_model_args(graph, self.threads, number, warmup_runs, 0.0, self.op_profiling)
        command = [self.binary] + args
        if self.taskset:
            command = ["taskset", self.taskset] + command
        if self.adb is not None:
            command = self._adb("shell", " ".join(shlex.quote(c) for c in command))
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        text = done.stdout.decode("utf-8", "replace")
        self.calls += 1
        if self.log_dir and self.op_profiling:
            with open(os.path.join(self.log_dir, "%s.%d.txt" % (os.path.basename(graph), self.calls)), "w") as f:
                f.write(text)
        if done.returncode != 0:
            raise BenchmarkModelError("benchmark_model exited with %d: %s" % (done.returncode, text.strip()[-300:]))
        check_benchmark_model_output(text, args)
        parsed = parse_benchmark_model_output(text)
        if parsed["runs"] != number:
            raise BenchmarkModelError("benchmark_model made %d runs, not the %d asked for" % (parsed["runs"], number))
        return parsed["avg_s"]


def _adb_shell(serial, command):
    """stdout of ``adb -s SERIAL shell COMMAND``, or None when it fails."""
    return hardware.command_output(["adb", "-s", serial, "shell", command], timeout=20.0)


def phone_environment(serial):
    """The fingerprint of the phone ``serial`` (over adb): SoC and cores, governor, model, Android version.
    Same keys as `environment` (cpu, gpu, jetson, versions); 'versions' has Android's and the runner's."""
    prop = lambda name: _adb_shell(serial, "getprop " + name) or None  # noqa: E731
    cpuinfo = _adb_shell(serial, "cat /proc/cpuinfo") or ""
    cpu = {"machine": prop("ro.product.cpu.abi"), "logical_cores": sum(
        1 for line in cpuinfo.splitlines() if line.split(":")[0].strip() == "processor")}
    soc = [line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("Hardware")]
    cpu["model"] = prop("ro.soc.model") or (soc[0] if soc else None) or prop("ro.board.platform")
    cpu["board"] = " ".join(v for v in (prop("ro.product.manufacturer"), prop("ro.product.model")) if v) or None
    governor = _adb_shell(serial, "cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    if governor:
        cpu["governor"] = governor
    freqs = _adb_shell(serial, "cat /sys/devices/system/cpu/cpu*/cpufreq/cpuinfo_max_freq") or ""
    if freqs:
        cpu["max_freq_hz_per_core"] = [int(v) * 1000 for v in freqs.split() if v.isdigit()]
    versions = {"android": prop("ro.build.version.release"), "android_build": prop("ro.build.fingerprint"),
                "dsprof-runner": RUNNER_VERSION}
    return {"cpu": dict((k, v) for k, v in cpu.items() if v is not None), "gpu": [], "jetson": {},
            "versions": dict((k, v) for k, v in versions.items() if v), "host": "adb:" + serial,
            "time_utc": hardware.utc_now()}


def phone_state(serial):
    """What changes on the phone: load average, current CPU clocks (Hz, per core), battery temperature (C)."""
    state = {}
    load = _adb_shell(serial, "cat /proc/loadavg")
    if load:
        state["load_avg_1m"] = float(load.split()[0])
    freqs = _adb_shell(serial, "cat /sys/devices/system/cpu/cpu*/cpufreq/scaling_cur_freq") or ""
    if freqs:
        state["cpu_freq_hz_per_core"] = [int(v) * 1000 for v in freqs.split() if v.isdigit()]
    battery = re.search(r"temperature: (\d+)", _adb_shell(serial, "dumpsys battery") or "")
    if battery:
        state["battery_temp_c"] = int(battery.group(1)) / 10
    return state


# -- results file ---------------------------------------------------------------------------------------------


def read_results(path, repair=False):
    """The result lines of ``path`` (a list of dicts). A last line cut short by an interrupted run is dropped
    from the file when ``repair`` (resuming), else it raises `RunnerError`; any other bad line raises. Every
    complete line is checked before anything is cut: a file that is not a results file is refused untouched."""
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        data = f.read()
    cut = None  # where a last line cut short by an interrupted run starts
    if data and not data.endswith(b"\n"):
        start = data.rfind(b"\n") + 1
        try:
            json.loads(data[start:].decode("utf-8"))
            data += b"\n"
        except ValueError:
            cut = start
    try:
        text = (data if cut is None else data[:cut]).decode("utf-8")
    except UnicodeDecodeError:
        raise RunnerError("%s is not a results file (not UTF-8 text); give another --out" % path)
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise RunnerError("%s, line %d: not JSON; point to the runner's results file" % (path, number))
        if not isinstance(record, dict) or record.get("format") != RESULTS_FORMAT:
            raise RunnerError("%s, line %d: not a %s line" % (path, number, RESULTS_FORMAT))
        out.append(record)
    if cut is not None:
        if not out and cut == 0 and data[:1] != b"{":
            raise RunnerError("%s is not a results file (its only line is not a %s line); give another --out"
                              % (path, RESULTS_FORMAT))
        if not repair:
            raise RunnerError("%s: its last line is cut short (an interrupted run); run the runner again with the "
                              "same --out to complete it" % path)
        with open(path, "r+b") as f:
            f.truncate(cut)
    return out


def _append(path, records):
    with open(path, "a") as f:
        for record in records:
            f.write(json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n")
        f.flush()
        os.fsync(f.fileno())


# -- the run ------------------------------------------------------------------------------------------------


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def load_manifest(bundle):
    path = os.path.join(bundle, "manifest.json")
    try:
        with open(path) as f:
            manifest = json.load(f)
    except (OSError, IOError):
        raise RunnerError("no manifest.json in %s; give the bundle folder that `dsprof export` wrote" % bundle)
    except ValueError:
        raise RunnerError("%s is not valid JSON; copy the bundle again" % path)
    if manifest.get("format") != BUNDLE_FORMAT:
        raise RunnerError("%s is a %r bundle; this runner reads %s: use the runner inside the bundle"
                          % (path, manifest.get("format"), BUNDLE_FORMAT))
    return manifest


def _settings(args, manifest):
    return {"bundle_id": manifest["bundle_id"], "runtime": args.runtime, "device": args.device, "threads": args.threads}


def run(args):
    """Time every workload of the bundle that the results file lacks; return (new, skipped) counts and the errors of
    the workloads that failed ({workload: error})."""
    manifest = load_manifest(args.bundle)
    file_format, layout = RUNTIMES[args.runtime]
    if file_format not in manifest["formats"]:
        raise RunnerError("this bundle has no %s files (it has %s); export it with --format %s"
                          % (file_format, ", ".join(manifest["formats"]), file_format))
    timing = dict(TIMING_DEFAULTS)
    timing.update(manifest["timing"])
    if args.budget is not None:
        timing["budget_s"] = args.budget
    settings = _settings(args, manifest)
    existing = read_results(args.out, repair=True)
    for record in existing:
        theirs = dict((k, record.get(k)) for k in settings)
        if theirs != settings:
            raise RunnerError("%s was written with other settings (%s); use the same options or another --out"
                              % (args.out, ", ".join("%s=%r" % kv for kv in sorted(theirs.items()))))
    done = set(r["workload"] for r in existing if r.get("error") is None and r.get("samples_s"))
    workloads = dict((w["id"], w) for w in manifest["workloads"])
    for w in workloads.values():  # a copy cut short fails here, not after an hour of timing
        path = os.path.join(args.bundle, w["files"][file_format])
        if not os.path.isfile(path) or _sha256(path) != w["sha256"][file_format]:
            raise RunnerError("%s is missing or differs from the exported file; copy the bundle again" % path)
    phone = args.adb if args.runtime == "benchmark_model" else None
    env = phone_environment(phone) if phone else environment(args.runtime)
    device = "cuda:0" if args.device == "cuda" else args.device
    state = (lambda: phone_state(phone)) if phone else (lambda: device_state(device))
    bench = None
    if args.runtime == "benchmark_model":
        bench = BenchmarkModel(args.benchmark_model, args.adb, args.remote_dir, args.taskset, args.op_profiling,
                               os.path.dirname(os.path.abspath(args.out)))
        bench.threads = args.threads
    run_id = "%08x" % random.getrandbits(32)
    new, failed = 0, {}
    todo = [timing_loop.left_to_time(group, done.__contains__, lambda wid: workloads[wid]["variant"] == "original")
            for group in manifest["groups"]]
    skipped = sum(len(g) for g in manifest["groups"]) - sum(len(g) for g in todo)
    todo = [g for g in todo if g]
    for index, group in enumerate(todo):
        group_timing = timing_loop.first_group(timing) if index == 0 else timing
        state_before = state()
        fns, errors, timers = [], {}, {}
        for wid in group:
            w = workloads[wid]
            path = os.path.join(args.bundle, w["files"][file_format])
            try:
                if bench is not None:  # fn() names the model file; the timer runs benchmark_model on it
                    fn = (lambda graph: (lambda: graph))(bench.push(path))
                    timer = lambda fn, number: bench.run(fn(), number, max(1, timing["warmup_min_iters"]))  # noqa: E731
                elif args.runtime == "onnxruntime":
                    fn, timer = _prepare_onnxruntime(path, device, args.threads)
                elif args.runtime == "openvino":
                    fn, timer = _prepare_openvino(path, device, args.threads)
                elif args.runtime == "tflite":
                    fn, timer = _prepare_tflite(path, device, args.threads)
                else:
                    fn, timer = _prepare_torchscript(path, device, args.threads, w["input_shape"])
            except RunnerError:
                raise
            except Exception as exc:  # noqa: BLE001 - recorded, the run goes on with the next workload
                errors[wid] = "failed to prepare: %s: %s" % (type(exc).__name__, str(exc)[:300])
                continue
            fns.append((wid, fn))
            timers[id(fn)] = timer
        results, share = {}, cpu_share.CpuShare(args.threads)
        if fns:
            with share:
                results = time_interleaved(fns, group_timing, lambda fn, number: timers[id(fn)](fn, number))
        state_after = state()
        if fns and bench is None and device == "cpu":  # as the profiler: other processes competing?
            state_after.update(share.reading())
        now = hardware.utc_now()
        records = []
        for wid in group:
            r = results.get(wid, {})
            records.append(dict(
                settings, format=RESULTS_FORMAT, workload=wid, layout=layout, group="%s:%d" % (run_id, index),
                samples_s=r.get("samples_s", []), iterations_per_sample=r.get("iterations_per_sample", 0),
                warmup_iterations=r.get("warmup_iterations", 0), stop_reason=r.get("stop_reason"),
                target_precision=timing["target_precision"], budget_s=timing["budget_s"], environment=env,
                state_before=state_before, state_after=state_after, time_utc=now, error=errors.get(wid),
                runtime_info=getattr(dict(fns).get(wid), "info", {}),
            ))
        _append(args.out, records)
        new += len(records)
        failed.update((wid, errors[wid]) for wid in group if wid not in results and wid in errors)
        if not args.quiet:
            shown = ", ".join("%s %.3f ms" % (workloads[w]["label"], statistics.median(results[w]["samples_s"]) * 1e3)
                              for w in group if w in results)
            print("[%d/%d] %s" % (index + 1, len(todo), shown or "failed: " + "; ".join(errors.values())))
    return new, skipped, failed


def build_parser():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description="Time the workloads of a dsprof bundle; results as JSON Lines for `dsprof import`.")
    p.add_argument("--bundle", default=here, help="the bundle folder (default: this file's folder)")
    p.add_argument("--runtime", required=True, choices=sorted(RUNTIMES), help="what runs the models")
    p.add_argument("--device", default="cpu", help="cpu, or cuda (onnxruntime with onnxruntime-gpu, torchscript)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads of the runtime (default: usable cores)")
    p.add_argument("--out", default=None, help="results file (default: BUNDLE/results/RUNTIME_DEVICE_tTHREADS.jsonl); "
                   "an existing one is resumed")
    p.add_argument("--budget", type=float, default=None, help="seconds of timing per workload at most (default: the bundle's)")
    p.add_argument("--benchmark-model", default="benchmark_model", help="benchmark_model binary (on the phone with --adb)")
    p.add_argument("--adb", default=None, metavar="SERIAL", help="run benchmark_model on this phone (adb devices lists them)")
    p.add_argument("--remote-dir", default="/data/local/tmp/dsprof", help="where the models are pushed on the phone")
    p.add_argument("--taskset", default=None, metavar="MASK", help="pin benchmark_model to these cores (hex mask, e.g. f0)")
    p.add_argument("--op-profiling", action="store_true", help="benchmark_model --enable_op_profiling; its output is kept beside --out")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.threads is None:
        args.threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if args.threads < 1:
        print("run_bundle: error: --threads must be >= 1", file=sys.stderr)
        return 2
    if args.out is None:
        args.out = os.path.join(args.bundle, "results", "%s_%s_t%d.jsonl" % (args.runtime, args.device.replace(":", ""), args.threads))
    try:
        folder = os.path.dirname(os.path.abspath(args.out))
        if not os.path.isdir(folder):
            os.makedirs(folder)
        new, skipped, failed = run(args)
    except RunnerError as exc:
        print("run_bundle: error: %s" % exc, file=sys.stderr)
        return 2
    if failed and len(failed) == new and not skipped:  # nothing timed: no import can use it
        print("run_bundle: error: all %d workloads failed (e.g. %s); fix that and run again, the same command "
              "resumes (results: %s)" % (new, sorted(failed.values())[0], args.out), file=sys.stderr)
        return 1
    lost = ", %d failed (their errors are in the file)" % len(failed) if failed else ""
    print("%d workloads timed%s, %d already in the file; results: %s" % (new - len(failed), lost, skipped, args.out))
    print("next: dsprof import %s %s" % (shlex.quote(args.bundle), shlex.quote(args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
