"""What a plan's check reads with the stem and head in its group (issue #44/#46: one check, two treatments).

`dsprof predict --measure` times a plan's merged model paired with the original alone, a group of two. `dsprof
measure --plan` timed it in the whole model's group: the original, its stem and its head (what a LUT keeps of the
model) and the plans, a group of four rotated round by round, in which each workload always follows the same other.
This times, in one process, groups of both kinds alternating (the profiler's prepared modules and loop, one thread):
the original and the plan alone, and the original, stem, head and plan; and prints the plan's paired speed-up from
each kind, per group and their median. A plan file of the model comes from `dsprof plan`. Run alone:

    ../shared/tools/quiet-run -- .venv/bin/python benchmarks/check_group.py --model mobilenetv1_100h:64 \\
        --plan OUT/timm-mobilenetv1_100h/front.plan.json --groups 6
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import torch

import dsprof
from dsprof.portable.timing_loop import DEFAULTS, first_group, time_interleaved
from dsprof.profiler import BackendSettings
from dsprof.profiler.workloads import model_workload, stem_head_workloads
from dsprof.runtimes import load_backend_class
from pair_order import model_ref
from planner_vs_random import load


def by_group(model: str, resolution: int, backend_name: str, plan: str, groups: int) -> str:
    ref = model_ref(model, resolution)
    torch.manual_seed(0)
    net = ref.build().eval()
    merged = dsprof.merge(ref, plan).model.eval()
    backend = load_backend_class(backend_name)(BackendSettings(backend_name, threads=1))
    size = (resolution, resolution)
    read: dict[int, list[float]] = {2: [], 4: []}
    with tempfile.TemporaryDirectory() as tmp:
        for g in range(2 * groups + 1):  # group 0 warms the process up and is not counted
            kind = 4 if g % 2 == 0 else 2
            group = [model_workload(net, model, "original", size)]
            group += stem_head_workloads(net, model, size) if kind == 4 else []
            group.append(model_workload(merged, "plan", "custom", size))
            prepared = [backend.prepare(w.module, (1, *w.input_shape), Path(tmp) / f"{g}-{i}") for i, w in enumerate(group)]
            names = [f"{w.scope} {w.variant}" for w in group]
            with torch.inference_mode():
                out = time_interleaved([(n, p.run) for n, p in zip(names, prepared)],
                                       first_group(DEFAULTS) if g == 0 else DEFAULTS)
            for p in prepared:
                p.close()
            if g:
                original, checked = out[names[0]]["samples_s"], out[names[-1]]["samples_s"]
                read[kind].append(statistics.median(a / b for a, b in zip(original, checked)))
    two, four = statistics.median(read[2]), statistics.median(read[4])
    return (f"{model} {resolution} px, {backend_name}, {Path(plan).name}, {groups} groups each: "
            f"{two:.4f}x paired with the original alone ({' '.join(f'{x:.3f}' for x in read[2])}), "
            f"{four:.4f}x beside the stem and head ({' '.join(f'{x:.3f}' for x in read[4])}); ratio {four / two:.4f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="MODEL:RESOLUTION (a timm name, or mobilenet_v2)")
    parser.add_argument("--plan", required=True, help="a plan file of the model (`dsprof plan` writes one)")
    parser.add_argument("--backend", default="torch", help="torch, onnxruntime, openvino or torch-compile")
    parser.add_argument("--groups", type=int, default=6, help="groups of each kind")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")  # the models' own warnings are not this benchmark's subject
    model, resolution = args.model.rsplit(":", 1)
    start = time.strftime("%H:%M:%SZ", time.gmtime())
    print(f"{by_group(model, int(resolution), args.backend, args.plan, args.groups)} ({start}, load {load()})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
