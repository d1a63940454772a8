"""What ends a `measure --calibrate` run (issues #27, #36): the front's pieces timed inside the model, then the
calibration group.

Blocks and spans timed alone say what each saves; inside the running model a piece can save less or more (issue
#36: on this CPU, MobileNetV2's block 1 at 112 px merged saved 8 % of the model, where its saving alone promised
14 %; the spans that take it over-promised the same). So, once the run has timed the blocks, spans and the whole
model, it plans the front from its own records (`dsprof.planning.plan_front`, the prices `dsprof predict` shows) and
times every piece the front uses -- a block linearised alone, merged or not as the LUT's rule deploys it, or a span
-- inside the model: one group each, the whole model and the model with only that piece deployed, paired round by
round (scope `IN_SITU_SCOPE`, named after the piece: a block's module name, or `dsprof.lut.schema.span_piece`). The
in-model method then prices those pieces at what they saved there (`dsprof.lut.inmodel`). Priced anew, the
front may take pieces not yet timed so: it is planned again, up to `IN_MODEL_ROUNDS` times, until it uses none.
Where the front's pieces (of every k) are fewer than the in-model scales need (`dsprof.lut.inmodel.MIN_PIECES`),
the model's other pieces are timed too, until there are enough (issue #46: a calibration is never unused in
silence): the calibration group's blocks one by one, then the spans the run measured, the ones that save most
alone first. A model with fewer pieces than that (4 blocks and no spans) has them all timed, and says so in one line
(`dsprof.lut.prices.CalibrationFallbackWarning`; its prices say it again wherever they are used).

A model of `MIN_PIECES` pieces or more also has the `COSTLY_PIECES` pieces that cost the most time alone timed inside
it (issue #46, item 4): of each lone block merged and unmerged, and each span the run measured, those that cost time,
the costliest first, one form of a block. The front never takes them, but another runtime's plan does, and the
cross table prices that plan with this LUT. On ONNX Runtime, OpenVINO and torch.compile, two of MobileNetV2's spans at
96 px that cost 12-250 us alone cost 115-801 us inside the model. The spans' line, drawn through spans that save,
priced them at a fraction of that (`dsprof.lut.inmodel.costs_apart`: such pieces get a line of their own).

Then the session pairs (issue #46): `SESSION_PAIRS` groups of the whole model against itself, each model built
anew (two sessions, as every group has), scope `IN_SITU_SCOPE`, variants ``original`` and
`dsprof.records.measurement.SESSION_AGAIN`, named `dsprof.records.measurement.session_pair_name`. Their paired ratio
is 1 but for the noise of one group: the rounds' and how two sessions of one model differ (on this 2-vCPU VM 1-2 % of
the model through torch.compile and 2-3 % through ONNX Runtime and OpenVINO, for FBNetV3-B at 64 px). That noise is
what one later check of a plan carries (`dsprof.lut.interval`'s check term), and what each piece timed inside the
model carries beside its saving (`dsprof.lut.inmodel`'s floor leaves it out); without them both were read from the
pieces' scatter, which holds the pieces' own too, and counted twice.

Then the calibration group (how much of the *sum* of the savings a merged model realises depends on the runtime:
ONNX Runtime saved 0.3-1.0 of it on CPU models where PyTorch saved about all of it: benchmarks/RESULTS.md, issue #27):
the whole model with every block linearised, each merged where this run's entries say merging pays (the rule
`dsprof predict` prices, `dsprof.planning.decide.merge_rule`), timed against the original round by round in one group,
the last group of the run. Its records have scope ``model``, the model's name and variant `CALIBRATION`; the LUT
keeps their paired ratio, and `dsprof.lut.interval` compares it with what the LUT predicts for the same plan (rho).
Where the run measured spans (``max_span`` > 1), the plan is the k = 0 plan of the front planned from the run's
records, with its spans and merge list (issue #46: rho measured on lone blocks and applied to spans priced pvrD's
front plans 10-12 % high); its record is named after that plan (`calibration_name`), so that the pricing side prices
that very plan (`dsprof.lut.inputs.calibration_entry`). Where that plan merges no span, the plan of before.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from torch import nn

from ..device_context import DeviceContext
from ..errors import DsprofError, UsageError
from ..records.measurement import (CALIBRATION, IN_SITU_SCOPE, SESSION_AGAIN, Measurement, MeasurementFile,
                                   calibration_name, session_pair_name)
from ..profiler.selection import Workloads
from ..profiler.workloads import Workload, model_workload
from ..models.ref import ModelRef
from ..models.registry import model_identity
from ..lut.build import lut_from_files
from ..lut.choice import Pricing
from ..lut.lookup import piece_name
from ..lut.inmodel import MIN_PIECES
from ..lut.predict import MethodFallbackWarning, prices_of
from ..lut.prices import CalibrationFallbackWarning, model_pieces, saving_alone_s
from ..lut.schema import in_situ_workload
from ..merging import merge_model
from ..records.plan import Plan
from ..planning.planner import plan_front
from ..planning.decide import merge_rule
from ..models import find_blocks, nothing_to_merge

__all__ = ["CALIBRATION", "COSTLY_PIECES", "IN_MODEL_ROUNDS", "SESSION_PAIRS", "calibration_groups",
           "calibration_workloads", "check_calibration_request", "in_model_groups", "session_pairs"]

#: How many times the front is planned from the run's records to find pieces not yet timed inside the model.
IN_MODEL_ROUNDS = 3
#: How many session pairs a run times: their noise is then known to about +-30 % (one sigma).
SESSION_PAIRS = 6
#: How many of the pieces that cost the most time alone a run times inside the model (the module docstring).
COSTLY_PIECES = 3


def check_calibration_request(model: Any, workloads: Workloads, input_size: tuple[int, int] | None = None) -> None:
    """Raise `UsageError` (one line, what to give) where a run of ``model`` (at ``input_size``) that times
    ``workloads`` cannot end with the calibration group: before anything is timed."""
    variants, model_variants, blocks = workloads.variants, workloads.model_variants, workloads.blocks
    if not isinstance(model, str) and model_identity(model) is None:
        raise UsageError("`calibrate=True` merges the model by a plan, which names a registered model: give its name "
                         "or its model file (PATH.py:FACTORY) as the model, or a module built by "
                         "dsprof.models.get_model")
    if blocks is None or "merged" not in variants or "original" not in variants or "original" not in model_variants:
        raise UsageError("`calibrate=True` prices a plan from this run's own entries: it needs "
                         "`workloads=Workloads(variants=)` with original and merged (and linear), "
                         "`workloads=Workloads(model_variants=)` with original, and blocks to time")
    nothing = nothing_to_merge(model, input_size) if isinstance(model, nn.Module) else None
    if nothing is not None:
        raise UsageError(f"{nothing}: there is no plan to calibrate; time the whole model without "
                         "`workloads=Workloads(calibrate=True)`")


def calibration_groups(net: nn.Module, label: str, input_size: tuple[int, int],
                       records: Callable[[], Sequence[Measurement]], context: DeviceContext, max_span: int,
                       existing: Sequence[Measurement] = (),
                       expect: Callable[[int], None] = lambda groups: None) -> Iterator[list[Workload]]:
    """The groups that end a `measure --calibrate` run, each built from the records timed before it (``records()``;
    `dsprof.workflows.measure` times each in the run's `dsprof.profiler.runner.MeasureSession` before it asks for the
    next): the front's pieces inside the model (`in_model_groups`, planned again until the front uses no piece
    untimed, at most `IN_MODEL_ROUNDS` times), the session pairs the records lack (`session_pairs`), then the
    calibration group, where the records the file held before the run (``existing``: a resumed run) lack it.
    ``expect(n)`` is told each batch of groups as it is planned, before the first of them is yielded (the progress
    bar's total)."""
    for _ in range(IN_MODEL_ROUNDS):
        try:
            groups = in_model_groups(net, label, input_size, records(), context, max_span)
        except DsprofError as exc:  # the run's own entries cannot be planned (e.g. they contradict each other)
            warnings.warn(f"{label}: the front's pieces were not timed inside the model ({exc})", stacklevel=2)
            break
        if not groups:
            break
        expect(len(groups))
        yield from groups
    pairs = session_pairs(net, label, input_size, records())
    calibration_due = not any(r.ok and r.variant == CALIBRATION for r in existing)
    expect(len(pairs) + int(calibration_due))
    yield from pairs
    if calibration_due:
        yield calibration_workloads(net, label, input_size, records(), context, max_span)


def _run_lut(label: str, records: Sequence[Measurement]) -> Any:
    return lut_from_files([MeasurementFile(Path(f"{label} (this run)"), list(records), [], 0)])


def in_model_groups(net: nn.Module, label: str, input_size: tuple[int, int], records: Sequence[Measurement],
                    context: DeviceContext, max_span: int) -> list[list[Workload]]:
    """One group per piece that the front planned from ``records`` (this run's) uses and that they do not time inside
    the model yet, and, where those and the pieces timed before are fewer than `MIN_PIECES`, the model's other pieces
    that make up the difference (`_more_pieces`): the whole model (variant ``original``) and the model with only that
    piece deployed (``merged``, or ``linear`` for a lone block the rule leaves unmerged), scope `IN_SITU_SCOPE`, named
    after the piece. None where the records cannot price the in-model method (no whole model yet). A model with
    fewer pieces than `MIN_PIECES` says so with a `CalibrationFallbackWarning`, once (the round that times them)."""
    registered, options = model_identity(net)
    lut = _run_lut(label, records)
    with warnings.catch_warnings():  # what the prices fall back to is said where they are used, not here
        warnings.simplefilter("ignore", MethodFallbackWarning)
        warnings.simplefilter("ignore", CalibrationFallbackWarning)
        ref = ModelRef.of(net, name=label, options=options)
        prices = prices_of(ref, lut, device=context, method="in-model")
    if prices.method != "in-model":
        return []
    front = plan_front(ref, lut, pricing=Pricing(max_span=max(1, max_span)), prices=prices)
    def timed(start: int, stop: int, variant: str) -> bool:  # in the records, whether or not they price it yet
        workload = in_situ_workload(prices.label, piece_name(prices.blocks, start, stop))
        return prices.lookup(workload, "linear" if variant == "linear" else "merged", IN_SITU_SCOPE) is not None

    wanted: dict[tuple[int, int], str] = {}
    for point in front.points:
        for p in prices.pieces(point.plan):
            if p.variant in ("merged", "linear", "span") and not timed(p.start, p.stop, p.variant):
                wanted.setdefault((p.start, p.stop), p.variant)
    n = len(prices.blocks)
    pieces = model_pieces(prices.blocks, lambda a, b: prices.span(a, b).found)
    done = {(a, b) for a, b in pieces
            if any(timed(a, b, v) for v in (("span",) if b - a > 1 else ("merged", "linear")))}
    for start, stop, variant in _more_pieces(prices, pieces, done | set(wanted)):  # too few for the estimate
        wanted[(start, stop)] = variant
    todo = {(start, stop, variant) for (start, stop), variant in wanted.items()}
    if len(pieces) >= MIN_PIECES:  # (a model of fewer has every piece timed, and one line through them)
        todo |= {piece for piece in _costly_pieces(prices, pieces) if not timed(*piece)}  # other runtimes' plans
    if not todo:
        return []
    if len(pieces) < MIN_PIECES:
        warnings.warn(f"{label}: the model has only {len(pieces)} pieces to time inside it ({n} blocks, "
                      f"{len(pieces) - n} spans measured), fewer than the {MIN_PIECES} the in-model scales need: all "
                      "are timed, and its prices will count the one line through them, shrunk toward 1 (said where "
                      "they are used)", CalibrationFallbackWarning, stacklevel=2)
    original = model_workload(net, label, "original", input_size)
    groups = []
    for start, stop, variant in sorted(todo):
        inside = [start <= i < stop for i in range(n)]
        keep = tuple(int(not x) for x in inside)
        plan = Plan(registered, keep, options, merge=tuple(x and variant != "linear" for x in inside),
                    spans=((start, stop),) if stop - start > 1 else None, name=piece_name(prices.blocks, start, stop))
        swapped = model_workload(merge_model(net, plan), label, "merged", input_size, fold=False)  # merge_model folds
        name = piece_name(prices.blocks, start, stop)
        spec, swap_variant = prices.blocks[start].spec, "linear" if variant == "linear" else "merged"
        groups.append([replace(original, scope=IN_SITU_SCOPE, name=name, spec=spec, index=start),
                       replace(swapped, scope=IN_SITU_SCOPE, name=name, variant=swap_variant, spec=spec, index=start)])
    return groups


def session_pairs(net: nn.Module, label: str, input_size: tuple[int, int],
                  records: Sequence[Measurement]) -> list[list[Workload]]:
    """The session pairs of ``net`` that ``records`` lack, of `SESSION_PAIRS` (the module docstring): each the whole
    model twice, each built anew, ``original`` and `SESSION_AGAIN`, scope `IN_SITU_SCOPE`, named
    `session_pair_name`."""
    done = {r.name for r in records if r.ok and r.scope == IN_SITU_SCOPE and r.variant == SESSION_AGAIN}
    groups = []
    for number in range(1, SESSION_PAIRS + 1):
        name = session_pair_name(number)
        if name not in done:  # model_workload folds a copy: two modules, two sessions
            groups.append([replace(model_workload(net, label, variant, input_size), scope=IN_SITU_SCOPE, name=name)
                           for variant in ("original", SESSION_AGAIN)])
    return groups


def _more_pieces(prices: Any, pieces: Sequence[tuple[int, int]],
                 have: set[tuple[int, int]]) -> list[tuple[int, int, str]]:
    """Where the pieces timed or to be timed (``have``) are fewer than `MIN_PIECES`, the model's other ``pieces``
    that make up the difference: the calibration group's blocks one by one (each linearised alone, merged or not as
    the prices deploy it), then the spans the run measured, each kind the pieces that save most alone first (they
    pin the scale: a piece weighs by its saving alone squared, `dsprof.lut.inmodel`); (start, stop, variant) each."""
    need = MIN_PIECES - len(have)
    if need <= 0:
        return []
    more = []
    for start, stop in pieces:
        if (start, stop) in have:
            continue
        if stop - start > 1:
            p, variant = prices.span(start, stop), "span"
        else:
            p = prices.linearized(start)
            variant = p.variant if p.variant in ("merged", "linear") else "merged"
        if p.saving_s == p.saving_s:
            more.append((stop - start > 1, -abs(p.saving_s), start, stop, variant))
    return [(start, stop, variant) for *_, start, stop, variant in sorted(more)[:need]]


def _costly_pieces(prices: Any, pieces: Sequence[tuple[int, int]]) -> list[tuple[int, int, str]]:
    """The `COSTLY_PIECES` pieces that cost the most time alone, the costliest first: of each lone block merged and
    unmerged (one of the two), and each span the run measured, only those that cost time; the same each round, so
    that a run times at most that many. (start, stop, variant) each (the module docstring)."""
    costly = []
    for start, stop in pieces:
        options = ([(prices.span(start, stop), "span")] if stop - start > 1 else
                   [(prices.linearized(start, merge), "merged" if merge else "linear") for merge in (True, False)])
        for p, variant in options:
            alone = saving_alone_s(prices.entries.originals[start:stop], p.latency_s)  # unscaled (NaN: not < 0)
            if p.variant in ("merged", "linear", "span") and alone < 0:
                costly.append((alone, start, stop, variant))
    chosen: dict[tuple[int, int], str] = {}
    for _, start, stop, variant in sorted(costly):  # the costliest first; one variant of a block
        if len(chosen) < COSTLY_PIECES:
            chosen.setdefault((start, stop), variant)
    return [(start, stop, variant) for (start, stop), variant in chosen.items()]


def calibration_workloads(net: nn.Module, label: str, input_size: tuple[int, int], records: Sequence[Measurement],
                          context: DeviceContext, max_span: int = 1) -> list[Workload]:
    """The calibration group: ``net`` (variant ``original``) and ``net`` with every block linearised (variant
    `CALIBRATION`), both timed under ``label``. Where the run measured spans (``max_span`` > 1) and the front planned
    from ``records`` (this run's, priced as `in_model_groups` prices them) merges some at k = 0, that plan, spans and
    merge list as planned, its record named after them (`calibration_name`: issue #46, rho is measured on a plan
    with the front's spans); else every block alone, merged where ``records`` say it pays."""
    registered, options = model_identity(net)
    lut = _run_lut(label, records)
    plan = _front_plan(net, label, lut, context, max_span) if max_span > 1 else None
    name = label
    if plan is not None and plan.spans:
        lone = [i for i in range(len(plan.keep)) if not any(a <= i < b for a, b in plan.spans)]
        name = calibration_name(label, plan.spans, [i for i in lone if not plan.merge[i]])
    else:
        plan = Plan(registered, (0,) * len(find_blocks(net, input_size)), options, name=CALIBRATION)
        rule = merge_rule(ModelRef.of(net, name=label, options=options), lut=lut, device=context)
        plan = rule.decide(plan, strict=False).plan
    merged = merge_model(net, plan)
    # merge_model folds its BatchNorms already: its model needs no folded copy
    return [model_workload(net, label, "original", input_size),
            model_workload(merged, name, CALIBRATION, input_size, fold=False)]


def _front_plan(net: nn.Module, label: str, lut: Any, context: DeviceContext, max_span: int) -> Plan | None:
    """The k = 0 plan of the front planned from ``lut`` (this run's), priced as `in_model_groups` prices, with its
    merge list; None where the run's entries cannot be planned."""
    _, options = model_identity(net)
    with warnings.catch_warnings():  # what the prices fall back to is said where they are used, not here
        warnings.simplefilter("ignore", MethodFallbackWarning)
        warnings.simplefilter("ignore", CalibrationFallbackWarning)
        try:
            ref = ModelRef.of(net, name=label, options=options)
            prices = prices_of(ref, lut, device=context, method="in-model")
            front = plan_front(ref, lut, pricing=Pricing(max_span=max_span), prices=prices)
        except DsprofError as exc:
            warnings.warn(f"{label}: the calibration group times every block alone (its front was not planned: "
                          f"{exc})", stacklevel=3)
            return None
    plan = next((p.plan for p in front.points if p.k == 0), None)
    return plan if plan is not None and plan.merge is not None else None
