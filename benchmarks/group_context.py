"""Does a plan's measured speed-up depend on the group it is timed in? (issue #46: the tie-break's check)

One plan P (the front's plan of k, planned from a LUT of `benchmarks/planner_vs_random.py`, ``--luts``) and the
original, timed paired by that benchmark's plain loop (`time_group`: one call each a round, the order shuffled every
round) in one process, in this order:

A. a group of two (the original and P);
B. the same, with the 20 top-priced plans of k (`top_plans`) merged and held in memory, not timed;
C. one group of the original, P and those plans;
D. a group of two again;
F. a group of two, 64 MB written before every call (the caches emptied; that write's own time, printed, is in each
   sample);
E. a group of the original, P and 19 deep copies of the original;
G. a group of two, last.

A, B, D and G agree if holding models does not matter and the machine did not drift; C and E against them show what
the other members of a group do to a paired ratio. Run alone:

    ../shared/tools/quiet-run -- .venv/bin/python benchmarks/group_context.py --luts /work/data/pvrF \\
        --model mnasnet_small --resolution 224 --k 11
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import warnings
from pathlib import Path

import torch

from dsprof.lut.choice import Pricing
from dsprof.lut.predict import prices_of
from dsprof.lut.table import LUT
from dsprof.merging import merge_model
from dsprof.models import ModelRef, get_model
from dsprof.planning.planner import plan_front, top_plans
from dsprof.profiler.allocator import steady_allocator
from dsprof.records.stats import paired_speedup
from planner_vs_random import MAX_SPAN, case_folder, load, model_name, runner, time_group


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--luts", type=Path, required=True, help="a planner_vs_random.py --out folder")
    parser.add_argument("--model", default="mnasnet_small")
    parser.add_argument("--resolution", type=int, default=224)
    parser.add_argument("--k", type=int, default=11)
    parser.add_argument("--seconds", type=float, default=15.0, help="seconds of rounds of a group of two")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    name, res = model_name(args.model), args.resolution
    lut = LUT.load(args.luts / "torch" / case_folder(args.model, res) / "lut.csv")
    model = ModelRef.of(name, resolution=res)
    prices = prices_of(model, lut)
    chosen = plan_front(model, lut, pricing=Pricing(max_span=MAX_SPAN), prices=prices).at_k(args.k).plan
    ranked = [p.plan for p in top_plans(prices, args.k, 21, max_span=MAX_SPAN, model=model)]
    others = [p for p in ranked if p.digest != chosen.digest][:20]
    torch.set_num_threads(1)
    steady_allocator()
    net = get_model(name, resolution=res).eval()
    shape = (1, 3, res, res)
    flush = torch.zeros(64 * 2**20 // 4)

    def flushed(run):
        def call() -> None:
            flush.add_(1.0)
            run()
        return call

    def report(tag: str, samples: list[list[float]]) -> None:
        r = paired_speedup(samples[0], samples[1])
        print(f"{tag:44s} P {r.ratio:.3f}x ({r.low:.3f}-{r.high:.3f}x)  original "
              f"{statistics.median(samples[0]) * 1e3:6.2f} ms  P {statistics.median(samples[1]) * 1e3:6.2f} ms  "
              f"(load {load()})", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        original = runner(net, "torch", shape, Path(tmp))
        plan = runner(merge_model(net, chosen), "torch", shape, Path(tmp))
        report("A a group of two", time_group([original, plan], args.seconds, 20, seed=1))
        rest = [runner(merge_model(net, q), "torch", shape, Path(tmp)) for q in others]
        report(f"B a group of two, {len(rest)} plans held", time_group([original, plan], args.seconds, 20, seed=2))
        report(f"C one group of {len(rest) + 2}", time_group([original, plan, *rest], 3 * args.seconds, 20, seed=3))
        report("D a group of two again", time_group([original, plan], args.seconds, 20, seed=4))
        report("F a group of two, 64 MB written before each call",
               time_group([flushed(original), flushed(plan)], args.seconds, 20, seed=5))
        alone = time_group([lambda: flush.add_(1.0)], 3.0, 20, seed=6)[0]
        print(f"  (writing 64 MB alone: {statistics.median(alone) * 1e3:.2f} ms)")
        copies = [runner(copy.deepcopy(net), "torch", shape, Path(tmp)) for _ in range(len(rest))]
        report(f"E the two and {len(copies)} copies of the original",
               time_group([original, plan, *copies], 3 * args.seconds, 20, seed=7))
        report("G a group of two, last", time_group([original, plan], args.seconds, 20, seed=8))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
