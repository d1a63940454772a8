"""The predicted ratio of two plans' latencies in one LUT context, with its 95 % interval: a speed-up (the original
over a plan) and a plan's loss against another (one plan over another, minus 1) are both such ratios.

The interval is the one place that says how sure such a ratio is (`dsprof plan` over several contexts, `--for`, the
benchmarks read it from here). Both latencies come from one LUT, so what the two plans share -- the rest of the
model, the pieces they deploy alike, the machine's drift, which scales both -- cancels in the ratio; what differs is
the median errors of the pieces only one of them deploys:

    a / b = 1 + (a - b) / b,    a - b = sum of the savings of b's own pieces - sum of the savings of a's own pieces,

so the half-width is 1.96 x sqrt(sum of those pieces' squared median errors) / b (the errors `predict_plan` sums for
its interval; the denominator's own error is second order and left out).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..lut.prices import Prices
from ..lut.predict import predict_plan

__all__ = ["Ratio", "plan_ratio"]

_Z95 = 1.959964


@dataclass(frozen=True)
class Ratio:
    """``value`` = latency of one plan over another's in one context, and its 95 % interval ``low``-``high``."""

    value: float
    low: float
    high: float


def _piece_errors(prices: Prices, plan: Any) -> Counter:
    return Counter((p.start, p.stop, p.variant, p.errors_s) for p in prices.pieces(plan))


def plan_ratio(prices: Prices, plan: Any, reference: Any) -> Ratio:
    """Predicted latency of ``plan`` over that of ``reference`` (each a `dsprof.plan.Plan`, or None for the original
    model) in ``prices``' context, both priced by `predict_plan`, with the 95 % interval of the module docstring."""
    a = predict_plan(prices, plan, strict=True).total_s
    b = predict_plan(prices, reference, strict=True).total_s
    mine, theirs = _piece_errors(prices, plan), _piece_errors(prices, reference)
    only = (mine - theirs) + (theirs - mine)  # the pieces one plan deploys and the other does not
    variance = sum(count * e * e for (_, _, _, errors), count in only.items() for e in errors)
    half = _Z95 * math.sqrt(variance) / b
    value = a / b
    return Ratio(value, value - half, value + half)
