"""Does the order in which a group's workloads warm up bias its paired ratio? (issue #46)

Every group of two (a check of one plan, a piece timed inside the model, a session pair, the calibration group) used
to warm its workloads up one after the other, then time them in rounds. A new user's `measure --calibrate` on
timm's hardcorenas_a at 96 px (PyTorch eager, one thread) read all six session pairs -- the whole model against a
copy of itself -- 1.6-4.1 % in the copy's favour: the original, warmed up first, ran 5.5-5.8 ms in the first rounds
and 5.0-5.2 ms after, while the copy ran steady. The session pairs' root mean square then put a check's noise at
+-2.8 % and the front's intervals at +-7-8 %, where the check itself read +-1.5 %.

This times two fresh copies of one model (true ratio 1) on the profiler's own prepared modules, with
`dsprof.portable.timing_loop.time_interleaved` and the default timing, in groups that alternate between

- ``one after the other``: each workload warmed up alone in turn (the loop before), and
- ``in rounds``: one call of each per warm-up round, as they are timed (`warm_up_group`, the loop now),

and which copy comes first. Per warm-up it prints, over the groups, the root mean square of the ratio's distance
from 1 (what `dsprof.lut.interval.session_noise` reads as a check's noise), the median ratio of the first halves'
rounds (the copy warmed up first, first in each round) and of the second halves' (the other order), each as the
copy warmed up second over the one warmed up first. Run alone:

    ../shared/tools/quiet-run -- .venv/bin/python benchmarks/warm_order.py \\
        --models hardcorenas_a:96,mobilenetv2_100:128,resnet18:64 --groups 12
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
import warnings
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch

from dsprof.portable import timing_loop
from dsprof.profiler import BackendSettings
from dsprof.profiler.workloads import model_workload
from dsprof.runtimes import load_backend_class
from pair_order import _median_ratio, model_ref
from planner_vs_random import load

WAYS = ("one after the other", "in rounds")


@contextmanager
def warmed_one_after_the_other():
    """The loop of before: each workload of a group warmed up alone, in the group's order."""
    rounds = timing_loop.warm_up_group

    def alone(pairs, timer, clock, config):
        return {name: rounds([(name, fn)], timer, clock, config)[name] for name, fn in pairs}

    timing_loop.warm_up_group = alone
    try:
        yield
    finally:
        timing_loop.warm_up_group = rounds


def compare(model: str, resolution: int, groups: int, backend_name: str = "torch") -> str:
    ref = model_ref(model, resolution)
    torch.manual_seed(0)
    net = ref.build().eval()
    shape = (1, 3, resolution, resolution)
    backend = load_backend_class(backend_name)(BackendSettings(backend_name, threads=1))
    ratios = {way: {"all": [], "first": [], "second": []} for way in WAYS}  # the later-warmed copy over the other
    with tempfile.TemporaryDirectory() as tmp:
        for g in range(2 * groups + 1):  # group 0 warms the process up and is not counted
            way = WAYS[g % 2]
            runs = [backend.prepare(model_workload(net, model, "original", (resolution, resolution)).module, shape,
                                    Path(tmp) / f"{g}{i}").run for i in (0, 1)]
            order = [("a", runs[0]), ("b", runs[1])] if g // 2 % 2 == 0 else [("a", runs[1]), ("b", runs[0])]
            config = timing_loop.first_group(timing_loop.DEFAULTS) if g == 0 else timing_loop.DEFAULTS
            with torch.inference_mode(), (warmed_one_after_the_other() if way == WAYS[0] else nullcontext()):
                out = timing_loop.time_interleaved(order, config)
            a, b = out["a"]["samples_s"], out["b"]["samples_s"]
            n = len(a) // 2
            if g:
                ratios[way]["all"].append(_median_ratio(a, b))
                ratios[way]["first"].append(_median_ratio(a[:n], b[:n]))
                ratios[way]["second"].append(_median_ratio(a[n:], b[n:]))
    parts = []
    for way in WAYS:
        r = ratios[way]
        rms = math.sqrt(statistics.fmean((1 - x) ** 2 for x in r["all"]))
        parts.append(f"{way}: check noise +-{rms:.2%} (rms), ratio {statistics.median(r['all']):.4f}, first half "
                     f"{statistics.median(r['first']):.4f}, second half {statistics.median(r['second']):.4f}")
    return f"{model} {resolution} px, {backend_name}, {groups} groups each: " + "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="hardcorenas_a:96,mobilenetv2_100:128,resnet18:64",
                        help="MODEL:RESOLUTION, comma-separated (timm names, or mobilenet_v2 of dsprof's zoo)")
    parser.add_argument("--groups", type=int, default=12, help="groups per model and warm-up")
    parser.add_argument("--backend", default="torch", help="torch (eager) or onnxruntime")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")  # the models' own warnings are not this benchmark's subject
    for spec in args.models.split(","):
        model, resolution = spec.rsplit(":", 1)
        start = time.strftime("%H:%M:%SZ", time.gmtime())
        print(f"{compare(model, int(resolution), args.groups, args.backend)} ({start}, load {load()})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
