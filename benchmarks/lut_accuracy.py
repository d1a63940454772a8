"""How well does a LUT predict merged models: their speed-up over the original, and their latency? (issues #5, #14, #27)

For each backend and model, one `measure` run builds the LUT (the blocks in their original, merged and linear
forms; the whole original model with its stem and head; every block in situ, `measure --in-situ`). Then plans
across the whole range of k -- the planner's front plans and seeded random plans whose number of linearised
blocks runs evenly over 0..n -- are merged (the LUT's rule) and each merged model is timed in a later, separate
run *interleaved with the original in one group* (`dsprof.workflows.check`, what `dsprof predict --measure` runs):
the measured speed-up is the median of their per-round ratios (paired), the measured latency the merged model's
median.

Each method (`dsprof.names.PREDICT_METHODS`) predicts every plan from the LUT alone; per backend and method the table sets
the speed-up's and the latency's agreement side by side: share within +-10 %, median |error|, Kendall tau over
k = 0..n (per model, median over models), the share of measurements inside the prediction's 95 % interval and
its median half-width. ``auto+probe`` is auto's latency scaled by the drift probe timed in the check run (the
speed-up needs no scaling). Every measurement file, every plan measured and results.json stay under --out;
``--reuse DIR`` scores a stored run again with today's code, without measuring (intervals can be developed
offline). Timings are figures only on a quiet machine: run it under ../shared/tools/quiet-run, which gives the
load; the table shows the load average of each case.

    .venv/bin/python benchmarks/lut_accuracy.py --out results/acc --seed 11                 # 5 architectures x 2 backends
    .venv/bin/python benchmarks/lut_accuracy.py --reuse results/acc                         # re-score, no measuring
    .venv/bin/python benchmarks/lut_accuracy.py --out /tmp/acc --models mobilenet_v2 --backends torch --resolution 32 \\
        --range-plans 2 --front-plans 2 --budget 0.05                                        # a quick look
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from dsprof.lut import MethodFallbackWarning, Pricing, build_lut
from dsprof.names import PREDICT_METHODS as LUT_METHODS
from dsprof.lut.predict import prices_of, predict_plan
from dsprof.lut.interval import lut_probe, probe_ratio
from dsprof.records.plan import Plan, load_plan
from dsprof.models import ModelRef, find_blocks, get_model
import dsprof
from dsprof.profiler import BackendSettings, TimingConfig, Workloads
from dsprof.workflows.check import measure_planned_run, paired_check
from dsprof.records.measurement import read_measurements
from dsprof.planning import plan_front
from dsprof.planning.decide import Decider

METHODS = tuple(m for m in LUT_METHODS if m != "auto") + ("auto", "auto+probe")
#: The five architectures of issue #27 (the model file's name is added with --model-file).
MODELS = "mobilenet_v2,efficientnet_lite0,resnet18,mnasnet1_0"


def load() -> str:
    return "/".join(f"{v:.1f}" for v in os.getloadavg())


def slug(label: str) -> str:
    return label.replace(":", "_").replace("/", "_")


def model_cases(models: str, model_file: str | None) -> list[tuple[str, dict]]:
    """(registered name, build options) of every model the run covers; a --model-file model is registered."""
    cases = [(m, {}) for m in models.split(",") if m]
    if model_file:
        from dsprof.models.user_model import register_model_file

        cases.append((register_model_file(model_file), {}))
    return cases


def range_plans(model: str, n: int, count: int, seed: int, options: dict) -> list[Plan]:
    """Seeded random plans whose number of linearised blocks k runs evenly over 0..n."""
    rng = random.Random(seed)
    plans = []
    for i in range(count):
        k = round(i * n / max(count - 1, 1))
        linear = set(rng.sample(range(n), k))
        plans.append(Plan(model, tuple(0 if b in linear else 1 for b in range(n)), options, name=f"range-{seed}-{i}"))
    return plans


def front_plans(model: str, lut, key, options: dict, resolution: int, count: int, max_span: int) -> list[Plan]:
    """``count`` of the planner's front plans (the fastest for k blocks keeping their activations), k evenly spread."""
    if count <= 0:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MethodFallbackWarning)
        front = plan_front(ModelRef.of(model, options=options, resolution=resolution), lut,
                           pricing=Pricing(device_key=key, max_span=max_span))
    points = front.points
    chosen = sorted({round(i * (len(points) - 1) / max(count - 1, 1)) for i in range(count)})
    return [Plan(model, points[i].plan.keep, options, merge=points[i].plan.merge, spans=points[i].plan.spans,
                 name=f"front-k{points[i].k}") for i in chosen]


