"""The paired check (issue #27): a plan's merged model timed against the original, interleaved in one group.

A speed-up measured with the merged model and the original in the same interleaved rounds divides the machine
out: sample i of both comes from round i, so a machine that slows down slows both, and the per-round ratios keep
what merging changed. `measure_planned_run` times the two that way (what `dsprof predict --measure` runs);
`paired_check` reads the pair from any run's records (`dsprof measure --plan` times the plan's model in the
whole-model group beside the original). The drift probe timed here and now, for `dsprof predict --probe`, is
`dsprof.profiler.probe.probe_now`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from torch import nn

from ..device_context import DeviceContext
from ..planning.decide import merge_rule
from ..merging.model import merge_model
from ..models import ModelRef
from ..records.plan import Plan
from ..records.measurement import Measurement, original_in_group
from ..profiler.runner import measure
from ..profiler.selection import Workloads
from ..records.stats import Speedup, paired_speedup
from ..units import percent

__all__ = ["CheckSettings", "PairedCheck", "check_line", "measure_planned", "measure_planned_run", "paired_check",
           "planned_name"]


@dataclass(frozen=True)
class CheckSettings:
    """How a prediction is checked here (`dsprof.predict(check=...)`): the measurement file goes to ``out``, timed
    with ``timing`` (a `dsprof.profiler.TimingConfig`; None: `dsprof.profiler.measure`'s), with a progress bar where
    ``progress``."""

    out: str | Path = "results/predict"
    timing: Any = None
    progress: bool = True


@dataclass(frozen=True)
class PairedCheck:
    """A merged model (``name``) and the original timed interleaved in one group: their medians (seconds per
    batch), the paired speed-up of the merged model over the original (`paired_speedup`: the median of the
    per-round ratios, with its 95 % distribution-free interval) and when the group was timed (ISO 8601, UTC)."""

    name: str
    original_s: float
    merged_s: float
    speedup: Speedup
    time_utc: str


def paired_check(records: Sequence[Measurement], name: str) -> PairedCheck | None:
    """The paired check of the whole model ``name`` (variant ``custom``: a plan's model) against the original
    model timed in its group, from a run's records; None where the run has no such pair (the workload failed)."""
    records = list(records)
    for r in records:
        if r.ok and r.scope == "model" and r.variant == "custom" and r.name == name:
            base = original_in_group(r, records)
            if base is not None:
                return PairedCheck(name, base.median_s, r.median_s, paired_speedup(base.samples_s, r.samples_s),
                                   r.time_utc)
    return None


def measure_planned_run(
    model: str | nn.Module | ModelRef,
    context: DeviceContext,
    plan: Any = None,
    *,
    lut: Any = None,
    merge_by: str | None = None,
    out: str | Path = "results/predict-check",
    progress: bool = True,
    timing: Any = None,
):
    """Time ``model`` (anything `ModelRef.of` takes; a `ModelRef` carries its name and options) and, with a ``plan``,
    the model merged by it (its ``merge`` list replayed, or written by ``lut``'s rule in ``context`` or by MACs with
    ``merge_by="macs"``: `dsprof.planning.decide.merge_rule`) interleaved in one group on this machine in ``context``
    (its backend, dtype, layout, batch, threads): the original as variant ``original``, the merged model as ``custom`` named after the plan
    (`paired_check` reads the pair). ``timing``: a `TimingConfig` (default: `measure`'s). Returns the
    `MeasureResult` (the drift probe's records too)."""
    ref = ModelRef.of(model).built()
    net = ref.build()
    extra = {}
    if plan is not None:
        plan = Plan.coerce(plan)
        rule = merge_rule(ref, lut=lut, device=context, merge_by=merge_by, plan=plan)
        extra[planned_name(plan)] = merge_model(net, rule.decide(plan).plan)
    more = {"timing": timing} if timing is not None else {}
    return measure(ref, settings=context,
                   workloads=Workloads(variants=(), model_variants=("original",), blocks=None), extra_models=extra,
                   out=out, overwrite=True, progress=progress, **more)


def planned_name(plan: Any) -> str:
    """The name a plan's merged model is timed under (its records' ``name``): the plan's name, or ``plan``."""
    return plan.name or "plan"


def measure_planned(model: str | nn.Module | ModelRef, context: DeviceContext, plan: Any = None,
                    **kwargs: Any) -> Measurement:
    """`measure_planned_run`, returning the record of the model it checks: the merged model's with a plan, else
    the original's (its ``median_s`` in seconds per batch)."""
    result = measure_planned_run(model, context, plan, **kwargs)
    wanted = ("custom", planned_name(plan)) if plan is not None else ("original", None)
    return next(r for r in result.measurements if r.scope == "model" and r.ok and r.variant == wanted[0]
                and (wanted[1] is None or r.name == wanted[1]))


def check_line(check: PairedCheck, prediction: Any = None) -> str:
    """One line: the measured speed-up with its interval, then the predicted one with its interval (``prediction``:
    anything with ``speedup``, ``speedup_low`` and ``speedup_high``, e.g. a `dsprof.lut.Prediction`) and whether
    the measurement falls inside it."""
    s = check.speedup
    line = (f"measured speed-up {s.ratio:.3f}x over the original (95 % interval {s.low:.3f}-{s.high:.3f}x, "
            f"{s.pairs} paired rounds)")
    if prediction is None:
        return line
    inside = prediction.speedup_low <= s.ratio <= prediction.speedup_high
    return (f"{line}; predicted {prediction.speedup:.3f}x ({prediction.speedup_low:.3f}-{prediction.speedup_high:.3f}x,"
            f" error {percent(prediction.speedup / s.ratio - 1)}): {'inside' if inside else 'OUTSIDE'} the predicted interval")
