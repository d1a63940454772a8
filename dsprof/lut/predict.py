"""Predicting a model's latency from a LUT: stem + blocks (original or merged per the plan) + head."""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
from torch import nn

from .._moved import moved_keywords
from ..errors import HINT, LUTError, UsageError
from ..models import find_blocks, format_span, input_size_of, model_args, model_identity, ModelRef
from ..device_context import DeviceContext
from ..records.merges import check_merges
from .lookup import in_model_factor
from .piece import Piece, comparable
from .prices import CalibrationFallbackWarning, MethodFallbackWarning, Prices
from .interval import TOO_WIDE, WIDE_WHY, Estimate, Estimated, plan_bounds, ratio_bounds
from ..names import OLD_METHOD_NAMES, PREDICT_METHODS
from .schema import model_label
from .table import LUT, LUTMissError, LUTMissWarning

__all__ = [
    "CalibrationFallbackWarning",
    "MethodFallbackWarning",
    "Prediction",
    "auto_method",
    "method_name",
    "prices_of",
    "predict_latency",
    "predict_plan",
    "predict_ratio",
    "profiled_options",
    "resolve_method",
    "with_probe",
]


#: The columns of `Prediction.blocks`, one row per block.
BLOCK_COLUMNS = ("index", "block", "spec", "variant", "latency_s", "saving_s", "noisy", "span", "in_model")
_LATENCY = BLOCK_COLUMNS.index("latency_s")

# The ways to predict (`dsprof.names.PREDICT_METHODS`): ``isolated`` (the whole model minus the savings of blocks timed alone),
# ``in-model`` (those savings times the middle of 1 and the model's in-model factor: its blocks take that much
# longer inside the whole model than alone), ``in-situ`` (minus the savings measured inside the running model,
# `dsprof measure --in-situ`), ``in-situ-scaled`` (the isolated savings times one factor, the in-situ savings
# of all the model's blocks over their isolated savings). The scaled and in-situ methods start from the median of
# the whole model's medians: its own entry and every in-situ group. ``auto``: `auto_method`. The older names
# ``context`` and ``context-scaled`` are read for one release (`dsprof.names.OLD_METHOD_NAMES`).
#: What stands for the part of the model outside its blocks (`predict_latency`'s ``rest``).
_RESTS = ("auto", "stem+head", "model-minus-blocks")


