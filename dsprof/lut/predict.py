"""Predicting a model's latency from a LUT: stem + blocks (original or merged per the plan) + head."""

from __future__ import annotations

import math
import statistics
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
from torch import nn

from ..errors import LUTError, UsageError
from ..models import Block, find_blocks, input_size_of, named_model
from ..device_context import DeviceContext
from .schema import context_workload, model_label
from ..profiler.probe import PROBE_GROUPS_VARIANT, PROBE_NAME, PROBE_SCOPE
from .table import LUT, LUTEntry, LUTMissError, LUTMissWarning

__all__ = [
    "CONTEXT_FACTOR_RANGE",
    "METHODS",
    "MethodFallbackWarning",
    "Prediction",
    "auto_method",
    "measure_planned",
    "measure_planned_run",
    "median_error_s",
    "observed_drift",
    "predict_latency",
    "prediction_interval",
    "profiled_options",
    "resolve_method",
]


#: Ways to predict: ``isolated`` (the whole model minus the savings of blocks timed alone),
#: ``context`` (minus the savings measured inside the running model, `dsprof measure --context`),
#: ``context-scaled``: the isolated savings times one factor, the in-context savings of all the
#: model's blocks over their isolated savings (noise averages over every group). Both context methods
#: start from the median of the whole model's medians: its own entry and every in-context group.
#: ``auto``: `auto_method`, what predicted later runs best in benchmarks/lut_accuracy.py.
METHODS = ("auto", "isolated", "context", "context-scaled")
_Z95 = 1.959964  # two-sided 95 % normal quantile
_IQR_TO_SD = 1 / 1.349  # IQR of a normal distribution = 1.349 standard deviations
_MAD_TO_SD = 1.4826
_RESTS = ("auto", "stem+head", "model-minus-blocks")
#: The context factors (a model's in-context over isolated savings) that ``auto`` trusts: the range the
#: lut_accuracy.py runs on five architectures saw (benchmarks/RESULTS.md, issue #21); outside it, ``auto``
#: predicts ``isolated`` and says so.
CONTEXT_FACTOR_RANGE = (0.8, 2.0)


class MethodFallbackWarning(UserWarning):
    """A prediction used another method than the one asked for (said in `Prediction.method` too)."""


@dataclass(frozen=True)
class Prediction:
    """A predicted latency (seconds per batch) with its parts, its method, its interval and its coverage.

    ``method`` says how the blocks' changes were counted: ``isolated`` (savings of blocks timed
    alone), ``context`` (savings measured inside the running model) or ``context-scaled (xF)``
    (the isolated savings times F, the model's in-context over isolated savings); ``isolated
    (context-scaled fell back: WHY)`` where context-scaled was asked for (or chosen by ``auto``) and could
    not apply. ``rest_s`` is everything
    outside the blocks: the whole original model minus its blocks, both measured on the device
    (``"model-minus-blocks"``), or the stem and head timed alone (``rest_method="stem+head"``);
    under ``context`` the whole model is the reference and ``rest_method`` is ``"whole-model"``. It is below
    zero where the whole model measured faster than the sum of its blocks timed alone (``str`` says so).
    ``low_s``/``high_s``: a 95 % interval from the LUT's own spread (``lut_spread``, relative) and
    the device's observed drift (``drift``, relative; ``drift_source`` says from what).
    ``coverage`` is the share of blocks found in the LUT; ``missing`` names the misses.
    ``probe_ratio``: how much slower (> 1) the machine ran the drift probe now than in the LUT's runs, by
    which total and interval are scaled (`dsprof.lut.drift.with_probe`); NaN when not probed.
    """

    model: str
    device: DeviceContext
    total_s: float
    rest_s: float
    rest_method: str
    blocks: pd.DataFrame = field(repr=False)
    coverage: float
    missing: tuple[str, ...]
    method: str = "isolated"
    low_s: float = float("nan")
    high_s: float = float("nan")
    lut_spread: float = 0.0
    drift: float = 0.0
    drift_source: str = "none"
    probe_ratio: float = float("nan")

    @property
    def fps(self) -> float:
        """Images per second at the LUT's batch size."""
        return self.device.batch / self.total_s

    def contains(self, measured_s: float) -> bool:
        """Whether a measured latency (seconds) falls inside the prediction's interval."""
        return self.low_s <= measured_s <= self.high_s

    def __str__(self) -> str:
        merged = int((self.blocks["variant"] == "merged").sum())
        return (
            f"{self.model} on {self.device}: {self.total_s * 1e3:.3f} ms per batch of {self.device.batch} "
            f"({self.fps:.1f} FPS), 95 % interval {self.low_s * 1e3:.3f}-{self.high_s * 1e3:.3f} ms "
            f"(LUT spread +-{self.lut_spread:.1%}, drift +-{self.drift:.1%} from {self.drift_source})"
            + (f"; scaled by the drift probe: the machine runs {self.probe_ratio:.3f}x the LUT's time now"
               if self.probe_ratio == self.probe_ratio else "")
            + f"; method {self.method}; {merged} of {len(self.blocks)} blocks merged; "
            f"coverage {self.coverage:.0%}; rest ({self.rest_method}) {self.rest_s * 1e3:.3f} ms"
            + (": below zero: the whole model measured faster than the sum of its blocks timed alone (noise, see "
               "the LUT's noisy column, or overhead a block pays only when timed alone); the total is still the whole "
               "model minus the blocks' savings" if self.rest_s < 0 else "")
            + (f"\nPARTIAL PREDICTION: the LUT lacks {len(self.missing)} of the keys it needs (block coverage "
               f"{self.coverage:.0%}); the total leaves their latency out" if self.missing else "")
        )


