"""How well does a LUT predict the latency of merged models? (issue #5)

For each backend and MobileNetV2 width: measure the blocks (original, merged, linear) and the
whole model on this device, build a LUT, then merge the model along seeded random plans, measure
each merged model end-to-end in a separate run, and compare with the LUT's prediction.

    .venv/bin/python benchmarks/lut_accuracy.py                      # full: 2 backends x 2 widths x 20 plans
    .venv/bin/python benchmarks/lut_accuracy.py --plans 3 --resolution 96 --backends torch   # quick look

Prints, per backend and width and overall: the share of plans within +-10 % and +-5 %, the median
absolute error and Kendall's tau between predicted and measured latency -- as predicted, and
drift-corrected: scaled by how much slower or faster the original model ran in the same rounds as
the merged one than in the LUT run (on a shared VM the same model drifts by 10-25 % between runs).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from dsprof.lut import accuracy_table, build_lut, predict_latency, prediction_accuracy
from dsprof.merge import Plan, merge_model, merge_report
from dsprof.models import find_blocks, get_model
from dsprof.profiler import TimingConfig, measure


def random_plans(n_blocks: int, count: int, seed: int, options: dict) -> list[Plan]:
    """Seeded plans: each block keeps its activations with probability 1/2."""
    rng = random.Random(seed)
    return [
        Plan("mobilenet_v2", tuple(rng.randint(0, 1) for _ in range(n_blocks)), options, name=f"random-{seed}-{i}")
        for i in range(count)
    ]


def run(backend: str, width: float, args: argparse.Namespace, work: Path) -> tuple[list[str], list[float], list[float]]:
    options = {"width": width}
    timing = TimingConfig(budget_s=args.budget)
    common = dict(backend=backend, resolution=args.resolution, batch=1, threads=args.threads, timing=timing, progress=False)
    # 1. The LUT run: blocks in three variants and the whole original model.
    lut_run = measure("mobilenet_v2", model_options=options, variants=("original", "merged", "linear"),
                      model_variants=("original",), out=work / f"lut-{backend}-{width}", **common)
    lut = build_lut([lut_run.path])
    key = lut.devices()[0]
    view = lut.savings(key)
    savings = dict(zip(view.workload, view.saving_s))

    # 2. A separate run: every merged model end-to-end, each in a group of its own with the original
    #    model (timing many models in interleaved rounds would evict each other's weights from the
    #    caches between calls). The original, timed in the same rounds, tells how far this moment of
    #    the machine has drifted from the LUT run's: the drift-corrected error divides it out.
    model = get_model("mobilenet_v2", resolution=args.resolution, **options)
    plans = random_plans(len(find_blocks(model)), args.plans, args.seed, options)
    in_lut = next(r.median_s for r in lut_run.measurements if r.scope == "model" and r.ok)
    merged, measured, drift = {}, {}, {}
    for plan in plans:
        net = merge_model(model, plan, savings=savings)
        merged[plan.name] = merge_report(net).plan
        run = measure(model, name="mobilenet_v2", model_options=options, variants=(), model_variants=("original",),
                      blocks=None, extra_models={plan.name: net}, out=work / f"check-{backend}-{width}-{plan.name}", **common)
        medians = {r.name: r.median_s for r in run.measurements if r.scope == "model" and r.ok}
        measured[plan.name] = medians[plan.name]
        drift[plan.name] = medians["mobilenet_v2"] / in_lut
    ratios = sorted(drift.values())
    print(f"{backend}, width {width}: the original model measured {min(ratios):.2f}x to {max(ratios):.2f}x "
          f"(median {ratios[len(ratios) // 2]:.2f}x) its LUT-run latency in the check runs")

    names, predicted, actual, corrected = [], [], [], []
    for name, replay in merged.items():
        pred = predict_latency("mobilenet_v2", lut, replay, device=key, options=options, resolution=args.resolution, strict=True)
        names.append(name)
        predicted.append(pred.total_s)
        actual.append(measured[name])
        corrected.append(pred.total_s * drift[name])
    return names, predicted, actual, corrected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="onnxruntime,torch")
    parser.add_argument("--widths", default="1.0,1.4")
    parser.add_argument("--plans", type=int, default=20, help="random plans per width")
    parser.add_argument("--resolution", type=int, default=224)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--budget", type=float, default=1.0, help="seconds of timing per workload at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="keep the measurement files here (default: a temporary folder)")
    args = parser.parse_args()

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.out or Path(tmp)
        all_pred, all_meas, all_corr = [], [], []
        for backend in args.backends.split(","):
            for width in map(float, args.widths.split(",")):
                names, predicted, measured, corrected = run(backend, width, args, work)
                all_pred += predicted
                all_meas += measured
                all_corr += corrected
                table = accuracy_table(names, predicted, measured).assign(drift_corrected_error=[c / m - 1 for c, m in zip(corrected, measured)])
                print(f"\n== {backend}, MobileNetV2-{width}, {args.resolution}x{args.resolution}, batch 1")
                print(table.assign(predicted_ms=table.predicted_s * 1e3, measured_ms=table.measured_s * 1e3)
                      [["model", "predicted_ms", "measured_ms", "error", "drift_corrected_error"]].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
                print(f"as predicted:    {prediction_accuracy(predicted, measured)}")
                print(f"drift-corrected: {prediction_accuracy(corrected, measured)}")
        print(f"\n== overall, as predicted:    {prediction_accuracy(all_pred, all_meas)}")
        print(f"== overall, drift-corrected: {prediction_accuracy(all_corr, all_meas)}")
    print(f"wall time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
