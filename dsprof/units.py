"""How a relative change and a speed-up are written for people: one spelling everywhere.

A loss (a plan's latency over another's, minus 1), a gap or an error is kept as a fraction in files (0.12 = 12 %
slower) and written as per cent with a sign and one decimal wherever it is shown: `dsprof plan`'s tables, the
report's tables and heat map, `dsprof predict`. docs/planning.md says so once. A speed-up is written with two
decimals and its 95 % interval beside it (`x`, `interval`): the report's answer and `dsprof plan`'s chosen lines.
"""

from __future__ import annotations

import math

__all__ = ["interval", "percent", "x"]


def percent(value: float) -> str:
    """A relative change (a fraction) as shown: per cent with a sign and one decimal, ``0.123`` -> ``+12.3 %``."""
    return f"{value * 100:+.1f} %"


def x(speedup: float) -> str:
    """A speed-up as shown everywhere in the answer: ``1.53x``."""
    return f"{speedup:.2f}x"


def interval(low: float, high: float) -> str:
    """A 95 % interval of a speed-up: ``95 % 1.45-1.61x`` (``at least 1.45x`` where it has no upper bound)."""
    return f"95 % {low:.2f}-{high:.2f}x" if math.isfinite(high) else f"95 % at least {low:.2f}x"
