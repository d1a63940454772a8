"""The planner at the level of single activations (issue #47, item 2): ``unit="activation"``.

The block-level planner (`dsprof.planning.planner.plan_front`) offers, for every block, the block kept, the block
linearised alone (merged or not) and spans of linearised blocks; its DP (`dsprof.planning.dp.best_per_k`) counts the
blocks kept. Here the same DP counts the *activations* kept, over the same pieces plus one more kind: a block that
keeps some of its activations, the runs between them merged (``fused-expand``, ``fused-project`` for a block of two,
``fused-010``... for a block of more: `Prices.partial`, the LUT's entries of those variants,
`dsprof.records.activations.partial_states`). A kept block counts its removable activations, a partial block those
its state keeps, a linearised block or a span none; and crossing spans (a span whose end blocks keep some activations,
`crossing_choices`), which count those their end blocks keep. So the block-level plans are among the candidates (the activation front is never
slower than the block front at the same number of kept activations, and with no partial piece offered, it is the
block front counted in activations); every piece adds its own saving, and the DP is exact as the block-level one is.

What a partial state merges and how is `dsprof.merging.partial`'s; its rules (runs, names, segments) are
`dsprof.records.activations`'. Partial states that the LUT does not hold are not offered, and `Front.limits` says so
(the variants to measure); a block of more than `dsprof.records.activations.MAX_TIMED_ACTS` removable activations
is offered whole (kept or linearised).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from torch import nn

from ..lut import LUT
from ..lut.choice import Pricing
from ..lut.piece import Piece
from ..lut.prices import Prices
from ..models.ref import ModelRef
from ..names import ACT_VARIANTS, CROSSING_VARIANT, PLAN_UNITS
from ..records.activations import crossing_candidates, is_partial_variant, partial_states
from ..records.plan import Plan
from .dp import Solution, best_per_k
from .front import Front
from .planner import _Context, _check_found, _options, front_inputs, variants_note

__all__ = ["UNITS", "act_choices", "act_count", "crossing_choices", "plan_front_acts"]

UNITS = PLAN_UNITS  # what the planner counts as kept: blocks (the default) or single activations


def act_choices(prices: Prices, max_span: int) -> tuple[list[Piece], list[Piece]]:
    """(the block-level pieces, the partial pieces the LUT holds): every piece a plan at the level of activations
    can use, priced; the partial pieces include the crossing spans of up to ``max_span`` blocks that the LUT holds
    (`crossing_choices`)."""
    blocks = _options(prices, max_span, None)
    partial = []
    for i, layout in enumerate(prices.layouts):
        for variant in partial_states(layout):
            piece = prices.partial(i, variant)
            if piece.found:
                partial.append(piece)
    return blocks, partial + [piece for piece, _ in crossing_choices(prices, max_span).values()]


def crossing_choices(prices: Prices, max_span: int) -> dict[int, tuple[Piece, tuple[tuple[int, ...], ...]]]:
    """{id of the piece: (the piece, the ``acts`` of its blocks)} for every crossing span of 2..``max_span`` blocks
    (`dsprof.records.activations.crossing_candidates`) whose entry the LUT holds (`Prices.crossing`, which returns
    one piece object per span and state: two states priced alike stay two choices)."""
    layouts = prices.layouts
    kept = [(1,) * layout.n_acts for layout in layouts]
    out = {}
    for (start, stop), inside in crossing_candidates(layouts, max_span):
        piece = prices.crossing(start, stop, kept[:start] + list(inside) + kept[stop:])
        if piece.found:
            out[id(piece)] = (piece, inside)
    return out


def act_count(prices: Prices, crossings: dict[int, tuple[Piece, tuple[tuple[int, ...], ...]]] | None = None
              ) -> Callable[[Piece], int]:
    """What a piece adds to the number of kept activations: a kept block its removable activations, a partial block
    those its state keeps (`partial_states`), a crossing span (``crossings``: `crossing_choices`) those its end
    blocks keep, anything else none."""
    layouts = prices.layouts
    crossings = crossings or {}

    def count(o: Piece) -> int:
        if o.variant == CROSSING_VARIANT:
            return sum(map(sum, crossings[id(o)][1]))
        if is_partial_variant(o.variant):
            return sum(partial_states(layouts[o.start])[o.variant])
        return layouts[o.start].n_acts if o.kept else 0
    return count


class _ActContext(_Context):
    """A DP solution as a plan with its ``acts``."""

    crossings: dict[int, tuple[Piece, tuple[tuple[int, ...], ...]]] = {}  # `crossing_choices`

    def plan(self, solution: Solution, label: str) -> Plan:
        layouts = self.prices.layouts
        n = len(layouts)
        acts: list[tuple[int, ...]] = [(1,) * lay.n_acts for lay in layouts]
        keep, merge, spans = [1] * n, [False] * n, []
        for o in solution.pieces:
            if o.variant == CROSSING_VARIANT:  # its end blocks keep some activations, those inside none (merged)
                spans.append((o.start, o.stop))
                for i, block_acts in zip(range(o.start, o.stop), self.crossings[id(o)][1]):
                    acts[i], keep[i], merge[i] = block_acts, int(any(block_acts)), not any(block_acts)
                continue
            if is_partial_variant(o.variant):
                acts[o.start] = partial_states(layouts[o.start])[o.variant]
                continue
            if o.kept:
                continue
            if o.stop - o.start > 1:
                spans.append((o.start, o.stop))
            for i in range(o.start, o.stop):
                acts[i], keep[i], merge[i] = (0,) * layouts[i].n_acts, 0, o.merges
        # ``keep`` as the DP chose, not derived from ``acts``: a block with no removable activation (a linear chain,
        # EfficientNet-B0's projection and head) has ``acts`` [] either way, and kept or linearised it deploys and is
        # priced differently
        return Plan(self.name, tuple(keep), options=self.options, acts=tuple(acts), merge=tuple(merge),
                    spans=tuple(sorted(spans)) or None, name=label, source=f"dsprof plan ({self.prices.key}, unit activation)")

    def point(self, solution: Solution, label: str):
        point = super().point(solution, label)
        return type(point)(sum(map(sum, point.plan.acts)), point.plan, point.speedup_estimate, point.latency_estimate,
                           point.importance)


def plan_front_acts(
    model: str | nn.Module | ModelRef,
    lut: LUT | str | Path | None,
    *,
    pricing: Pricing | None = None,
    prices: Prices | None = None,
    partial: bool = True,
    **old: Any,
) -> Front:
    """The front of ``model`` at the level of activations: for every number k of activations kept, the fastest plan
    (a `Plan` with ``acts``; `FrontPoint.k` is that number). ``model``, ``lut``, ``pricing`` and ``prices`` (and the
    keywords of before) are `plan_front`'s, read by the same `front_inputs` (no importance: the importance file
    scores blocks). ``partial=False`` offers no partial block: the block plans only, counted in activations."""
    got = front_inputs("dsprof.planning.activations.plan_front_acts", model, lut, pricing, prices, old)
    prices, max_span = got.prices, got.max_span
    blocks, partial_pieces = act_choices(prices, max_span)
    _check_found(prices, blocks, max_span, hint_span=got.asked)
    pieces = blocks + (partial_pieces if partial else [])
    ctx = _ActContext(prices, got.model.name, dict(got.model.options))
    ctx.crossings = crossing_choices(prices, max_span) if partial else {}
    n = len(prices.blocks)
    points = tuple(ctx.point(s, f"front-a{k}-{got.where}")
                   for k, s in best_per_k(n, pieces, count=act_count(prices, ctx.crossings)).items())
    offered = sum(len(partial_states(lay)) for lay in prices.layouts)
    held = len(partial_pieces) - len(ctx.crossings)
    lacking = (f"the LUT holds {held} of the {offered} partial states of {prices.label}'s blocks "
               f"(variants {', '.join(ACT_VARIANTS[:2])}, and fused-<kept 0/1> for blocks of more than two "
               "activations); the others are planned whole"
               if partial and held < offered else None)
    return Front(
        **got.front_fields(blocks), method=f"{prices.used}, unit activation", points=points,
        limits=tuple(filter(None, [got.span_limit, variants_note(prices), lacking])),
    )