# -- measuring -------------------------------------------------------------------------------------------------


def measure_case(backend: str, model_name: str, options: dict, args: argparse.Namespace, out: Path) -> dict:
    """The LUT run and one paired check per plan, every file under ``out``; returns the case's manifest."""
    timing = TimingConfig(budget_s=args.budget, first_warmup_s=args.first_warmup)
    settings = BackendSettings(backend, args.device, threads=args.threads)
    case = {"backend": backend, "model": model_name, "options": options, "resolution": args.resolution,
            "load_before": load(), "slug": f"{backend}-{slug(model_name)}", "seed": args.seed,
            "model_file": args.model_file if model_name.startswith("file:") else None}
    t0 = time.perf_counter()
    lut_run = dsprof.measure(ModelRef.of(model_name, options=options, resolution=args.resolution),
                             workloads=Workloads(("original", "merged", "linear"), ("original",),
                                                 in_situ=tuple(filter(None, args.in_situ.split(","))), spans=args.spans,
                                                 calibrate=args.calibrate),
                             timing=timing, out=out / f"lut-{case['slug']}", progress=False,
                             settings=settings, batch=args.batch).run
    case["lut_wall_s"] = time.perf_counter() - t0
    lut = build_lut([lut_run.path])
    key = lut.devices()[0]
    model = get_model(model_name, resolution=args.resolution, **options)
    n = len(find_blocks(model))
    plans = (front_plans(model_name, lut, key, options, args.resolution, args.front_plans, max(args.spans, 1))
             + range_plans(model_name, n, args.range_plans, args.seed, options))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MethodFallbackWarning)
        costs = prices_of(ModelRef.of(model_name, options=options, resolution=args.resolution), lut, device=key)
    plan_dir = out / "plans" / case["slug"]
    plan_dir.mkdir(parents=True, exist_ok=True)
    case["plans"] = []
    for plan in plans:
        deployed = Decider("lut", costs).decide(plan).plan  # its merge list: the planner on the LUT, as predict prices it and merge replays it
        (plan_dir / f"{plan.name}.json").write_text(deployed.to_json())
        measure_planned_run(ModelRef.of(model, name=model_name, options=options), key, deployed, timing=timing,
                            out=out / f"check-{case['slug']}-{plan.name}", progress=False)
        case["plans"].append(plan.name)
    case["load_after"] = load()
    return case


# -- scoring ---------------------------------------------------------------------------------------------------


def _pair(records, model_name: str, plan_name: str) -> tuple[float, float, float, float] | None:
    """(measured speed-up, its low, its high, merged median s) of one check run; the original is variant ``original``
    (or, in files of the benchmark before issue #27, ``custom`` under the model's name)."""
    check = paired_check(records, plan_name)
    if check is None:
        by_name = {r.name: r for r in records if r.scope == "model" and r.ok}
        base, merged = by_name.get(model_name), by_name.get(plan_name)
        if base is None or merged is None or base.group != merged.group:
            return None
        from dsprof.records.stats import paired_speedup

        s = paired_speedup(base.samples_s, merged.samples_s)
        return s.ratio, s.low, s.high, merged.median_s
    return check.speedup.ratio, check.speedup.low, check.speedup.high, check.merged_s


def _plans_of(case: dict, out: Path) -> list[Plan]:
    """The plans of a case as measured: stored plan files, or (older runs) the keep lists of results.json."""
    plan_dir = out / "plans" / case["slug"]
    if plan_dir.is_dir():
        return [load_plan(plan_dir / f"{name}.json") for name in case["plans"]]
    return [Plan(case["model"], tuple(int(c) for c in row["keep"]), case["options"], name=row["plan"])
            for row in case["rows"]]


