"""Does a long LUT run read its calibration group as a fresh process would? (issue #46)

pvrE's 128 px LUT run for MobileNetV2-0.35 recorded its calibration plan (the k = 0 plan, spans and merges as planned)
saving 64.7 % over the original, where the same plan timed later in a fresh process saved 57-59 %
(benchmarks/RESULTS.md, pvrF section). The calibration group is the last group of a run that has built and timed a
few hundred workloads. This script, alone on the machine:

1. runs the LUT measurement `benchmarks/planner_vs_random.py` runs (`dsprof.measure`: every block as built,
   linearised and merged, spans of up to 4 blocks, the whole model, ``calibrate=True``; ``--budget`` seconds a
   workload at most) and reads the calibration group's paired saving from its records;
2. in the same process, right after: the same two models (`dsprof.workflows.calibrate.calibration_workloads` built
   from the run's records before that group, as the run built them) timed again as a pair by dsprof's profiler
   (`dsprof.profiler.runner.measure`, as the run timed them), then
   by a plain loop (`planner_vs_random.time_group`, one call each a round, shuffled);
3. in a fresh process (this script with ``--retime RECORDS``): the same two timings.

Where 1 reads more than 2 and 3, the run's own state (what it built and freed before) moves the calibration group.

    ../shared/tools/quiet-run -- .venv/bin/python benchmarks/calibration_state.py \\
        --model mobilenetv2_035 --resolution 128
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import torch

import dsprof
from dsprof.lut import build_lut
from dsprof.models import ModelRef, get_model
from dsprof.profiler import BackendSettings, TimingConfig, Workloads
from dsprof.records.measurement import CALIBRATION, paired_with_original, read_measurements
from dsprof.workflows.calibrate import calibration_workloads
from dsprof.profiler.allocator import steady_allocator
from dsprof.profiler.runner import measure as profile
from dsprof.workflows.check import paired_check
from planner_vs_random import MAX_SPAN, load, model_name, time_group


def calibration_pair(path: Path) -> tuple[float, list]:
    """(the saving the run's calibration group recorded, the run's records before that group, in file order)."""
    records = read_measurements(path)
    calib = next(r for r in records if r.ok and r.variant == CALIBRATION)
    saving = 1 - 1 / paired_with_original(calib, records).ratio
    first = next(i for i, r in enumerate(records) if r.group == calib.group)
    return saving, records[:first]


def retime(path: Path, name: str, resolution: int, budget: float, seconds: float, tag: str) -> None:
    """The calibration pair of the run in ``path``, built as the run built it, timed by `dsprof.measure` and by the
    plain loop; one line each."""
    _, before = calibration_pair(path)
    context = build_lut([path]).devices()[0]
    net = get_model(name, resolution=resolution).eval()
    label = next(r.name for r in before if r.scope == "model" and r.variant == "original")
    original, calibrated = calibration_workloads(net, label, (resolution, resolution), before, context, MAX_SPAN)
    with tempfile.TemporaryDirectory() as tmp:
        records = profile(ModelRef.of(net, name=name, resolution=resolution),
                          settings=BackendSettings("torch", threads=1),
                          workloads=Workloads((), ("original",), blocks=None),
                          extra_models={"calibration": calibrated.module}, timing=TimingConfig(budget_s=budget),
                          out=Path(tmp) / "pair.jsonl", progress=False).measurements
    run = paired_check(records, "calibration")
    print(f"{tag}, dsprof's profiler, a pair: saves {1 - 1 / run.speedup.ratio:.1%} ({run.speedup.pairs} rounds; load "
          f"{load()})", flush=True)
    torch.set_num_threads(1)
    x = torch.randn(1, 3, resolution, resolution)
    with torch.no_grad():
        samples = time_group([lambda: original.module(x), lambda: calibrated.module(x)], seconds, 20, seed=1)
    ratio = statistics.median(b / a for a, b in zip(*samples))
    print(f"{tag}, plain loop pair: saves {1 - ratio:.1%} ({len(samples[0])} rounds; original "
          f"{statistics.median(samples[0]) * 1e3:.2f} ms; load {load()})", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mobilenetv2_035", help="a planner_vs_random.py model")
    parser.add_argument("--resolution", type=int, default=128)
    parser.add_argument("--budget", type=float, default=1.0, help="LUT run: seconds of timing per workload at most")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of rounds of the plain loop's pair")
    parser.add_argument("--retime", type=Path, help="(internal) time the calibration pair of this run, fresh")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    steady_allocator()
    name = model_name(args.model)
    if args.retime is not None:
        retime(args.retime, name, args.resolution, args.budget, args.seconds, "3. a fresh process")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        run = dsprof.measure(ModelRef.of(name, resolution=args.resolution),
                             settings=BackendSettings("torch", threads=1),
                             workloads=Workloads(("original", "merged", "linear"), ("original",), spans=MAX_SPAN,
                                                 calibrate=True),
                             timing=TimingConfig(budget_s=args.budget), out=Path(tmp) / "lut", progress=False).run
        saving, before = calibration_pair(run.path)
        print(f"1. the LUT run ({len(before)} records in {len({r.group for r in before})} groups before it): its "
              f"calibration group saves {saving:.1%} (load {load()})", flush=True)
        retime(run.path, name, args.resolution, args.budget, args.seconds, "2. the same process, after the run")
        subprocess.run([sys.executable, __file__, "--model", args.model, "--resolution", str(args.resolution),
                        "--budget", str(args.budget), "--seconds", str(args.seconds), "--retime", str(run.path)],
                       check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
