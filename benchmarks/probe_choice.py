"""Which small workload tracks the whole models' drift best? (issue #21: the drift probe's reference)

Whole models and candidate probes are timed interleaved, in rounds (each round times every workload for
``--slot`` seconds, in a shuffled order, and keeps its median per call), for ``--seconds`` in all, in
PyTorch eager on the CPU with one thread (`measure`'s default). Each workload's round medians divided
by their overall median are its *ratios*: how fast the machine was in that round, as that workload saw it.

For every (model, candidate): the Pearson correlation of their ratios, and what scaling by the candidate
buys: the median and 90th percentile of |model ratio / candidate ratio - 1| (the error a prediction
scaled by that probe keeps) against |model ratio - 1| (the error of no scaling). The other whole model
stands for "the original model itself" (a probe that is one of the models; the model itself would only
be available to a probe after measuring it).

    .venv/bin/python benchmarks/probe_choice.py --seconds 180
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

import numpy as np
import torch
from torch import nn

from dsprof.models import get_model
from dsprof.profiler.allocator import steady_allocator
from dsprof.profiler.probe import candidate_probes


def load() -> str:
    return "/".join(f"{v:.1f}" for v in os.getloadavg())


def time_slot(fn, x: torch.Tensor, slot_s: float) -> float:
    """Median seconds per call over ``slot_s`` seconds of calls (after one warm-up call)."""
    fn(x)
    times = []
    end = time.perf_counter() + slot_s
    while time.perf_counter() < end or len(times) < 3:
        t0 = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=180.0, help="how long to keep timing rounds")
    parser.add_argument("--slot", type=float, default=0.3, help="seconds of calls per workload per round")
    parser.add_argument("--resolution", type=int, default=128, help="the whole models' input resolution")
    parser.add_argument("--models", default="mobilenet_v2,resnet18")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    allocator = steady_allocator()
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    models = {m: get_model(m, resolution=args.resolution).eval() for m in args.models.split(",")}
    inputs = {m: torch.randn(1, 3, args.resolution, args.resolution) for m in models}
    probes = candidate_probes()
    workloads: dict[str, tuple[nn.Module, torch.Tensor]] = {m: (net, inputs[m]) for m, net in models.items()}
    for name, (module, shape) in probes.items():
        workloads[name] = (module.eval(), torch.randn(*shape))
    print(f"probe_choice --seconds {args.seconds} --slot {args.slot} --resolution {args.resolution}; 1 thread, "
          f"allocator {allocator}; load average {load()}", flush=True)
    with torch.inference_mode():  # one untimed round: first calls pay for allocator growth
        for module, x in workloads.values():
            time_slot(module, x, args.slot)
    medians: dict[str, list[float]] = {w: [] for w in workloads}
    start = time.perf_counter()
    with torch.inference_mode():
        while time.perf_counter() - start < args.seconds:
            order = list(workloads)
            rng.shuffle(order)
            for w in order:
                module, x = workloads[w]
                medians[w].append(time_slot(module, x, args.slot))
    rounds = len(next(iter(medians.values())))
    print(f"{rounds} rounds in {time.perf_counter() - start:.0f} s; load average {load()}")
    for w, m in medians.items():
        print(f"  {w:<22} median {statistics.median(m) * 1e3:8.3f} ms, round medians {min(m) / statistics.median(m):.2f}x-"
              f"{max(m) / statistics.median(m):.2f}x")
    ratios = {w: np.asarray(m) / statistics.median(m) for w, m in medians.items()}
    print("\n| model | probe | correlation of ratios | unscaled: median / p90 error | scaled by probe: median / p90 error |")
    print("| --- | --- | --- | --- | --- |")
    for model in models:
        r_model = ratios[model]
        raw = np.abs(r_model - 1)
        for probe in workloads:
            if probe == model:
                continue
            r_probe = ratios[probe]
            corr = float(np.corrcoef(r_model, r_probe)[0, 1])
            scaled = np.abs(r_model / r_probe - 1)
            print(f"| {model} | {probe} | {corr:+.2f} | {np.median(raw):.1%} / {np.quantile(raw, 0.9):.1%} | "
                  f"{np.median(scaled):.1%} / {np.quantile(scaled, 0.9):.1%} |")


if __name__ == "__main__":
    main()
