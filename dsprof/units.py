"""How a relative change is written for people: one spelling everywhere.

A loss (a plan's latency over another's, minus 1), a gap or an error is kept as a fraction in files (0.12 = 12 %
slower) and written as per cent with a sign and one decimal wherever it is shown: `dsprof plan`'s tables, the
report's tables and heat map, `dsprof predict`. docs/planning.md says so once.
"""

from __future__ import annotations

__all__ = ["percent"]


def percent(value: float) -> str:
    """A relative change (a fraction) as shown: per cent with a sign and one decimal, ``0.123`` -> ``+12.3 %``."""
    return f"{value * 100:+.1f} %"
