"""`dsprof finetune`: the linearised model of a plan fine-tuned (free ReLU6, optional self-distillation), its merge
checked (`dsprof.search.finetune`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..records.plan import load_plan
from ..search.settings import DistillSettings, TrainRun
from .flags import command_line_text
from .options import (add_accept_modified, add_device_key_arg, add_merge_by_arg, add_model_args, load_lut,
                      model_options_from_args, on_interrupt, weights_from_args)
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
    p.add_argument("--merged-out", type=Path, default=None, help="also write the merged model (a file `dsprof measure --merged-model` times)")
    p.add_argument("--no-merge-check", action="store_true", help="skip merging and comparing the merged model's outputs")
    p.add_argument("--lut", type=Path, default=None,
                   help="a LUT whose rule merges the linearised blocks of a plan without a merge list (as predict prices)")
    add_device_key_arg(p)
    p.add_argument("--lut-resolution", type=int, default=None, help="the resolution the LUT was measured at (default: --resolution)")
    add_merge_by_arg(p)
    add_accept_modified(p, "a LUT")
    p.add_argument("--ds-plus", action="store_true", help="DepthShrinker+: train the model expanded (VGG, MobileNetV2 rules), shrink it back; --merged-out gets the original-architecture weights")
    p.add_argument("--linear-epochs", type=int, default=None, help="DepthShrinker+: last epochs with the expanded blocks' activations removed (default: a quarter)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..search.finetuning import finetune  # PyTorch

    from ..lut.choice import MergeChoice
    from ..models.ref import ModelRef

    plan = load_plan(args.plan) if args.plan else None
    options, weights = model_options_from_args(args), weights_from_args(args)
    if args.model is not None or plan is None:
        model = ModelRef.of(args.model or "mobilenet_v2", options=options, resolution=args.resolution, weights=weights)
    elif options or args.resolution is not None or weights:  # the plan's model, built as the options say
        model = ModelRef.of(plan.model, options=options or plan.options, resolution=args.resolution, weights=weights)
    else:
        model = None  # the plan's, as it says
    with on_interrupt(lambda: checkpoint_note(args.out)), ThreadUse(args.threads) as use:
        result = finetune(
            plan, model=model, data=args.data, config=train_config(args),
            distill=DistillSettings(args.distill_alpha, args.temperature) if args.distill else False,
            layer_pruning=args.layer_prune, ds_plus=args.ds_plus, linear_epochs=args.linear_epochs,
            merged_out=args.merged_out, check_merge=not args.no_merge_check,
            merge=MergeChoice(load_lut(args.lut, args.accept_modified), args.device_key, args.merge_by),
            lut_resolution=args.lut_resolution,
            run=TrainRun(args.device, args.out, args.resume),
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
