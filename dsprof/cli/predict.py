"""`dsprof predict`: a model's (or a plan's) predicted speed-up and latency from a LUT, and with ``--measure`` the
paired check here (`dsprof.predict`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..names import OLD_METHOD_NAMES, PREDICT_METHODS
from ..profiler.timing import TimingConfig
from .flags import command_line_text
from .options import (
    CliError,
    add_accept_modified,
    add_device_key_arg,
    add_merge_by_arg,
    add_model_args,
    add_timing_args,
    load_lut,
    model_ref_from_args,
    pricing_from_args,
    timing_from_args,
)


def add(sub, fmt) -> None:
    p = sub.add_parser("predict", help="predict a model's latency from a LUT (and --measure it to check)", formatter_class=fmt)
    add_model_args(p)
    p.add_argument("--lut", type=Path, required=True, help="LUT file from `dsprof build-lut`")
    p.add_argument("--plan", default=None, help="a plan file (JSON) or preset name (e.g. mbv2-ds-a); without it: the original model")
    add_device_key_arg(p)
    p.add_argument("--backend", default=None, help="pick the LUT context by backend")
    p.add_argument("--batch", type=int, default=None, help="pick the LUT context by batch size")
    p.add_argument("--strict", action="store_true", help="a LUT miss is an error (raised by the library, naming the key)")
    p.add_argument("--allow-partial", action="store_true",
                   help="print a prediction that lacks some LUT keys (its coverage said) and exit 0; without it, exit 2")
    p.add_argument("--rest", choices=("auto", "stem+head", "model-minus-blocks"), default="auto",
                   help="what stands for the part outside the blocks: the stem and head timed alone, or the measured "
                        "original model minus its blocks; auto: the latter where the LUT has the whole model")
    p.add_argument("--method", choices=(*PREDICT_METHODS, *OLD_METHOD_NAMES), default="auto",
                   help="count merged blocks by their savings timed alone (isolated), timed alone and bounded by "
                        "how much longer the blocks take inside the whole model (in-model), inside the running model "
                        "(in-situ), or alone scaled by the in-situ/isolated ratio (in-situ-scaled); the in-situ "
                        "methods need `dsprof measure --in-situ`; auto: in-model where the LUT has the whole model, "
                        "its stem and head, else isolated (docs/predictions.md); context and context-scaled: the "
                        "in-situ methods' older names, read until the next release")
    p.add_argument("--probe", type=float, default=None, metavar="SECONDS",
                   help="time the drift probe here for SECONDS (e.g. 2) and scale the milliseconds by how much slower or "
                        "faster this machine runs it now than in the LUT's runs (needs a LUT of this environment, "
                        "measured with the probe); default: not scaled")
    p.add_argument("--measure", action="store_true",
                   help="also merge the model per the plan and time it here interleaved with the original in one group: "
                        "the measured speed-up (paired) against the predicted one and its interval, then the milliseconds "
                        "and the drift probe's ratio during it")
    p.add_argument("--json", type=Path, default=None, metavar="FILE",
                   help="also write the prediction (speed-up first, then milliseconds) and the check as JSON")
    p.add_argument("--measure-out", type=Path, default=Path("results/predict"), help="where --measure writes its measurement file")
    add_merge_by_arg(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_accept_modified(p, "a LUT")
    add_timing_args(p, "timing of --measure's check (as `dsprof measure` times)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..api import predict
    from ..workflows.check import CheckSettings

    timing = timing_from_args(args)
    if not args.measure and timing != TimingConfig():  # they would be read by nothing: said, not ignored
        raise CliError("the timing options (--budget, --min-samples...) time --measure's check: add --measure, or "
                       "leave them out")

    def words(text: str) -> str:
        return command_line_text(text, "predict")

    found = predict(
        model_ref_from_args(args), load_lut(args.lut, args.accept_modified), args.plan,
        pricing=pricing_from_args(args), merge_by=args.merge_by, allow_partial=args.allow_partial, probe=args.probe,
        check=CheckSettings(args.measure_out, timing=timing, progress=not args.no_progress)
        if args.measure else False,
        json_out=args.json, on_prediction=lambda shown: print(shown.head(words)),  # before it is refused or checked
    )
    if found.check is not None:
        print(found.check_text())
    if args.json is not None:
        print(f"wrote {args.json}")
    return 0
