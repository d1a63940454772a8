"""Does a group of two read its second workload faster? (issue #46)

A check of one plan (`measure --plan`), a piece timed inside the model, a session pair and the calibration group are
each a group of two: the original and one other model, timed in interleaved rounds. Before this benchmark the rounds
kept one order, the original first. This times, on the profiler's own prepared modules (PyTorch eager by default,
or ``--backend onnxruntime``; one thread; `dsprof.portable.timing_loop.time_interleaved` as the runner calls it):

- ``copies``: two fresh copies of one model, whose true ratio is 1;
- ``plan``: a model against the model with every block linearised and merged alone (the calibration group's shape);

in groups that alternate which of the two comes first. The loop now times the rounds the stopping rule ends in one
order and as many again in the other; the first half of each group's samples is thus the loop of before. Per group
it prints the paired ratio (the median of the per-round ratios) of the first half, of the second half, and of all
rounds, and at the end, over the groups, the second workload's reading over the first's (the position's effect,
from the first halves: the square root of the ratio's reading second over its reading first), and the speed-up of
the second model over the first read with it second, with it first, and from all rounds (the loop now). Run alone:

    ../shared/tools/quiet-run -- .venv/bin/python benchmarks/pair_order.py \\
        --models tinynet_e:64,mobilenetv2_050:96,resnet18:64 --groups 12
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import torch

from dsprof.models import ModelRef
from dsprof.portable.timing_loop import DEFAULTS, first_group, time_interleaved
from dsprof.profiler import BackendSettings
from dsprof.runtimes import load_backend_class
from dsprof.profiler.workloads import model_workload
from calls_per_sample import all_merged
from planner_vs_random import load


def model_ref(model: str, resolution: int) -> ModelRef:
    """``model`` as these timing benchmarks take it: a timm name (``lcnet_150``), ``mobilenet_v2`` of dsprof's zoo,
    or any name with its source (``torchvision:NAME``), at ``resolution``."""
    return ModelRef.of(f"timm:{model}" if ":" not in model and model != "mobilenet_v2" else model, resolution=resolution)


def _median_ratio(base: list[float], other: list[float]) -> float:
    return statistics.median(o / b for b, o in zip(base, other))


def compare(model: str, resolution: int, kind: str, groups: int, backend_name: str = "torch") -> str:
    ref = model_ref(model, resolution)
    torch.manual_seed(0)
    net = ref.build().eval()
    other = net if kind == "copies" else all_merged(net, resolution)
    shape = (1, 3, resolution, resolution)
    backend = load_backend_class(backend_name)(BackendSettings(backend_name, threads=1))
    halves = {"second": [], "first": []}  # the other model's ratio over the original, read with it second / first
    both = []
    with tempfile.TemporaryDirectory() as tmp:
        for g in range(groups + 1):  # group 0 warms the process up and is not counted
            base = backend.prepare(model_workload(net, model, "original", (resolution, resolution)).module, shape,
                                   Path(tmp) / f"{g}a").run
            second = backend.prepare(model_workload(other, model, "other", (resolution, resolution),
                                                    fold=kind == "copies").module, shape, Path(tmp) / f"{g}b").run
            order = [("base", base), ("other", second)] if g % 2 == 0 else [("other", second), ("base", base)]
            with torch.inference_mode():
                out = time_interleaved(order, first_group(DEFAULTS) if g == 0 else DEFAULTS)
            b, o = out["base"]["samples_s"], out["other"]["samples_s"]
            n = len(b) // 2
            first_half, second_half = _median_ratio(b[:n], o[:n]), _median_ratio(b[n:], o[n:])
            if g:
                other_second = g % 2 == 0  # the first half's order: the other model second in even groups
                halves["second" if other_second else "first"].append(first_half)
                halves["first" if other_second else "second"].append(second_half)
                both.append(_median_ratio(b, o))
    second, first = statistics.median(halves["second"]), statistics.median(halves["first"])
    effect = math.sqrt(second / first)  # < 1: the second of a pair reads faster
    return (f"{model} {resolution} px, {backend_name}, {kind}, {groups} groups: the second of two reads x{effect:.4f} of the first; "
            f"the {'copy' if kind == 'copies' else 'merged model'} over the original: {1 / second:.4f}x read second, "
            f"{1 / first:.4f}x read first, {1 / statistics.median(both):.4f}x from both orders (the loop now)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="tinynet_e:64,mobilenetv2_050:96,resnet18:64",
                        help="MODEL:RESOLUTION, comma-separated (timm names, or mobilenet_v2 of dsprof's zoo)")
    parser.add_argument("--kinds", default="copies,plan", help="copies, plan or both")
    parser.add_argument("--groups", type=int, default=12, help="groups per model and kind, alternating the order")
    parser.add_argument("--backend", default="torch", help="torch (eager) or onnxruntime")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")  # the models' own warnings are not this benchmark's subject
    for spec in args.models.split(","):
        model, resolution = spec.rsplit(":", 1)
        for kind in args.kinds.split(","):
            start = time.strftime("%H:%M:%SZ", time.gmtime())
            print(f"{compare(model, int(resolution), kind, args.groups, args.backend)} ({start}, load {load()})",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
