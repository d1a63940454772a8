"""`dsprof plan`: before training, the plan of lowest predicted latency for every k from a LUT, over one context or
several side by side (`dsprof.plan`, the API function)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from ..constants import DEFAULT_MAX_SPAN, TIE_BREAK_CANDIDATES
from ..names import OLD_METHOD_NAMES, PLAN_UNITS, PREDICT_METHODS
from ..units import interval, percent, x
from .commands import merge_command, hint_command
from .flags import command_line_text
from .options import (add_accept_modified, add_device_key_arg, add_model_args, keep_arg, load_lut, model_ref_from_args,
                      pricing_from_args)


def add(sub, fmt) -> None:
    p = sub.add_parser(
        "plan", formatter_class=fmt,
        help="before training: the plan (activations, merges, spans) of lowest predicted latency for every k, "
             "and with --importance the accuracy-latency front, from a LUT",
    )
    add_model_args(p)
    p.add_argument("--lut", type=Path, required=True, action="append",
                   help="LUT file from `dsprof build-lut` (span entries: measure --spans N); repeatable. Without "
                        "--device-key or --backend, a LUT (or LUTs) holding several contexts plans each, and prints "
                        "what each context's plans lose on the others")
    p.add_argument("--importance", type=Path, default=None,
                   help="the file `dsprof importance` writes (refused when measured for another model), or a JSON file of "
                        "{block index: accuracy loss without its activations} or a list, one per block")
    p.add_argument("--for", dest="joint", default=None, metavar="CONTEXT,CONTEXT[,...]",
                   help="also one plan for several contexts (labels as printed, keys, or backends): at each k the "
                        "least --objective loss against each one's own plan (with --importance also the least "
                        "importance loss, which --keep writes); --keep K writes it")
    p.add_argument("--objective", default="worst", choices=("worst", "mean"),
                   help="--for: minimise the worst or the mean relative latency over the contexts")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--keep", type=keep_arg, default=None,
                        help="write the plan in which this many blocks keep their activations: a count (7) or a "
                             "fraction of the blocks (0.4), as search --keep")
    budget.add_argument("--budget-ms", type=float, default=None, help="write the plan for this predicted latency budget (ms)")
    budget.add_argument("--speedup", type=float, default=None, help="write the plan for this predicted speed-up over the original")
    p.add_argument("--max-span", type=int, default=None,
                   help="blocks per span at most (1: no spans; default: as wide as the LUT holds every span of; "
                        f"the front says so where that is under {DEFAULT_MAX_SPAN}); never wider than the LUT holds")
    p.add_argument("--method", default="auto", choices=(*PREDICT_METHODS, *OLD_METHOD_NAMES), help="how block changes are counted (see dsprof predict)")
    add_device_key_arg(p)
    p.add_argument("--backend", default=None, help="pick the LUT context to plan by backend, as predict --backend")
    p.add_argument("--batch", type=int, default=None, help="pick the LUT context to plan by batch size")
    add_accept_modified(p, "a LUT")
    p.add_argument("--out", type=Path, default=Path("front.json"), help="the front as JSON (and CSV beside it)")
    p.add_argument("--tie-break", type=float, default=None, metavar="SECONDS",
                   help="time the top-priced plans of the chosen k (--keep, --budget-ms or --speedup) that are priced "
                        "inside each other's intervals, paired with the original on this machine for about SECONDS "
                        "of timed rounds, and write the measured best (its measured speed-up beside the predicted one). "
                        "Needs a LUT measured on this machine")
    p.add_argument("--tie-break-candidates", type=int, default=TIE_BREAK_CANDIDATES, metavar="N",
                   help="--tie-break: how many of the top-priced plans of the k are candidates")
    p.add_argument("--tie-break-out", type=Path, default=None, metavar="DIR",
                   help="--tie-break: the folder of its measurement file, which `dsprof build-lut` reads (default: "
                        "tie-break/ beside --out)")
    p.add_argument("--unit", default=PLAN_UNITS[0], choices=PLAN_UNITS,
                   help="what k counts: blocks that keep their activations, or single activations kept (plans that "
                        "keep one of a block's two activations and merge the run beside it: docs/activations.md)")
    p.add_argument("--plan-out", type=Path, default=None,
                   help="the chosen plan file (default: --out with .plan.json); for merge, finetune, measure --plan, export --plan, predict")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..api import plan
    from ..workflows.plan import PlannedContexts, TieBreak

    from ..planning.front import LatencyBudget
    from ..planning.minimax import Joint

    tie_break = None
    if args.tie_break is not None:
        tie_break = TieBreak(args.tie_break, args.tie_break_candidates,
                             args.tie_break_out if args.tie_break_out is not None else args.out.parent / "tie-break")
    outcome = plan(
        model_ref_from_args(args), [load_lut(path, args.accept_modified) for path in args.lut], keep=args.keep,
        budget=LatencyBudget(args.budget_ms, args.speedup), importance=args.importance,
        pricing=pricing_from_args(args), joint=Joint(args.joint, args.objective) if args.joint else None,
        out=args.out, plan_out=args.plan_out, tie_break=tie_break, unit=args.unit,
    )
    if isinstance(outcome, PlannedContexts):
        fronts = outcome.fronts
        print(command_line_text(fronts.table(hint_command), "plan"))
        for front in fronts.fronts:
            _predicted_note(outcome.predicted[front.device], fronts.labels[front.device])
        if outcome.chosen is not None:
            print("\n" + joint_chosen_line(outcome.chosen, [fronts.labels[c] for c in fronts.joint.contexts]))
    else:
        print(command_line_text(outcome.front.table(), "plan"))
        _predicted_note(outcome.predicted, str(outcome.front.device))
        if outcome.chosen is not None:
            print("\n" + outcome.chosen_line())
        if outcome.tie_break is not None:
            print(outcome.tie_break.line())
            if outcome.tie_break.contention:
                print(f"warning: {command_line_text(outcome.tie_break.contention, 'plan')}", file=sys.stderr)
            print(f"wrote {outcome.tie_break.path} (the timed plans' records: `dsprof build-lut` reads them)")
    for path in outcome.paths:
        print(f"wrote {path}")
    if outcome.plan_path is not None:  # the model the plan is for: the first context's, as all share it
        front = outcome.fronts.fronts[0] if isinstance(outcome, PlannedContexts) else outcome.front
        print(f"next: {merge_command(front.name, front.options, outcome.plan_path, args.resolution)}")
    return 0


def joint_chosen_line(point, labels: Sequence[str]) -> str:
    """The chosen plan for several contexts in one line: on each context its predicted speed-up over that context's
    original with the 95 % interval and its loss against that context's own plan (per cent, signed); its importance."""
    on = "; ".join(f"{label} {x(up)} ({interval(lo, hi)}), {percent(loss)} against its own plan"
                   for label, up, lo, hi, loss in zip(labels, point.speedup, point.speedup_low, point.speedup_high,
                                                      point.loss))
    importance = f"; importance loss {point.importance:.4f}" if point.importance is not None else ""
    return f"chosen: k = {point.k}, one plan for all: {on}; worst {percent(point.worst)}{importance}"


def _predicted_note(predicted: int, label: str) -> None:
    if predicted:
        print(f"note: {predicted} entries of {label} are predicted from another context's (`dsprof measure --few`), "
              "not measured")
