"""What a plan chosen for one device context loses on another: the cross table of `dsprof plan` over several contexts.

For an ordered pair of contexts (A, B) and each k, the front plan of A (`Front.at_k`, with the ``merge`` list A's LUT
chose) priced on B by `predict_plan`, against B's own front plan of that k: ``loss`` = its predicted latency over
the latency of B's plan, minus 1 (0.12 = 12 % slower). On its own context a plan's loss is 0 by construction.
Intervals: `dsprof.plan.ratio`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..device_context import DeviceContext
from ..lut.prices import Prices
from ..lut.predict import predict_plan
from .plan import Plan
from .front import Front
from .ratio import plan_ratio

__all__ = ["CrossPoint", "cross_points"]


@dataclass(frozen=True)
class CrossPoint:
    """The front plan of ``chosen_for`` with ``k`` kept blocks, priced on ``runs_on``: predicted latency (seconds per
    batch, 95 % interval from `predict_plan`), ``own_latency_s`` of ``runs_on``'s own front plan of that k,
    ``loss`` (relative, with its interval) and the speed-ups over the original on ``runs_on`` of both plans."""

    chosen_for: DeviceContext
    runs_on: DeviceContext
    k: int
    plan: Plan
    latency_s: float
    low_s: float
    high_s: float
    own_latency_s: float
    loss: float
    loss_low: float
    loss_high: float
    speedup: float
    speedup_low: float
    speedup_high: float
    own_speedup: float
    own_speedup_low: float
    own_speedup_high: float

    def to_dict(self, labels: dict[DeviceContext, str]) -> dict[str, Any]:
        return {"chosen_for": str(self.chosen_for), "chosen_for_label": labels[self.chosen_for],
                "runs_on": str(self.runs_on), "runs_on_label": labels[self.runs_on], "k": self.k,
                "keep": list(self.plan.keep), "merge": list(self.plan.merge or ()),
                "spans": [list(s) for s in self.plan.spans or ()], "latency_s": self.latency_s, "low_s": self.low_s,
                "high_s": self.high_s, "own_latency_s": self.own_latency_s, "loss": self.loss,
                "loss_low": self.loss_low, "loss_high": self.loss_high, "speedup": self.speedup,
                "speedup_low": self.speedup_low, "speedup_high": self.speedup_high, "own_speedup": self.own_speedup,
                "own_speedup_low": self.own_speedup_low, "own_speedup_high": self.own_speedup_high}


def cross_points(chosen: Front, prices: Prices, own: Front) -> list[CrossPoint]:
    """For every k of both fronts, ``chosen``'s plan priced on ``prices`` (another context's, or the same) against
    ``own`` (the front of ``prices``' context): `CrossPoint` s in k order."""
    out = []
    own_by_k = {p.k: p for p in own.points}
    for point in chosen.points:
        if point.k not in own_by_k:
            continue
        reference = own_by_k[point.k].plan
        pred = predict_plan(prices, point.plan, strict=True)
        loss = plan_ratio(prices, point.plan, reference)
        speedup = plan_ratio(prices, None, point.plan)
        own_speedup = plan_ratio(prices, None, reference)
        out.append(CrossPoint(chosen.device, own.device, point.k, point.plan, pred.total_s, pred.low_s, pred.high_s,
                              own_by_k[point.k].latency_s, loss.value - 1, loss.low - 1, loss.high - 1, speedup.value,
                              speedup.low, speedup.high, own_speedup.value, own_speedup.low, own_speedup.high))
    return out
