"""`dsprof plan` as a Python function: the front, the chosen plan, the files (`plan`); one context
(`plan_to_file`) or several, side by side with one plan for several (`plan_contexts_to_file`)."""

from __future__ import annotations

import contextlib
import json
import math
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from torch import nn

from .._moved import as_request, moved_keywords
from ..errors import BadFileError, PlanError, UsageError
from ..io import atomic_write_text, check_output_path, read_json
from ..lut.choice import Pricing
from ..lut.table import LUT
from ..models import nothing_to_merge
from ..models.ref import ModelRef
from ..models.spans_text import format_spans
from ..planning.contexts import ContextFronts, plan_contexts
from ..planning.front import Front, FrontPoint, LatencyBudget, check_budget, resolve_k
from ..planning.minimax import Joint, JointPoint
from ..planning.activations import plan_front_acts
from ..planning.planner import plan_front
from ..names import PLAN_UNITS
from .. import units
from ..records.importance import (
    check_importance_model,
    importance_resolution_note,
    is_importance_record,
    read_importance,
)
from .tiebreak import TieBreak, TieBroken, break_tie, tie_break_of

__all__ = ["PlannedContexts", "Planned", "TieBreak", "load_importance", "plan", "plan_contexts_to_file", "plan_to_file"]


@dataclass(frozen=True)
class Planned:
    """What `plan_to_file` produced: the front, the chosen point (None without a budget), the files, and the
    chosen plan file (``plan_path``, what `dsprof.merge` deploys; None where none was written)."""

    front: Front
    chosen: FrontPoint | None
    paths: tuple[Path, ...]
    plan_path: Path | None = None
    predicted: int = 0  # entries of the context predicted from another's (`dsprof measure --few`), not measured
    tie_break: TieBroken | None = None  # with `tie_break=`: the tied plans timed, ``chosen`` their measured best

    def chosen_line(self) -> str | None:
        """The chosen plan in one line (None without one): its k of the blocks with a removable activation (a block
        without one is kept or not by price: the front's notes say which), or of the activations on a front of
        single activations; its predicted speed-up and milliseconds, each with its 95 % interval, spans and importance
        loss."""
        front, c = self.front, self.chosen
        if c is None:
            return None
        most = max(p.k for p in front.points)
        unit = "activations" if c.plan.acts is not None else "blocks"
        # no activation to remove (every block linear already): the one plan is which blocks merge
        which = f"k = {c.k} of {most} {unit}" if most else "the one plan (no activation to remove)"
        # the speed-up's interval (what a paired check of the plan against the original is held to) and the
        # latency's (which also holds the machine's drift between the LUT's runs and a later one)
        speedup = f"{units.x(front.original_s / c.latency_s)} ({units.interval(c.speedup_low, c.speedup_high)})"
        return (f"chosen: {which}, {speedup}, {c.latency_s * 1e3:.3f} ms (95 % {c.low_s * 1e3:.3f}-{c.high_s * 1e3:.3f} ms), "
                f"spans {format_spans(c.plan.spans, 'none')}"
                + (f", importance loss {c.importance:.4f}" if c.importance is not None else "")
                + (f"; {front.draft}" if front.draft else ""))

    def __str__(self) -> str:
        """What `dsprof plan` prints: the front (`Front.table`), then the chosen plan."""
        chosen = self.chosen_line()
        return self.front.table() + (f"\n\n{chosen}" if chosen else "")


@dataclass(frozen=True)
class PlannedContexts:
    """What `plan_contexts_to_file` produced: the fronts over several contexts, the plan for several contexts at
    ``keep`` (None without one; with importance the least loss at that k), the files, and the plan file written
    (``plan_path``, what `dsprof.merge` deploys; None where none was)."""

    fronts: ContextFronts
    chosen: JointPoint | None
    paths: tuple[Path, ...]
    plan_path: Path | None = None
    predicted: Mapping[Any, int] | None = None  # per context, its entries predicted from another's (not measured)


