"""How well does a LUT predict the latency of merged models? (issues #5, #14)

For each backend and MobileNetV2 width: one `measure` run builds the LUT (the blocks in their
original, merged and linear forms, the whole original model, and every block *in context*: the
whole model with that block swapped, against the whole model, `measure --context`). Then seeded
random plans are merged (their merge lists written by the LUT's rule, `PlanCosts.with_merges`) and each merged model is measured
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
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from dsprof.lut import MethodFallbackWarning, build_lut, model_label, predict_latency
from dsprof.lut.cost import CONTEXT_FACTOR_RANGE, Lookup, ModelEntries, _context_factor
from dsprof.lut.drift import lut_probe, probe_ratio_of
from dsprof.lut.predict import plan_costs, profiled_options
from dsprof.merge import Plan, merge_model, merge_report
from dsprof.models import find_blocks, get_model
from dsprof.profiler import TimingConfig, measure

METHODS = ("isolated", "context", "context-scaled", "auto", "auto+probe", "calibrated")


def load() -> str:
    return "/".join(f"{v:.1f}" for v in os.getloadavg())


def random_plans(model: str, n_blocks: int, count: int, seed: int, options: dict, prefix: str = "random",
                 spread_k: bool = False) -> list[Plan]:
    """Seeded plans: n // 2 of the n blocks linearised, chosen at random (plans of one k); with ``spread_k`` the
    number of linearised blocks k runs evenly over 0..n instead, for a rank over the whole range."""
    rng = random.Random(seed)
    plans = []
    for i in range(count):
        if spread_k:
            k = round(i * n_blocks / max(count - 1, 1))
            merged = set(rng.sample(range(n_blocks), k))
            keep = tuple(0 if b in merged else 1 for b in range(n_blocks))
        else:
            merged = set(rng.sample(range(n_blocks), n_blocks // 2))
            keep = tuple(0 if b in merged else 1 for b in range(n_blocks))
        plans.append(Plan(model, keep, options, name=f"{prefix}-{seed}-{i}"))
    return plans


def model_cases(args: argparse.Namespace) -> list[tuple[str, dict, str]]:
    """(model name, build options, label) of every model the run covers: MobileNetV2 at each width, the other
    registered models, and the ``--model-file`` model."""
    cases = [("mobilenet_v2", {"width": w}, f"MobileNetV2-{w}") for w in map(float, filter(None, args.widths.split(",")))]
    cases += [(m, {}, m) for m in args.models.split(",") if m]
    if args.model_file:
        from dsprof.models.user_model import register_model_file

        name = register_model_file(args.model_file)
        cases.append((name, {}, name))
    return cases


def _prediction(model: str, lut, replay, key, options: dict, args, method: str) -> tuple[float, float, float, str]:
    """(total, low, high, method used) of one method; NaN where the entries contradict each other."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MethodFallbackWarning)  # said in the method column
        try:
            pred = predict_latency(model, lut, replay, device=key, options=options, resolution=args.resolution,
                                   strict=True, method=method)
        except ValueError as exc:  # entries that contradict each other (a non-positive total): a failed prediction
            print(f"  {replay.name} {method}: no prediction ({str(exc)[:120]})", flush=True)
            return float("nan"), float("nan"), float("nan"), "failed"
    return pred.total_s, pred.low_s, pred.high_s, pred.method


