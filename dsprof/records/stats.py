"""Statistics of timing samples: pure arithmetic on lists of seconds, no clocks, no hardware.

* `summarize` derives median, mean, IQR, p90, p99 and the coefficient of variation from raw
  samples, and flags a measurement as noisy when IQR / median exceeds 10 % (the threshold
  ``torch.utils.benchmark`` warns at).
* `median_ci` is a distribution-free confidence interval of the median (order statistics of the binomial
  distribution) and `median_relative_halfwidth` its half-width relative to the median: the adaptive
  stopping rule stops once it is at or below the target precision. Both live in the timing loop's
  standard-library file (`dsprof.portable.timing_loop`, which edge bundles carry) and are re-exported here.
* `Estimate` is a value with its interval: the one such type (issue #44). A plan's predicted speed-up and latency
  (`dsprof.lut.interval` builds them: the front, `predict`, the cross table, the joint plan and the report all read
  the same one) and a measured paired speed-up (`Speedup`) are each an `Estimate`.
* `paired_speedup` is the speed-up of a dense variant over the original from *paired* samples
  (taken in the same interleaved round): the median of the per-round ratios, with the same
  distribution-free interval, so a user sees whether a difference exceeds the noise.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from ..portable.timing_loop import median_ci, median_relative_halfwidth

__all__ = [
    "NOISE_THRESHOLD",
    "Estimate",
    "SampleStats",
    "Speedup",
    "median_ci",
    "median_relative_halfwidth",
    "paired_speedup",
    "percentile",
    "summarize",
]

_LARGE = 1e100  # samples above it are scaled before they are summed (fsum of 1e308s overflows)

#: IQR / median above which a measurement is flagged noisy.
NOISE_THRESHOLD = 0.10


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of already sorted values, linear interpolation (numpy's default)."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    pos = (len(sorted_values) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclass(frozen=True)
class SampleStats:
    """What the raw samples say, in the samples' unit (seconds): never stored instead of them."""

    count: int
    median: float
    mean: float
    iqr: float
    p10: float
    p90: float
    p99: float
    min: float
    max: float
    cov: float  # standard deviation / mean

    @property
    def relative_iqr(self) -> float:
        """IQR / median."""
        return self.iqr / self.median if self.median > 0 else math.inf

    @property
    def noisy(self) -> bool:
        """True when IQR / median exceeds `NOISE_THRESHOLD` (10 %)."""
        return self.relative_iqr > NOISE_THRESHOLD


def summarize(samples: Sequence[float]) -> SampleStats:
    """Median, mean, IQR (p75 - p25), p10, p90, p99, min, max and CoV of ``samples``."""
    if not samples:
        raise ValueError("no samples to summarize")
    s = sorted(float(v) for v in samples)
    if not all(math.isfinite(v) for v in s):
        raise ValueError("samples must be finite numbers of seconds")
    # mean and deviation of the samples scaled to at most 1: the sums stay finite however large the samples are
    scale = max(abs(s[0]), abs(s[-1])) if abs(s[-1]) > _LARGE or abs(s[0]) > _LARGE else 1.0
    mean = statistics.fmean(v / scale for v in s) * scale
    std = (statistics.stdev([v / scale for v in s]) if len(s) > 1 else 0.0) * scale
    return SampleStats(
        count=len(s),
        median=percentile(s, 50),
        mean=mean,
        iqr=percentile(s, 75) - percentile(s, 25),
        p10=percentile(s, 10),
        p90=percentile(s, 90),
        p99=percentile(s, 99),
        min=s[0],
        max=s[-1],
        cov=std / mean if mean > 0 else math.inf,
    )


@dataclass(frozen=True)
class Estimate:
    """A value with its interval [``low``, ``high``] (95 % unless the record holding it says otherwise), in the unit
    of the value: the one value-with-interval type of dsprof (a speed-up, a latency in seconds, a relative loss)."""

    value: float
    low: float
    high: float

    @classmethod
    def unknown(cls) -> "Estimate":
        """An estimate that could not be made: NaN throughout."""
        return cls(math.nan, math.nan, math.nan)

    def contains(self, x: float) -> bool:
        """Whether ``x`` falls inside the interval (bounds included)."""
        return self.low <= x <= self.high

    def scaled(self, factor: float) -> "Estimate":
        """Value and bounds times ``factor`` (> 0), e.g. milliseconds moved by the drift probe."""
        return Estimate(self.value * factor, self.low * factor, self.high * factor)

    def shifted(self, offset: float) -> "Estimate":
        """Value and bounds plus ``offset``, e.g. a ratio of latencies minus 1 (a relative loss)."""
        return Estimate(self.value + offset, self.low + offset, self.high + offset)


@dataclass(frozen=True)
class Speedup(Estimate):
    """Speed-up of a variant over a baseline: the `Estimate` whose ``value`` is baseline time / variant time (> 1:
    faster), the median of per-round ratios, with its ``confidence`` interval [low, high] over ``pairs`` rounds."""

    confidence: float = 0.95
    pairs: int = 0

    @property
    def ratio(self) -> float:
        """Baseline time over variant time (the estimate's value)."""
        return self.value

    @property
    def significant(self) -> bool:
        """True when the interval excludes 1: the difference is larger than the noise."""
        return self.low > 1 or self.high < 1


def paired_speedup(
    baseline: Sequence[float], variant: Sequence[float], confidence: float = 0.95
) -> Speedup:
    """Speed-up of ``variant`` over ``baseline`` from samples taken in the same rounds.

    ``baseline[i]`` and ``variant[i]`` must come from the same interleaved round, so that drift
    (clock changes, other load) affects both; the ratio of each pair is formed first and the
    median of the ratios and its distribution-free interval are reported.
    """
    if len(baseline) != len(variant):
        raise ValueError(f"paired samples differ in length: {len(baseline)} vs {len(variant)}")
    if not baseline:
        raise ValueError("no paired samples")
    ratios = [b / v for b, v in zip(baseline, variant)]
    lo, hi = median_ci(ratios, confidence)
    return Speedup(statistics.median(ratios), lo, hi, confidence, len(ratios))