def score_case(case: dict, out: Path) -> list[dict]:
    """One row per plan: k, the measured speed-up and latency, and every method's predictions with intervals."""
    lut = build_lut([out / f"lut-{case['slug']}"])
    key = lut.devices()[0]
    probe = lut_probe(lut, key)
    costs = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MethodFallbackWarning)  # said in the method column
        for method in METHODS[:-1]:  # each method's prices, read once
            model = ModelRef.of(case["model"], options=case["options"], resolution=case["resolution"])
            costs[method] = prices_of(model, lut, device=key, method=method)
    rows = []
    for plan in _plans_of(case, out):
        folder = out / f"check-{case['slug']}-{plan.name}"
        records = [r for f in sorted(folder.glob("*.jsonl")) for r in read_measurements(f)]
        pair = _pair(records, case["model"], plan.name)
        if pair is None:
            print(f"  {case['slug']} {plan.name}: no paired check in {folder}; left out", flush=True)
            continue
        samples = [s for r in records if r.scope == "probe" and r.ok for s in r.samples_s]
        row = {"plan": plan.name, "k": plan.keep.count(0), "n": len(plan.keep), "speedup": pair[0], "speedup_low": pair[1],
               "speedup_high": pair[2], "latency_s": pair[3],
               "probe_ratio": probe_ratio(samples, probe) if samples else float("nan")}
        for method, priced in costs.items():
            try:
                pred = predict_plan(priced, plan, strict=True, name=case["model"])
            except ValueError as exc:  # entries that contradict each other: a failed prediction
                print(f"  {plan.name} {method}: no prediction ({str(exc)[:100]})", flush=True)
                pred = None
            row[method] = _values(pred)
        ratio = row["probe_ratio"]
        row["auto+probe"] = dict(row["auto"], **{k: row["auto"][k] * ratio for k in ("latency_s", "low_s", "high_s")})
        rows.append(row)
    return rows


def _values(pred) -> dict:
    nan = float("nan")
    if pred is None:
        return dict(speedup=nan, speedup_low=nan, speedup_high=nan, latency_s=nan, low_s=nan, high_s=nan, method="failed")
    return dict(speedup=pred.speedup, speedup_low=pred.speedup_low, speedup_high=pred.speedup_high,
                latency_s=pred.total_s, low_s=pred.low_s, high_s=pred.high_s, method=pred.method)


@dataclass(frozen=True)
class Score:
    """Agreement of one quantity's predictions with its measurements (a failed prediction is outside every band)."""

    count: int
    within_10pct: float
    median_abs_error: float
    tau: float  # Kendall tau over k = 0..n, per model, median over models
    coverage: float  # share of measurements inside the 95 % interval
    half_width: float  # median relative half-width of the interval
    worst: float  # the signed error of largest size

    def cells(self) -> str:
        return (f"{self.within_10pct:.0%} | {self.median_abs_error:.1%} | {self.tau:.2f} | {self.coverage:.0%} | "
                f"±{self.half_width:.1%}")


def score(rows: list[dict], method: str, quantity: str, by_case: list[list[dict]]) -> Score:
    """``quantity``: "speedup" (measured: the paired median ratio) or "latency_s" (the merged model's median)."""
    low, high = ("speedup_low", "speedup_high") if quantity == "speedup" else ("low_s", "high_s")
    p = np.array([r[method][quantity] for r in rows], dtype=float)
    m = np.array([r[quantity] for r in rows], dtype=float)
    ok = np.isfinite(p)
    err = np.where(ok, p / m - 1, np.inf)
    inside = [r[method][low] <= r[quantity] <= r[method][high] for r in rows]
    halves = [(r[method][high] - r[method][low]) / 2 / r[method][quantity] for r in rows if math.isfinite(r[method][quantity])]
    taus = []
    for case_rows in by_case:
        pc = np.array([r[method][quantity] for r in case_rows], dtype=float)
        mc = np.array([r[quantity] for r in case_rows], dtype=float)
        good = np.isfinite(pc)
        if good.sum() > 2:
            taus.append(float(kendalltau(pc[good], mc[good]).statistic))
    worst = float(err[ok][np.argmax(np.abs(err[ok]))]) if ok.any() else float("nan")
    return Score(len(rows), float((np.abs(err) <= 0.10).mean()), float(np.median(np.abs(err))),
                 statistics.median(taus) if taus else float("nan"), float(np.mean(inside)),
                 statistics.median(halves) if halves else float("nan"), worst)


