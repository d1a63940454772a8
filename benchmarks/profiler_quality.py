"""How good are dsprof's latency numbers on this machine? (issue #3)

Prints, for MobileNetV2-1.0 at batch 1 (default 224 x 224) on this CPU:

(a) wall time of `measure` over all 17 blocks x {original, merged, flops_matched} plus both whole
    models (original and FLOPs-matched dense), default timing settings, workload building included;
(b) the median, over those 53 entries, of IQR / median;
(c) the median drift of block medians between two back-to-back runs: |m2 - m1| / m1, and the drift of
    the whole-model median between them;
(d) the ratio of our median to ``torch.utils.benchmark.Timer(...).blocked_autorange()``'s median,
    timing the same prepared callables (same modules, same input, same threads).

(e) what --threads does to repeatability: for each count of ``--repeat-threads``, ``--repeats``
    back-to-back `measure` runs of the whole model alone; their medians, spread (max/min - 1) and the
    median drift between consecutive runs. The default thread count of `measure` is chosen from this.

Targets on the 2-core reference machine: (a) <= 90 s, (b) <= 5 %, (c) <= 5 % for blocks and <= 2 % for
the whole model at the default settings, (d) within 5 %.

    .venv/bin/python benchmarks/profiler_quality.py [--resolution 224] [--threads N] [--backend torch]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.utils.benchmark as tb

from dsprof.models import ModelRef, get_model
from dsprof.profiler import BackendSettings, TimingConfig, block_workloads, measure, model_workloads, time_interleaved
from dsprof.profiler import Workloads
from dsprof.profiler.backends.torch_eager import TorchBackend
from dsprof.profiler.fingerprint import environment
from dsprof.profiler.runner import DEFAULT_CPU_THREADS


def pct(v: float) -> str:
    return f"{100 * v:.1f} %"


def repeatability(args: argparse.Namespace) -> None:
    """(e): back-to-back whole-model runs at each thread count, interleaved by run."""
    counts = [int(t) for t in args.repeat_threads.split(",")]
    medians: dict[int, list[float]] = {t: [] for t in counts}
    shares: dict[int, list[float]] = {t: [] for t in counts}
    for i in range(args.repeats):
        for t in counts:  # alternate the counts so that both see the same moments of the machine
            result = measure(ModelRef.of("mobilenet_v2", resolution=args.resolution),
                             settings=BackendSettings(threads=t, backend=args.backend),
                             workloads=Workloads(variants=(), model_variants=("original",), blocks=None),
                             out=args.out / f"repeat-t{t}-{i}.jsonl", overwrite=True, progress=False)
            r = next(m for m in result.measurements if m.scope == "model" and m.ok)
            medians[t].append(r.stats.median)
            shares[t].append(r.state_after.get("process_cpu_share", float("nan")))
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    for t in counts:
        m = medians[t]
        steps = [abs(b - a) / a for a, b in zip(m, m[1:])]
        print(f"(e) {t} thread(s): whole model {', '.join(f'{v * 1e3:.2f}' for v in m)} ms in {len(m)} back-to-back runs; "
              f"spread max/min - 1 = {pct(max(m) / min(m) - 1)}, median drift between consecutive runs "
              f"{pct(statistics.median(steps))}; CPU share {', '.join(f'{v:.2f}' for v in shares[t])}; load average {load}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resolution", type=int, default=224)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for (a)-(d) (default: measure's default, 1)")
    parser.add_argument("--repeat-threads", default="1,2", help="thread counts compared in (e), comma-separated; 'none' to skip")
    parser.add_argument("--repeats", type=int, default=5, help="back-to-back whole-model runs per thread count in (e)")
    parser.add_argument("--out", type=Path, default=Path("results/profiler_quality"))
    parser.add_argument("--min-run-time", type=float, default=0.2, help="blocked_autorange's min_run_time, seconds")
    parser.add_argument("--backend", default="torch", help="torch, onnxruntime or tflite; (d) is for torch only")
    parser.add_argument("--skip-d", action="store_true", help="skip (d), the comparison with torch.utils.benchmark")
    args = parser.parse_args()

    env = environment()
    threads = args.threads or DEFAULT_CPU_THREADS
    print(f"CPU: {env['cpu'].get('model')}, {env['cpu'].get('logical_cores')} logical cores, torch {torch.__version__}, "
          f"backend {args.backend}, "
          f"{threads} threads, MobileNetV2-1.0 at {args.resolution}x{args.resolution}, batch 1, fp32, BatchNorm folded")
    with open("/proc/loadavg") as f:
        print(f"load average before: {f.read().split()[:3]}")

    runs = []
    for i in (1, 2):
        start = time.perf_counter()
        result = measure(ModelRef.of("mobilenet_v2", resolution=args.resolution),
                         settings=BackendSettings(threads=threads, backend=args.backend),
                         out=args.out / f"{args.backend}-t{threads}-run{i}.jsonl", overwrite=True, progress=False)
        wall = time.perf_counter() - start
        runs.append((wall, result))
        shares = [m.state_after.get("process_cpu_share") for m in result.measurements if "process_cpu_share" in m.state_after]
        if shares:
            print(f"run {i}: median CPU share of the timed threads {statistics.median(shares):.0%} "
                  "(the CPU time the process got / what its threads asked for; < 80 %: other processes compete)")
        print(f"run {i}: {result.new} workloads in {wall:.1f} s; stop reasons: "
              + ", ".join(f"{r}={sum(m.stop_reason == r for m in result.measurements)}" for r in ("precision", "budget", "max_samples")))

    wall, first = runs[0]
    records = [m for m in first.measurements if m.ok]
    rel_iqr = [m.stats.relative_iqr for m in records]
    print(f"(a) wall time, 17 blocks x 3 variants + 2 whole models: {wall:.1f} s (second run {runs[1][0]:.1f} s)  [target <= 90 s]")
    print(f"(b) median IQR/median over {len(records)} entries: {pct(statistics.median(rel_iqr))} "
          f"(run 2: {pct(statistics.median(m.stats.relative_iqr for m in runs[1][1].measurements if m.ok))}); "
          f"noisy (> 10 %): {sum(m.stats.noisy for m in records)}  [target <= 5 %]")
    second = {m.workload_key: m for m in runs[1][1].measurements if m.ok}
    drift = [abs(second[m.workload_key].stats.median - m.stats.median) / m.stats.median
             for m in records if m.scope == "block" and m.workload_key in second]
    drift_all = [abs(second[m.workload_key].stats.median - m.stats.median) / m.stats.median
                 for m in records if m.workload_key in second]
    print(f"(c) median drift of block medians between the two runs: {pct(statistics.median(drift))} "
          f"(max {pct(max(drift))}; all 53 entries: {pct(statistics.median(drift_all))})  [target <= 5 %]")
    whole = [m for m in records if m.scope == "model" and m.variant == "original" and m.workload_key in second]
    for m in whole:
        w2 = second[m.workload_key].stats.median
        print(f"    whole-model median drift between the two runs: {pct(abs(w2 - m.stats.median) / m.stats.median)} "
              f"({m.stats.median * 1e3:.2f} -> {w2 * 1e3:.2f} ms)  [target <= 2 %]")

    models = [m for m in records if m.scope == "model"]
    for m in models:
        print(f"    whole model {m.variant}: {m.stats.median * 1e3:.2f} ms, {1 / m.stats.median:.1f} FPS")

    if args.repeat_threads.lower() != "none":
        repeatability(args)
    if args.skip_d or args.backend != "torch":
        return
    model = get_model("mobilenet_v2", resolution=args.resolution)
    workloads = [w for g in block_workloads(model) for w in g] + model_workloads(model, "mobilenet_v2")
    backend = TorchBackend(BackendSettings(threads=threads))
    ratios = []
    with tempfile.TemporaryDirectory() as tmp, torch.inference_mode():
        for i, w in enumerate(workloads):
            prepared = backend.prepare(w.module, (1, *w.input_shape), Path(tmp))
            config = TimingConfig(first_warmup_s=0.5) if i == 0 else TimingConfig()
            ours = statistics.median(time_interleaved({"x": prepared.run}, config)["x"].samples_s)
            theirs = tb.Timer(stmt="run()", globals={"run": prepared.run}, num_threads=threads).blocked_autorange(
                min_run_time=args.min_run_time
            ).median
            ratios.append(ours / theirs)
    within = sum(abs(r - 1) <= 0.05 for r in ratios)
    print(f"(d) our median / blocked_autorange median over {len(ratios)} modules: median {statistics.median(ratios):.3f}, "
          f"range {min(ratios):.3f}..{max(ratios):.3f}, within 5 %: {within}/{len(ratios)}  [target: within 5 %]")
    with open("/proc/loadavg") as f:
        print(f"load average after: {f.read().split()[:3]}")


if __name__ == "__main__":
    main()