def run_case(backend: str, model_name: str, options: dict, label: str, args: argparse.Namespace, work: Path) -> dict:
    timing = TimingConfig(budget_s=args.budget, first_warmup_s=args.first_warmup)
    common = dict(backend=backend, device=args.device, resolution=args.resolution, batch=args.batch,
                  threads=args.threads, timing=timing, progress=False)
    load_before = load()
    slug = label.replace(":", "_").replace("/", "_")
    # 1. The LUT run.
    t0 = time.perf_counter()
    lut_run = measure(model_name, model_options=options, variants=("original", "merged", "linear"),
                      model_variants=("original",), context=tuple(filter(None, args.context.split(","))),
                      out=work / f"lut-{backend}-{slug}", **common)
    lut_wall = time.perf_counter() - t0
    lut = build_lut([lut_run.path])
    key = lut.devices()[0]
    # which blocks merge: the one rule predict_latency prices (a plan's list, written once, replayed by merge_model)
    rule = plan_costs(model_name, lut, device=key, options=options, resolution=args.resolution, method="isolated")
    in_lut = next(r.median_s for r in lut_run.measurements if r.scope == "model" and r.ok)
    probe_lut = lut_probe(lut, key)
    model = get_model(model_name, resolution=args.resolution, **options)
    blocks = find_blocks(model)
    lookup = Lookup.of(lut, key)
    factor_ctx = _context_factor(blocks, ModelEntries.read(lookup, model_label(model_name, profiled_options(model, options)),
                                                            blocks), lookup)

    # 2. Later, separate runs: each merged model end-to-end in a group of its own with the original.
    n_blocks = len(blocks)
    plans = (random_plans(model_name, n_blocks, args.plans, args.seed, options)
             + random_plans(model_name, n_blocks, args.range_plans, args.seed + 20_000, options, "range", spread_k=True))
    calibration = random_plans(model_name, n_blocks, args.calibration, args.seed + 10_000, options, prefix="calibration")
    rows = []
    for plan in calibration + plans:
        net = merge_model(model, rule.with_merges(plan))
        replay = merge_report(net).plan
        # the original and the merged model as two whole models (no stem/head split, exported once each)
        check = measure(model, name=model_name, model_options=options, variants=(), model_variants=(),
                        blocks=None, extra_models={model_name: model, plan.name: net},
                        out=work / f"check-{backend}-{slug}-{plan.name}", **common)
        medians = {r.name: r.median_s for r in check.measurements if r.scope == "model" and r.ok}
        probe_samples = [s for r in check.measurements if r.scope == "probe" and r.ok for s in r.samples_s]
        row = {"plan": plan.name, "keep": "".join(map(str, plan.keep)), "k": plan.keep.count(0),
               "measured_s": medians[plan.name], "drift": medians[model_name] / in_lut, "calibration": plan in calibration,
               "range": plan.name.startswith("range"),
               "probe_ratio": probe_ratio_of(probe_samples, probe_lut) if probe_samples else float("nan")}
        for method in ("isolated", "context", "context-scaled", "auto"):
            total, low, high, used = _prediction(model_name, lut, replay, key, options, args, method)
            assert method == "auto" or used.startswith(method) or used.startswith("isolated") or used == "failed", used
            row[f"{method}_s"], row[f"{method}_low_s"], row[f"{method}_high_s"], row[f"{method}_method"] = total, low, high, used
        # auto scaled by the drift probe timed during the check (what `predict --probe` just before it gives)
        r_ = row["probe_ratio"]
        row["auto+probe_s"], row["auto+probe_low_s"], row["auto+probe_high_s"] = (row["auto_s"] * r_, row["auto_low_s"] * r_,
                                                                                 row["auto_high_s"] * r_)
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
    return {"backend": backend, "model": label, "rows": scored, "factor": factor, "context_factor": factor_ctx,
            "auto_method": scored[0]["auto_method"] if scored else "", "lut_wall_s": lut_wall,
            "load_before": load_before, "load_after": load(), "drift_range": (drifts[0], drifts[len(drifts) // 2], drifts[-1]),
            "probe_spread": 1.959964 * probe_lut.iqr_s / 1.349 / probe_lut.median_s,
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


def tau(predicted: list[float], measured: list[float]) -> float:
    p, m = np.asarray(predicted, dtype=float), np.asarray(measured, dtype=float)
    ok = np.isfinite(p)
    return float(kendalltau(p[ok], m[ok]).statistic) if ok.sum() > 1 else float("nan")


def score(predicted: list[float], measured: list[float]) -> Score:
    p, m = np.asarray(predicted, dtype=float), np.asarray(measured, dtype=float)
    ok = np.isfinite(p)
    err = np.where(ok, np.abs(p / m - 1), np.inf)
    return Score(len(p), int((~ok).sum()), float((err <= 0.10).mean()), float((err <= 0.05).mean()),
                 float(np.median(err)), tau(predicted, measured))


def summary_line(rows: list[dict], method: str) -> dict:
    """Raw score over every plan; tau over the plans whose k spans 0..n and over the plans of one k; the share
    inside the 95 % interval and its median relative half-width; the drift-corrected diagnostic."""
    measured = [r["measured_s"] for r in rows]
    raw = score([r[f"{method}_s"] for r in rows], measured)
    corrected = score([r[f"{method}_s"] * r["drift"] for r in rows], measured)
    full = [r for r in rows if r.get("range")]
    one_k = [r for r in rows if not r.get("range")]
    inside = half = None
    if method != "calibrated":
        inside = sum(r[f"{method}_low_s"] <= r["measured_s"] <= r[f"{method}_high_s"] for r in rows) / len(rows)
        halves = [(r[f"{method}_high_s"] - r[f"{method}_low_s"]) / 2 / r[f"{method}_s"] for r in rows
                  if math.isfinite(r[f"{method}_s"])]
        half = statistics.median(halves) if halves else float("nan")
    signed = [r[f"{method}_s"] / r["measured_s"] - 1 for r in rows if math.isfinite(r[f"{method}_s"])]
    bias = statistics.median(signed) if signed else float("nan")
    return {"raw": raw, "corrected": corrected, "inside": inside, "half": half, "median_signed_error": bias,
            "tau_full": tau([r[f"{method}_s"] for r in full], [r["measured_s"] for r in full]),
            "tau_one_k": tau([r[f"{method}_s"] for r in one_k], [r["measured_s"] for r in one_k])}


def fmt(acc: Score) -> str:
    failed = f" ({acc.failed} failed)" if acc.failed else ""
    return f"{acc.within_10pct:.0%} / {acc.within_5pct:.0%}, {acc.median_abs_error:.1%}{failed}"


def _cells(s: dict) -> str:
    inside = f"{s['inside']:.0%}, ±{s['half']:.1%}" if s["inside"] is not None else "—"
    return (f"{fmt(s['raw'])} | {s['tau_full']:.3f} / {s['tau_one_k']:.3f} | {s['median_signed_error']:+.1%} | {inside} | "
            f"{fmt(s['corrected'])}")


def print_tables(cases: list[dict], seed: int, backends: list[str]) -> None:
    """The Markdown tables: per case and method, then per backend over all its plans; the context factors."""
    print("\n| backend, model | method | raw: within ±10 % / ±5 %, median error | τ: k over 0..n / one k | "
          "median signed error | inside 95 % interval, median half-width | drift-corrected (diagnostic) | "
          "load avg before → after | seed |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for case in cases:
        for m in METHODS:
            print(f"| {case['backend']}, {case['model']} | {m} | {_cells(summary_line(case['rows'], m))} | "
                  f"{case['load_before']} → {case['load_after']} | {seed} |")
    for m in METHODS:
        for backend in backends:
            rows = [r for c in cases if c["backend"] == backend for r in c["rows"]]
            if rows:
                print(f"| **{backend}, all {len(rows)} plans** | {m} | {_cells(summary_line(rows, m))} | | {seed} |")
    print("\n| backend, model | context factor (in-context / isolated savings) | auto used | probe spread in the LUT run "
          "(95 %) | probe ratio in the checks (min-median-max) | original model in the checks / LUT run |")
    print("| --- | --- | --- | --- | --- | --- |")
    for case in cases:
        ratios = sorted(r["probe_ratio"] for r in case["rows"] if math.isfinite(r["probe_ratio"]))
        shown = f"{ratios[0]:.2f}-{ratios[len(ratios) // 2]:.2f}-{ratios[-1]:.2f}" if ratios else "—"
        lo, mid, hi = case["drift_range"]
        factor = case["context_factor"]
        print(f"| {case['backend']}, {case['model']} | {factor if factor is None else f'{factor:.3f}'} | "
              f"{case['auto_method'][:60]} | ±{case['probe_spread']:.1%} | {shown} | {lo:.2f}-{mid:.2f}-{hi:.2f} |")


def rescore_auto(case: dict) -> None:
    """Re-derive the ``auto`` and ``auto+probe`` columns of a saved case under today's `CONTEXT_FACTOR_RANGE`:
    context-scaled where PyTorch's context factor lies in it, else isolated (what `predict_latency` does)."""
    low, high = CONTEXT_FACTOR_RANGE
    factor = case["context_factor"]
    scaled = case["backend"] == "torch" and factor is not None and low <= float(factor) <= high
    source = "context-scaled" if scaled else "isolated"
    case["auto_method"] = f"{source} (re-scored, range {low}-{high})"
    for r in case["rows"]:
        for part in ("", "_low", "_high"):
            r[f"auto{part}_s"] = r[f"{source}{part}_s"]
            r[f"auto+probe{part}_s"] = r[f"{source}{part}_s"] * r["probe_ratio"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="onnxruntime,torch")
    parser.add_argument("--widths", default="1.0,1.4", help="MobileNetV2 widths ('' for none)")
    parser.add_argument("--models", default="", help="more registered models, e.g. mnasnet0_5,efficientnet_lite0,resnet18")
    parser.add_argument("--model-file", default=None, help="a model outside the zoo, PATH.py:FACTORY (as `dsprof --model-file`)")
    parser.add_argument("--plans", type=int, default=20, help="random plans per model with n/2 blocks linearised (one k), scored")
    parser.add_argument("--range-plans", type=int, default=10,
                        help="random plans per model whose number of linearised blocks k runs evenly over 0..n, scored")
    parser.add_argument("--calibration", type=int, default=3, help="extra plans per model to fit the calibrated candidate")
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
    parser.add_argument("--context", default="merged,linear",
                        help="the LUT run's --context variants ('' for none: the context methods then fail, auto is isolated)")
    parser.add_argument("--rescore-auto", action="store_true",
                        help="with --tables-from: re-derive auto's columns under today's context factor range")
    args = parser.parse_args()
    if args.tables_from:
        saved = [json.loads(p.read_text()) for p in args.tables_from]
        cases = [c for s in saved for c in s["cases"]]
        if args.rescore_auto:
            for case in cases:
                rescore_auto(case)
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
            for model_name, options, label in model_cases(args):
                case = run_case(backend, model_name, options, label, args, work)
                cases.append(case)
                if args.out:  # after every case: a run cut short keeps what it measured
                    (args.out / "results.json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                                                       "cases": cases}, indent=1, default=str))
                lo, mid, hi = case["drift_range"]
                print(f"\n== {backend}, {label}, {args.resolution}px, batch {args.batch}, {case['threads']} thread(s), "
                      f"{case['device_name']}; load average {case['load_before']} -> {case['load_after']}; LUT run "
                      f"{case['lut_wall_s']:.0f} s; original model in the checks {lo:.2f}x-{hi:.2f}x (median {mid:.2f}x) its "
                      f"LUT-run latency; calibration factor {case['factor']:.3f}; context factor {case['context_factor']}; "
                      f"auto: {case['auto_method']}", flush=True)
                for r in case["rows"]:
                    print(f"  {r['plan']:<14} k={r['k']:<3} probe {r['probe_ratio']:.2f}x  measured {r['measured_s'] * 1e3:8.3f} ms  "
                          + "  ".join(f"{m} {r[f'{m}_s'] / r['measured_s'] - 1:+.1%}" for m in METHODS), flush=True)
                for m in METHODS:
                    s = summary_line(case["rows"], m)
                    inside = (f", inside 95 % interval {s['inside']:.0%} (median half-width {s['half']:.1%})"
                              if s["inside"] is not None else "")
                    inside += f"; tau over k=0..n {s['tau_full']:.3f}, one k {s['tau_one_k']:.3f}"
                    print(f"  {m:<10} raw: {s['raw']}; median signed error {s['median_signed_error']:+.1%}{inside}", flush=True)
                    print(f"  {'':<10} drift-corrected (diagnostic): {s['corrected']}", flush=True)
        print_tables(cases, args.seed, args.backends.split(","))
    print(f"wall time {time.perf_counter() - start:.0f} s; load average {load()}")


if __name__ == "__main__":
    main()