def load_importance(path: str | Path, model: str | ModelRef | None = None) -> dict[int, float]:
    """Per-block importance from a JSON file: what `dsprof importance` writes (refused when measured for another
    model than ``model`` -- a registered name, or a `ModelRef` with its options, resolution and weights; where given
    --, with the `dsprof importance` that scores it for ``model`` from its weights; scored at another input size than
    the model's -- its resolution, else its default --, an `ImportanceResolutionWarning` that says what differs), an
    object {block index: loss} or a list, one loss per block. A model passed as a module is not checked."""
    path = Path(path)
    data = read_json(path, "importance file (JSON)", _BARE)
    if is_importance_record(data):
        record = read_importance(path)
        ref = ModelRef.of(model) if model is not None else None
        if ref is not None and ref.entry is not None:
            check_importance_model(record, ref.entry, dict(ref.options), path, ref.weights)

            note = importance_resolution_note(record, ref.entry, dict(ref.options), ref.input_size[0], path)
            if note is not None:
                warnings.warn(note, stacklevel=2)  # an ImportanceResolutionWarning
        return {i: float(v) for i, v in enumerate(record["importance"])}
    pairs = (enumerate(data) if isinstance(data, list) else data.items() if isinstance(data, dict) else None)
    try:
        found = {int(k): float(v) for k, v in pairs} if pairs is not None else None
    except (TypeError, ValueError, OverflowError):
        found = None
    if found is None:
        raise BadFileError(f"importance file {path}: {_BARE}")
    bad = next((k for k, v in found.items() if not math.isfinite(v)), None)
    if bad is not None:  # NaN or infinity (JSON as Python reads it allows both): no ranking can hold them
        raise BadFileError(f"importance file {path}: block {bad}'s importance is {found[bad]}, not a finite number; "
                             f"{_BARE}")
    return found


_BARE = "give a JSON object {block index: loss} or a list of finite numbers, or a file that `dsprof importance` wrote"


def plan_to_file(
    model: str | nn.Module | ModelRef,
    lut: Any,
    *,
    out: str | Path | None = None,
    importance: Mapping[int, float] | Sequence[float] | str | Path | None = None,
    keep: int | float | None = None,
    budget_ms: float | None = None,
    speedup: float | None = None,
    max_span: int | None = None,
    device: Any = None,
    method: str = "auto",
    plan_out: str | Path | None = None,
    tie_break: TieBreak | float | None = None,
    unit: str = PLAN_UNITS[0],
) -> Planned:
    """`plan_front` of ``model`` (anything `ModelRef.of` takes; a `ModelRef` carries its options and resolution),
    then the plan for one budget (``keep`` blocks with activations -- a count, or a fraction
    of the blocks --, ``budget_ms`` or ``speedup``, each above 0; `Front.choose`). Writes the front to ``out`` (JSON, and CSV beside it) and the chosen plan to
    ``plan_out`` (default: ``out`` with ``.plan.json``), an ordinary plan file. With ``tie_break`` (a `TieBreak`, or
    its seconds), the plans of the chosen k tied with it are timed here and the measured best is the plan chosen
    (`dsprof.workflows.tiebreak`; the front's JSON says what was measured under ``tie_break``). ``unit="activation"``:
    k counts kept activations, the plans carry ``acts`` (`dsprof.planning.activations.plan_front_acts`; no importance,
    no tie-break)."""
    check_budget(budget_ms, speedup)  # before the LUT is read
    _check_unit(unit, importance, tie_break)
    tie_break = tie_break_of(tie_break, choosing=not (keep is None and budget_ms is None and speedup is None),
                             importance=importance)
    model = ModelRef.of(model)
    importance, chosen_path = _inputs(importance, model, out, plan_out)
    pricing = Pricing(device_key=device, method=method, max_span=max_span)
    with _nothing_to_plan(model):
        if unit == "activation":
            front = plan_front_acts(model, lut, pricing=pricing)
        else:
            front = plan_front(model, lut, pricing=pricing, importance=importance)
    chosen = None
    if keep is not None or budget_ms is not None or speedup is not None:
        chosen = front.choose(keep=keep, budget_s=budget_ms / 1e3 if budget_ms is not None else None, speedup=speedup)
    broken = None
    if tie_break is not None:
        broken = break_tie(model, lut, front, chosen, tie_break, method=method)
        chosen = broken.best.point
    paths = _write(front, out, chosen, chosen_path)
    if broken is not None and out is not None:  # the front's JSON says what was measured
        data = json.loads(paths[0].read_text())
        atomic_write_text(paths[0], json.dumps({**data, "tie_break": broken.to_dict()}, indent=1) + "\n")
    return Planned(front, chosen, paths, chosen_path if chosen is not None else None, tie_break=broken)


