"""The measured speed-up of one whole model over another, from records timed in one interleaved group.

`time_interleaved` takes sample i of every workload of a group in round i, so the ratio of the two samples of a
round divides out whatever the machine did during that round (a clock boost, another process). The speed-up is the
median of the per-round ratios, with the distribution-free 95 % interval of that median (`paired_speedup` in
`dsprof.profiler.stats`, on the raw samples).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError
from .records import Measurement
from .stats import paired_speedup as _paired_samples

__all__ = ["PairedSpeedup", "paired_speedup"]


@dataclass(frozen=True)
class PairedSpeedup:
    """``speedup`` = the original's time over the other's (> 1: the other is faster), the median of the per-round
    ratios; ``low``/``high`` its 95 % interval; ``rounds`` the number of paired rounds."""

    speedup: float
    low: float
    high: float
    rounds: int


def paired_speedup(original: Measurement, other: Measurement) -> PairedSpeedup:
    """The speed-up of ``other`` over ``original``, two records of one interleaved group (same ``group``, as many
    samples: sample i of each from round i). Refused (`UsageError`) for records timed apart."""
    if original.group != other.group or len(original.samples_s) != len(other.samples_s):
        raise UsageError(f"{other.name} and {original.name} were not timed in one group (groups {other.group!r}, "
                         f"{original.group!r}); time both in one `dsprof measure` run (its --plan models join the original's group)")
    up = _paired_samples(original.samples_s, other.samples_s)
    return PairedSpeedup(up.ratio, up.low, up.high, up.pairs)
