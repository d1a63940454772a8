"""The interval's inputs of one model's prices: the entries and numbers `dsprof.lut.interval` estimates every plan's
95 % interval from (the whole model's references, the drift probe, the calibration group and the share its plan is
predicted to save, the blocks timed in situ). Split from `dsprof.lut.prices` (issue #44, item 11): `Prices.terms`
reads them once."""

from __future__ import annotations

import math
from typing import Any

from ..records.measurement import CALIBRATION, IN_SITU_SCOPE, PROBE_NAME, PROBE_SCOPE, calibration_plan
from ..runtimes import BACKENDS
from .interval import IntervalInputs
from .lookup import in_model_factor
from .piece import Piece
from .schema import in_situ_workload, split_label

__all__ = ["calibration_entry", "interval_inputs"]


def interval_inputs(prices: Any) -> IntervalInputs:
    """The entries and numbers the intervals of ``prices`` (a model's `dsprof.lut.prices.Prices`) are estimated from
    (`dsprof.lut.interval.IntervalInputs`)."""
    entries = prices.entries
    calibration, pieces, plan = calibration_entry(prices)
    share = math.nan  # of the model, that the calibration group's plan is predicted to save
    costs = 0.0  # of it, what its in-model pieces that cost time add (<= 0), which rho does not scale
    if calibration is not None:
        original = prices.total_s(prices.pieces(None))
        if all(p.found for p in pieces) and original > 0:
            share = 1 - prices.total_s(pieces, together=False) / original
            if prices.in_model is not None:
                costs = sum(min(0.0, p.saving_s) for p in pieces) / original
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
        prices.lookup(PROBE_NAME, "original", PROBE_SCOPE), calibration, share, tuple(in_situ), prices.reference_s,
        plan, entries.sessions, _process_spread(prices.key.backend), costs)


def _process_spread(backend: str) -> float:
    """The spread from process to process of ``backend`` (`dsprof.runtimes.BackendEntry`; 0 where not measured)."""
    entry = BACKENDS.get(backend)
    return entry.process_spread if entry is not None else 0.0


def calibration_entry(prices: Any) -> tuple[Any, list[Piece], str]:
    """The calibration group's entry of ``prices``' model (a `dsprof.lut.table.LUTEntry`, or None), the pieces of
    the plan it timed, as ``prices`` price them, and that plan as its record names it after the model (``spans 0-1
    3-4 unmerged 6``; "" for the plan of before). A record named after the front's plan with spans
    (`dsprof.records.measurement.calibration_name`, issue #46) is that plan: its spans, each other block alone, merged
    but where its name says unmerged; of several such (runs whose fronts differed), the one of most groups, then the
    latest. Else the entry under the model's label (every file before it): every block linearised alone, merged
    where that is cheaper (`Prices.linearized`)."""
    n = len(prices.blocks)
    name, _ = split_label(prices.label)
    options = prices.label[len(name):]  # the label's options, as every whole model's workload of it ends
    found = []
    for (scope, workload, variant), entry in prices.lookup.index.items():
        if scope != "model" or variant != CALIBRATION or not workload.endswith(options):
            continue
        plan = calibration_plan(workload[:len(workload) - len(options)], name)
        if plan is None:
            continue
        spans, unmerged = plan
        if any(not 0 <= a < b <= n for a, b in spans):
            continue  # not a plan of this model's blocks
        inside = [i for a, b in spans for i in range(a, b)]
        if len(set(inside)) != len(inside) or any(not 0 <= i < n or i in inside for i in unmerged):
            continue
        found.append(((entry.groups, entry.time_utc, workload), entry, spans, unmerged))
    if found:
        (_, _, workload), entry, spans, unmerged = max(found, key=lambda f: f[0])
        merge = [i not in unmerged for i in range(n)]
        shown = workload[len(name):len(workload) - len(options)].strip()
        return entry, prices.pieces_of((0,) * n, spans, merge), shown
    entry = prices.lookup(prices.label, CALIBRATION, "model")
    return entry, [prices.linearized(i) for i in range(n)] if entry is not None else [], ""
