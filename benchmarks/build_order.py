"""Does the copy of a model built later in a group run faster? (issue #46)

Every session pair, check of a plan, piece timed inside the model and the calibration group builds its models one
after the other, the original first, then times them in interleaved rounds whose order cancels the place a model is
timed in (`dsprof.portable.timing_loop.round_order`). What the rounds do not cancel is the order they were built in.
This builds ``--copies`` fresh copies of one model in a row, exactly as the profiler prepares a group's workloads
(`backend.prepare` of `model_workload`, BatchNorm folded, one thread), times them in one interleaved group (a group of
three or more rotates its order every round), and repeats that ``--groups`` times. Per backend it prints, over the
groups, the median paired ratio of copy 1's time over each later copy's (above 1: the later copy runs faster), and in
how many groups that copy read faster than copy 1. Two copies' true ratio is 1. Run alone:

    ../shared/tools/quiet-run -- .venv/bin/python benchmarks/build_order.py \\
        --model lcnet_150:224 --backends torch,onnxruntime,openvino --copies 3 --groups 8

``--warm-up one-after-the-other`` warms each copy up alone in turn, the copy built first warmed first, as the loop did
before 12e22a2; in rounds (the loop now), two copies of LCNet-1.5 at 224 px on ONNX Runtime and OpenVINO read the
later-built copy 0.1-1.6 % faster where they had read it 1.9-4.5 % faster (benchmarks/RESULTS.md, "Warm-up in rounds").
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import torch

from dsprof.portable.timing_loop import DEFAULTS, first_group, time_interleaved
from dsprof.profiler import BackendSettings
from dsprof.profiler.workloads import model_workload
from dsprof.runtimes import load_backend_class
from pair_order import model_ref
from planner_vs_random import load
from warm_order import warmed_one_after_the_other


def later_over_first(model: str, resolution: int, backend_name: str, copies: int, groups: int, spare: bool = False) -> str:
    ref = model_ref(model, resolution)
    torch.manual_seed(0)
    net = ref.build().eval()
    shape = (1, 3, resolution, resolution)
    backend = load_backend_class(backend_name)(BackendSettings(backend_name, threads=1))
    ratios: list[list[float]] = [[] for _ in range(copies - 1)]  # copy 1's time over copy i+2's, per group
    with tempfile.TemporaryDirectory() as tmp:
        for g in range(groups + 1):  # group 0 warms the process up and is not counted
            built = [(f"copy {c + 1}", backend.prepare(
                model_workload(net, model, "original", (resolution, resolution)).module, shape,
                Path(tmp) / f"{g}-{c}")) for c in range(copies)]
            extra = [backend.prepare(model_workload(net, model, "original", (resolution, resolution)).module, shape,
                                     Path(tmp) / f"{g}-spare")] if spare else []  # built last, never timed
            with torch.inference_mode():
                out = time_interleaved([(name, p.run) for name, p in built], first_group(DEFAULTS) if g == 0 else DEFAULTS)
            for p in [p for _, p in built] + extra:
                p.close()
            if g:
                first = out["copy 1"]["samples_s"]
                for c in range(1, copies):
                    later = out[f"copy {c + 1}"]["samples_s"]
                    ratios[c - 1].append(statistics.median(a / b for a, b in zip(first, later)))
    parts = [f"copy {c + 2}: {statistics.median(r):.4f}x (faster than copy 1 in {sum(x > 1 for x in r)} of {len(r)})"
             for c, r in enumerate(ratios)]
    spared = ", then a spare copy built and not timed" if spare else ""
    return f"{model} {resolution} px, {backend_name}, {copies} copies built in a row{spared}, {groups} groups: " + "; ".join(parts)


def check_by_build_order(model: str, resolution: int, backend_name: str, plan: str, groups: int) -> str:
    import dsprof

    ref = model_ref(model, resolution)
    torch.manual_seed(0)
    modules = {"original": ref.build().eval(), "plan": dsprof.merge(ref, plan).model.eval()}
    shape = (1, 3, resolution, resolution)
    backend = load_backend_class(backend_name)(BackendSettings(backend_name, threads=1))
    read: dict[str, list[float]] = {"original": [], "plan": []}  # the plan's speed-up, by the one built first
    with tempfile.TemporaryDirectory() as tmp:
        for g in range(2 * groups + 1):  # group 0 warms the process up and is not counted
            built_first = "original" if g % 2 == 0 else "plan"
            order = [built_first, "plan" if built_first == "original" else "original"]
            prepared = {k: backend.prepare(model_workload(modules[k], model, k, (resolution, resolution)).module,
                                           shape, Path(tmp) / f"{g}-{k}") for k in order}
            with torch.inference_mode():  # the rounds as a check times them: the original first
                out = time_interleaved([(k, prepared[k].run) for k in ("original", "plan")],
                                       first_group(DEFAULTS) if g == 0 else DEFAULTS)
            for p in prepared.values():
                p.close()
            if g:
                read[built_first].append(statistics.median(
                    a / b for a, b in zip(out["original"]["samples_s"], out["plan"]["samples_s"])))
    a, b = statistics.median(read["original"]), statistics.median(read["plan"])
    return (f"{model} {resolution} px, {backend_name}, {Path(plan).name} against the original, {groups} groups each: "
            f"{a:.4f}x built after the original (as a check builds it), {b:.4f}x built before it; "
            f"ratio {a / b:.4f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="lcnet_150:224", help="MODEL:RESOLUTION (a timm name, or mobilenet_v2)")
    parser.add_argument("--backends", default="torch,onnxruntime,openvino", help="comma-separated")
    parser.add_argument("--copies", type=int, default=3, help="fresh copies built in a row per group (2 or more)")
    parser.add_argument("--groups", type=int, default=8, help="groups per backend")
    parser.add_argument("--spare", action="store_true", help="build one more copy after them, kept but never timed")
    parser.add_argument("--plan", default=None, help="time this plan of the model against the original instead, "
                                                     "alternating which is built first")
    parser.add_argument("--warm-up", choices=("rounds", "one-after-the-other"), default="rounds",
                        help="a group's warm-up: in rounds (the loop now) or each copy alone in turn, the copy built "
                             "first warmed first (the loop before 12e22a2)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")  # the models' own warnings are not this benchmark's subject
    model, resolution = args.model.rsplit(":", 1)
    for backend in args.backends.split(","):
        start = time.strftime("%H:%M:%SZ", time.gmtime())
        with warmed_one_after_the_other() if args.warm_up == "one-after-the-other" else contextlib.nullcontext():
            line = (check_by_build_order(model, int(resolution), backend, args.plan, args.groups) if args.plan else
                    later_over_first(model, int(resolution), backend, args.copies, args.groups, args.spare))
        print(f"{line}, warm-up {args.warm_up} ({start}, load {load()})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
