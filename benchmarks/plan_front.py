"""The planner's front on this CPU, predicted and then measured (issue #20).

Stage ``lut`` (one run): MobileNetV2-1.0 at 224 px, one thread, PyTorch eager and ONNX Runtime: the blocks in
their original, merged and linear forms, every span of 2..4 consecutive blocks, the whole model; the LUT; the
front for every k (`dsprof.planning.plan_front`), written to ``OUT/front_<backend>.json``; and the planner's time.

Stage ``check`` (a later, separate run): merges front plans (every ``--every``-th k, at least 8, and the k of
each paper preset) and the paper's presets (MBV2-DS-A..D) as `dsprof merge --lut` deploys them (BatchNorm folded),
measures them end to end in one group with the original model, interleaved round by round, and prints predicted against measured, whether the measured front is
monotone in k, and each preset against the front plan of its k, predicted and measured.

Stage ``timing``: the planner's solver on synthetic piece prices, 17..50 blocks (ResNet-152 has 50) and more,
spans up to 4, with and without importance; and `plan_front` end to end on the stage-``lut`` LUT.

    .venv/bin/python benchmarks/plan_front.py lut --out results/plan_front          # ~10-20 min on a loaded 2-core CPU
    .venv/bin/python benchmarks/plan_front.py check --out results/plan_front        # later
    .venv/bin/python benchmarks/plan_front.py timing --out results/plan_front
    .venv/bin/python benchmarks/plan_front.py lut --resolution 96 --budget 0.2      # quick look (fewer samples)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from pathlib import Path
from types import SimpleNamespace

MODEL = "mobilenet_v2"
PRESETS = ("mbv2-ds-a", "mbv2-ds-b", "mbv2-ds-c", "mbv2-ds-d")


def _timing(budget: float | None):
    from dsprof.profiler import TimingConfig

    return TimingConfig() if budget is None else TimingConfig(budget_s=budget)


def _load() -> str:
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def stage_lut(args) -> None:
    from dsprof.lut import Pricing, build_lut
    from dsprof.planning import plan_front
    from dsprof.profiler import BackendSettings, Workloads, measure
    from dsprof.models import ModelRef

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for backend in args.backends:
        print(f"measuring {MODEL} {args.resolution} px on {backend}, one thread ({_load()})", flush=True)
        t = time.perf_counter()
        result = measure(ModelRef.of(MODEL, resolution=args.resolution),
                         settings=BackendSettings(backend=backend, threads=1),
                         workloads=Workloads(variants=("original", "merged", "linear"), model_variants=("original",), spans=args.max_span),
                         timing=_timing(args.budget), out=out / f"lut_{backend}.jsonl", overwrite=True, progress=False)
        files.append(result.path)
        print(f"  {time.perf_counter() - t:.0f} s", flush=True)
    lut = build_lut(files)
    lut.save(out / "lut.csv")
    for backend in args.backends:
        t = time.perf_counter()
        front = plan_front(ModelRef.of(MODEL, resolution=args.resolution), lut,
                           pricing=Pricing(device_key=_key(lut, backend), max_span=args.max_span))
        elapsed = time.perf_counter() - t
        front.write(out / f"front_{backend}.json")
        print(f"\n{backend}: plan_front {elapsed:.2f} s ({_load()})")
        print(front.table())


def _key(lut, backend: str):
    return lut.resolve(backend=backend)


def _chosen_ks(front, every: int) -> list[int]:
    n = len(front.points) - 1
    ks = set(range(0, n + 1, every)) | {n} | {p.k for p in front.presets}
    return sorted(ks)


def stage_check(args) -> None:
    from dsprof.lut import LUT, Pricing
    from dsprof.lut.predict import prices_of, predict_plan
    from dsprof.merging import merge_model
    from dsprof.planning.decide import Decider
    from dsprof.records.plan import load_preset
    from dsprof.models import get_model
    from dsprof.planning import plan_front
    from dsprof.models import ModelRef
    from dsprof.profiler import Workloads, measure

    out = Path(args.out)
    lut = LUT.load(out / "lut.csv")
    rows = []
    for backend in args.backends:
        key = _key(lut, backend)
        front = plan_front(ModelRef.of(MODEL, resolution=args.resolution), lut,
                           pricing=Pricing(device_key=key, max_span=args.max_span))
        costs = prices_of(ModelRef.of(MODEL, resolution=args.resolution), lut, device=key)
        checked = {f"front-k{k}": (front.at_k(k), True) for k in _chosen_ks(front, args.every)}
        for name in PRESETS:
            preset = load_preset(name)
            pred = predict_plan(costs, preset, strict=True)
            checked[name] = (SimpleNamespace(plan=preset, k=sum(preset.keep), latency_s=pred.total_s, low_s=pred.low_s,
                                             high_s=pred.high_s), False)
        # every merged model (merged as `dsprof merge --lut` deploys it, BatchNorm folded) in one group with the
        # original, interleaved round by round: the machine's load moves them all alike
        model = get_model(MODEL, resolution=args.resolution)
        merged = {name: merge_model(model, Decider("lut", costs).decide(p.plan).plan) for name, (p, _) in checked.items()}
        print(f"\n{backend}: {len(merged)} merged models and the original, interleaved ({_load()})", flush=True)
        t = time.perf_counter()
        result = measure(ModelRef.of(model, name=MODEL), settings=key,
                         workloads=Workloads((), ("original",), blocks=None), extra_models=merged,
                         timing=_timing(args.budget), out=out / f"check_{backend}.jsonl", overwrite=True,
                         progress=False)
        medians = {r.name: r.median_s for r in result.measurements if r.scope == "model" and r.ok}
        print(f"  {time.perf_counter() - t:.0f} s ({_load()})", flush=True)
        for name, (p, on_front) in checked.items():
            rows.append({"backend": backend, "plan": name, "k": p.k, "spans": [list(s) for s in p.plan.spans or ()],
                         "predicted_s": p.latency_s, "low_s": p.low_s, "high_s": p.high_s, "measured_s": medians[name],
                         "original_s": medians[MODEL], "predicted_original_s": front.original_s, "front": on_front})
    (out / "check.json").write_text(json.dumps(rows, indent=1))
    summarise(rows)


def summarise(rows: list[dict]) -> None:
    for backend in sorted({r["backend"] for r in rows}):
        mine = [r for r in rows if r["backend"] == backend]
        front = sorted((r for r in mine if r["front"]), key=lambda r: r["k"])
        errors = [r["predicted_s"] / r["measured_s"] - 1 for r in mine]
        inside = sum(r["low_s"] <= r["measured_s"] <= r["high_s"] for r in mine)
        print(f"\n{backend}: original predicted {mine[0]['predicted_original_s'] * 1e3:.3f} ms, measured "
              f"{mine[0]['original_s'] * 1e3:.3f} ms; |error| median "
              f"{statistics.median(abs(e) for e in errors):.1%}, max {max(abs(e) for e in errors):.1%}; "
              f"{inside}/{len(mine)} inside the 95 % interval")
        print(f"{'plan':<14} {'k':>3} {'spans':<22} {'pred ms':>9} {'meas ms':>9} {'error':>7} {'pred x':>7} {'meas x':>7}")
        for r in mine:
            spans = " ".join(f"{a}-{b - 1}" for a, b in r["spans"]) or "-"
            print(f"{r['plan']:<14} {r['k']:>3} {spans:<22} {r['predicted_s'] * 1e3:>9.3f} {r['measured_s'] * 1e3:>9.3f} "
                  f"{r['predicted_s'] / r['measured_s'] - 1:>+7.1%} {r['predicted_original_s'] / r['predicted_s']:>6.2f}x "
                  f"{r['original_s'] / r['measured_s']:>6.2f}x")
        drops = [(a["k"], b["k"]) for a, b in zip(front, front[1:]) if b["measured_s"] < a["measured_s"]]
        print("measured front monotone in k (more kept blocks, never faster): "
              + ("yes" if not drops else "no, faster at k = " + ", ".join(f"{b} than {a}" for a, b in drops)))
        by_k = {r["k"]: r for r in front}
        for r in (r for r in mine if not r["front"]):
            f = by_k.get(r["k"])
            if f is not None:
                print(f"{r['plan']:<14} k={r['k']:>2}: predicted {r['predicted_s'] / f['predicted_s'] - 1:+.1%}, "
                      f"measured {r['measured_s'] / f['measured_s'] - 1:+.1%} against the front plan of its k")


def stage_timing(args) -> None:
    from dsprof.lut.piece import Piece
    from dsprof.planning.dp import best_per_k, pareto_front

    rng = random.Random(0)
    print(f"solver on synthetic piece prices, spans up to {args.max_span} blocks ({_load()})")
    print(f"{'blocks':>6} {'per-k s':>9} {'front s':>9} {'front size':>10}")
    for n in (8, 17, 25, 34, 50, 100):
        losses = [rng.randint(0, 100) for _ in range(n)]
        options = []
        for i in range(n):
            options += [Piece(i, i + 1, "original", saving_s=0.0, kept=True, loss=0),
                        Piece(i, i + 1, "merged", saving_s=rng.uniform(-1, 3), loss=losses[i])]
            options += [Piece(i, i + size, "span", saving_s=rng.uniform(-1, 3 * size), loss=sum(losses[i:i + size]))
                        for size in range(2, args.max_span + 1) if i + size <= n]
        t = time.perf_counter()
        best_per_k(n, options)
        per_k = time.perf_counter() - t
        if n > 50:  # the front grows with the plans' spread; past ResNet-152's 50 blocks only the per-k search
            print(f"{n:>6} {per_k:>9.4f} {'-':>9} {'-':>10}")
            continue
        t = time.perf_counter()
        front = pareto_front(n, options)
        print(f"{n:>6} {per_k:>9.4f} {time.perf_counter() - t:>9.4f} {len(front):>10}")
    lut_path = Path(args.out) / "lut.csv"
    if lut_path.exists():
        import torch

        from dsprof.lut import LUT, Pricing
        from dsprof.lut.predict import prices_of
        from dsprof.models import ModelRef
        from dsprof.planning import plan_front

        torch.set_num_threads(1)
        lut = LUT.load(lut_path)
        for backend in args.backends:
            t = time.perf_counter()
            costs = prices_of(ModelRef.of(MODEL, resolution=args.resolution), lut, device=_key(lut, backend))
            read = time.perf_counter() - t
            t = time.perf_counter()
            front = plan_front(MODEL, lut, pricing=Pricing(max_span=args.max_span), prices=costs)
            print(f"{MODEL} (17 blocks, spans up to {args.max_span}) on {backend}: model built and traced, LUT read "
                  f"{read:.2f} s; plan_front (every piece priced, the search, {len(front.points)} front plans and "
                  f"{len(front.presets)} presets priced by predict_plan) {time.perf_counter() - t:.2f} s ({_load()})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("stage", choices=("lut", "check", "timing"))
    parser.add_argument("--out", default="results/plan_front", help="folder for the LUT, fronts and checks")
    parser.add_argument("--backends", default="torch,onnxruntime", help="comma-separated")
    parser.add_argument("--resolution", type=int, default=224)
    parser.add_argument("--max-span", type=int, default=4)
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds of timed runs per workload at most (default: the profiler's); fewer samples")
    parser.add_argument("--every", type=int, default=2, help="check: measure the front plan of every this-many-th k")
    args = parser.parse_args()
    args.backends = args.backends.split(",")
    {"lut": stage_lut, "check": stage_check, "timing": stage_timing}[args.stage](args)


if __name__ == "__main__":
    main()
