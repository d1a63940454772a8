"""`dsprof predict` as a Python function: a plan's predicted speed-up and latency from a LUT, the plan's merges
written once by the one rule (priced and, with ``check``, measured alike), scaled to now by the drift probe where
asked, and checked against the merged model and the original timed interleaved here (`dsprof.workflows.check`).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from torch import nn

from .._moved import as_request, moved_keywords
from ..errors import LUTMissError, PartialPredictionError, UsageError
from ..fields import shown
from ..io import atomic_write_text, check_output_path
from ..lut.choice import Pricing
from ..lut.interval import lut_probe, probe_ratio
from ..lut.predict import Prediction, predict_latency, with_probe
from ..planning.decide import merge_rule
from ..lut.table import LUT, LUTMissWarning
from ..records.merges import Merges
from ..models import ModelRef
from ..profiler.fingerprint import environment, environment_id
from ..profiler.probe import probe_now
from ..profiler.timing import TimingConfig
from ..units import percent
from .check import CheckSettings, PairedCheck, check_line, measure_planned_run, paired_check, planned_name

__all__ = ["CheckSettings", "Checked", "Predicted", "predict"]


@dataclass(frozen=True)
class Checked:
    """A prediction checked here (`predict(check=True)`): the measurement file, the paired check of the plan's
    merged model against the original (None without a plan: the original timed alone), the model's measured latency
    (seconds per batch), and the drift probe's ratio during the measurement against the LUT's runs (None where the
    LUT has no probe); ``here``: whether this machine is the LUT context's environment."""

    path: Path
    paired: PairedCheck | None
    measured_s: float
    probe_ratio: float | None
    here: bool

    def to_dict(self, prediction: Prediction) -> dict[str, Any]:
        """The check as JSON-ready values, against ``prediction``: the paired speed-up first, then the latency."""
        out: dict[str, Any] = {"file": str(self.path)}
        if self.paired is not None:
            s = self.paired.speedup
            out.update(speedup=s.ratio, speedup_low=s.low, speedup_high=s.high, pairs=s.pairs,
                       inside=prediction.contains_speedup(s.ratio), original_s=self.paired.original_s)
        out.update(latency_s=self.measured_s, latency_inside=prediction.contains(self.measured_s),
                   probe_ratio=self.probe_ratio)
        return out


@dataclass(frozen=True)
class Predicted:
    """What `predict` found: the prediction, the plan's merges and what decided them (None without a plan), and the
    check (None unless asked for)."""

    prediction: Prediction
    merges: Merges | None = None
    check: Checked | None = None

    def head(self, words: Callable[[str], str] = str) -> str:
        """What `dsprof predict` prints before it checks: the prediction, the plan's merges and, where the drift probe
        was not timed, how to time it; in the caller's words (``words``: `dsprof.cli.flags.command_line_text` gives
        the command line's options where this names parameters)."""
        lines = [str(self.prediction)]
        if self.merges is not None:
            lines.append(words(self.merges.describe()))
        if self.prediction.probe_ratio != self.prediction.probe_ratio:  # NaN: not timed
            lines.append(words("drift probe: not timed; `probe=2` times it here for 2 s and scales the milliseconds by "
                               "this machine's speed now against the LUT's runs (the speed-up needs no scaling)"))
        return "\n".join(lines)

    def check_text(self) -> str:
        """The check's lines (empty without one): the paired speed-up against the predicted one (the plan's interval),
        then the milliseconds and the drift probe during it."""
        checked, pred = self.check, self.prediction
        if checked is None:
            return ""
        lines = [f"check: {check_line(checked.paired, pred)}" if checked.paired is not None else
                 "check: no plan, so nothing to pair: the original model timed alone"]
        measured_s = checked.measured_s
        where = "inside" if pred.contains(measured_s) else "OUTSIDE"
        lines.append(f"  measured {measured_s * 1e3:.3f} ms per batch ({pred.device.batch / measured_s:.1f} FPS) now; "
                     f"predicted {pred.total_s * 1e3:.3f} ms {pred.when}: error {percent(pred.total_s / measured_s - 1)}, "
                     f"{where} the 95 % interval {pred.low_s * 1e3:.3f}-{pred.high_s * 1e3:.3f} ms")
        if checked.probe_ratio is not None:
            ratio = checked.probe_ratio
            lines.append(f"  drift probe: during this measurement the machine ran the reference at {ratio:.3f}x its time "
                         f"in the LUT's runs ({'slower' if ratio > 1 else 'faster'} by {abs(ratio - 1):.1%})")
        return "\n".join(lines)

    def text(self, words: Callable[[str], str] = str) -> str:
        """What `dsprof predict` prints (`head`, then `check_text`), in the caller's words."""
        return "\n".join(part for part in (self.head(words), self.check_text()) if part)

    def __str__(self) -> str:
        return self.text()

    def to_dict(self) -> dict[str, Any]:
        """The prediction (speed-up first, then milliseconds) and the check, as `dsprof predict --json` writes them."""
        out: dict[str, Any] = {"prediction": self.prediction.to_dict()}
        if self.check is not None:
            out["check"] = self.check.to_dict(self.prediction)
        return out