@dataclass(frozen=True)
class Prediction(Estimated):
    """A plan's predicted speed-up over the original model in the same LUT context, with its 95 % interval, then
    its predicted latency (seconds per batch) with its parts, its method, its interval and its coverage.

    ``speedup_estimate`` is the original's predicted latency (``original_s``) over the plan's (``latency_estimate``),
    each an `Estimate` with its 95 % interval as `dsprof.lut.interval.plan_bounds` built it (read flat: ``speedup``,
    ``speedup_low``, ``speedup_high``; ``total_s``, ``low_s``, ``high_s``). The speed-up is the number to trust on a
    machine that moves (docs/predictions.md). The intervals' parts are relative half-widths:
    ``lut_spread`` (the LUT medians the savings add up), ``systematic`` (blocks timed alone against the whole
    model, ``systematic_source``), ``check`` (the noise of a paired check, speed-up only; ``check_source``) and
    ``drift`` (the machine between groups and runs, latency only; ``drift_source`` says from what).
    ``measured_utc``: when the LUT context's last group was timed, the moment its milliseconds belong to.

    ``method`` (``isolated (in-model fell back: WHY)`` where a method could not apply) says how the
    blocks' changes were counted: ``isolated`` (savings of blocks timed alone), ``in-model (xF)``,
    ``in-situ`` (savings measured inside the running model) or ``in-situ-scaled (xF)``. ``rest_s`` is everything
    outside the blocks: the whole original model minus its blocks, both measured on the device
    (``"model-minus-blocks"``), or the stem and head timed alone (``rest_method="stem+head"``);
    under ``in-situ`` the whole model is the reference and ``rest_method`` is ``"whole-model"``. It is below
    zero where the whole model measured faster than the sum of its blocks timed alone (``str`` says so).
    ``coverage`` is the share of blocks found in the LUT; ``missing`` names the misses.
    ``probe_ratio``: how much slower (> 1) the machine ran the drift probe now than in the LUT's runs, by
    which the milliseconds are scaled (`with_probe`); NaN when not probed.
    """

    model: str
    device: DeviceContext
    latency_estimate: Estimate  # seconds per batch, with its 95 % interval
    rest_s: float
    rest_method: str
    block_rows: tuple[tuple[Any, ...], ...] = field(repr=False)  # ``blocks``' rows, in `BLOCK_COLUMNS` order
    coverage: float
    missing: tuple[str, ...]
    method: str = "isolated"
    speedup_estimate: Estimate = Estimate.unknown()  # over the original, with its 95 % interval
    lut_spread: float = 0.0
    drift: float = 0.0
    drift_source: str = "none"
    probe_ratio: float = float("nan")
    original_s: float = float("nan")
    systematic: float = 0.0
    systematic_source: str = "none"
    check: float = 0.0
    check_source: str = "none"
    measured_utc: str = ""
    factor: float = 1.0  # what each block's saving timed alone counts with under ``method`` (`Prices.factor`)
    in_model_factor: float | None = None  # the blocks' time inside the whole model over their time alone

    @functools.cached_property
    def blocks(self) -> pd.DataFrame:
        """One row per block (`BLOCK_COLUMNS`): its variant, latency and saving; a span's on its first block (``span``
        names its blocks; the others show 0 s); ``in_model``: its piece's saving was timed inside the model
        (`dsprof.lut.inmodel`). Built when first read: the planner prices thousands of plans and reads none of them."""
        return pd.DataFrame(list(self.block_rows), columns=list(BLOCK_COLUMNS))

    @property
    def total_s(self) -> float:
        """The predicted latency (seconds per batch): ``latency_estimate``'s value."""
        return self.latency_estimate.value

    @property
    def fps(self) -> float:
        """Images per second at the LUT's batch size."""
        return self.device.batch / self.total_s

    def contains(self, measured_s: float) -> bool:
        """Whether a measured latency (seconds) falls inside the prediction's interval."""
        return self.latency_estimate.contains(measured_s)

    def contains_speedup(self, measured: float) -> bool:
        """Whether a measured speed-up (original over merged, paired) falls inside the prediction's interval."""
        return self.speedup_estimate.contains(measured)

    @property
    def when(self) -> str:
        """When the milliseconds hold: the LUT's measurement time, or now (scaled by the drift probe)."""
        measured = f"as measured {_short_time(self.measured_utc)}" if self.measured_utc else "as measured"
        if self.probe_ratio == self.probe_ratio:
            return f"scaled to now by the drift probe ({self.probe_ratio:.3f}x the LUT's time; LUT {measured[3:]})"
        return f"{measured} (the LUT's runs)"

    def speedup_line(self) -> str:
        """The speed-up over the original with its interval and parts, one line."""
        return (f"speed-up {self.speedup:.3f}x over the original (95 % interval {self.speedup_low:.3f}-"
                f"{self.speedup_high:.3f}x: LUT entries +-{self.lut_spread:.1%}, systematic +-{self.systematic:.1%}, "
                f"a paired check's noise +-{self.check:.1%})")

    def latency_line(self) -> str:
        """The latency with its interval and when it holds, one line."""
        return (f"latency {self.total_s * 1e3:.3f} ms per batch of {self.device.batch} ({self.fps:.1f} FPS; the "
                f"original {self.original_s * 1e3:.3f} ms) {self.when}, 95 % interval {self.low_s * 1e3:.3f}-"
                f"{self.high_s * 1e3:.3f} ms (drift +-{self.drift:.1%} from {self.drift_source})")

    def method_line(self) -> str:
        """How the blocks' changes were counted, with what each factor shown multiplies."""
        phi = self.in_model_factor
        if self.method.startswith("in-model") and phi is not None:
            if math.isclose(self.factor, (1 + phi) / 2):
                return (f"method in-model: each saving of a block timed alone counts x{self.factor:.3f}, the middle of "
                        f"x1 and the in-model factor {phi:.3f} (the blocks' time inside the whole model over their time "
                        "alone, the systematic range above)")
            return (f"method in-model: each saving of a block timed alone counts x{self.factor:.3f}, the scale its "
                    f"pieces timed inside the model give (the in-model factor {phi:.3f}, the blocks' time inside the "
                    "whole model over their time alone, bounds the systematic range above)")
        if self.method.startswith("in-situ-scaled"):
            return (f"method in-situ-scaled: each saving of a block timed alone counts x{self.factor:.3f} (the "
                    "blocks' savings measured inside the model over their savings timed alone)")
        return f"method {self.method}"

    def to_dict(self) -> dict[str, Any]:
        """The prediction as JSON-ready values: the speed-up first, then the milliseconds (in seconds) and when
        they were measured, the parts of the intervals, the method and the blocks."""
        return {"model": self.model, "device": str(self.device), "speedup": self.speedup,
                "speedup_low": self.speedup_low, "speedup_high": self.speedup_high, "latency_s": self.total_s,
                "low_s": self.low_s, "high_s": self.high_s, "original_s": self.original_s,
                "measured_utc": self.measured_utc, "probe_ratio": None if self.probe_ratio != self.probe_ratio
                else self.probe_ratio, "interval": {"lut_spread": self.lut_spread, "systematic": self.systematic,
                                                    "systematic_source": self.systematic_source,
                                                    "check": self.check, "check_source": self.check_source,
                                                    "drift": self.drift,
                                                    "drift_source": self.drift_source},
                "method": self.method, "rest_s": self.rest_s, "rest_method": self.rest_method,
                "coverage": self.coverage, "missing": list(self.missing),
                "blocks": self.blocks.to_dict(orient="records")}

    def __str__(self) -> str:
        merged = int(self.blocks["variant"].isin(("merged", "span")).sum())
        return (
            f"{self.model} on {self.device}:\n  {self.speedup_line()}\n  {self.latency_line()}\n"
            f"  systematic: {self.systematic_source}; a check's noise from {self.check_source}\n"
            f"  {self.method_line()}; {merged} of {len(self.blocks)} blocks merged; "
            f"coverage {self.coverage:.0%}; rest ({self.rest_method}) {self.rest_s * 1e3:.3f} ms"
            + (": below zero: the whole model measured faster than the sum of its blocks timed alone (noise, see "
               "the LUT's noisy column, or overhead a block pays only when timed alone); the total is still the whole "
               "model minus the blocks' savings" if self.rest_s < 0 else "")
            + (f"\ntoo wide to act on: the speed-up's 95 % interval spans more than a factor of {TOO_WIDE:g}. "
               f"{WIDE_WHY}" if self.too_wide else "")
            + (f"\nPARTIAL PREDICTION: the LUT lacks {len(self.missing)} of the keys it needs (block coverage "
               f"{self.coverage:.0%}); the total leaves their latency out" if self.missing else "")
        )