def median_error_s(entry: LUTEntry) -> float:
    """Standard error of an entry's median (seconds): 1.2533 sigma / sqrt(n), sigma from the IQR."""
    return 1.2533 * entry.iqr_s * _IQR_TO_SD / math.sqrt(entry.n_samples)


def observed_drift(medians_s: list[float]) -> float:
    """Relative 95 % half-width of the spread of one model's medians from separate groups (robust:
    1.4826 MAD); 0 for fewer than 3."""
    if len(medians_s) < 3:
        return 0.0
    center = statistics.median(medians_s)
    mad = statistics.median(abs(m - center) for m in medians_s)
    return _Z95 * _MAD_TO_SD * mad / center


def prediction_interval(total_s: float, entry_errors_s: list[float], drift: float) -> tuple[float, float, float]:
    """(low, high, lut_spread): total +- total * sqrt(lut_spread^2 + drift^2) (low at least 0), with lut_spread
    the 95 % half-width of the used entries' median errors, summed in quadrature, relative to ``total_s``; ``drift``
    is the machine's, relative (`observed_drift`, the drift probe's spread: see `predict_latency`)."""
    lut_spread = _Z95 * math.sqrt(sum(e * e for e in entry_errors_s)) / total_s if total_s > 0 else 0.0
    half = math.hypot(lut_spread, drift)
    return max(total_s * (1 - half), 0.0), total_s * (1 + half), lut_spread  # a latency is never below zero


