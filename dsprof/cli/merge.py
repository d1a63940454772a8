"""`dsprof merge`: the blocks a plan linearises merged into dense convolutions, exactly (`dsprof.merge`, the API
function)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..constants import DEFAULT_MAX_SPAN, IMAGENET_CLASSES
from .flags import command_line_text
from .options import (add_accept_modified, add_device_key_arg, add_merge_by_arg, add_model_args,
                      merge_choice_from_args, model_options_from_args, model_ref_from_args, spans_arg, weights_from_args)


def add(sub, fmt) -> None:
    p = sub.add_parser(
        "merge",
        help="merge the blocks a plan linearises into dense convolutions (exact); write the merged model",
        formatter_class=fmt,
    )
    add_model_args(p, classes_help="classes of the checkpoint's classifier (default: the checkpoint's where it says, "
                   f"as `dsprof finetune`'s do, else the model's, {IMAGENET_CLASSES})")
    p.set_defaults(model=None)  # no --model (or --model-file): the plan's model
    p.add_argument("--plan", default=None,
                   help="a preset of the paper's Tab. 8 (e.g. mbv2-1.4-ds-e; an unknown name lists them) or a plan JSON file; default: "
                        "the plan the --checkpoint carries (`dsprof finetune --out` writes it there)")
    p.add_argument("--checkpoint", type=Path, default=None,
                   help="state dict of the fine-tuned linearised model (or of the original); `dsprof finetune --out` "
                        "also carries the plan and the class count")
    p.add_argument("--out", type=Path, default=None, help="write the merged model here (state dict + plan: a file `dsprof measure --merged-model` times); "
                        "a file there is replaced only if it is a merged model too")
    p.add_argument("--onnx", type=Path, default=None, help="also export the merged model to this ONNX file (batch 1)")
    p.add_argument("--spans", default=None, metavar="auto|none|A-B,...",
                   help="merge runs of consecutive linear blocks into one convolution each: 'auto' where it pays "
                        "(--lut, or MACs with --merge-by macs), or inclusive block ranges (0-1,3-4: blocks 0 and 1, 3 "
                        "and 4); default: the plan's")
    p.add_argument("--max-span", type=int, default=None,
                   help=f"blocks per span at most (--spans auto; default {DEFAULT_MAX_SPAN}, no wider than the LUT holds)")
    p.add_argument("--lut", type=Path, default=None,
                   help="latency table that decides which linearised blocks of a plan without a merge list merge (the "
                        "rule predict prices) and, with --spans auto, the spans (the planner's; span entries: dsprof "
                        "measure --spans N)")
    add_device_key_arg(p)
    add_merge_by_arg(p)
    add_accept_modified(p, "a LUT")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..api import merge
    from ..workflows.merge import plan_model

    ref = model_ref_from_args(args) or plan_model(  # no --model: the plan's, with the options given
        args.plan, args.checkpoint, options=model_options_from_args(args), resolution=args.resolution,
        weights=weights_from_args(args))
    outcome = merge(
        ref, args.plan, checkpoint=args.checkpoint, out=args.out, onnx=args.onnx,
        num_classes=args.num_classes, spans=spans_arg(args.spans), max_span=args.max_span,
        merge=merge_choice_from_args(args),
    )
    print(outcome.text(lambda text: command_line_text(text, "merge")))
    return 0