def _check_unit(unit: str, importance: Any, tie_break: Any = None) -> None:
    """Refuse a planner unit that is not one (`PLAN_UNITS`), and importance or a tie-break at the level of
    activations."""
    if unit not in PLAN_UNITS:
        raise UsageError(f"`unit={unit!r}`: the planner counts one of {', '.join(PLAN_UNITS)}")
    if unit == "activation" and importance is not None:
        raise UsageError("`unit='activation'` plans without importance (an importance file scores blocks): drop "
                         "`importance=`, or plan with `unit='block'`")
    if unit == "activation" and tie_break is not None:
        raise UsageError("`unit='activation'` plans without a tie-break (its candidates are block plans): drop "
                         "`tie_break=`, or plan with `unit='block'`")


@contextlib.contextmanager
def _nothing_to_plan(model: ModelRef) -> Iterator[None]:
    """A model without a block has no plan to choose: the planner's error about its empty plans becomes the one line
    that says why (`dsprof.models.nothing_to_merge`)."""
    try:
        yield
    except PlanError:
        nothing = nothing_to_merge(model.build())
        if nothing is None:
            raise
        raise UsageError(f"{model.name}: {nothing}; there is no plan to choose, only the whole model to time") from None


def _inputs(importance: Any, model: ModelRef, out: str | Path | None,
            plan_out: str | Path | None) -> tuple[Any, Path | None]:
    """The importance (read where a file is given, checked against a registered ``model`` at its resolution) and
    where the chosen plan goes, both output paths checked."""
    if isinstance(importance, (str, Path)):
        importance = load_importance(importance, model)
    chosen_path = Path(plan_out) if plan_out is not None else (Path(out).with_suffix(".plan.json") if out else None)
    for path in (out, chosen_path):
        if path is not None:
            check_output_path(path)
    return importance, chosen_path


def _write(result: Any, out: str | Path | None, chosen: Any, chosen_path: Path | None) -> tuple[Path, ...]:
    """``result.write(out)`` and the chosen point's plan at ``chosen_path``; the paths written."""
    paths: tuple[Path, ...] = tuple(result.write(out)) if out is not None else ()
    if chosen is not None and chosen_path is not None:
        paths += (atomic_write_text(chosen_path, chosen.plan.to_json()),)
    return paths


def plan_contexts_to_file(
    model: str | nn.Module | ModelRef,
    luts: Any,
    *,
    out: str | Path | None = None,
    importance: Mapping[int, float] | Sequence[float] | str | Path | None = None,
    keep: int | float | None = None,
    max_span: int | None = None,
    method: str = "auto",
    joint: str | Sequence[str] | None = None,
    objective: str = "worst",
    plan_out: str | Path | None = None,
) -> PlannedContexts:
    """`dsprof plan` of ``model`` (anything `ModelRef.of` takes; a `ModelRef` carries its options and resolution)
    over every context of ``luts`` (a LUT, a file, or several): `plan_contexts`. Writes its JSON to
    ``out`` (the fronts, the cross table and the plan for several contexts as CSV beside it:
    `ContextFronts.write`); with ``joint`` and ``keep``, the plan for those contexts with ``keep`` kept blocks as an
    ordinary plan file at ``plan_out`` (default: ``out`` with ``.plan.json``)."""
    if keep is not None and joint is None:
        held = f" (the LUT holds {', '.join(map(str, luts.devices()))})" if isinstance(luts, LUT) else ""
        raise UsageError(f"several contexts{held}: choose one with `pricing=Pricing(device_key=KEY)` (or "
                         "`pricing=Pricing(backend=, batch=)`) to write its plan, or give `joint='CONTEXT,CONTEXT'` for "
                         "one plan for several")
    model = ModelRef.of(model)
    importance, chosen_path = _inputs(importance, model, out, plan_out)
    with _nothing_to_plan(model):
        fronts = plan_contexts(model, luts, importance=importance, max_span=max_span, method=method, joint=joint,
                               objective=objective)
    chosen = None
    if keep is not None and fronts.joint is not None:  # a count or a fraction of the blocks, as for one context
        chosen = fronts.joint.choose(resolve_k(keep, max(p.k for p in fronts.joint.points)))
    paths = _write(fronts, out, chosen, chosen_path)
    return PlannedContexts(fronts, chosen, paths, chosen_path if chosen is not None else None)


