"""Predicting a model's latency from a LUT: stem + blocks (original or merged per the plan) + head."""

from __future__ import annotations

import math
import statistics
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
from torch import nn

from ..errors import LUTError, UsageError
from ..models import find_blocks, format_span, input_size_of, model_flags, model_identity, named_model
from ..device_context import DeviceContext
from ..profiler.probe import PROBE_GROUPS_VARIANT, PROBE_NAME, PROBE_SCOPE
from .cost import (CONTEXT_FACTOR_RANGE, MethodFallbackWarning, ModelEntries as _ModelEntries, Piece, PlanCosts,
                   median_error_s)
from .schema import METHODS, model_label
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
    "plan_costs",
    "predict_latency",
    "predict_plan",
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
_Z95 = 1.959964  # two-sided 95 % normal quantile
_IQR_TO_SD = 1 / 1.349  # IQR of a normal distribution = 1.349 standard deviations
_MAD_TO_SD = 1.4826
_RESTS = ("auto", "stem+head", "model-minus-blocks")


@dataclass(frozen=True)
class Prediction:
    """A predicted latency (seconds per batch) with its parts, its method, its interval and its coverage.

    ``method`` (``isolated (context-scaled fell back: WHY)`` where context-scaled could not apply) says how the
    blocks' changes were counted: ``isolated`` (savings of blocks timed
    alone), ``context`` (savings measured inside the running model) or ``context-scaled (xF)``
    (the isolated savings times F, the model's in-context over isolated savings). ``rest_s`` is everything
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
        merged = int(self.blocks["variant"].isin(("merged", "span")).sum())
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
    says merging saves time (`PlanCosts.with_merges`, the list every command that builds the merged model
    replays), and as ``linear`` (else ``original``) where not; each of the plan's ``spans`` counts its one convolution's entry
    (`dsprof measure --spans N`) instead of its blocks'. `dsprof.lut.cost.PlanCosts` prices the pieces. ``options`` are the
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
    if method not in METHODS:
        raise UsageError(f"method is one of {', '.join(METHODS)}, got {method!r}")
    if rest not in _RESTS:
        raise LUTError(f"rest is 'auto', 'stem+head' or 'model-minus-blocks', got {rest!r}")
    if variant is not None and plan is not None:
        raise LUTError("give a plan or a variant for every block, not both")
    costs = plan_costs(model, lut, device=device, name=name, options=options, resolution=resolution, rest=rest,
                       method=method, variant=variant)
    return predict_plan(costs, plan, variant=variant, strict=strict, name=name or str(model))


def predict_plan(costs: PlanCosts, plan: Any = None, *, variant: str | None = None, strict: bool = False,
                 name: str | None = None) -> Prediction:
    """`predict_latency` of a plan (or of every block as ``variant``) from the model's `plan_costs`: the one
    function that turns a plan into a predicted latency with its interval (the planner prices its plans here)."""
    lut, key, label, entries = costs.lookup.lut, costs.key, costs.label, costs.entries
    name = name or label.split("{", 1)[0]
    pieces = _pieces(costs, plan, variant, strict)
    drift, drift_source = _drift(entries, costs.lookup(PROBE_NAME, PROBE_GROUPS_VARIANT, PROBE_SCOPE))
    missing = [p.missing for p in pieces if p.missing] + list(costs.missing)
    table = _block_table(costs, pieces)
    found = table["latency_s"].notna()
    _report_misses(costs, name, costs.measure_flags or f"--model {name}", table, missing, strict)
    total, rest_s, rest_method = costs.total_s(pieces), costs.shown_rest_s(pieces), costs.rest_method
    if total <= 0 and rest_method == "model-minus-blocks" and found.all():
        raise LUTError(
            f"the LUT's entries for {label} on {key} contradict each other (predicted {total * 1e3:.3f} ms): "
            "the whole model measured faster than its blocks by more than they take. Measure again on a "
            "quiet machine (see the noisy column) and rebuild the LUT."
        )
    coverage = float(found.mean()) if len(table) else 1.0
    low, high, spread = prediction_interval(total, costs.errors_s(pieces), drift)
    return Prediction(label, key, total, rest_s, rest_method, table, coverage, tuple(missing), costs.used,
                      low, high, spread, drift, drift_source)


def plan_costs(
    model: str | nn.Module,
    lut: LUT | str | Path,
    *,
    device: DeviceContext | str | None = None,
    name: str | None = None,
    options: Mapping[str, Any] | None = None,
    resolution: int | None = None,
    rest: str = "auto",
    method: str = "auto",
    variant: str | None = None,
) -> PlanCosts:
    """The `PlanCosts` that price every plan of ``model`` on one LUT context, with the method resolved
    (``auto``: `auto_method`): what `predict_latency` and the planner both read."""
    lut = lut if isinstance(lut, LUT) else LUT.load(lut)
    key = lut.resolve(device)
    auto = method == "auto"
    method = resolve_method(method, key, rest=rest, variant=variant)  # before any lookup
    options = dict(options or {})
    name, net = named_model(model, name, resolution, options)
    label = model_label(name, profiled_options(net, options))
    blocks = find_blocks(net)
    costs = PlanCosts.read(lut, key, label, blocks, method=method, rest=rest, variant=variant, auto=auto)
    flags = f"{model_flags(name, options)} --resolution {input_size_of(net)[0]}"
    return replace(costs, identity=model_identity(net), measure_flags=flags)


def _pieces(costs: PlanCosts, plan: Any, variant: str | None, strict: bool) -> list[Piece]:
    """The pieces a plan deploys (its merge list, or the one `with_merges` writes: what a merged model built from
    it replays), or every block as ``variant``."""
    if variant is not None:
        return [costs.as_variant(i, variant) for i in range(len(costs.blocks))]
    return costs.pieces(costs.with_merges(plan, strict=strict) if plan is not None else None)


def _block_table(costs: PlanCosts, pieces: list[Piece]) -> pd.DataFrame:
    """One row per block: its variant, latency and saving; a span's on its first block (``span`` names its
    blocks; the others show 0 s)."""
    rows = []
    for p in pieces:
        for i in range(p.start, p.stop):
            first = i == p.start
            block = costs.blocks[i]
            rows.append({"index": i, "block": block.name, "spec": block.spec.to_str(), "variant": p.variant,
                         "latency_s": p.latency_s if first else (0.0 if p.found else float("nan")),
                         "saving_s": p.saving_s if first else 0.0, "noisy": p.noisy,
                         "span": format_span((p.start, p.stop)) if p.stop - p.start > 1 else ""})
    return pd.DataFrame(rows, columns=["index", "block", "spec", "variant", "latency_s", "saving_s", "noisy", "span"])


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


def _report_misses(costs: PlanCosts, name: str, flags: str, table: pd.DataFrame, missing: list[str], strict: bool) -> None:
    """No block in the LUT raises (nothing to add up, whatever ``strict`` says; saying what the LUT holds
    instead where it holds other models); other misses warn, or raise with ``strict``. Called from
    `predict_plan` under `predict_latency`: the warning points at its caller."""
    lut, key, label = costs.lookup.lut, costs.key, costs.label
    if len(table) and not table["latency_s"].notna().any():
        held = costs.lookup.other_model_note(label) or "it holds other models, resolutions or variants"
        raise LUTMissError(
            f"the LUT {lut.source} covers none of the {len(table)} blocks of {label} on {key} (coverage 0 %), e.g. "
            f"{missing[0]}: {held}. Or measure {name} there (`dsprof measure {flags}`) and rebuild the LUT."
        )
    if not missing:
        return
    message = (
        f"LUT {lut.source} lacks {len(missing)} key(s) for {label} on {key}: " + "; ".join(missing[:5])
        + ("; ..." if len(missing) > 5 else "")
        + f". Measure this model on that device (`dsprof measure {flags}`) and rebuild the LUT."
    )
    if strict:
        raise LUTMissError(message)
    warnings.warn(message, LUTMissWarning, stacklevel=4)


def measure_planned(model: str | nn.Module, context: DeviceContext, plan: Any = None, **kwargs: Any):
    """Measure ``model``, merged per ``plan`` when given, as one whole model on this machine in
    ``context`` (its backend, dtype, layout, batch, threads): the independent measurement that
    `dsprof predict --measure` sets beside a prediction. A plan without a ``merge`` list has it written by
    ``lut``'s rule in that context (`dsprof.merge.rule.decide_merges`), as `predict_latency` prices it.
    Keywords (``lut``, ``name``, ``options``, ``out``, ``progress``) as `measure_planned_run`, which returns
    the whole run (its drift probe records too). Returns the `dsprof.profiler.Measurement` (its ``median_s``
    in seconds per batch)."""
    result = measure_planned_run(model, context, plan, **kwargs)
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
    """`measure_planned`, returning the `dsprof.profiler.MeasureResult` of its run (the merged model's record
    and the drift probe's)."""
    from ..merge.rule import merge_by_rule
    from ..profiler import measure

    name, net = named_model(model, name, None, dict(options or {}))
    if plan is not None:
        net, merges = merge_by_rule(net, plan, lut=lut, device=context, name=name, options=options)
        name = f"{name}-{merges.plan.name or 'plan'}"
    # the merged model as a model of its own: its blocks are not the original's (no stem/head split)
    return measure(net, name=name, variants=(), model_variants=(), extra_models={name: net}, blocks=None,
                   out=out, overwrite=True, progress=progress, **context.measure_options())
