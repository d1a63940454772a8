"""`dsprof finetune`: the linearised model of a plan fine-tuned (free ReLU6, optional self-distillation), its merge
checked (`dsprof.search.finetune`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..records.plan import load_plan
from .flags import command_line_text
from .options import (add_accept_modified, add_merge_by_arg, add_model_args, load_lut, model_options_from_args,
                      on_interrupt, weights_from_args)
from .training import ThreadUse, add_training_args, checkpoint_note, train_config


def add(sub, fmt) -> None:
    p = sub.add_parser(
        "finetune", help="fine-tune the linearised model of a plan (free ReLU6, optional self-distillation)", formatter_class=fmt
    )
    add_model_args(p)
    add_training_args(p)
    p.add_argument("--plan", default=None, help="plan file or preset; without one the original model (--model) is trained")
    p.set_defaults(model=None)  # with --plan and no --model (or --model-file): the plan's model; else mobilenet_v2
    p.add_argument("--distill", action="store_true", help="self-distillation from the original model (KL divergence)")
    p.add_argument("--distill-alpha", type=float, default=0.5, help="weight of the distillation term (1 - alpha on cross-entropy)")
    p.add_argument("--temperature", type=float, default=2.0, help="distillation temperature")
    p.add_argument("--layer-prune", action="store_true", help="baseline: drop the plan's linearised blocks instead (where shapes allow)")
    p.add_argument("--out", type=Path, default=Path("finetune.pt"), help="checkpoint, every epoch; `dsprof merge --checkpoint` takes it")
    p.add_argument("--merged-out", type=Path, default=None, help="also write the merged model (dsprof.merging.load_merged)")
    p.add_argument("--no-merge-check", action="store_true", help="skip merging and comparing the merged model's outputs")
    p.add_argument("--lut", type=Path, default=None,
                   help="a LUT whose rule merges the linearised blocks of a plan without a merge list (as predict prices)")
    p.add_argument("--device-key", default=None, help="the LUT context to use when it holds several")
    p.add_argument("--lut-resolution", type=int, default=None, help="the resolution the LUT was measured at (default: --resolution)")
    add_merge_by_arg(p)
    add_accept_modified(p, "a LUT")
    p.add_argument("--ds-plus", action="store_true", help="DepthShrinker+: train the model expanded (VGG, MobileNetV2 rules), shrink it back; --merged-out gets the original-architecture weights")
    p.add_argument("--linear-epochs", type=int, default=None, help="DepthShrinker+: last epochs with the expanded blocks' activations removed (default: a quarter)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..search.finetuning import finetune  # PyTorch

    plan = load_plan(args.plan) if args.plan else None
    model = args.model if args.model is not None or plan is not None else "mobilenet_v2"  # with a plan: the plan's
    with on_interrupt(lambda: checkpoint_note(args.out)), ThreadUse(args.threads) as use:
        result = finetune(
            plan, model=model, options=model_options_from_args(args), data=args.data,
            resolution=args.resolution, weights=weights_from_args(args), config=train_config(args), distill=args.distill,
            distill_alpha=args.distill_alpha, temperature=args.temperature, layer_pruning=args.layer_prune,
            out=args.out, resume=args.resume, merged_out=args.merged_out, check_merge=not args.no_merge_check,
            device=args.device, ds_plus=args.ds_plus, linear_epochs=args.linear_epochs,
            lut=load_lut(args.lut, args.accept_modified), device_key=args.device_key,
            lut_resolution=args.lut_resolution, merge_by=args.merge_by,
        )
    if result.merges is not None:
        print(command_line_text(result.merges.describe(), "finetune"))
    for note in result.notes:
        print(f"layer pruning: {note}")
    print(f"accuracy {result.accuracy:.4f}")
    print(use.line())
    if result.merged_accuracy is not None:
        print(f"{'shrunk' if args.ds_plus else 'merged'} model: accuracy {result.merged_accuracy:.4f}, max |logit "
              f"difference| to the fine-tuned model {result.merged_max_abs_diff:.2e}")
    for path in (result.checkpoint, result.merged_out):
        if path is not None:
            print(f"wrote {path}")
    return 0
