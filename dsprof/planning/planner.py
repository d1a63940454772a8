"""The planner: from a model and a LUT, the exact plan of lowest predicted latency for every budget.

For each k (blocks that keep their activations, 0..n, counting only the blocks that have a removable activation: one
without is linear already, kept or linearised by price alone) the plan -- which blocks keep their activations,
which linearised blocks merge, which consecutive ones merge as one span -- that `predict_latency` prices
lowest; with per-block importance (the accuracy a block loses without its activations), the
accuracy-latency front. The search is `dp` (dynamic programming, exact); every plan it returns is priced
by `predict_plan`, the function `dsprof predict` uses, so the two show the same number.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Mapping, Sequence

from torch import nn

from .._moved import as_request, moved_keywords
from ..constants import DEFAULT_MAX_SPAN
from ..device_context import DeviceContext
from ..errors import HINT, LUTMissError, UsageError
from ..lut import LUT
from ..lut.choice import Pricing
from ..lut.lookup import span_key
from ..lut.piece import Piece, comparable
from ..lut.prices import Prices
from ..lut.predict import prices_of, predict_plan
from ..merging.partial import with_acts
from ..records.activations import is_crossing
from ..records.plan import PRESETS, Plan, same_family
from ..models.ref import ModelRef
from ..models.spans import span_ranges, span_runs
from ..runtimes import folds_activations
from .dp import Solution, best_of_k, best_per_k, block_count, pareto_front
from .front import Front, FrontPoint, PresetPoint

__all__ = ["FrontInputs", "best_plan", "context_suffix", "front_inputs", "plan_front", "settle", "span_limit", "spans_held",
           "top_plans"]


#: The keywords `plan_front` and `plan_front_acts` took one by one before (deprecated): each -> (the parameter that
#: holds it now, its object, field).
_OLD_KEYWORDS = {
    **{k: ("model", "ModelRef.of", k) for k in ("name", "options", "resolution")},
    **{k: ("pricing", "Pricing", k) for k in ("max_span", "method", "rest")},
    "device": ("pricing", "Pricing", "device_key"),
}


@dataclass(frozen=True)
class FrontInputs:
    """What both front planners (`plan_front`, `dsprof.planning.activations.plan_front_acts`) read from their one
    request (a model, a LUT, a `Pricing`): the model's reference, its prices, the widest span offered
    (``max_span``), the line saying what the LUT limited ("" where nothing) and the span width a hint to measure
    asks for (``asked``)."""

    model: ModelRef
    prices: Prices
    max_span: int
    span_limit: str
    asked: int

    @property
    def where(self) -> str:
        """What a plan of this front carries in its name (`context_suffix`)."""
        return context_suffix(self.prices.key)

    def front_fields(self, pieces: list[Piece]) -> dict[str, Any]:
        """The `Front` fields both planners fill alike (``pieces``: the block-level pieces offered), the LUT run's
        contention label (``draft``) among them."""
        prices = self.prices
        return dict(model=prices.label, name=self.model.name, options=dict(self.model.options), device=prices.key,
                    max_span=self.max_span, blocks=tuple(b.name for b in prices.blocks),
                    spans_predicted=_spans_predicted(prices, pieces), original_s=predict_plan(prices, None).total_s,
                    no_gain=_no_gain(prices), draft=prices.draft,
                    uncounted=tuple(i for i, counted in enumerate(with_acts(prices.blocks)) if not counted))


def front_inputs(verb: str, model: str | nn.Module | ModelRef, lut: LUT | str | Path | None, pricing: Pricing | None,
                 prices: Prices | None, old: Mapping[str, Any]) -> FrontInputs:
    """The one reading of a front planner's request (``verb``: the planner's name, for the warning about ``old``, the
    keywords of before): ``model`` (anything `ModelRef.of` takes), priced on ``lut`` as ``pricing`` says (its context:
    ``device_key``, or the one ``backend`` and ``batch`` leave; ``method``, ``rest``; ``resolution``: the size the LUT
    was measured at, for a model trained at another; spans of up to ``max_span`` blocks), or by ``prices`` already
    read (`prices_of`; they fix the context, method and rest). ``pricing.strict`` changes nothing: the planner
    refuses every miss (`_check_found`)."""
    moved = moved_keywords(verb, old, _OLD_KEYWORDS, stacklevel=4)
    pricing = as_request(pricing, Pricing, "pricing", moved)
    if pricing.max_span is not None and pricing.max_span < 1:
        raise UsageError(f"`pricing=Pricing(max_span=)` is at least 1 (1: no spans), got {pricing.max_span}")
    ref = ModelRef.of(model, **moved.get("model", {}))
    if prices is None:
        device = pricing.device_key
        if pricing.backend is not None or pricing.batch is not None:
            lut = lut if isinstance(lut, LUT) else LUT.load(lut)
            device = pricing.context(lut)
        at = ModelRef.of(ref, resolution=pricing.resolution)  # priced at the LUT's size where it is another
        prices = prices_of(at, lut, device=device, rest=pricing.rest, method=pricing.method)
    max_span, limited = span_limit(prices, pricing.max_span)
    return FrontInputs(ref, prices, max_span, limited, max(pricing.max_span or DEFAULT_MAX_SPAN, max_span))


def plan_front(
    model: str | nn.Module | ModelRef,
    lut: LUT | str | Path | None,
    *,
    pricing: Pricing | None = None,
    importance: Mapping[int, float] | Sequence[float] | None = None,
    prices: Prices | None = None,
    **old: Any,
) -> Front:
    """The front of ``model`` (anything `ModelRef.of` takes: a registered name, a model file, an ``nn.Module``, or a
    `ModelRef` with its name, options and resolution) on one LUT context, for every k the fastest plan, and with
    ``importance`` ({block index: accuracy loss without its activations}, or one value per block) the plans of least
    summed loss for every latency. ``pricing`` (a `dsprof.lut.Pricing`): the context (``device_key``, or the one
    ``backend`` and ``batch`` pick), ``method`` and ``rest``, and spans of up to ``max_span`` consecutive linear
    blocks (1: none), no wider than the LUT holds (`spans_held`; None: as wide as it holds); where the LUT held the
    plans to fewer blocks than asked (or than the default, `DEFAULT_MAX_SPAN`), `Front.limits` says so in one line
    (and where it holds only one variant of a block linearised alone, `alone`).
    ``prices``: the model's `prices_of` when already read (they fix the LUT context, method and rest).
    A LUT entry the planner needs and lacks raises `LUTMissError` naming it and the `dsprof measure` to run (a LUT
    of this model at another resolution: the ``resolution`` to give). The keywords of before (``name=``,
    ``options=``, ``resolution=``; ``max_span=``, ``device=``, ``method=``, ``rest=``) still work for a release, with
    a `DeprecationWarning` (`front_inputs`)."""
    got = front_inputs("dsprof.planning.plan_front", model, lut, pricing, prices, old)
    prices, max_span = got.prices, got.max_span
    loss = _importance(importance, len(prices.blocks))
    choices = _options(prices, max_span, loss)
    _check_found(prices, choices, max_span, hint_span=got.asked)
    ctx = _Context(prices, got.model.name, dict(got.model.options), loss is not None)
    pieces, n, count = choices, len(prices.blocks), ctx.count
    where = got.where  # a plan is named after its context: plans of two contexts never share a name
    points = tuple(ctx.point(s, f"front-k{k}-{where}") for k, s in best_per_k(n, pieces, count=count).items())
    least_loss, pareto = None, None
    if loss is not None:
        by_loss = best_per_k(n, pieces, score=lambda o: (-o.loss, o.gain_s), count=count)
        least_loss = tuple(ctx.point(s, f"least-loss-k{k}-{where}") for k, s in by_loss.items())
        pareto = tuple(ctx.point(s, f"pareto-{i}-{where}") for i, s in enumerate(pareto_front(n, pieces)))
    return Front(
        **got.front_fields(choices), method=prices.used, points=points, least_loss=least_loss, pareto=pareto,
        presets=tuple(_presets(ctx, points, loss)), limits=tuple(filter(None, [got.span_limit, variants_note(prices)])),
    )


def top_plans(prices: Prices, k: int, count: int, *, max_span: int,
              model: str | nn.Module | ModelRef) -> tuple[FrontPoint, ...]:
    """The ``count`` plans of ``model`` (anything `ModelRef.of` takes: the reference ``prices`` were read for, whose
    name and options the plans carry) with ``k`` kept blocks that ``prices`` price fastest, fastest first, each priced
    as the front prices its plans (`predict_plan`): the exact k-best search over the pieces the planner offers
    (`dp.best_of_k`; spans of up to ``max_span`` blocks, the front's). The first is a fastest plan of that k, as the front's (of equal prices,
    possibly another). Each is named after its content and context (``tied-k3-<digest>-torch``), so that plans timed
    together, or in two runs, never share a name (`dsprof.records.plan.named_plans`)."""
    if count < 1:
        raise UsageError(f"count is at least 1 plan, got {count}")
    choices = _options(prices, max_span, None)
    _check_found(prices, choices, max_span)
    ref = ModelRef.of(model)
    ctx, where = _Context(prices, ref.name, dict(ref.options)), context_suffix(prices.key)
    out = []
    for solution in best_of_k(len(prices.blocks), choices, k, count, kept=ctx.count):
        plan = ctx.plan(solution, "")
        out.append(ctx.point(solution, f"tied-k{k}-{plan.digest[:8]}-{where}"))
    return tuple(out)


def spans_held(prices: Prices, limit: int | None = None) -> int:
    """The widest span (in blocks) up to which the LUT holds every span of ``prices``' model in its context, at most
    ``limit``: 1 where it holds none of two blocks (or the model has no two consecutive blocks a span can merge)."""
    runs = span_runs(prices.blocks, (0,) * len(prices.blocks))
    longest = max((len(r) for r in runs), default=0)
    held = 1
    for width in range(2, (longest if limit is None else min(limit, longest)) + 1):
        if not all(prices.span(run[a], run[a + width - 1] + 1).found for run in runs
                   for a in range(len(run) - width + 1)):
            break
        held = width
    return held


def span_limit(prices: Prices, asked: int | None) -> tuple[int, str]:
    """The widest span the planner offers -- ``asked`` (None: `DEFAULT_MAX_SPAN` at most where the LUT holds none
    wider, else as wide as it holds), no wider than the LUT holds (`spans_held`) -- and one line saying what the LUT
    limited ("" where it limited nothing)."""
    runs = span_runs(prices.blocks, (0,) * len(prices.blocks))
    longest = max((len(r) for r in runs), default=0)
    wanted = asked if asked is not None else max(DEFAULT_MAX_SPAN, spans_held(prices))
    if wanted <= 1 or longest < 2:
        return wanted, ""
    held = spans_held(prices, wanted)
    if held >= min(wanted, longest):
        return wanted, ""
    what = (f"{asked} asked" if asked is not None else f"the default {DEFAULT_MAX_SPAN}")
    lacks = "none of two blocks" if held == 1 else f"every span of up to {held} blocks, not all of {held + 1}"
    return held, (f"spans up to {held} block{'s' if held > 1 else ''}, not {what}: the LUT holds {lacks} for "
                  f"{prices.label} on {prices.key} (measure wider spans to plan them)")


def best_plan(model: str | nn.Module | ModelRef, lut: LUT | str | Path, keep: Sequence[int], *,
              max_span: int = DEFAULT_MAX_SPAN, prices: Prices | None = None, **pricing: Any) -> Plan:
    """For the fixed ``keep`` list, the plan of ``model`` (anything `ModelRef.of` takes; a `ModelRef` carries its
    name, options and resolution) with its ``merge`` and ``spans`` filled that the LUT prices lowest:
    what `dsprof merge --spans auto --lut` deploys (`settle` on the LUT's prices). ``pricing``: `prices_of`'s
    keywords (device, method, rest), or ``prices`` already read."""
    ref = ModelRef.of(model)
    prices = prices or prices_of(ref, lut, **pricing)
    keep = tuple(int(k) for k in keep)
    if len(keep) != len(prices.blocks):
        raise UsageError(f"keep has {len(keep)} entries but {prices.label} has {len(prices.blocks)} blocks")
    settled = settle(prices, Plan(ref.name, keep, dict(ref.options)), max_span=max_span)
    return replace(settled, name="best-spans", source=f"dsprof plan ({prices.key})")


def settle(costs: Any, plan: Plan, *, max_span: int | None = None, strict: bool = True) -> Plan:
    """``plan`` with its ``merge`` list (and, with ``max_span``, its ``spans``) chosen by the planner's exact search
    for its fixed ``keep``: the one place that decides which linearised blocks and spans merge (`dsprof.planning.decide`
    calls it for every command that builds a merged model). ``costs`` is the price table: a LUT's `Prices` or MACs
    (`dsprof.lut.macs.MacPrices`). Each block the plan linearises alone is offered as its table deploys it cheaper
    (`dsprof.lut.piece.cheaper`); ``max_span`` None keeps the plan's own spans, else every span of up to
    ``max_span`` blocks (`span_ranges`) is offered and the search keeps those that save most. A lone block whose
    merged or unmerged entry the LUT lacks raises the table's miss (with ``strict=False`` it counts as merged, the
    miss named where it is priced); a missing span entry raises as the planner does (`_check_found`)."""
    n, keep, border = len(costs.blocks), tuple(plan.keep), plan.border
    # a crossing span (a plan with acts: its ends keep some activations) is the plan's own, kept whatever max_span
    crossing = [s for s in plan.spans or () if is_crossing(plan.acts, s)]
    forced = {a: b for a, b in plan.spans or () if (a, b) not in crossing} if max_span is None else {}
    inside = {i for start, stop in [*forced.items(), *crossing] for i in range(start, stop)}
    pieces, undecided = [], []
    crossed = {i for start, stop in crossing for i in range(start, stop)}
    for i in range(n):
        if i in crossed:
            continue
        if keep[i]:
            pieces.append(costs.kept(i))
        elif i not in inside:
            pieces.append(costs.linearized(i, None, border))
            if not comparable(costs.linearized(i, True, border), costs.linearized(i, False, border)):
                undecided.append(i)
    pieces += [costs.span(start, stop) for start, stop in forced.items()]
    pieces += [Piece(start, stop, "crossing", 0.0, 0.0, kept=True) for start, stop in crossing]  # fixed: no choice
    if max_span is not None:
        pieces += [costs.span(start, stop) for start, stop in span_ranges(costs.blocks, keep, max_span)
                   if not any(a < stop and start < b for a, b in crossing)]
    if strict and max_span is not None:  # as the planner names a miss
        _check_found(costs, pieces, max_span, spans_by="max_span={}")  # merge(max_span=), best_plan(max_span=)
    elif strict and undecided:
        raise costs.hints.undecided(undecided)
    (solution,) = best_per_k(n, pieces).values()
    merge, spans = [False] * n, []
    for p in solution.pieces:
        if p.stop - p.start > 1:
            spans.append((p.start, p.stop))
        for i in range(p.start, p.stop):
            merge[i] = p.merges or (p.variant == "crossing" and not keep[i])  # a crossing's linearised blocks merge
    return replace(plan, merge=tuple(merge), spans=tuple(spans) or None)


def context_suffix(context: DeviceContext) -> str:
    """What a plan of ``context``'s front carries in its name (``front-k3-onnxruntime``): the backend, and the device
    where it is not the CPU (``torch-cuda0``), so that the plans that `dsprof plan` writes for two backends, measured
    together, keep two names (`dsprof.records.plan.named_plans`)."""
    word = lambda text: "".join(c for c in text if c.isascii() and (c.isalnum() or c == "-"))  # noqa: E731  (data)
    return word(context.backend) + ("" if context.device == "cpu" else "-" + word(context.device))


class _Context:
    """What turns a DP solution into a priced plan of this model."""

    def __init__(self, prices: Prices, name: str, options: dict[str, Any], with_loss: bool = False) -> None:
        self.prices, self.name, self.options, self.with_loss = prices, name, options, with_loss
        self.counted = with_acts(prices.blocks)  # the blocks k counts: those with a removable activation
        self.count = block_count(self.counted)

    def plan(self, solution: Solution, label: str) -> Plan:
        n = len(self.prices.blocks)
        keep, merge, spans = [1] * n, [False] * n, []
        for o in solution.pieces:
            if o.kept:
                continue
            if o.stop - o.start > 1:
                spans.append((o.start, o.stop))
            for i in range(o.start, o.stop):
                keep[i] = 0
                merge[i] = o.merges
        return Plan(self.name, tuple(keep), self.options, merge=tuple(merge), spans=tuple(spans) or None, name=label,
                    source=f"dsprof plan ({self.prices.key})")

    def point(self, solution: Solution, label: str) -> FrontPoint:
        plan = self.plan(solution, label)
        pred = predict_plan(self.prices, plan, strict=True, name=self.name)
        return FrontPoint(sum(map(self.count, solution.pieces)), plan, pred.speedup_estimate, pred.latency_estimate,
                          float(solution.loss) if self.with_loss else None)


def _importance(importance: Mapping[int, float] | Sequence[float] | None, n: int) -> list[float] | None:
    if importance is None:
        return None
    if isinstance(importance, Mapping):
        values = {int(k): float(v) for k, v in importance.items()}
        missing = [i for i in range(n) if i not in values]
        extra = sorted(set(values) - set(range(n)))
        if missing or extra:
            raise UsageError(f"importance needs one value per block 0..{n - 1}; "
                             + (f"missing {missing}" if missing else f"unknown blocks {extra}"))
        return [values[i] for i in range(n)]
    values = [float(v) for v in importance]
    if len(values) != n:
        raise UsageError(f"importance needs one value per block ({n}), got {len(values)}")
    return values


def _options(prices: Prices, max_span: int, loss: list[float] | None) -> list[Piece]:
    """Every piece a plan can use, priced: each block kept or linearised alone (merged or not as the LUT's rule
    decides, the way `predict` prices a plan without a merge list), each span of 2..max_span blocks inside a run of
    spannable blocks (`span_ranges`). Nothing is held back: a block that buys nothing linearised alone is still
    offered, so the front is the fastest plan of every k under the prices `predict` shows (issue #36); `_no_gain`
    names such blocks."""
    n = len(prices.blocks)
    # exact sums of the losses: a span's loss and its blocks' losses added one by one must tie exactly
    loss = [Fraction(v) for v in loss] if loss is not None else [Fraction(0)] * n
    out = []
    for i in range(n):
        out.append(prices.kept(i))
        out.append(replace(alone(prices, i), loss=loss[i]))
    for start, stop in span_ranges(prices.blocks, (0,) * n, max_span):
        out.append(replace(prices.span(start, stop), loss=sum(loss[start:stop])))
    return out


def alone(prices: Prices, i: int) -> Piece:
    """Block ``i`` linearised alone as the planner offers it: merged or not as the LUT's rule decides, or, where the
    LUT holds only the other variant of it (a LUT measured without ``merged``, say), that one: the planner plans with
    the variants the LUT holds (`variants_note` says where)."""
    piece = prices.linearized(i)
    if not piece.found:
        other = prices.linearized(i, piece.variant != "merged")
        if other.found:
            return other
    return piece


def variants_note(prices: Prices) -> str:
    """One line naming what the variants the LUT holds limit: the blocks that `alone` plans in the one variant the
    LUT holds of them, merged or unmerged, where its rule cannot compare the two (a LUT measured without ``merged``,
    or without the ``linear`` entry of a block that deploys unmerged in a larger form: `Prices.unmerged`), and the
    blocks priced unmerged as built though an activation they lose may cost time on this runtime (a LUT measured
    before ``linear`` was timed of them: `dsprof.runtimes.folds_activations`); "" where there is none."""
    swapped = [i for i in range(len(prices.blocks)) if alone(prices, i).found
               and not comparable(prices.linearized(i, True), prices.linearized(i, False))]
    as_built = tuple(i for i, block in enumerate(prices.blocks)
                     if prices.unmerged(i)[0] == "original" and not folds_activations(block))
    if not swapped and not as_built:
        return ""
    by = {}
    for i in swapped:
        by.setdefault(alone(prices, i).variant, []).append(i)
    parts = [f"blocks {_indices(tuple(v))} linearised alone are planned {'merged' if k == 'merged' else 'unmerged'}"
             f" ({k}): the LUT holds no {'unmerged' if k == 'merged' else 'merged'} entry of them"
             for k, v in sorted(by.items())]
    if as_built:
        parts.append(f"blocks {_indices(as_built)} left unmerged are priced as built (original): the LUT holds no "
                     "linear entry of them, and an activation they lose (not ReLU) may cost time on this runtime")
    needed = {"linear" if k == "merged" else "merged" for k in by} | ({"linear"} if as_built else set())
    timed = " and ".join(sorted(needed))
    return (f"variants: {'; '.join(parts)} for {prices.label} on {prices.key}; a `dsprof measure` (or "
            f"dsprof.measure) that times them {timed} lets the planner compare both")


def _indices(values: tuple[int, ...]) -> str:
    return " ".join(map(str, values))


def _no_gain(prices: Prices) -> tuple[int, ...]:
    """The blocks that buy nothing linearised alone: as the LUT's rule deploys them (merged where that pays), they
    are predicted no faster than with their activations. Information, not a constraint: the front may still
    linearise one where a k needs it, or take it into a span."""
    return tuple(i for i in range(len(prices.blocks)) if not alone(prices, i).saving_s > 0 and alone(prices, i).found)


def _check_found(prices: Prices, choices: list[Piece], max_span: int, hint_span: int | None = None, *,
                 spans_by: str = "pricing=Pricing(max_span={})") -> None:
    """One line naming what the LUT lacks and what to time (a `MeasureHint`, spans of up to ``hint_span`` blocks,
    default ``max_span``): first whether the LUT holds another model (or this one at another resolution), then the
    first entry missing; where spans lack entries, the widest the LUT holds every span of, to plan with, as the
    caller's parameter ``spans_by`` sets it (the planner's `Pricing`; `settle`'s callers take ``max_span=``)."""
    missing = list(prices.missing) + [p.missing for p in choices if p.missing]
    if not missing:
        return
    hint = prices.hints.measure_hint(hint_span or max_span)  # spans as wide as asked, where the LUT held them narrower
    measure = f"{HINT} and rebuild the LUT with `dsprof.build_lut()`"
    note = prices.lookup.other_model_note(prices.label)
    if note is not None:
        raise LUTMissError(f"{note}; or measure {prices.label} on {prices.key}: run {measure}", hint=hint)
    more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
    spans = any(not p.found and p.stop - p.start > 1 for p in choices)
    held = spans_held(prices, max_span)  # a width the LUT holds every span of
    without = (f"; or plan with the spans it holds: `{spans_by.format(held)}`" if held > 1 else
               f"; or plan without spans: `{spans_by.format(1)}`") if spans and max_span > 1 else ""
    raise LUTMissError(
        f"the LUT {prices.lookup.lut.source} lacks {missing[0]}{more} for {prices.label} on {prices.key}: run "
        f"{measure}{without}", hint=hint
    )


def _presets(ctx: _Context, points: tuple[FrontPoint, ...], loss: list[float] | None) -> list[PresetPoint]:
    """The paper's plans for this model and options, priced and set against the front plan of their k."""
    by_k = {p.k: p for p in points}
    out = []
    for preset_name, preset in sorted(PRESETS.items()):
        if not same_family(preset.model, ctx.name) or dict(preset.options) != ctx.options \
                or len(preset.keep) != len(ctx.prices.blocks):
            continue
        pred = predict_plan(ctx.prices, preset, strict=True, name=ctx.name)
        k = sum(kept for kept, counted in zip(preset.keep, ctx.counted) if counted)
        front = by_k[k].latency_s
        importance = sum(loss[i] for i in preset.linearized) if loss is not None else None
        out.append(PresetPoint(preset_name, k, pred.speedup_estimate, pred.latency_estimate, front, importance))
    return out


def _spans_predicted(prices: Prices, choices: list[Piece]) -> tuple[int, int]:
    """(of the span entries the planner read, how many were predicted from another context (`dsprof.measure_few()`),
    how many it read): each distinct convolution once."""
    keys = {span_key(prices.blocks, o.start, o.stop) for o in choices if o.stop - o.start > 1}
    entries = [prices.lookup(k, "merged") for k in keys]
    return sum(e is not None and e.predicted for e in entries), len(keys)


#: The planner's reading of per-block importance ({block index: loss} or one value per block, as one value per block),
#: which the plan for several contexts (`dsprof.planning.minimax`) reads too.
importance_values = _importance
