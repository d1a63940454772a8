"""The machine now against the machine the LUT was measured on: the drift probe timed again (issue #21).

Every `dsprof measure` run times the drift probe (`dsprof.profiler.probe`) after each group; the LUT
pools those samples. `probe_now` times the same reference here and now, in the LUT context's backend,
device, dtype, layout, batch and threads; `with_probe` scales a `Prediction` by the ratio (now over the
LUT's median), so that a LUT built in a fast (or slow) moment of the machine predicts the machine as it is.
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from ..device_context import DeviceContext
from ..errors import UsageError
from .predict import Prediction
from .table import LUT, LUTEntry, LUTMissError

__all__ = ["lut_probe", "probe_now", "probe_ratio_of", "with_probe"]


def lut_probe(lut: LUT, context: DeviceContext) -> LUTEntry:
    """The LUT's drift probe entry in ``context``; raises `LUTMissError` (saying what to do) without one."""
    from ..profiler.probe import PROBE_NAME, PROBE_SCOPE

    entry = lut.find(PROBE_NAME, "original", context, scope=PROBE_SCOPE)
    if entry is None:
        raise LUTMissError(
            f"the LUT {lut.source} has no drift probe ({PROBE_NAME}) in {context}: its measurement files "
            "predate the probe. Measure again (`dsprof measure`, any model, the same settings) and rebuild the LUT "
            "with the new file, or predict without --probe"
        )
    return entry


def probe_now(context: DeviceContext, seconds: float = 2.0) -> list[float]:
    """Samples (seconds per call) of the drift probe timed here for about ``seconds``, in ``context``'s
    backend, device, dtype, layout, batch and threads (the process's torch thread count is restored)."""
    import torch

    from ..profiler.backends import BackendSettings, get_backend
    from ..profiler.probe import time_probe

    if not seconds > 0:
        raise UsageError(f"the probe needs a time in seconds > 0, got {seconds}")
    settings = BackendSettings(context.backend, context.device, context.dtype, context.layout == "channels_last",
                               context.threads or None, context.compile)
    saved = torch.get_num_threads()
    try:
        backend = get_backend(settings)
        with tempfile.TemporaryDirectory(prefix="dsprof-probe-") as tmp:
            return time_probe(backend.prepare, context.batch, Path(tmp), seconds)
    finally:
        torch.set_num_threads(saved)


def probe_ratio_of(samples_s: Sequence[float], entry: LUTEntry) -> float:
    """Now over then: the median of ``samples_s`` (the probe timed now) over the LUT's probe median."""
    return statistics.median(samples_s) / entry.median_s


def with_probe(pred: Prediction, ratio: float) -> Prediction:
    """``pred`` scaled by the probe's ``ratio`` (> 1: the machine is slower now than in the LUT's runs): its
    total and interval (the relative half-width stays: the machine can move again before a later measurement;
    ``rest_s`` and the block table keep the LUT's latencies)."""
    if not ratio > 0:
        raise UsageError(f"a probe ratio is > 0, got {ratio}")
    return replace(pred, total_s=pred.total_s * ratio, low_s=pred.low_s * ratio,
                   high_s=pred.high_s * ratio, probe_ratio=ratio)