def print_case(case: dict) -> None:
    print(f"\n== {case['backend']}, {case['model']}, {case['resolution']} px; load average {case['load_before']} -> "
          f"{case['load_after']}; auto: {case['rows'][0]['auto']['method'] if case['rows'] else '-'}", flush=True)
    for r in case["rows"]:
        a = r["auto"]
        inside = "in " if a["speedup_low"] <= r["speedup"] <= a["speedup_high"] else "OUT"
        print(f"  {r['plan']:<14} k={r['k']:<3} speed-up measured {r['speedup']:.3f} [{r['speedup_low']:.3f}, "
              f"{r['speedup_high']:.3f}] auto {a['speedup']:.3f} [{a['speedup_low']:.3f}, {a['speedup_high']:.3f}] {inside} "
              f"{a['speedup'] / r['speedup'] - 1:+.1%} | latency {r['latency_s'] * 1e3:.3f} ms auto "
              f"{a['latency_s'] / r['latency_s'] - 1:+.1%}" + "".join(
                  f" {m} {r[m]['speedup'] / r['speedup'] - 1:+.1%}" for m in METHODS if m not in ("auto", "auto+probe")),
              flush=True)


def print_table(cases: list[dict], seed) -> None:
    """The summary to paste: per backend and method, speed-up and latency side by side, with the loads."""
    print("\n| backend | method | plans | speed-up: within ±10 % | median error | τ (k = 0..n) | inside 95 % | median "
          "half-width | latency: within ±10 % | median error | τ | inside 95 % | median half-width | load avg |")
    print("| --- | --- | --- |" + " --- |" * 11)
    for backend in dict.fromkeys(c["backend"] for c in cases):
        mine = [c for c in cases if c["backend"] == backend]
        rows = [r for c in mine for r in c["rows"]]
        loads = ", ".join(f"{c['load_before']}→{c['load_after']}" for c in mine)
        by_case = [c["rows"] for c in mine]
        for method in METHODS:
            s, lat = score(rows, method, "speedup", by_case), score(rows, method, "latency_s", by_case)
            print(f"| {backend} | {method} | {s.count} | {s.cells()} | {lat.cells()} | {loads if method == 'auto' else ''} |")
    if len({c["backend"] for c in cases}) > 1:  # the targets are over both backends together
        rows, by_case = [r for c in cases for r in c["rows"]], [c["rows"] for c in cases]
        s, lat = score(rows, "auto", "speedup", by_case), score(rows, "auto", "latency_s", by_case)
        print(f"| all | auto | {s.count} | {s.cells()} | {lat.cells()} |  |")
    rest = [r for c in cases for r in c["rows"] if r["k"] != r["n"]]
    if rest:  # the calibration times the all-linearised plan in the LUT run: the figure without that plan, too
        s = score(rest, "auto", "speedup", [])
        print(f"\nauto without the plans that linearise every block (the calibration group's plan): {s.count} plans, "
              f"within ±10 % {s.within_10pct:.0%}, inside 95 % {s.coverage:.0%} at ±{s.half_width:.1%}")
    print(f"\nseed {seed}; per model (auto): speed-up within ±10 %, median error, worst, inside 95 %, median half-width")
    for c in cases:
        s = score(c["rows"], "auto", "speedup", [c["rows"]])
        print(f"  {c['backend']:<12} {c['model']:<22} {s.within_10pct:>4.0%} {s.median_abs_error:>6.1%} {s.worst:>+7.1%} "
              f"{s.coverage:>5.0%} ±{s.half_width:.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="onnxruntime,torch")
    parser.add_argument("--models", default=MODELS, help="registered models, comma-separated")
    parser.add_argument("--model-file", default="tests/models/mynet.py:build",
                        help="a model outside the zoo, PATH.py:FACTORY (as `dsprof --model-file`); '' for none")
    parser.add_argument("--range-plans", type=int, default=10,
                        help="seeded random plans per model, their number of linearised blocks k evenly over 0..n")
    parser.add_argument("--front-plans", type=int, default=5, help="the planner's front plans per model, k evenly spread")
    parser.add_argument("--spans", type=int, default=0, help="the LUT run's --spans (and the front's spans up to it)")
    parser.add_argument("--resolution", type=int, default=128)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: measure's, 1)")
    parser.add_argument("--budget", type=float, default=TimingConfig.budget_s, help="seconds of timing per workload at most")
    parser.add_argument("--first-warmup", type=float, default=TimingConfig.first_warmup_s)
    parser.add_argument("--in-situ", default="merged,linear", help="the LUT run's --in-situ variants ('' for none)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-calibrate", dest="calibrate", action="store_false",
                        help="a LUT run without the calibration group (`measure --calibrate`): intervals as before it")
    parser.add_argument("--system-allocator", action="store_true",
                        help="leave glibc malloc as it is (DSPROF_ALLOCATOR=system): the context effect of issue #14 back")
    parser.add_argument("--out", type=Path, default=None, help="keep every measurement file, plan and results.json here")
    parser.add_argument("--reuse", type=Path, default=None, help="score the files a run stored here again, measuring nothing")
    args = parser.parse_args()
    start = time.perf_counter()
    if args.reuse is not None:
        out = args.reuse
        saved = json.loads((out / "results.json").read_text())
        cases = saved["cases"]
        for case in cases:  # files of the benchmark before issue #27: their names and options
            case.setdefault("slug", f"{case['backend']}-{slug(case['model'])}")
            case.setdefault("options", {"width": 1.0} if case["model"].startswith("MobileNetV2") else {})
            case.setdefault("resolution", int(saved["args"].get("resolution", 128)))
            if case["model"].startswith("MobileNetV2"):
                case["model"] = "mobilenet_v2"
            model_file = case.get("model_file") or saved["args"].get("model_file")
            if case["model"].startswith("file:") and model_file not in (None, "None", ""):
                from dsprof.models.user_model import register_model_file

                register_model_file(model_file)
        seed = ",".join(sorted({str(c.get("seed", saved["args"].get("seed"))) for c in cases}))
    else:
        if args.out is None:
            parser.error("give --out DIR (every measurement file is kept there) or --reuse DIR")
        out = args.out
        out.mkdir(parents=True, exist_ok=True)
        if args.system_allocator:
            os.environ["DSPROF_ALLOCATOR"] = "system"  # read when the first PyTorch CPU backend starts
        print(f"lut_accuracy --seed {args.seed} --resolution {args.resolution} --budget {args.budget}; load average {load()}",
              flush=True)
        # cases another run stored here stay (a run split by backend, or cut short, adds to them)
        stored = json.loads((out / "results.json").read_text())["cases"] if (out / "results.json").exists() else []
        cases = []
        for backend in args.backends.split(","):
            for model_name, options in model_cases(args.models, args.model_file or None):
                cases.append(measure_case(backend, model_name, options, args, out))
                kept = [c for c in stored if c["slug"] not in {m["slug"] for m in cases}]
                (out / "results.json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                                              "cases": kept + cases}, indent=1))
        cases = kept + cases
        seed = args.seed
    for case in cases:
        case["rows"] = score_case(case, out)
        print_case(case)
    if args.reuse is None:  # a stored run is read, never written
        (out / "scores.json").write_text(json.dumps(cases, indent=1, default=str))
    print_table(cases, seed)
    print(f"wall time {time.perf_counter() - start:.0f} s; load average {load()}")


if __name__ == "__main__":
    main()