def profiled_options(model: nn.Module, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The model options as `dsprof measure` records them: the build options plus the resolution."""
    out = dict(options or {})
    h, w = input_size_of(model)
    out["resolution"] = h
    if h != w:
        out["resolution_w"] = w
    return out


def predict_latency(
    model: str | nn.Module,
    lut: LUT | str | Path,
    plan: Any = None,
    *,
    device: DeviceContext | str | None = None,
    name: str | None = None,
    options: Mapping[str, Any] | None = None,
    resolution: int | None = None,
    strict: bool = False,
    variant: str | None = None,
    rest: str = "auto",
    method: str = "auto",
) -> Prediction:
    """Latency of ``model`` (a registered name, or a module with ``name``) on one LUT context.

    ``plan`` (a `dsprof.merge.Plan`, preset name or plan file) says which blocks are merged: a
    linearised block counts as merged where the plan's ``merge`` list says so, else where the LUT
    says merging saves time (what `merge_model` decides given the same LUT). ``options`` are the
    model's build options (``width``, ``depths``...). Misses warn, or raise with ``strict=True``.
    ``variant`` (instead of a plan) counts every block as that LUT variant, e.g. ``"flops_matched"``
    for the paper's Tab. 1 dense counterpart of the whole model. ``rest`` picks what stands for the
    part outside the blocks: ``"stem+head"`` (timed alone), ``"model-minus-blocks"`` (the measured
    original model minus its measured blocks) or ``"auto"``: the latter where the LUT has the whole
    model, else the former. ``method`` (`METHODS`): count the blocks' changes as measured alone
    (``isolated``), inside the running model (``context``, from `dsprof measure --context`
    entries), or alone but scaled by the model's in-context / isolated savings (``context-scaled``);
    ``auto`` is `auto_method`'s choice, from what predicted later runs best in ``benchmarks/lut_accuracy.py``. The prediction
    says which it used, and carries a 95 % interval (LUT spread and observed drift).
    """
    if rest not in _RESTS:
        raise LUTError(f"rest is 'auto', 'stem+head' or 'model-minus-blocks', got {rest!r}")
    if variant is not None and plan is not None:
        raise LUTError("give a plan or a variant for every block, not both")
    lut = lut if isinstance(lut, LUT) else LUT.load(lut)
    key = lut.resolve(device)
    auto = method == "auto"
    method = resolve_method(method, key, rest=rest, variant=variant)  # before any lookup
    options = dict(options or {})
    name, net = named_model(model, name, resolution, options)
    label = model_label(name, profiled_options(net, options))
    blocks = find_blocks(net)
    lookup = _Lookup(lut, key)
    entries = _ModelEntries.read(lookup, label, blocks)
    rows, missing = _block_rows(blocks, entries.originals, lookup, plan, variant)
    drift, drift_source = _drift(entries, lookup(PROBE_NAME, PROBE_GROUPS_VARIANT, PROBE_SCOPE))

    total: float | None = None
    if method == "context":
        total, rest_s, errors = _context_total(rows, blocks, entries, lookup, missing)
        rest_method, used = "whole-model", "context"
    else:
        rest_s, rest_method, errors = _rest(rows, entries, rest, missing)
        for row, original in zip(rows, entries.originals):
            row["saving_s"] = (original.median_s - row["latency_s"]) if original is not None else float("nan")
        used = "isolated"
        # auto on a LUT without the model's --context run: plain isolated (nothing was there to fall back from)
        if method == "context-scaled" and (not auto or any(entries.in_model.values())):
            factor = _context_factor(blocks, entries, lookup)
            why_not = _why_not_scaled(factor, rest_method, label, auto)
            if why_not is None:
                total, rest_s = _scaled_total(rows, factor, entries.references)
                used = f"context-scaled (x{factor:.3f})"
            else:  # a method's fallback, not a LUT miss: said in the method and warned, never raised
                used = f"isolated (context-scaled fell back: {why_not})"
                warnings.warn(f"{label}: {used}", MethodFallbackWarning, stacklevel=2)

    table = pd.DataFrame(rows, columns=["index", "block", "spec", "variant", "latency_s", "saving_s", "noisy"])
    found = table["latency_s"].notna()
    _report_misses(lut, key, name, label, table, missing, strict)
    if total is None:
        total = rest_s + float(table.loc[found, "latency_s"].sum())
    if total <= 0 and rest_method == "model-minus-blocks" and found.all():
        raise LUTError(
            f"the LUT's entries for {label} on {key} contradict each other (predicted {total * 1e3:.3f} ms): "
            "the whole model measured faster than its blocks by more than they take. Measure again on a "
            "quiet machine (see the noisy column) and rebuild the LUT."
        )
    coverage = float(found.mean()) if len(table) else 1.0
    low, high, spread = prediction_interval(total, errors, drift)
    return Prediction(label, key, total, rest_s, rest_method, table, coverage, tuple(missing), used,
                      low, high, spread, drift, drift_source)


def auto_method(context: DeviceContext) -> str:
    """The method ``auto`` asks for in a context: ``context-scaled`` for PyTorch eager on a CPU, else
    ``isolated``. In PyTorch eager a block inside the model runs with cold caches and unfused operators,
    so merging saves more there than alone (1.10-1.55x the isolated savings in five runs on a 2-core CPU);
    ONNX Runtime and TFLite fuse, and their in-context differences only added noise (benchmarks/RESULTS.md,
    issue #14). Where the LUT lacks the model's in-context entries, or its factor is outside
    `CONTEXT_FACTOR_RANGE`, the prediction falls back to ``isolated`` and says so."""
    return "context-scaled" if context.backend == "torch" and context.device == "cpu" else "isolated"


def resolve_method(method: str, context: DeviceContext, *, rest: str = "auto", variant: str | None = None) -> str:
    """The method a prediction in ``context`` asks for (``auto`` resolved by `auto_method`), checked against
    ``rest`` and ``variant`` before any lookup; raises `UsageError` on a method that cannot apply. The
    context methods start from the whole model, so they take ``rest="auto"`` (or ``"model-minus-blocks"``)
    and a plan, not a variant for every block; ``auto`` with either of those asks for ``isolated``."""
    if method not in METHODS:
        raise UsageError(f"method is one of {', '.join(METHODS)}, got {method!r}")
    if method == "auto":
        return "isolated" if rest == "stem+head" or variant is not None else auto_method(context)
    if method != "isolated" and variant is not None:
        raise UsageError(f"the {method} method predicts plans; give a plan, not a variant for every block "
                         "(or method 'isolated')")
    if method != "isolated" and rest == "stem+head":
        raise UsageError(f"the {method} method starts from the whole model measured, not from its stem and head: "
                         "give rest 'auto' (or method 'isolated' with rest 'stem+head')")
    return method


def _why_not_scaled(factor: float | None, rest_method: str, label: str, auto: bool) -> str | None:
    """Why ``context-scaled`` cannot predict here (None: it can). Its factor needs the model's in-context
    entries and its whole-model entry with every block; under ``auto`` it must also lie in
    `CONTEXT_FACTOR_RANGE` (an explicit ``context-scaled`` uses any positive factor)."""
    if rest_method != "model-minus-blocks":
        return f"the LUT lacks {label}'s whole-model entry or one of its blocks' originals"
    if factor is None:
        return (f"the LUT lacks in-context entries (merged) of {label}'s blocks whose savings agree in sign with "
                "the isolated ones (`dsprof measure --context merged`)")
    low, high = CONTEXT_FACTOR_RANGE
    if auto and not low <= factor <= high:
        return (f"its context factor {factor:.2f} is outside {low:.2f}-{high:.2f}, the range seen across "
                "architectures (benchmarks/RESULTS.md, issue #21)")
    return None


@dataclass(frozen=True)
class _Lookup:
    """Lookups in one device context of a LUT that miss quietly (None): a prediction gathers its misses
    and reports them once."""

    lut: LUT
    key: DeviceContext

    def __call__(self, workload: str, variant: str, scope: str = "block") -> LUTEntry | None:
        return self.lut.find(workload, variant, self.key, scope=scope)


@dataclass(frozen=True)
class _ModelEntries:
    """What a prediction reads of one model besides its blocks' chosen variants: each block's original,
    the whole model, its stem and head, and the whole model in each block's context group (by block name)."""

    label: str
    originals: list[LUTEntry | None]
    whole: LUTEntry | None
    stem: LUTEntry | None
    head: LUTEntry | None
    in_model: dict[str, LUTEntry | None]

    @classmethod
    def read(cls, lookup: _Lookup, label: str, blocks: list[Block]) -> "_ModelEntries":
        return cls(
            label,
            [lookup(b.spec.to_str(), "original") for b in blocks],
            lookup(label, "original", "model"),
            lookup(label, "original", "stem"),
            lookup(label, "original", "head"),
            {b.name: lookup(context_workload(label, b.name), "original", "context") for b in blocks},
        )

    @property
    def references(self) -> list[LUTEntry]:
        """The whole model's medians the context methods start from: its own entry and every in-context group's."""
        return [e for e in [self.whole, *self.in_model.values()] if e is not None]


def _block_rows(blocks: list[Block], originals: list[LUTEntry | None], lookup: _Lookup, plan: Any,
                variant: str | None) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per block: the variant the plan (or ``variant``, for every block) gives it and its LUT
    entry; and the misses."""
    linearized: set[int] = set()
    merge_flags = None
    if plan is not None:
        from ..merge.plan import Plan  # the merge package imports models only; keep lut importable alone

        plan = Plan.coerce(plan)
        plan.check_blocks(len(blocks))
        linearized = set(plan.linearized)
        merge_flags = plan.merge
    rows, missing = [], []
    for i, (block, original) in enumerate(zip(blocks, originals)):
        spec = block.spec.to_str()
        if variant is not None:
            chosen, entry = variant, lookup(spec, variant)
        elif i not in linearized:
            chosen, entry = "original", original
        else:
            chosen, entry = _linearized_variant(spec, original, None if merge_flags is None else merge_flags[i], lookup)
        if entry is None:
            missing.append(f"block {spec} [{chosen}]")
        rows.append({"index": i, "block": block.name, "spec": spec, "variant": chosen,
                     "latency_s": entry.median_s if entry else float("nan"), "noisy": bool(entry and entry.noisy),
                     "_entry": entry})
    return rows, missing


def _linearized_variant(spec: str, original: LUTEntry | None, merge: bool | None,
                        lookup: _Lookup) -> tuple[str, LUTEntry | None]:
    """(variant, entry) of a block the plan linearises: merged where the plan says so (``merge``), or when
    it leaves that open (None) where the LUT says merging saves time; else the activation-free block
    (``linear``) when the LUT has it, else the original."""
    merged = lookup(spec, "merged")
    if merge is None:
        merge = merged.median_s < original.median_s if merged is not None and original is not None else True
    if merge:
        return "merged", merged
    linear = lookup(spec, "linear")
    return ("linear", linear) if linear is not None else ("original", original)


def _spread(entry: LUTEntry) -> float:
    """Relative 95 % half-width of an entry's pooled samples (normal, sigma from the IQR)."""
    return _Z95 * entry.iqr_s * _IQR_TO_SD / entry.median_s


def _runs(entry: LUTEntry) -> str:
    count = len(entry.sources.split(";")) if entry.sources else 1
    return f"{count} runs" if count > 1 else "1 run"


def _drift(entries: _ModelEntries, probe: LUTEntry | None) -> tuple[float, str]:
    """The device's drift (relative 95 % half-width) and what it was observed from: the largest of the
    spread of the whole model's medians across its in-context groups, the whole model's samples (pooled
    across the runs that measured it) and the drift probe's group medians (``probe``: timed after every
    group of every run, the machine over minutes). A later measurement is one moment of that machine, so its
    distance from a prediction pooled over the runs is about one draw of it."""
    observed: list[tuple[float, str]] = []
    groups = [e for e in entries.in_model.values() if e is not None]
    if len(groups) >= 3:
        observed.append((observed_drift([e.median_s for e in groups]), f"{len(groups)} in-context groups"))
    if entries.whole is not None:  # within one run, its group's noise; across runs, the machine's moves too
        observed.append((_spread(entries.whole), f"the whole model's samples ({_runs(entries.whole)})"))
    if probe is not None and probe.n_samples >= 3:
        observed.append((_spread(probe), f"the drift probe ({probe.n_samples} groups, {_runs(probe)})"))
    if not observed:
        return 0.0, "nothing (no whole-model entry, no drift probe)"
    return max(observed)


def _found_latency_s(rows: list[dict[str, Any]]) -> float:
    """The sum of the blocks' latencies that the LUT has (NaN marks a miss)."""
    return float(sum(r["latency_s"] for r in rows if r["latency_s"] == r["latency_s"]))


def _context_total(rows: list[dict[str, Any]], blocks: list[Block], entries: _ModelEntries, lookup: _Lookup,
                   missing: list[str]) -> tuple[float, float, list[float]]:
    """(total, rest, entry errors) by the ``context`` method: the whole model's reference minus each changed
    block's saving measured inside the running model (``saving_s`` set on each row). Misses go to ``missing``."""
    label, references = entries.label, entries.references
    changed = [(i, row["variant"]) for i, row in enumerate(rows) if row["variant"] != "original"]
    swaps = {i: (entries.in_model[blocks[i].name], lookup(context_workload(label, blocks[i].name), v, "context"))
             for i, v in changed}
    for i, v in changed:
        if swaps[i][0] is None or swaps[i][1] is None:
            missing.append(f"context {context_workload(label, blocks[i].name)} [original/{v}]")
    if not references:
        missing.append(f"a whole-model or in-context entry of {label}")
    errors: list[float] = []
    reference = statistics.median(e.median_s for e in references) if references else 0.0
    if references:  # the median of several entries: about one entry's error over the square root of their count
        errors.append(median_error_s(references[0]) / math.sqrt(len(references)))
    saved = 0.0
    for i, row in enumerate(rows):
        pair = swaps.get(i)
        if pair is None or pair[0] is None or pair[1] is None:
            row["saving_s"] = 0.0 if row["variant"] == "original" else float("nan")
            continue
        base, swap = pair
        # the saving relative to the model timed in the same rounds, scaled to the reference:
        # a group that ran in a slow moment of the machine inflates neither
        row["saving_s"] = reference * (1 - swap.median_s / base.median_s)
        saved += row["saving_s"]
        errors += [median_error_s(base) * reference / base.median_s, median_error_s(swap) * reference / base.median_s]
    total = reference - saved
    return total, total - _found_latency_s(rows), errors


def _rest(rows: list[dict[str, Any]], entries: _ModelEntries, rest: str,
          missing: list[str]) -> tuple[float, str, list[float]]:
    """(rest, how it was found, entry errors of the isolated total): the part outside the blocks. ``auto``
    takes the measured whole model minus its blocks first: it carries what a sum of parts timed alone misses
    (on a CPU the parts timed alone add up to less, likely warm caches: see benchmarks/RESULTS.md), then the
    stem and head timed alone. Misses go to ``missing``."""
    whole, originals = entries.whole, entries.originals
    errors: list[float] = []
    if whole is not None and all(o is not None for o in originals) and rest != "stem+head":
        errors.append(median_error_s(whole))
        for row, original in zip(rows, originals):
            if row["variant"] != "original" and row["_entry"] is not None:
                errors += [median_error_s(original), median_error_s(row["_entry"])]
        return whole.median_s - sum(o.median_s for o in originals), "model-minus-blocks", errors
    stem, head = entries.stem, entries.head
    if stem is not None and head is not None and rest != "model-minus-blocks":
        errors += [median_error_s(stem), median_error_s(head)] + [median_error_s(r["_entry"]) for r in rows if r["_entry"]]
        return stem.median_s + head.median_s, "stem+head", errors
    wanted = {"auto": "stem/head entries or a whole-model entry with all its blocks",
              "stem+head": "stem/head entries", "model-minus-blocks": "a whole-model entry with all its blocks"}[rest]
    missing.append(f"{wanted} of {entries.label}")
    return 0.0, "missing", errors


def _scaled_total(rows: list[dict[str, Any]], factor: float, references: list[LUTEntry]) -> tuple[float, float]:
    """(total, rest) by ``context-scaled``: the whole model's reference minus the changed blocks' isolated
    savings times ``factor`` (each row's ``saving_s`` is scaled in place)."""
    reference = statistics.median(e.median_s for e in references)
    saved = 0.0
    for row in rows:
        row["saving_s"] *= factor
        saved += row["saving_s"] if row["variant"] != "original" and row["saving_s"] == row["saving_s"] else 0.0
    total = reference - saved
    return total, total - _found_latency_s(rows)


def _report_misses(lut: LUT, key: DeviceContext, name: str, label: str, table: pd.DataFrame, missing: list[str],
                   strict: bool) -> None:
    """No block in the LUT raises (nothing to add up, whatever ``strict`` says); other misses warn, or
    raise with ``strict``. Called from `predict_latency` only: the warning points at its caller."""
    if len(table) and not table["latency_s"].notna().any():
        raise LUTMissError(
            f"the LUT {lut.source} covers none of the {len(table)} blocks of {label} on {key} (coverage 0 %), e.g. "
            f"{missing[0]}: it holds other models, resolutions or variants. Measure {name} there "
            f"(`dsprof measure --model {name}`, the same options) and rebuild the LUT."
        )
    if not missing:
        return
    message = (
        f"LUT {lut.source} lacks {len(missing)} key(s) for {label} on {key}: " + "; ".join(missing[:5])
        + ("; ..." if len(missing) > 5 else "")
        + ". Measure this model on that device (`dsprof measure`) and rebuild the LUT."
    )
    if strict:
        raise LUTMissError(message)
    warnings.warn(message, LUTMissWarning, stacklevel=3)


def _context_factor(blocks: list[Block], entries: _ModelEntries, lookup: _Lookup) -> float | None:
    """Sum of the blocks' in-context savings (merged) over the sum of their isolated savings, or None
    without in-context entries or when the two sums disagree in sign (the in-context differences are
    not comparable: TFLite on a CPU, isolated -0.04 ms against +23 % in context, gave -34). Each in-context saving is
    relative to the model timed in its group."""
    in_context, alone = 0.0, 0.0
    for block, original in zip(blocks, entries.originals):
        base = entries.in_model.get(block.name)
        swap = lookup(context_workload(entries.label, block.name), "merged", "context")
        merged = lookup(block.spec.to_str(), "merged")
        if base is None or swap is None or merged is None or original is None:
            continue
        in_context += 1 - swap.median_s / base.median_s
        alone += (original.median_s - merged.median_s)
    if alone == 0.0 or in_context == 0.0:
        return None
    whole_ref = statistics.median(e.median_s for e in entries.in_model.values() if e is not None)
    factor = in_context * whole_ref / alone
    return factor if factor > 0 else None


def measure_planned(
    model: str | nn.Module,
    context: DeviceContext,
    plan: Any = None,
    *,
    lut: LUT | None = None,
    name: str | None = None,
    options: Mapping[str, Any] | None = None,
    out: str | Path = "results/predict-check",
    progress: bool = True,
):
    """Measure ``model``, merged per ``plan`` when given, as one whole model on this machine in
    ``context`` (its backend, dtype, layout, batch, threads): the independent measurement that
    `dsprof predict --measure` sets beside a prediction. Where the plan leaves the merge of a
    linearised block open, ``lut``'s savings in that context decide, as `predict_latency` assumes.
    Returns the `dsprof.profiler.Measurement` (its ``median_s`` in seconds per batch);
    `measure_planned_run` returns the whole run (its drift probe records too)."""
    result = measure_planned_run(model, context, plan, lut=lut, name=name, options=options, out=out, progress=progress)
    return next(r for r in result.measurements if r.scope == "model" and r.ok)


def measure_planned_run(
    model: str | nn.Module,
    context: DeviceContext,
    plan: Any = None,
    *,
    lut: LUT | None = None,
    name: str | None = None,
    options: Mapping[str, Any] | None = None,
    out: str | Path = "results/predict-check",
    progress: bool = True,
):
    """`measure_planned`, returning the `dsprof.profiler.MeasureResult` of its run."""
    from ..merge import merge_model
    from ..profiler import measure

    name, net = named_model(model, name, None, dict(options or {}))
    if plan is not None:
        from ..merge.plan import Plan

        plan = Plan.coerce(plan)
        savings = None
        if lut is not None:
            view = lut.savings(context)
            savings = dict(zip(view.workload, view.saving_s))
        net = merge_model(net, plan, savings=savings)
        name = f"{name}-{plan.name or 'plan'}"
    # the merged model as a model of its own: its blocks are not the original's (no stem/head split)
    return measure(net, name=name, variants=(), model_variants=(), extra_models={name: net}, blocks=None,
                   out=out, overwrite=True, progress=progress, **context.measure_options())
