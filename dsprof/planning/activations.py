"""The planner at the level of single activations (issue #47, item 2): ``unit="activation"``.

The block-level planner (`dsprof.planning.planner.plan_front`) offers, for every block, the block kept, the block
linearised alone (merged or not) and spans of linearised blocks; its DP (`dsprof.planning.dp.best_per_k`) counts the
blocks kept. Here the same DP counts the *activations* kept, over the same pieces plus one more kind: a block that
keeps one of its two activations, the run beside it merged (``fused-expand``, ``fused-project``: `Prices.partial`,
the LUT's entries of those variants). A kept block counts its removable activations, a partial block one, a
linearised block or a span none. So the block-level plans are among the candidates (the activation front is never
slower than the block front at the same number of kept activations, and with no partial piece offered, it is the
block front counted in activations); every piece adds its own saving, and the DP is exact as the block-level one is.

What a partial state merges and how is `dsprof.merging.partial`'s; its rules (runs, names, segments) are
`dsprof.records.activations`'. Partial states that the LUT does not hold are not offered, and `Front.limits` says so
(the variants to measure); a block of more than two removable activations is offered whole (kept or linearised).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from torch import nn

from ..lut import LUT
from ..lut.choice import Pricing
from ..lut.piece import Piece
from ..lut.prices import Prices
from ..merging.partial import act_layouts
from ..models.ref import ModelRef
from ..names import ACT_VARIANTS, PLAN_UNITS
from ..records.activations import partial_states
from ..records.plan import Plan
from .dp import Solution, best_per_k
from .front import Front
from .planner import _Context, _check_found, _options, front_inputs, variants_note

__all__ = ["UNITS", "act_choices", "act_count", "plan_front_acts"]

UNITS = PLAN_UNITS  # what the planner counts as kept: blocks (the default) or single activations


def act_choices(prices: Prices, max_span: int) -> tuple[list[Piece], list[Piece]]:
    """(the block-level pieces, the partial pieces the LUT holds): every piece a plan at the level of activations
    can use, priced."""
    blocks = _options(prices, max_span, None)
    partial = []
    for i, layout in enumerate(act_layouts(prices.blocks)):
        for variant in partial_states(layout):
            piece = prices.partial(i, variant)
            if piece.found:
                partial.append(piece)
    return blocks, partial


def act_count(prices: Prices) -> Callable[[Piece], int]:
    """What a piece adds to the number of kept activations: a kept block its removable activations, a partial block
    one, anything else none."""
    counts = [layout.n_acts for layout in act_layouts(prices.blocks)]
    return lambda o: 1 if o.variant in ACT_VARIANTS else counts[o.start] if o.kept else 0


class _ActContext(_Context):
    """A DP solution as a plan with its ``acts``."""

    def plan(self, solution: Solution, label: str) -> Plan:
        layouts = act_layouts(self.prices.blocks)
        n = len(layouts)
        acts: list[tuple[int, ...]] = [(1,) * lay.n_acts for lay in layouts]
        keep, merge, spans = [1] * n, [False] * n, []
        for o in solution.pieces:
            if o.variant in ACT_VARIANTS:
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
                    spans=tuple(spans) or None, name=label, source=f"dsprof plan ({self.prices.key}, unit activation)")

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
    n = len(prices.blocks)
    points = tuple(ctx.point(s, f"front-a{k}-{got.where}")
                   for k, s in best_per_k(n, pieces, count=act_count(prices)).items())
    offered = sum(len(partial_states(lay)) for lay in act_layouts(prices.blocks))
    lacking = (f"the LUT holds {len(partial_pieces)} of the {offered} partial states of {prices.label}'s blocks "
               f"(variants {', '.join(ACT_VARIANTS[:2])}); the others are planned whole"
               if partial and len(partial_pieces) < offered else None)
    return Front(
        **got.front_fields(blocks), method=f"{prices.used}, unit activation", points=points,
        limits=tuple(filter(None, [got.span_limit, variants_note(prices), lacking])),
    )
