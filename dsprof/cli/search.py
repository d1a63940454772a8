"""`dsprof search`: which blocks keep their activations, by block importance through the planner (or the paper's
differentiable search, the LUT's fastest plan, a random plan): writes a plan (`dsprof.search.search`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..constants import DEFAULT_MAX_SPAN
from ..models.spans_text import format_spans
from ..names import DEFAULT_SEARCH_METHOD, SEARCH_METHODS
from ..search.settings import GateSettings, TrainRun
from .options import (add_accept_modified, add_device_key_arg, add_model_args, keep_arg, load_lut, model_ref_from_args,
                      on_interrupt)
from .training import ThreadUse, add_proxy_args, add_training_args, checkpoint_note, proxy_settings, train_config


def add(sub, fmt) -> None:
    p = sub.add_parser(
        "search", help="choose which blocks keep their activations (block importance through the planner); writes a plan",
        formatter_class=fmt,
    )
    add_model_args(p)
    add_training_args(p)
    budget = p.add_mutually_exclusive_group(required=True)
    budget.add_argument("--keep", type=keep_arg, default=None,
                        help="blocks that keep their activations: a count (7) or a fraction of the blocks (0.4), as "
                             "plan --keep (of the blocks with a removable activation)")
    budget.add_argument("--budget-ms", type=float, default=None,
                        help="instead of --keep: the LUT's predicted latency per batch at most (importance, planner)")
    budget.add_argument("--speedup", type=float, default=None,
                        help="instead of --keep: the LUT's predicted speed-up over the original at least (importance, planner)")
    p.add_argument("--method", default=DEFAULT_SEARCH_METHOD, choices=SEARCH_METHODS,
                   help="importance: each block scored by --proxy (finetune: linearised alone and fine-tuned "
                   "--epochs), the plan of least summed importance chosen by the planner (with --lut: its merges and spans too; without: the k most "
                   "important blocks keep their activations) -- the default, as the ground truth supports "
                   "(docs/search.md); differentiable: the paper's search (Sec. 4.2); planner: the LUT's fastest plan, "
                   "no training; random: the random-search baseline (seeded by --seed)")
    add_proxy_args(p, None)
    p.add_argument("--lut", type=Path, default=None, help="LUT file: the planner's latencies (importance, planner); the "
                   "differentiable search's decay weights = each block's latency saving there (default: MAC saving)")
    add_device_key_arg(p)
    p.add_argument("--lut-resolution", type=int, default=None, help="the resolution the LUT was measured at (default: --resolution)")
    p.add_argument("--max-span", type=int, default=DEFAULT_MAX_SPAN,
                   help="the planner's spans: consecutive linear blocks merged as one, at most this many (1: none; span "
                   "entries: dsprof measure --spans N)")
    p.add_argument("--lam", type=float, default=1e-3,
                   help="differentiable search: strength of the latency-weighted L1 decay of the gate scores")
    p.add_argument("--score-lr", type=float, default=0.01, help="learning rate of the gate scores")
    p.add_argument("--score-normalize", action="store_true", help="divide the scores' straight-through gradient by its largest entry")
    p.add_argument("--score-bound", type=float, default=None, help="re-centre the gate scores on their initial value and keep them within BOUND of it")
    p.add_argument("--anneal-epochs", type=float, default=0.0, help="lower the kept blocks from all to --keep over this many epochs")
    p.add_argument("--name", default=None, help="name stored in the plan")
    p.add_argument("--out", type=Path, required=True, help="the plan file to write (JSON)")
    p.add_argument("--checkpoint", type=Path, default=None, help="search checkpoint, written every epoch (the importance search with --proxy finetune: each "
                        "fine-tune as it ends, one JSON line each) (none given: OUT.ckpt.pt)")
    p.add_argument("--weights-out", type=Path, default=None, help="also save the searched weights (original architecture)")
    add_accept_modified(p, "a LUT")
    p.set_defaults(func=run)


def interrupted_note(method: str, out: Path, checkpoint: Path, proxy: str | None = None) -> str:
    """What an interrupted search kept, and how to go on: the differentiable search's checkpoint; the plan file it
    rewrites every epoch is not its answer yet (a new user took it for one); the importance search's fine-tunes
    (``proxy`` finetune), kept in the checkpoint as each ends."""
    if method == "importance" and proxy == "finetune" and checkpoint.exists() and checkpoint.stat().st_size:
        return (f"interrupted: {out} not written (the plan is written at the end); {checkpoint} holds the fine-tunes "
                "finished, and the same command with --resume continues from them")
    if method != "differentiable":
        return f"interrupted: {out} not written (the plan is written at the end)"
    note = checkpoint_note(checkpoint)
    if out.exists():
        note += f"; {out} is not the search's answer (it holds the plan of the last epoch finished, or an earlier run's)"
    return note


def run(args: argparse.Namespace) -> int:
    from ..lut.choice import Pricing
    from ..planning.front import LatencyBudget
    from ..search.registry import search

    checkpoint = args.checkpoint or Path(f"{args.out}.ckpt.pt")
    note = lambda: interrupted_note(args.method, args.out, checkpoint, args.proxy)  # noqa: E731
    with on_interrupt(note), ThreadUse(args.threads) as use:
        result = search(
            model_ref_from_args(args), keep=args.keep, budget=LatencyBudget(args.budget_ms, args.speedup),
            data=args.data, method=args.method, lut=load_lut(args.lut, args.accept_modified),
            pricing=Pricing(args.device_key, max_span=args.max_span, resolution=args.lut_resolution),
            config=train_config(args),
            settings=proxy_settings(args) if args.method == "importance" else GateSettings(
                args.lam, args.score_lr, score_normalize=args.score_normalize, score_bound=args.score_bound,
                anneal_epochs=args.anneal_epochs),
            proxy=args.proxy, out=args.out, name=args.name,
            run=TrainRun(args.device, checkpoint, args.resume, weights_out=args.weights_out),
        )
    keep = "".join(map(str, result.plan.keep))
    counted = result.counted or (True,) * len(result.plan.keep)
    # k of the blocks with a removable activation, as dsprof plan counts it (a block without one: kept or not by price)
    uncounted = [str(i) for i, c in enumerate(counted) if not c]
    one = len(uncounted) == 1
    none = (f"; {'block' if one else 'blocks'} {', '.join(uncounted)} {'has' if one else 'have'} no removable "
            "activation: not counted" if uncounted else "")
    print(f"keep {keep} ({result.k} of {sum(counted)} blocks keep their activations{none})")
    proxy = (result.plan.search or {}).get("proxy")
    if proxy:
        print(f"importance by {proxy} in {result.plan.search['seconds']:.1f} s")
    if result.ranking:
        print("ranking (most important first): " + " ".join(map(str, result.ranking)))
    planner = (result.plan.search or {}).get("planner")
    if planner:
        spans = format_spans(result.plan.spans, "none")
        print(f"planner ({planner['device']}): predicted {planner['latency_s'] * 1e3:.3f} ms, "
              f"{planner['speedup']:.2f}x the original; spans {spans}")
    if args.method in ("importance", "differentiable"):  # the methods that train or score with training data
        print(use.line())
    print(f"wrote {result.out}")
    return 0
