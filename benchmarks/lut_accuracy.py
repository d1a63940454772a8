"""How well does a LUT predict the latency of merged models? (issues #5, #14)

For each backend and MobileNetV2 width: one `measure` run builds the LUT (the blocks in their
original, merged and linear forms, the whole original model, and every block *in context*: the
whole model with that block swapped, against the whole model, `measure --context`). Then seeded
random plans are merged (`merge_model` with the LUT's savings) and each merged model is measured
end-to-end in a later, separate run, in a group of its own with the original model.

Candidates, each scored against that later measurement (the headline: raw error, what a user
predicting a model they have not measured gets):

* ``isolated``: the whole original model minus the savings of the blocks timed alone (issue #5);
* ``context``: minus the savings measured inside the running model (`predict_latency(method="context")`);
* ``context-scaled``: the isolated savings times one factor, all blocks' in-context savings over their
  isolated savings (`method="context-scaled"`; noise averages over the 17 groups);
* ``calibrated``: the isolated savings scaled by one factor fitted on ``--calibration`` extra plans
  measured end-to-end (LitePred-style adaptation from a small sample; those plans are not scored).

Diagnostic columns: ``drift-corrected`` (the prediction scaled by how much slower or faster the
original model ran in the check's rounds than in the LUT run: it divides out the machine, which a
user cannot do) and the share of measurements inside the prediction's 95 % interval.

    .venv/bin/python benchmarks/lut_accuracy.py --seed 1                    # CPU: 2 backends x 2 widths x 20 plans
    .venv/bin/python benchmarks/lut_accuracy.py --plans 3 --resolution 96 --backends torch   # quick look
    python3 benchmarks/lut_accuracy.py --device cuda --batch 128 --backends torch --plans 40 --budget 0.2
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from dsprof.lut import build_lut, predict_latency
from dsprof.lut.cost import merge_savings
from dsprof.merge import Plan, merge_model, merge_report
from dsprof.models import find_blocks, get_model
from dsprof.profiler import TimingConfig, measure

METHODS = ("isolated", "context", "context-scaled", "calibrated")


def load() -> str:
    return "/".join(f"{v:.1f}" for v in os.getloadavg())


def random_plans(n_blocks: int, count: int, seed: int, options: dict, prefix: str = "random") -> list[Plan]:
    """Seeded plans: each block keeps its activations with probability 1/2."""
    rng = random.Random(seed)
    return [
        Plan("mobilenet_v2", tuple(rng.randint(0, 1) for _ in range(n_blocks)), options, name=f"{prefix}-{seed}-{i}")
        for i in range(count)
    ]


def run_case(backend: str, width: float, args: argparse.Namespace, work: Path) -> dict:
    options = {"width": width}
    timing = TimingConfig(budget_s=args.budget, first_warmup_s=args.first_warmup)
    common = dict(backend=backend, device=args.device, resolution=args.resolution, batch=args.batch,
                  threads=args.threads, timing=timing, progress=False)
    load_before = load()
    # 1. The LUT run.
    t0 = time.perf_counter()
    lut_run = measure("mobilenet_v2", model_options=options, variants=("original", "merged", "linear"),
                      model_variants=("original",), context=("merged", "linear"), out=work / f"lut-{backend}-{width}", **common)
    lut_wall = time.perf_counter() - t0
    lut = build_lut([lut_run.path])
    key = lut.devices()[0]
    savings = merge_savings(lut, key)  # where merging pays, as predict_latency prices it
    in_lut = next(r.median_s for r in lut_run.measurements if r.scope == "model" and r.ok)

    # 2. Later, separate runs: each merged model end-to-end in a group of its own with the original.
    model = get_model("mobilenet_v2", resolution=args.resolution, **options)
    n_blocks = len(find_blocks(model))
    plans = random_plans(n_blocks, args.plans, args.seed, options)
    calibration = random_plans(n_blocks, args.calibration, args.seed + 10_000, options, prefix="calibration")
    rows = []
    for plan in calibration + plans:
        net = merge_model(model, plan, savings=savings)
        replay = merge_report(net).plan
        # the original and the merged model as two whole models (no stem/head split, exported once each)
        check = measure(model, name="mobilenet_v2", model_options=options, variants=(), model_variants=(),
                        blocks=None, extra_models={"mobilenet_v2": model, plan.name: net},
                        out=work / f"check-{backend}-{width}-{plan.name}", **common)
        medians = {r.name: r.median_s for r in check.measurements if r.scope == "model" and r.ok}
        row = {"plan": plan.name, "keep": "".join(map(str, plan.keep)), "measured_s": medians[plan.name],
               "drift": medians["mobilenet_v2"] / in_lut, "calibration": plan in calibration}
        for method in ("isolated", "context", "context-scaled"):
            try:
                pred = predict_latency("mobilenet_v2", lut, replay, device=key, options=options,
                                       resolution=args.resolution, strict=True, method=method)
            except ValueError as exc:  # entries that contradict each other (a non-positive total): a failed prediction
                print(f"  {plan.name} {method}: no prediction ({str(exc)[:120]})", flush=True)
                row[f"{method}_s"] = row[f"{method}_low_s"] = row[f"{method}_high_s"] = float("nan")
                continue
            assert pred.method.startswith(method)
            row[f"{method}_s"], row[f"{method}_low_s"], row[f"{method}_high_s"] = pred.total_s, pred.low_s, pred.high_s
        rows.append(row)

    # 3. The calibrated candidate: one factor on the isolated savings, fitted on the calibration plans.
    whole_s = in_lut
    fit = [r for r in rows if r["calibration"]]
    predicted_saving = sum(whole_s - r["isolated_s"] for r in fit)
    factor = sum(whole_s - r["measured_s"] for r in fit) / predicted_saving if fit and predicted_saving else 1.0
    for r in rows:
        r["calibrated_s"] = whole_s - factor * (whole_s - r["isolated_s"])
        if not r["calibrated_s"] > 0:
            r["calibrated_s"] = float("nan")
    scored = [r for r in rows if not r["calibration"]]
    drifts = sorted(r["drift"] for r in scored)
    return {"backend": backend, "width": width, "rows": scored, "factor": factor, "lut_wall_s": lut_wall,
            "load_before": load_before, "load_after": load(), "drift_range": (drifts[0], drifts[len(drifts) // 2], drifts[-1]),
            "threads": key.threads, "device_name": lut.device_name(key)}


@dataclass(frozen=True)
class Score:
    """Agreement of predictions with measurements; a failed prediction counts as outside every band."""

    count: int
    failed: int
    within_10pct: float
    within_5pct: float
    median_abs_error: float
    kendall_tau: float

    def __str__(self) -> str:
        failed = f", {self.failed} failed" if self.failed else ""
        return (f"{self.count} models: {self.within_10pct:.0%} within +-10 %, {self.within_5pct:.0%} within +-5 %, "
                f"median |error| {self.median_abs_error:.1%}, Kendall tau {self.kendall_tau:.3f}{failed}")


def score(predicted: list[float], measured: list[float]) -> Score:
    p, m = np.asarray(predicted, dtype=float), np.asarray(measured, dtype=float)
    ok = np.isfinite(p)
    err = np.where(ok, np.abs(p / m - 1), np.inf)
    tau = float(kendalltau(p[ok], m[ok]).statistic) if ok.sum() > 1 else float("nan")
    return Score(len(p), int((~ok).sum()), float((err <= 0.10).mean()), float((err <= 0.05).mean()),
                 float(np.median(err)), tau)


def summary_line(rows: list[dict], method: str) -> dict:
    measured = [r["measured_s"] for r in rows]
    raw = score([r[f"{method}_s"] for r in rows], measured)
    corrected = score([r[f"{method}_s"] * r["drift"] for r in rows], measured)
    inside = None
    if method != "calibrated":
        inside = sum(r[f"{method}_low_s"] <= r["measured_s"] <= r[f"{method}_high_s"] for r in rows) / len(rows)
    signed = [r[f"{method}_s"] / r["measured_s"] - 1 for r in rows if math.isfinite(r[f"{method}_s"])]
    bias = statistics.median(signed) if signed else float("nan")
    return {"raw": raw, "corrected": corrected, "inside": inside, "median_signed_error": bias}


def fmt(acc: Score) -> str:
    failed = f" ({acc.failed} failed)" if acc.failed else ""
    return f"{acc.within_10pct:.0%} / {acc.within_5pct:.0%}, {acc.median_abs_error:.1%}, {acc.kendall_tau:.3f}{failed}"


def print_tables(cases: list[dict], seed: int, backends: list[str]) -> None:
    """The Markdown table: per case and method, then per backend over all its plans."""
    print("\n| backend, width | method | raw: within ±10 % / ±5 %, median error, τ | median signed error | "
          "inside 95 % interval | drift-corrected (diagnostic) | load avg before → after | seed |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for case in cases:
        for m in METHODS:
            s = summary_line(case["rows"], m)
            inside = f"{s['inside']:.0%}" if s["inside"] is not None else "—"
            print(f"| {case['backend']}, {case['width']} | {m} | {fmt(s['raw'])} | {s['median_signed_error']:+.1%} | "
                  f"{inside} | {fmt(s['corrected'])} | {case['load_before']} → {case['load_after']} | {seed} |")
    for m in METHODS:
        for backend in backends:
            rows = [r for c in cases if c["backend"] == backend for r in c["rows"]]
            if not rows:
                continue
            s = summary_line(rows, m)
            inside = f"{s['inside']:.0%}" if s["inside"] is not None else "—"
            print(f"| **{backend}, all {len(rows)} plans** | {m} | {fmt(s['raw'])} | {s['median_signed_error']:+.1%} | "
                  f"{inside} | {fmt(s['corrected'])} | | {seed} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="onnxruntime,torch")
    parser.add_argument("--widths", default="1.0,1.4")
    parser.add_argument("--plans", type=int, default=20, help="random plans per width, scored")
    parser.add_argument("--calibration", type=int, default=3, help="extra plans per width to fit the calibrated candidate")
    parser.add_argument("--resolution", type=int, default=224)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: measure's, 1)")
    parser.add_argument("--budget", type=float, default=TimingConfig.budget_s,
                        help="seconds of timing per workload at most (default: measure's)")
    parser.add_argument("--first-warmup", type=float, default=TimingConfig.first_warmup_s,
                        help="seconds of warm-up of each run's first group (thread pools, allocator, cuDNN autotuning)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--system-allocator", action="store_true",
                        help="leave glibc malloc as it is (DSPROF_ALLOCATOR=system): the context effect of issue #14 back")
    parser.add_argument("--out", type=Path, default=None, help="keep the measurement files and results.json here")
    parser.add_argument("--tables-from", type=Path, nargs="+", default=None,
                        help="print the tables of results.json files (e.g. cases run in parallel) and stop")
    args = parser.parse_args()
    if args.tables_from:
        saved = [json.loads(p.read_text()) for p in args.tables_from]
        cases = [c for s in saved for c in s["cases"]]
        seeds = {s["args"]["seed"] for s in saved}
        print_tables(cases, int(seeds.pop()) if len(seeds) == 1 else -1, list(dict.fromkeys(c["backend"] for c in cases)))
        return

    if args.system_allocator:
        os.environ["DSPROF_ALLOCATOR"] = "system"  # read when the first PyTorch CPU backend starts
    start = time.perf_counter()
    print(f"lut_accuracy --seed {args.seed} --plans {args.plans} --calibration {args.calibration} --budget {args.budget} "
          f"--device {args.device} --batch {args.batch} --resolution {args.resolution}"
          f"{' --system-allocator' if args.system_allocator else ''}; load average {load()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.out or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        cases = []
        for backend in args.backends.split(","):
            for width in map(float, args.widths.split(",")):
                case = run_case(backend, width, args, work)
                cases.append(case)
                if args.out:  # after every case: a run cut short keeps what it measured
                    (args.out / "results.json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                                                       "cases": cases}, indent=1, default=str))
                lo, mid, hi = case["drift_range"]
                print(f"\n== {backend}, MobileNetV2-{width}, {args.resolution}px, batch {args.batch}, {case['threads']} thread(s), "
                      f"{case['device_name']}; load average {case['load_before']} -> {case['load_after']}; LUT run "
                      f"{case['lut_wall_s']:.0f} s; original model in the checks {lo:.2f}x-{hi:.2f}x (median {mid:.2f}x) its "
                      f"LUT-run latency; calibration factor {case['factor']:.3f}", flush=True)
                for r in case["rows"]:
                    print(f"  {r['plan']:<14} {r['keep']}  measured {r['measured_s'] * 1e3:8.3f} ms  "
                          + "  ".join(f"{m} {r[f'{m}_s'] / r['measured_s'] - 1:+.1%}" for m in METHODS), flush=True)
                for m in METHODS:
                    s = summary_line(case["rows"], m)
                    inside = f", inside 95 % interval {s['inside']:.0%}" if s["inside"] is not None else ""
                    print(f"  {m:<10} raw: {s['raw']}; median signed error {s['median_signed_error']:+.1%}{inside}", flush=True)
                    print(f"  {'':<10} drift-corrected (diagnostic): {s['corrected']}", flush=True)
        print_tables(cases, args.seed, args.backends.split(","))
    print(f"wall time {time.perf_counter() - start:.0f} s; load average {load()}")


if __name__ == "__main__":
    main()
