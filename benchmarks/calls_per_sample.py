"""Does giving each workload of a group its own count of calls per sample bias a paired ratio? (issue #46)

The profiler's loop makes one sample of several back-to-back calls, as many as last ``min_sample_s`` (5 ms). Until
issue #46 each workload of a group had its own count: a merged model twice as fast as its original took 2 calls a
sample against the original's 1. The first call of a sample, right after the other workload ran, pays to refill the
caches; spread over 2 calls it weighs half as much. This benchmark times one model against the same model with every
block linearised and merged alone (the shape of the calibration group), on the profiler's own prepared modules, in
the same rounds, three ways:

- ``count each``: each its own count, as `dsprof.portable.timing_loop.warm_up` gives it (the loop before the fix);
- ``one count``: both the slower one's count (`dsprof.portable.timing_loop.group_number`, the loop now);
- ``plain``: one call each per round, as `benchmarks/planner_vs_random.py`'s checks time merged models.

and prints the saving (1 - the median of the per-round ratios) each way, with its 95 % interval. Run alone:

    ../shared/tools/quiet-run -- .venv/bin/python benchmarks/calls_per_sample.py \\
        --models mobilenetv2_035,semnasnet_050 --resolutions 64,128,224
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import warnings
from pathlib import Path

import torch

from dsprof.merging import merge_model
from dsprof.models import find_blocks, get_model
from dsprof.models.registry import model_identity
from dsprof.portable.timing_loop import CpuTimer, DEFAULTS, group_number, warm_up
from dsprof.profiler import BackendSettings
from dsprof.profiler.backends.torch_eager import TorchBackend
from dsprof.profiler.workloads import model_workload
from dsprof.records.plan import Plan
from dsprof.records.stats import paired_speedup
from planner_vs_random import load, model_name


def all_merged(net: torch.nn.Module, resolution: int) -> torch.nn.Module:
    """``net`` with every block linearised and merged alone."""
    name, options = model_identity(net)
    n = len(find_blocks(net, (resolution, resolution)))
    return merge_model(net, Plan(name, (0,) * n, options, merge=(True,) * n))


def compare(factory: str, resolution: int, seconds: float, seed: int) -> str:
    name = model_name(factory)
    net = get_model(name, resolution=resolution).eval()
    shape = (1, 3, resolution, resolution)
    backend = TorchBackend(BackendSettings("torch", threads=1))
    with tempfile.TemporaryDirectory() as tmp:
        runs = [backend.prepare(model_workload(m, name, v, (resolution, resolution)).module, shape, Path(tmp)).run
                for m, v in ((net, "original"), (all_merged(net, resolution), "merged"))]
        timer = CpuTimer()
        with torch.inference_mode():
            counts = [warm_up(run, timer, time.perf_counter_ns, DEFAULTS)[1] for run in runs]
            one = group_number(counts)
            ways = {"count each": counts, "one count": [one, one], "plain": [1, 1]}
            samples = {way: ([], []) for way in ways}
            rng, end = random.Random(seed), time.perf_counter() + seconds
            while time.perf_counter() < end:  # each round: every way once, the ways in a shuffled order
                for way in rng.sample(list(ways), len(ways)):
                    for i in (0, 1):
                        samples[way][i].append(timer(runs[i], ways[way][i]))
    parts = []
    for way, (base, merged) in samples.items():
        s = paired_speedup(base, merged)
        parts.append(f"{way} ({'/'.join(map(str, ways[way]))} calls) saves {1 - 1 / s.ratio:.1%} "
                     f"[{1 - 1 / s.low:.1%}, {1 - 1 / s.high:.1%}]")
    return f"{factory} {resolution} px, {len(samples['plain'][0])} rounds: " + "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="mobilenetv2_035,semnasnet_050",
                        help="factories of benchmarks/heldout_models.py (zoo:NAME for a dsprof zoo model)")
    parser.add_argument("--resolutions", default="64,128,224")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of rounds per model and size")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")  # the held-out models' own warnings are not this benchmark's subject
    for factory in args.models.split(","):
        for resolution in (int(r) for r in args.resolutions.split(",")):
            print(f"{compare(factory, resolution, args.seconds, args.seed)} (load {load()})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
