"""`dsprof explain`: why a block is slow, its latency as a unit beside its operators (`dsprof.profiler.explain`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .options import add_model_args, add_timing_args, model_ref_from_args, timing_from_args


def add(sub, fmt) -> None:
    p = sub.add_parser(
        "explain",
        help="why a block is slow: its latency as a unit beside its operators (torch.profiler, Inductor's kernels, "
             "ONNX Runtime profiling, OpenVINO's per-layer counters: what a compiler fused)",
        formatter_class=fmt,
    )
    add_model_args(p)
    p.add_argument("--block", required=True, help="the block's module name, e.g. features.2, or its index, e.g. 1 (see `dsprof blocks`)")
    p.add_argument("--backend", default="torch", help="torch, torch-compile, onnxruntime or openvino (CPU)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: 1); with more, the block is also timed on 1")
    p.add_argument("--batch", type=int, default=1, help="images per forward pass")
    p.add_argument("--out", type=Path, default=None,
                   help="also write the explanation as JSON (name it *.explain.json beside the measurements: `dsprof report` shows it)")
    add_timing_args(p, "timing of the block and of each of its modules", budget=0.5)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..profiler.explain import explain_block, format_explanation

    explanation = explain_block(
        model_ref_from_args(args), args.block,
        backend=args.backend, threads=args.threads, batch=args.batch, timing=timing_from_args(args),
    )
    print(format_explanation(explanation))
    if args.out:
        print(f"wrote {explanation.save(args.out)}")
    return 0