def partial_message(prediction: Prediction, name: str) -> str:
    """What a prediction that lacks some of the LUT's keys lacks, and what to measure."""
    shown = "; ".join(prediction.missing[:3]) + ("; ..." if len(prediction.missing) > 3 else "")
    return (f"the LUT covers {prediction.coverage:.0%} of the blocks; it lacks {len(prediction.missing)} key(s): "
            f"{shown}. Measure {name} on that device and rebuild the LUT")


#: The keywords of before (deprecated): each old keyword -> (the parameter that holds it now, its object, field).
_OLD_KEYWORDS = {
    **{k: ("model", "ModelRef.of", k) for k in ("name", "options", "resolution", "weights")},
    **{k: ("pricing", "Pricing", k) for k in ("device_key", "backend", "batch", "method", "rest", "strict")},
    "check_out": ("check", "CheckSettings", "out"), "check_timing": ("check", "CheckSettings", "timing"),
    "progress": ("check", "CheckSettings", "progress"), "accept_modified": ("lut", "LUT.load", "accept_modified"),
}


def predict(
    model: str | nn.Module | ModelRef,
    lut: LUT | str | Path,
    plan: Any = None,
    *,
    pricing: Pricing | None = None,
    merge_by: str | None = None,
    allow_partial: bool = True,
    probe: float | None = None,
    check: bool | CheckSettings = False,
    json_out: str | Path | None = None,
    on_prediction: Callable[[Predicted], None] | None = None,
    **old: Any,
) -> Predicted:
    """The predicted speed-up and latency of ``model`` (anything `dsprof.models.ModelRef.of` takes: a registered name, a
    ``path.py:factory`` file, an ``nn.Module``, or a `ModelRef` carrying its name, options, resolution and weights:
    ``ModelRef.of("mobilenet_v2", options={"width": 1.4}, resolution=160)``) merged by ``plan`` (a `Plan`, preset
    name or plan file; None: the original) on one context
    of ``lut`` (a `LUT`, or its file; ``LUT.load(path, accept_modified=True)`` for a file changed since `dsprof
    build-lut` wrote it), as ``pricing`` says (a `dsprof.lut.Pricing`: the context -- ``device_key``, or the one
    ``backend`` and ``batch`` leave --, ``method`` and ``rest`` as `dsprof.lut.predict_latency`, and ``strict``: any
    miss an error).

    The plan's merges are its own list, else the LUT's rule, else MACs with ``merge_by="macs"``
    (`dsprof.planning.decide.merge_rule`). ``probe`` (seconds) times the drift probe here and scales the milliseconds
    by this machine's speed now against the LUT's runs. A prediction that lacks some of the LUT's keys raises
    `PartialPredictionError` unless ``allow_partial``. ``check`` (True, or a `CheckSettings`: where the records go,
    the `TimingConfig`, the progress bar) times the merged model and the original interleaved here. ``json_out``:
    also write `Predicted.to_dict` there. ``on_prediction`` is called with the prediction before it is refused or
    checked (what `dsprof predict` prints first). The keywords of before (``name=``, ``options=``, ``resolution=``,
    ``weights=``; ``device_key=``,
    ``backend=``, ``batch=``, ``method=``, ``rest=``, ``strict=``; ``check_out=``, ``check_timing=``,
    ``progress=``; ``accept_modified=``) still work for a release, with a `DeprecationWarning`."""
    moved = moved_keywords("dsprof.predict", old, _OLD_KEYWORDS)
    pricing = as_request(pricing, Pricing, "pricing", moved)
    if not isinstance(check, (bool, CheckSettings)):
        raise UsageError(f"`check=` is True, False or a CheckSettings(...) (where its records go, its timing), not "
                         f"{type(check).__name__} {shown(check)}")
    checking = as_request(check if isinstance(check, CheckSettings) else None, CheckSettings, "check", moved)
    accept_modified = moved.get("lut", {}).get("accept_modified", False)
    method, rest, strict = pricing.method, pricing.rest, pricing.strict
    ref = ModelRef.of(model, **moved.get("model", {}))  # resolved, not built
    if pricing.resolution is not None:
        raise UsageError("`pricing=Pricing(resolution=)` prices a model trained at another size (a search); a "
                         f"prediction prices the model at its own: give `{ref.argument(pricing.resolution)}`")
    check_out, check_timing, progress = checking.out, checking.timing, checking.progress
    if lut is not None and not isinstance(lut, LUT):
        lut = LUT.load(lut, accept_modified=accept_modified)  # before the model is built: a bad file is said at once
    if json_out is not None:
        check_output_path(json_out)
    ref = ref.built()  # built once: decided, priced and checked alike
    name = ref.name
    key = pricing.context(lut)
    merges = None
    if plan is not None:  # its merge list, written once (the LUT's rule, or MACs): priced and measured alike
        merges = merge_rule(ref, lut=lut, device=key, merge_by=merge_by, plan=plan).decide(plan, strict=strict)
    deployed = merges.plan if merges is not None else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LUTMissWarning)  # the misses are in the prediction; said once, below
        prediction = predict_latency(ref, lut, deployed, device=key, strict=strict, rest=rest, method=method)
    if probe is not None:
        entry = lut_probe(lut, key)  # before timing: a LUT without the probe says so at once
        prediction = with_probe(prediction, probe_ratio(probe_now(key, probe), entry))  # another machine is refused
    result = Predicted(prediction, merges)
    if on_prediction is not None:
        on_prediction(result)
    if prediction.missing:
        if not allow_partial:
            raise PartialPredictionError(partial_message(prediction, name) + ", or pass `allow_partial=True` to accept a "
                                         "partial prediction")
        warnings.warn(partial_message(prediction, name), stacklevel=2)
    if check:
        result = Predicted(prediction, merges, _check(ref, lut, key, deployed, check_out, progress, check_timing))
    if json_out is not None:
        atomic_write_text(json_out, json.dumps(result.to_dict(), indent=1, default=str) + "\n")
    return result


def _check(model: ModelRef, lut: LUT, key: Any, plan: Any, out: str | Path, progress: bool,
           timing: TimingConfig | None) -> Checked:
    """The merged model (the plan's merge list, as priced) and the original timed interleaved in one group here."""
    here = environment_id(environment()) == key.env_id
    if not here:
        warnings.warn(f"the LUT context {key} is another environment than this machine's; the measurement is taken "
                      "here", stacklevel=3)
    run = measure_planned_run(model, key, plan, out=out, progress=progress, timing=timing)
    paired = paired_check(run.measurements, planned_name(plan)) if plan is not None else None
    measured_s = (paired.merged_s if paired is not None else
                  next(r for r in run.measurements if r.scope == "model" and r.ok).median_s)
    samples = [s for r in run.measurements if r.scope == "probe" and r.ok for s in r.samples_s]
    try:
        ratio = probe_ratio(samples, lut_probe(lut, key)) if samples else None
    except LUTMissError:
        ratio = None
    return Checked(run.path, paired, measured_s, ratio, here)

