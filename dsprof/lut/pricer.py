"""Pricing many plans of one model fast (issue #36): the pieces read once, each plan a sum.

`Pricer` is built once per (model, LUT, context) from the model's `Prices` and prices a plan with the same
pieces, the same lone-block choice (`Prices.linearized`) and the same interval (`dsprof.lut.interval.plan_bounds`)
as `dsprof.lut.predict_plan`, without the per-block table a `Prediction` carries: what the planner's exactness
tests, `benchmarks/planner_vs_random.py` and anyone who ranks thousands of plans call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..errors import LUTMissError
from .piece import Piece
from .prices import Prices
from .interval import Estimate, Estimated, plan_bounds

__all__ = ["Price", "Pricer"]


@dataclass(frozen=True)
class Price(Estimated):
    """A plan's predicted speed-up over the original and its latency (seconds per batch), each an `Estimate` with
    its 95 % interval: the numbers of a `dsprof.lut.Prediction`, without its per-block table."""

    speedup_estimate: Estimate
    latency_estimate: Estimate


class Pricer:
    """Prices plans of one model in one LUT context (``prices``: `dsprof.lut.predict.prices_of`)."""

    def __init__(self, prices: Prices) -> None:
        self.prices = prices
        self.n = len(prices.blocks)
        self.original_s = prices.total_s(prices.pieces(None))

    def pieces(self, keep: Sequence[int], spans: Sequence[tuple[int, int]] = (),
               merge: Sequence[bool] | None = None, border: str = "in_front") -> list[Piece]:
        """The pieces of a plan (`Prices.pieces_of`: the walk `predict_plan` takes too)."""
        return self.prices.pieces_of(keep, spans, merge, border)

    def price(self, plan: Any = None, *, keep: Sequence[int] | None = None,
              spans: Sequence[tuple[int, int]] = ()) -> Price:
        """The `Price` of ``plan`` (a `dsprof.planning.Plan`: its keep, spans, merge list, border and ``acts``), or of ``keep``
        and ``spans`` with the LUT's merges. A piece the LUT lacks raises `LUTMissError` naming it."""
        if plan is not None:  # what it deploys, partial blocks of a plan at the level of activations included
            pieces = self.prices.pieces(plan)
        else:
            pieces = self.pieces(keep, spans)
        missing = next((p.missing for p in pieces if p.missing), None)
        if missing is not None:
            raise LUTMissError(f"the LUT {self.prices.lookup.lut.source} lacks {missing} for {self.prices.label} "
                               f"on {self.prices.key}")
        b = plan_bounds(pieces, self.prices.total_s(pieces), self.original_s, self.prices.terms)
        return Price(b.speedup, b.latency)
