"""Device-aware plans, measured on this machine (issue #29): does the plan chosen for one runtime keep its speed on
another, and how close do a few measurements of a new context come to its full LUT?

For each model (MobileNetV2-1.0, MobileNetV2-1.4, EfficientNet-Lite0; 224 px) and each context (PyTorch eager, ONNX
Runtime, TFLite/LiteRT on the CPU, one thread):

1. ``lut``: the blocks in their original, merged and linear forms, every span of 2..``--max-span`` consecutive
   blocks and the whole model (``OUT/MODEL/lut_BACKEND.jsonl``, resumable: TFLite converts each workload, minutes);
   the LUT; `dsprof plan` over the contexts (``OUT/MODEL/fronts.json``: each front, the cross table).
2. ``check``: in each context B and for three values of k (``--ks``, default a quarter, half and three quarters of the
   blocks keeping their activations), B's own front plan and every other context's front plan of that k, merged as
   deployed (the plan's ``merge`` list and spans, BatchNorm folded), converted and timed in B in one interleaved group
   (``OUT/MODEL/check_BACKEND_kK.jsonl``, resumable): the measured latency of the other context's plan over B's own
   (paired by round: median of the per-round ratios, 95 % interval) beside the predicted one (1 + the cross loss).
3. ``few``: for each ordered pair (A full, B new) and N = 10, 20: the N entries `dsprof measure --few` would time in
   B (`dsprof.lut.few.choose`) taken from B's full LUT -- the same measurements a ``--few`` run would make --, the rest
   predicted from A; the planner's plan at each k on that LUT priced on B's full LUT against B's own front plan
   (worst and median loss over k), beside A's own plans priced on B (no measurement of B at all).

It prints the tables for benchmarks/RESULTS.md. ``--reuse`` re-scores from the files in ``--out`` without timing
anything (a missing file is an error). Expected run time on a quiet 2-core CPU: see the end of this docstring.

    .venv/bin/python benchmarks/device_aware.py --out results/device_aware                    # everything (hours: TFLite)
    .venv/bin/python benchmarks/device_aware.py --out results/device_aware --models mbv2-1.0  # one model at a time
    .venv/bin/python benchmarks/device_aware.py --out results/device_aware --reuse            # tables again
    .venv/bin/python benchmarks/device_aware.py --out /tmp/da --models mbv2-1.0 --depths 1,1,1,1,1,1,1 \\
        --resolution 64 --backends torch,onnxruntime --budget 0.05                            # quick look (~1 min)

Run time (one thread, default timing): per model, the LUT of PyTorch eager and ONNX Runtime about 5-10 min each;
TFLite converts each of about 110 workloads through onnx2tf first (1-2 s each on a 2-vCPU VM: benchmarks/runtimes.py's
TFLite LUTs took 4-9 min per model at --budget 0.5, RESULTS "Does DepthShrinker still pay under a compiler?"); the
checks about 10 min per model (TFLite converts each merged plan); the few stage seconds. Every stage resumes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

MODELS = {  # name in this script: (registered model, build options)
    "mbv2-1.0": ("mobilenet_v2", {}),
    "mbv2-1.4": ("mobilenet_v2", {"width": 1.4}),
    "effnet-lite0": ("efficientnet_lite0", {}),
}
FEW = (10, 20)


def _load() -> str:
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def _timing(budget: float | None):
    from dsprof.profiler import TimingConfig

    return TimingConfig() if budget is None else TimingConfig(budget_s=budget)


def _model(args, key: str) -> tuple[str, dict]:
    name, options = MODELS[key]
    options = dict(options)
    if args.depths and name == "mobilenet_v2":
        options["depths"] = [int(d) for d in args.depths.split(",")]
    return name, options


def _need(path: Path, args) -> None:
    if args.reuse and not path.exists():
        raise SystemExit(f"--reuse: {path} is missing; run without --reuse to measure it")


# -- 1. LUTs and fronts ------------------------------------------------------------------------------
def stage_lut(args, key: str, folder: Path):
    from dsprof.lut import build_lut
    from dsprof.planning import joint_front, plan_contexts
    from dsprof.profiler import BackendSettings, Workloads, measure
    from dsprof.models import ModelRef

    name, options = _model(args, key)
    files = []
    for backend in args.backends:
        path = folder / f"lut_{backend}.jsonl"
        _need(path, args)
        if not args.reuse:
            print(f"{key}: LUT entries through {backend}, one thread ({_load()})", flush=True)
            t = time.perf_counter()
            measure(ModelRef.of(name, options=options, resolution=args.resolution),
                    settings=BackendSettings(backend=backend, threads=1),
                    workloads=Workloads(variants=("original", "merged", "linear"), model_variants=("original",), spans=args.max_span),
                    timing=_timing(args.budget), out=path, resume=True, progress=False)
            print(f"  {time.perf_counter() - t:.0f} s ({_load()})", flush=True)
        files.append(path)
    lut = build_lut(files)
    lut.save(folder / "lut.csv")
    fronts = plan_contexts(ModelRef.of(name, options=options, resolution=args.resolution), lut, max_span=args.max_span)
    fronts.write(folder / "fronts.json")
    print(f"\n{key}:\n{fronts.table()}\n", flush=True)
    if len(fronts.fronts) > 1:  # one plan for all of them: the exact minimax's cost here
        t = time.perf_counter()
        joint = joint_front([fronts.prices[f.device] for f in fronts.fronts], list(fronts.fronts), max_span=args.max_span)
        print(f"one plan for all {len(fronts.fronts)} contexts (least worst loss): {time.perf_counter() - t:.2f} s, "
              f"largest set of partial plans kept {joint.states}; worst loss by k: "
              + ", ".join(f"{p.k}: {p.worst:+.1%}" for p in joint.points), flush=True)
    return name, options, lut, fronts


def _ks(args, n: int) -> list[int]:
    if args.ks:
        return [int(k) for k in args.ks.split(",")]
    return sorted({round(n / 4), round(n / 2), round(3 * n / 4)})


def _same(a, b) -> bool:
    return a.keep == b.keep and (a.merge or ()) == (b.merge or ()) and (a.spans or ()) == (b.spans or ())


# -- 2. measured: one context's plan on another, paired with that context's own ---------------------
def stage_check(args, key: str, folder: Path, name: str, options: dict, fronts) -> list[dict]:
    from dsprof.merging import merge_model
    from dsprof.models import format_spans, get_model
    from dsprof.models import ModelRef
    from dsprof.profiler import Workloads, measure
    from dsprof.records.measurement import read_measurements
    from dsprof.records.stats import paired_speedup

    rows = []
    n = max(p.k for p in fronts.fronts[0].points)  # the number of blocks
    model = get_model(name, resolution=args.resolution, **options) if not args.reuse else None
    for runs_on in fronts.fronts:
        b = runs_on.device
        label_b = fronts.labels[b]
        for k in _ks(args, n):
            own = runs_on.at_k(k).plan
            plans = {f"own-k{k}": own}
            for chosen in fronts.fronts:
                if chosen.device != b and not _same(chosen.at_k(k).plan, own):
                    plans.setdefault(f"{chosen.device.backend}-k{k}", chosen.at_k(k).plan)
            path = folder / f"check_{b.backend}_k{k}.jsonl"
            _need(path, args)
            if not args.reuse:
                merged = {plan_name: merge_model(model, plan) for plan_name, plan in plans.items()}
                print(f"{key} on {label_b}, k={k}: {len(merged)} merged plans interleaved ({_load()})", flush=True)
                t = time.perf_counter()
                measure(ModelRef.of(model, name=name), settings=b, workloads=Workloads((), (), blocks=None),
                        extra_models=merged, timing=_timing(args.budget), out=path, resume=True, progress=False)
                print(f"  {time.perf_counter() - t:.0f} s ({_load()})", flush=True)
            records = {r.name: r for r in read_measurements(path) if r.scope == "model" and r.ok}
            for chosen in fronts.fronts:
                if chosen.device == b:
                    continue
                point = next(c for c in fronts.pair(chosen.device, b) if c.k == k)
                row = {"model": key, "chosen_for": fronts.labels[chosen.device], "runs_on": label_b, "k": k,
                       "spans": format_spans(point.plan.spans, "-"), "own_spans": format_spans(own.spans, "-"),
                       "predicted": 1 + point.loss, "predicted_low": 1 + point.loss_low,
                       "predicted_high": 1 + point.loss_high}
                if _same(point.plan, own):
                    row.update(same=True, measured=1.0, measured_low=1.0, measured_high=1.0)
                else:
                    mine, theirs = records[f"{chosen.device.backend}-k{k}"], records[f"own-k{k}"]
                    ratio = paired_speedup(mine.samples_s, theirs.samples_s)  # per round: its time over the own plan's
                    row.update(same=False, measured=ratio.ratio, measured_low=ratio.low, measured_high=ratio.high,
                               measured_s=mine.median_s, own_measured_s=theirs.median_s)
                rows.append(row)
    return rows


# -- 3. a new context from a few measurements --------------------------------------------------------
def stage_few(args, key: str, name: str, options: dict, lut, fronts) -> list[dict]:
    from dsprof.lut import LUT, Pricing
    from dsprof.lut.few import candidates, choose, few_lut
    from dsprof.lut.predict import profiled_options
    from dsprof.lut.schema import model_label
    from dsprof.models import ModelRef, find_blocks, get_model
    from dsprof.planning import plan_front
    from dsprof.planning.cross import cross_points
    from dsprof.workflows.few import workload_macs

    net = get_model(name, resolution=args.resolution, **options)
    label = model_label(name, profiled_options(net, options))
    blocks = find_blocks(net)
    macs = workload_macs(net, label, args.max_span)
    rows = []
    for full in fronts.fronts:  # A: the full context
        cands = candidates(lut, full.device, label, blocks, args.max_span, macs)
        for target in fronts.fronts:  # B: the new one
            if target.device == full.device:
                continue
            costs = fronts.prices[target.device]
            mine = lut.entries(target.device)
            baseline = [c.loss for c in fronts.pair(full.device, target.device)]
            for n in FEW:
                if n > len(cands):
                    continue
                keys = {c.key for c in choose(cands, n)}
                taken = [(s, w, v) in keys or s == "probe" for s, w, v in zip(mine.scope, mine.workload, mine.variant)]
                predicted, fit = few_lut(lut, cands, LUT(mine[taken], f"{n} entries of {fronts.labels[target.device]}"))
                front = plan_front(ModelRef.of(name, options=options, resolution=args.resolution), predicted,
                                   pricing=Pricing(max_span=args.max_span))
                points = cross_points(front, costs, target)
                worst = max(points, key=lambda c: c.loss)
                rows.append({"model": key, "full": fronts.labels[full.device], "new": fronts.labels[target.device],
                             "n": n, "entries": len(cands), "loo_error": fit.loo_error, "worst": worst.loss,
                             "worst_k": worst.k, "median": statistics.median(c.loss for c in points),
                             "baseline_worst": max(baseline), "baseline_median": statistics.median(baseline)})
    return rows


# -- tables ------------------------------------------------------------------------------------------
def print_tables(cross_summary: list[dict], checks: list[dict], few: list[dict]) -> None:
    print("\n### Predicted: what a plan chosen for one context loses on another (all k)\n")
    print("| model | chosen for | runs on | worst loss (k) | median loss |")
    print("|---|---|---|---|---|")
    for r in cross_summary:
        print(f"| {r['model']} | {r['chosen_for']} | {r['runs_on']} | {r['worst']:+.1%} (k={r['worst_k']}) | "
              f"{r['median']:+.1%} |")
    print("\n### Measured: the other context's plan over the context's own plan, same k, paired in one group\n")
    print("| model | plan chosen for | runs on | k | its spans | own spans | predicted | measured (95 %) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in checks:
        measured = ("same plan" if r["same"] else
                    f"{r['measured']:.3f} ({r['measured_low']:.3f}-{r['measured_high']:.3f})")
        print(f"| {r['model']} | {r['chosen_for']} | {r['runs_on']} | {r['k']} | {r['spans']} | {r['own_spans']} | "
              f"{r['predicted']:.3f} | {measured} |")
    if checks:
        differ = [r for r in checks if not r["same"]]
        inside = sum(r["measured_low"] <= r["predicted"] <= r["measured_high"] for r in differ)
        slower = sum(r["measured_low"] > 1 for r in differ)
        print(f"\n{len(differ)} of {len(checks)} pairs ran a different plan; {slower} measured significantly slower "
              f"than the own plan; the predicted ratio inside the measured 95 % interval in {inside}")
    print("\n### A new context from N measurements: its plans priced on the full LUT against the full LUT's plans\n")
    print("| model | full LUT of | new context | N | of entries | fit error (LOO) | worst loss (k) | median loss | "
          "full context's own plans: worst | median |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in few:
        print(f"| {r['model']} | {r['full']} | {r['new']} | {r['n']} | {r['entries']} | {r['loo_error']:.0%} | "
              f"{r['worst']:+.1%} (k={r['worst_k']}) | {r['median']:+.1%} | {r['baseline_worst']:+.1%} | "
              f"{r['baseline_median']:+.1%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--out", default="results/device_aware", help="folder for every measurement file and result")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--backends", default="torch,onnxruntime,tflite", help="comma-separated")
    parser.add_argument("--resolution", type=int, default=224)
    parser.add_argument("--depths", default=None, help="MobileNetV2 blocks per stage, for quick runs (e.g. 1,1,1,1,1,1,1)")
    parser.add_argument("--max-span", type=int, default=4)
    parser.add_argument("--ks", default=None, help="the k values to check (default: n/4, n/2, 3n/4)")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds of timed runs per workload at most (default: the profiler's); fewer samples")
    parser.add_argument("--stages", default="lut,check,few", help="comma-separated, of lut, check, few")
    parser.add_argument("--reuse", action="store_true", help="time nothing: re-score from the files in --out")
    args = parser.parse_args()
    args.backends = args.backends.split(",")
    stages = set(args.stages.split(","))
    import torch

    torch.set_num_threads(1)
    print(f"device_aware: {args.models} at {args.resolution} px through {', '.join(args.backends)} ({_load()})")
    summary, checks, few = [], [], []
    for key in args.models.split(","):
        folder = Path(args.out) / key
        folder.mkdir(parents=True, exist_ok=True)
        name, options, lut, fronts = stage_lut(args, key, folder)
        for a in fronts.fronts:
            for b in fronts.fronts:
                if a.device != b.device:
                    points = fronts.pair(a.device, b.device)
                    worst = max(points, key=lambda c: c.loss)
                    summary.append({"model": key, "chosen_for": fronts.labels[a.device], "runs_on": fronts.labels[b.device],
                                    "worst": worst.loss, "worst_k": worst.k,
                                    "median": statistics.median(c.loss for c in points)})
        if "check" in stages:
            checks += stage_check(args, key, folder, name, options, fronts)
        if "few" in stages:
            few += stage_few(args, key, name, options, lut, fronts)
    (Path(args.out) / "results.json").write_text(json.dumps({"cross": summary, "checks": checks, "few": few}, indent=1))
    print_tables(summary, checks, few)
    print(f"\n({_load()})")


if __name__ == "__main__":
    main()