#: The keywords of before (deprecated): each old keyword -> (the parameter that holds it now, its object, field).
_OLD_KEYWORDS = {
    **{k: ("model", "ModelRef.of", k) for k in ("name", "options", "resolution")},
    **{k: ("budget", "LatencyBudget", k) for k in ("budget_ms", "speedup")},
    **{k: ("pricing", "Pricing", k) for k in ("max_span", "device_key", "backend", "batch", "method")},
    "objective": ("joint", "Joint", "objective"),
    "accept_modified": ("lut", "LUT.load", "accept_modified"),
}


def _joint(joint: Any, moved: Mapping[str, Any]) -> tuple[Any, str]:
    """The contexts of one plan for several (None: none) and its objective: ``joint``'s (a `Joint`, or its contexts
    with the default objective), the ``objective=`` of before in place of its own."""
    if not isinstance(joint, Joint):
        joint = Joint(joint) if joint is not None else None
    objective = moved.get("objective", joint.objective if joint is not None else "worst")
    return (joint.contexts if joint is not None else None), objective


def _check_not_over_a_lut(out: str | Path | None, plan_out: str | Path | None, luts: Sequence[str | Path]) -> None:
    """Refuse (one line) an ``out`` whose files (the front, its table ``.csv``, the cross and joint tables, the plan
    file) would overwrite a LUT file the plan reads (``luts``: their files, or a loaded LUT's source):
    ``out="lut.json"`` writes ``lut.csv``."""
    if out is None:
        return
    out = Path(out)
    written = [out, out.with_suffix(".csv"), out.with_suffix(".cross.csv"), out.with_suffix(".joint.csv"),
               Path(plan_out) if plan_out is not None else out.with_suffix(".plan.json")]
    read = {Path(x).resolve() for x in luts if Path(x).is_file()}
    for path in written:
        if path.resolve() in read:
            raise UsageError(f"`out={str(out)!r}` would write {path} over the LUT it plans from: choose another "
                             "`out=`")