def _short_time(iso: str) -> str:
    """``2026-11-27T02:29:24+00:00`` as ``2026-11-27 02:29 UTC``."""
    return f"{iso[:10]} {iso[11:16]} UTC" if len(iso) >= 16 else iso


def profiled_options(model: nn.Module, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The model options as `dsprof measure` records them: the build options plus the resolution."""
    out = dict(options or {})
    h, w = input_size_of(model)
    out["resolution"] = h
    if h != w:
        out["resolution_w"] = w
    return out


def predict_latency(
    model: str | nn.Module | ModelRef,
    lut: LUT | str | Path,
    plan: Any = None,
    *,
    device: DeviceContext | str | None = None,
    strict: bool = False,
    variant: str | None = None,
    rest: str = "auto",
    method: str = "auto",
    **old: Any,
) -> Prediction:
    """Latency of ``model`` (anything `ModelRef.of` takes: a registered name, a ``path.py:factory`` file, an
    ``nn.Module``, or a `ModelRef` with its name, options and resolution:
    ``ModelRef.of("mobilenet_v2", options={"width": 1.4}, resolution=160)``) on one LUT context.

    ``plan`` (a `dsprof.planning.Plan`, preset name or plan file) says which blocks are merged: a
    linearised block counts as merged where the plan's ``merge`` list says so, else where the LUT
    prices merging lower (`Prices.linearized`: the planner's choice, the list every command that builds the merged
    model replays), and as ``linear`` (else ``original``) where not; each of the plan's ``spans`` counts its one convolution's entry
    (`dsprof measure --spans N`) instead of its blocks'. `dsprof.lut.prices.Prices` prices the pieces. Misses warn, or
    raise with ``strict=True``.
    ``variant`` (instead of a plan) counts every block as that LUT variant, e.g. ``"flops_matched"``
    for the paper's Tab. 1 dense counterpart of the whole model. ``rest`` picks what stands for the
    part outside the blocks: ``"stem+head"`` (timed alone), ``"model-minus-blocks"`` (the measured
    original model minus its measured blocks) or ``"auto"``: the latter where the LUT has the whole
    model, else the former. ``method`` (`dsprof.names.PREDICT_METHODS`): count the blocks' changes as measured alone
    (``isolated``), alone times the middle of 1 and the model's in-model factor (``in-model``), inside the running
    model (``in-situ``, from `dsprof measure --in-situ` entries), or alone but scaled by the model's in-situ /
    isolated savings (``in-situ-scaled``); ``auto`` is `auto_method`'s choice. The prediction says which it used,
    and carries the speed-up over the original and the latency, each with its 95 % interval (`dsprof.lut.interval`).
    The keywords of before (``name=``, ``options=``, ``resolution=``) still work for a release, with a
    `DeprecationWarning`.
    """
    ref = _model_ref(model, old, "dsprof.lut.predict_latency")
    method = method_name(method)
    if rest not in _RESTS:
        raise LUTError(f"rest is 'auto', 'stem+head' or 'model-minus-blocks', got {rest!r}")
    if variant is not None and plan is not None:
        raise LUTError("give a plan or a variant for every block, not both")
    prices = prices_of(ref, lut, device=device, rest=rest, method=method, variant=variant)
    return predict_plan(prices, plan, variant=variant, strict=strict, name=ref.name)


def predict_plan(prices: Prices, plan: Any = None, *, variant: str | None = None, strict: bool = False,
                 name: str | None = None) -> Prediction:
    """`predict_latency` of a plan (or of every block as ``variant``) from the model's `prices_of`: the one
    function that turns a plan into a predicted latency with its interval (the planner prices its plans here)."""
    key, label = prices.key, prices.label
    name = name or label.split("{", 1)[0]
    pieces = _pieces(prices, plan, variant, strict)
    missing = [p.missing for p in pieces if p.missing] + list(prices.missing)
    rows = _block_rows(prices, pieces)
    found = [not math.isnan(row[_LATENCY]) for row in rows]
    widest = max((p.stop - p.start for p in pieces if p.missing), default=1)  # the spans to time, if any
    _report_misses(prices, name, len(rows), any(found), missing, strict, widest)
    total, rest_s, rest_method = prices.total_s(pieces), prices.shown_rest_s(pieces), prices.rest_method
    if total <= 0 and all(found):  # no latency is 0 or less, whichever method priced it
        why = ("the whole model measured faster than its blocks by more than they take"
               if prices.method == "isolated" else "the savings it prices add up to more than the whole model takes")
        raise LUTError(
            f"the LUT's entries for {label} on {key} contradict each other (predicted {total * 1e3:.3f} ms): "
            f"{why}. Measure again on a quiet machine (see the noisy column) and rebuild the LUT."
        )
    coverage = sum(found) / len(found) if found else 1.0
    original = prices.total_s(prices.pieces(None))
    terms = prices.terms
    b = plan_bounds(pieces, total, original, terms)
    return Prediction(label, key, b.latency, rest_s, rest_method, rows, coverage, tuple(missing), prices.used,
                      b.speedup, b.entries, b.drift, terms.drift_source, factor=prices.factor,
                      in_model_factor=in_model_factor(prices.entries), original_s=original, systematic=b.systematic,
                      systematic_source=terms.systematic_source, check=b.check, check_source=terms.check_source,
                      measured_utc=prices.measured_utc)


def predict_ratio(prices: Prices, plan: Any, reference: Any) -> Estimate:
    """Predicted latency of ``plan`` over that of ``reference`` (each a `dsprof.planning.Plan`, or None for the original
    model) in ``prices``' context, both deployed as `predict_plan` deploys them, with the 95 % interval of
    `dsprof.lut.interval.ratio_bounds` with the model's terms (a plan's loss against another is it minus 1)."""
    a, b = predict_plan(prices, plan, strict=True), predict_plan(prices, reference, strict=True)  # misses raise
    mine, theirs = _pieces(prices, plan, None, True), _pieces(prices, reference, None, True)
    return ratio_bounds(mine, a.total_s, theirs, b.total_s, prices.terms)


def prices_of(
    model: str | nn.Module | ModelRef,
    lut: LUT | str | Path,
    *,
    device: DeviceContext | str | None = None,
    rest: str = "auto",
    method: str = "auto",
    variant: str | None = None,
    **old: Any,
) -> Prices:
    """The `Prices` that price every plan of ``model`` (anything `ModelRef.of` takes; a `ModelRef` carries its name,
    options and resolution) on one LUT context, with the method resolved (``auto``: `auto_method`): what
    `predict_latency` and the planner both read. The keywords of before (``name=``, ``options=``, ``resolution=``)
    still work for a release, with a `DeprecationWarning`."""
    ref = _model_ref(model, old, "dsprof.lut.prices_of")
    lut = lut if isinstance(lut, LUT) else LUT.load(lut)
    key = lut.resolve(device)
    auto = method == "auto"
    method = resolve_method(method, key, rest=rest, variant=variant)  # before any lookup
    name, options, net = ref.name, dict(ref.options), ref.build()
    label = model_label(name, profiled_options(net, options))
    blocks = find_blocks(net)
    args = model_args(name, options, input_size_of(net)[0])
    prices = Prices.read(lut, key, label, blocks, method=method, rest=rest, variant=variant, auto=auto, model_args=args)
    return replace(prices, identity=model_identity(net))


#: The keywords `prices_of` and `predict_latency` took beside the model before (deprecated): each -> (the parameter
#: that holds it now, its object, field).
_OLD_KEYWORDS = {k: ("model", "ModelRef.of", k) for k in ("name", "options", "resolution")}


def _model_ref(model: str | nn.Module | ModelRef, old: Mapping[str, Any], verb: str) -> ModelRef:
    """``model`` as one `ModelRef` (`ModelRef.of`), with the keywords of before (``old``: ``name=``, ``options=``,
    ``resolution=``) in place of its own, said once (`DeprecationWarning`, pointing at ``verb``'s caller)."""
    moved = moved_keywords(verb, old, _OLD_KEYWORDS, stacklevel=4)
    return ModelRef.of(model, **moved.get("model", {}))


def _pieces(prices: Prices, plan: Any, variant: str | None, strict: bool) -> list[Piece]:
    """The pieces a plan deploys (checked against the model, `check_merges`), or every block as ``variant``. Without
    a ``merge`` list, each block it linearises alone is priced as the planner deploys it (`Prices.linearized`: the
    cheaper way, the list `dsprof.planning.decide` writes and a merged model built from it replays); with ``strict``, a
    block the LUT cannot decide that for raises its miss."""
    if variant is not None:
        return [prices.as_variant(i, variant) for i in range(len(prices.blocks))]
    if plan is None:
        return prices.pieces(None)
    plan = check_merges(plan, prices.identity, len(prices.blocks))
    pieces = prices.pieces(plan)
    if strict and plan.merge is None:
        undecided = [p.start for p in pieces if p.stop - p.start == 1 and not p.kept and not comparable(
            prices.linearized(p.start, True, plan.border), prices.linearized(p.start, False, plan.border))]
        if undecided:
            raise prices.hints.undecided(undecided)
    return pieces


def _block_rows(prices: Prices, pieces: list[Piece]) -> tuple[tuple[Any, ...], ...]:
    """`Prediction.blocks`' rows (`BLOCK_COLUMNS`), one per block: a span's latency and saving on its first block."""
    rows = []
    for p in pieces:
        span = format_span((p.start, p.stop)) if p.stop - p.start > 1 else ""
        for i in range(p.start, p.stop):
            first = i == p.start
            block = prices.blocks[i]
            rows.append((i, block.name, block.spec.to_str(), p.variant,
                         p.latency_s if first else (0.0 if p.found else float("nan")),
                         p.saving_s if first else 0.0, p.noisy, span, p.in_model))
    return tuple(rows)


def auto_method(context: DeviceContext) -> str:
    """The method ``auto`` asks for: ``in-model`` in every context. The blocks of a whole model take longer
    inside it than timed alone (PyTorch eager on a 2-core CPU: 26-41 % of the model's time beyond its stem, head
    and blocks, ONNX Runtime 6-17 %), and a plan that merges many blocks saves part of that too: the merged
    models of issue #27's early data ran up to 14 % faster than the isolated savings predicted (PyTorch), always
    between the isolated savings and the in-model factor times them. Where the LUT lacks the model's stem, head
    or whole-model entry, the prediction is ``isolated``."""
    return "in-model"


def resolve_method(method: str, context: DeviceContext, *, rest: str = "auto", variant: str | None = None) -> str:
    """The method a prediction in ``context`` asks for (``auto`` resolved by `auto_method`), checked against
    ``rest`` and ``variant`` before any lookup; raises `UsageError` on a method that cannot apply. The
    scaled and in-situ methods start from the whole model, so they take ``rest="auto"`` (or
    ``"model-minus-blocks"``) and a plan, not a variant for every block; ``auto`` with either of those asks for
    ``isolated``."""
    method = method_name(method)
    if method == "auto":
        return "isolated" if rest == "stem+head" or variant is not None else auto_method(context)
    if method != "isolated" and variant is not None:
        raise UsageError(f"the {method} method predicts plans; give a plan, not a variant for every block "
                         "(or method 'isolated')")
    if method != "isolated" and rest == "stem+head":
        raise UsageError(f"the {method} method starts from the whole model measured, not from its stem and head: "
                         "give rest 'auto' (or method 'isolated' with rest 'stem+head')")
    return method


def method_name(method: str) -> str:
    """``method`` as `dsprof.names.PREDICT_METHODS` spells it: an older name (``context``, ``context-scaled``) is
    read as its new one, with a `FutureWarning` (for one release); an unknown one raises `UsageError`."""
    if method in OLD_METHOD_NAMES:
        warnings.warn(f"method {method!r} is now called {OLD_METHOD_NAMES[method]!r} (\"context\" names the device "
                      "context only); the old name is read until the next release", FutureWarning, stacklevel=3)
        return OLD_METHOD_NAMES[method]
    if method not in PREDICT_METHODS:
        raise UsageError(f"method is one of {', '.join(PREDICT_METHODS)}, got {method!r}")
    return method


def _report_misses(prices: Prices, name: str, blocks: int, any_found: bool, missing: list[str], strict: bool,
                   max_span: int = 1) -> None:
    """No block in the LUT raises (nothing to add up, whatever ``strict`` says; saying what the LUT holds
    instead where it holds other models); other misses warn, or raise with ``strict``. Each names what to time
    (spans of up to ``max_span`` blocks). Called from `predict_plan` under `predict_latency`: the warning points
    at its caller."""
    lut, key, label = prices.lookup.lut, prices.key, prices.label
    if blocks and not any_found:
        held = prices.lookup.other_model_note(label) or "it holds other models, resolutions or variants"
        raise LUTMissError(
            f"the LUT {lut.source} covers none of the {blocks} blocks of {label} on {key} (coverage 0 %), e.g. "
            f"{missing[0]}: {held}. Or measure {name} there ({HINT}) and rebuild the LUT.",
            hint=prices.hints.measure_hint(max_span),
        )
    if not missing:
        return
    message = (
        f"LUT {lut.source} lacks {len(missing)} key(s) for {label} on {key}: " + "; ".join(missing[:5])
        + ("; ..." if len(missing) > 5 else "")
        + f". Measure this model on that device ({HINT}) and rebuild the LUT."
    )
    hint = prices.hints.measure_hint(max_span)
    if strict:
        raise LUTMissError(message, hint=hint)
    warnings.warn(LUTMissWarning(message, hint=hint), stacklevel=4)


def with_probe(pred: Prediction, ratio: float) -> Prediction:
    """``pred``'s milliseconds scaled by the probe's ``ratio`` (> 1: the machine is slower now than in the LUT's
    runs): its total, the original's and the latency interval (whose relative width stays: the machine can move
    again before a later measurement). The speed-up stays: both latencies scale alike."""
    if not ratio > 0:
        raise UsageError(f"a probe ratio is > 0, got {ratio}")
    return replace(pred, latency_estimate=pred.latency_estimate.scaled(ratio), original_s=pred.original_s * ratio,
                   probe_ratio=ratio)
