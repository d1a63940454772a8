"""What a plan chosen for one device context loses on another: the cross table of `dsprof plan` over several contexts.

For an ordered pair of contexts (A, B) and each k, the front plan of A (`Front.at_k`, with the ``merge`` list A's LUT
chose) priced on B by `predict_plan`, against B's own front plan of that k: ``loss`` = its predicted latency over
the latency of B's plan, minus 1 (0.12 = 12 % slower). On its own context a plan's loss is 0 by construction.
Intervals: the speed-ups and the latency are the `Estimate` s `predict_plan` built (`dsprof.lut.interval.plan_bounds`,
what the front and `predict` show for the same plan); the loss is `dsprof.lut.predict.predict_ratio`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..device_context import DeviceContext
from ..errors import LUTMissError
from ..lut.interval import Estimate, Estimated
from ..lut.prices import Prices
from ..lut.predict import predict_plan, predict_ratio
from ..records.plan import Plan
from .front import Front

__all__ = ["CrossPoint", "cross_points"]


@dataclass(frozen=True)
class CrossPoint(Estimated):
    """The front plan of ``chosen_for`` with ``k`` kept blocks, priced on ``runs_on``: its predicted speed-up over the
    original and latency (seconds per batch) on ``runs_on`` (each an `Estimate`, as `predict_plan` builds it),
    ``own_latency_s`` of ``runs_on``'s own front plan of that k and that plan's speed-up (``own_speedup_estimate``,
    the one its front shows), and the ``loss_estimate`` (relative, with its interval)."""

    chosen_for: DeviceContext
    runs_on: DeviceContext
    k: int
    plan: Plan
    speedup_estimate: Estimate
    latency_estimate: Estimate
    own_latency_s: float
    own_speedup_estimate: Estimate
    loss_estimate: Estimate
    #: where either context's figures are drafts, why (`Front.draft`: a contended LUT run, or no piece timed inside
    #: the model; both joined by "; "), else ""
    draft: str = ""

    @property
    def loss(self) -> float:
        return self.loss_estimate.value

    @property
    def loss_low(self) -> float:
        return self.loss_estimate.low

    @property
    def loss_high(self) -> float:
        return self.loss_estimate.high

    @property
    def own_speedup(self) -> float:
        return self.own_speedup_estimate.value

    @property
    def own_speedup_low(self) -> float:
        return self.own_speedup_estimate.low

    @property
    def own_speedup_high(self) -> float:
        return self.own_speedup_estimate.high

    def to_dict(self, labels: dict[DeviceContext, str]) -> dict[str, Any]:
        return {"chosen_for": str(self.chosen_for), "chosen_for_label": labels[self.chosen_for],
                "runs_on": str(self.runs_on), "runs_on_label": labels[self.runs_on], "k": self.k,
                "keep": list(self.plan.keep), "merge": list(self.plan.merge or ()),
                "spans": [list(s) for s in self.plan.spans or ()], "latency_s": self.latency_s, "low_s": self.low_s,
                "high_s": self.high_s, "own_latency_s": self.own_latency_s, "loss": self.loss,
                "loss_low": self.loss_low, "loss_high": self.loss_high, "speedup": self.speedup,
                "speedup_low": self.speedup_low, "speedup_high": self.speedup_high, "own_speedup": self.own_speedup,
                "own_speedup_low": self.own_speedup_low, "own_speedup_high": self.own_speedup_high, "draft": self.draft}


def cross_points(chosen: Front, prices: Prices, own: Front) -> list[CrossPoint]:
    """For every k of both fronts, ``chosen``'s plan priced on ``prices`` (another context's, or the same) against
    ``own`` (the front of ``prices``' context): `CrossPoint` s in k order; none where ``prices``' LUT lacks a piece of
    ``chosen``'s plan (a span wider than it holds: each front plans with the spans its own LUT holds)."""
    out = []
    own_by_k = {p.k: p for p in own.points}
    draft = "; ".join(sorted({part for front in (chosen, own) for part in front.draft.split("; ") if part}))
    for point in chosen.points:
        if point.k not in own_by_k:
            continue
        mine = own_by_k[point.k]
        try:
            pred = predict_plan(prices, point.plan, strict=True)
            loss = predict_ratio(prices, point.plan, mine.plan).shifted(-1)
        except LUTMissError:  # a span the other context's LUT does not hold (each front plans with its own): no row
            continue
        out.append(CrossPoint(chosen.device, own.device, point.k, point.plan, pred.speedup_estimate,
                              pred.latency_estimate, mine.latency_s, mine.speedup_estimate, loss, draft))
    return out
