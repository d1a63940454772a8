"""The interval's inputs of one model's prices: the entries and numbers `dsprof.lut.interval` estimates every plan's
95 % interval from (the whole model's references, the drift probe, the calibration group and the share its plan is
predicted to save, the blocks timed in situ). Split from `dsprof.lut.prices` (issue #44, item 11): `Prices.terms`
reads them once."""

from __future__ import annotations

import math
from typing import Any

from ..records.measurement import CALIBRATION, IN_SITU_SCOPE, PROBE_NAME, PROBE_SCOPE
from .interval import IntervalInputs
from .lookup import in_model_factor
from .schema import in_situ_workload

__all__ = ["interval_inputs"]


def interval_inputs(prices: Any) -> IntervalInputs:
    """The entries and numbers the intervals of ``prices`` (a model's `dsprof.lut.prices.Prices`) are estimated from
    (`dsprof.lut.interval.IntervalInputs`)."""
    entries = prices.entries
    calibration = prices.lookup(prices.label, CALIBRATION, "model")
    share = math.nan  # of the model, that the calibration group's plan is predicted to save
    if calibration is not None:  # its plan: every block linearised alone, merged where that is cheaper
        pieces = [prices.linearized(i) for i in range(len(prices.blocks))]
        original = prices.total_s(prices.pieces(None))
        if all(p.found for p in pieces) and original > 0:
            share = 1 - prices.total_s(pieces) / original
    in_situ = []
    for block, original_entry in zip(prices.blocks, entries.originals):
        base = entries.in_situ.get(block.name)
        if base is None or original_entry is None:
            continue
        for variant in ("merged", "linear"):
            swap = prices.lookup(in_situ_workload(prices.label, block.name), variant, IN_SITU_SCOPE)
            alone = prices.lookup(block.spec.to_str(), variant)
            if swap is not None and alone is not None:
                in_situ.append((base, swap, original_entry.median_s - alone.median_s))
    return IntervalInputs(
        tuple(entries.references), entries.whole, bool(entries.stem and entries.head), prices.method,
        prices.rest_method, prices.factor, in_model_factor(prices.entries), prices.in_model, prices.base_errors,
        prices.lookup(PROBE_NAME, "original", PROBE_SCOPE), calibration, share, tuple(in_situ), prices.reference_s)
