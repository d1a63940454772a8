"""How good are the predictions: predicted against measured latencies of the same models."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
from scipy.stats import kendalltau

from ..errors import UsageError

__all__ = ["PredictionAccuracy", "accuracy_table", "prediction_accuracy"]


@dataclass(frozen=True)
class PredictionAccuracy:
    """Agreement of predicted and measured latencies (errors relative to the measurement)."""

    count: int
    within_10pct: float  # share of models predicted within +-10 %
    within_5pct: float
    median_abs_error: float  # median of |predicted / measured - 1|
    max_abs_error: float
    kendall_tau: float  # rank agreement, 1 = same order

    def __str__(self) -> str:
        return (
            f"{self.count} models: {self.within_10pct:.0%} within +-10 %, {self.within_5pct:.0%} within +-5 %, "
            f"median |error| {self.median_abs_error:.1%}, max {self.max_abs_error:.1%}, Kendall tau {self.kendall_tau:.3f}"
        )


def prediction_accuracy(predicted_s: Sequence[float], measured_s: Sequence[float]) -> PredictionAccuracy:
    """Share within +-10 % and +-5 %, median and max absolute relative error, Kendall's tau-b."""
    p, m = np.asarray(predicted_s, dtype=float), np.asarray(measured_s, dtype=float)
    if p.shape != m.shape or p.size == 0:
        raise UsageError("give as many predicted as measured latencies, at least one")
    if (m <= 0).any() or (p <= 0).any():
        raise UsageError("latencies must be positive")
    err = np.abs(p / m - 1)
    tau = float(kendalltau(p, m).statistic) if p.size > 1 else float("nan")
    return PredictionAccuracy(int(p.size), float((err <= 0.10).mean()), float((err <= 0.05).mean()),
                              float(np.median(err)), float(err.max()), tau)


def accuracy_table(names: Sequence[str], predicted_s: Sequence[float], measured_s: Sequence[float]) -> pd.DataFrame:
    """One row per model: predicted and measured milliseconds and the relative error."""
    frame = pd.DataFrame({"model": list(names), "predicted_s": list(predicted_s), "measured_s": list(measured_s)})
    frame["error"] = frame.predicted_s / frame.measured_s - 1
    return frame