def plan(
    model: str | nn.Module | ModelRef,
    lut: Any,
    *,
    keep: int | float | None = None,
    budget: LatencyBudget | None = None,
    importance: Mapping[int, float] | Sequence[float] | str | Path | None = None,
    pricing: Pricing | None = None,
    joint: str | Sequence[str] | Joint | None = None,
    out: str | Path | None = None,
    plan_out: str | Path | None = None,
    tie_break: TieBreak | float | None = None,
    unit: str = PLAN_UNITS[0],
    **old: Any,
) -> Planned | PlannedContexts:
    """`dsprof plan`: the plan of lowest predicted latency for every k of ``model`` (anything
    `dsprof.models.ModelRef.of` takes: a registered name, a ``path.py:factory`` file, an ``nn.Module``, or a
    `ModelRef` carrying its name, options and resolution), from ``lut`` (a `LUT`, its file, or several;
    ``LUT.load(path, accept_modified=True)`` for a file changed since `dsprof build-lut` wrote it), priced as
    ``pricing`` says (a `dsprof.lut.Pricing`: spans of up to ``max_span`` blocks, the ``method``, and the context:
    ``device_key``, or the one ``backend`` and ``batch`` pick). One context (the one ``pricing`` picks; the only one
    the LUTs hold): `plan_to_file`, with the plan for one budget (``keep`` blocks keeping their activations, a count
    or a fraction, or ``budget``: a `dsprof.planning.LatencyBudget`, ``budget_ms`` or ``speedup``). Several
    contexts: `plan_contexts_to_file`, each context's front and what its plans lose on the others, and with
    ``joint`` (the contexts, or a `dsprof.planning.Joint` with its ``objective``: the least "worst" or "mean" loss)
    one plan for those contexts (``keep`` writes it). ``importance``: per-block losses, or the file `dsprof
    importance` wrote. The files go to ``out`` and ``plan_out`` (default: ``out`` with ``.plan.json``).
    ``tie_break`` (one context; a `dsprof.workflows.tiebreak.TieBreak`, or its seconds): the plans of the chosen k
    tied by price with it are timed here paired with the original, and the measured best is the plan written.
    ``unit``: what k counts, kept blocks (the default) or kept activations (``"activation"``: plans at the level of
    single activations, one context, `plan_to_file`). The keywords of before (``name=``, ``options=``,
    ``resolution=``; ``budget_ms=``,
    ``speedup=``; ``max_span=``, ``device_key=``, ``backend=``, ``batch=``, ``method=``; ``objective=``;
    ``accept_modified=``) still work for a release, with a `DeprecationWarning`."""
    moved = moved_keywords("dsprof.plan", old, _OLD_KEYWORDS)
    budget = as_request(budget, LatencyBudget, "budget", moved)
    pricing = as_request(pricing, Pricing, "pricing", moved)
    accept_modified = moved.get("lut", {}).get("accept_modified", False)
    budget_ms, speedup, max_span, method = budget.budget_ms, budget.speedup, pricing.max_span, pricing.method
    if keep is not None and budget.given:
        raise UsageError("a plan is chosen by `keep=` or by `budget=LatencyBudget(budget_ms=, speedup=)`: give one of them")
    model = ModelRef.of(model, **moved.get("model", {}))
    if pricing.resolution is not None:
        raise UsageError("`pricing=Pricing(resolution=)` prices a model trained at another size (a search); a plan "
                         f"prices the model at its own: give `{model.argument(pricing.resolution)}`")
    joint, objective = _joint(joint, moved.get("joint", {}))
    _check_unit(unit, importance, tie_break)
    tie_break = tie_break_of(tie_break)  # a bad budget is refused before the LUT is read
    luts = lut if isinstance(lut, (list, tuple)) else [lut]
    _check_not_over_a_lut(out, plan_out, [x.source if isinstance(x, LUT) else x for x in luts])
    lut = LUT.concat([x if isinstance(x, LUT) else LUT.load(x, accept_modified=accept_modified) for x in luts])
    picked = pricing.picks
    if joint is not None and picked:
        raise UsageError("`joint=` plans for several contexts; `pricing=Pricing(device_key=, backend=, batch=)` picks "
                         "one: give one or the other")
    if not picked and len(lut.devices()) > 1:
        if unit != PLAN_UNITS[0]:
            raise UsageError("`unit='activation'` plans one context: give `pricing=Pricing(device_key=KEY)` (or "
                             "`pricing=Pricing(backend=, batch=)`)")
        if budget.given:
            raise UsageError("several contexts: `budget=LatencyBudget(budget_ms=, speedup=)` chooses within one; give "
                             "`pricing=Pricing(device_key=KEY)` (or `keep=K` with `joint=`)")
        if tie_break is not None:
            raise UsageError("several contexts: `tie_break=` times the plans of one, on its machine; give "
                             "`pricing=Pricing(device_key=KEY)`")
        outcome = plan_contexts_to_file(model, lut, out=out, importance=importance, keep=keep, max_span=max_span,
                                        method=method, joint=joint, objective=objective, plan_out=plan_out)
        return replace(outcome, predicted={f.device: lut.predicted_count(f.device) for f in outcome.fronts.fronts})
    if joint is not None:
        raise UsageError("`joint=` plans for several contexts: give `lut=` a LUT (or a list of LUTs) holding them, "
                         "without `pricing=Pricing(device_key=)`")
    device = pricing.context(lut) if picked else None
    outcome = plan_to_file(model, lut, out=out, importance=importance, keep=keep, budget_ms=budget_ms, speedup=speedup,
                           max_span=max_span, device=device, method=method, plan_out=plan_out, tie_break=tie_break,
                           unit=unit)
    return replace(outcome, predicted=lut.predicted_count(outcome.front.device))
