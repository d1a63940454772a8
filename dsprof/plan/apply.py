"""`dsprof merge` as a Python function: build, load a checkpoint, apply the plan (its spans chosen by the
planner with a LUT), merge, save, export, tabulate. It sits with the planner, above `dsprof.merge` (which
merges what it is told and never reaches up here)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
from torch import nn

from ..errors import MergeError
from ..io import check_output_path
from ..models import get_model, load_checkpoint
from ..models.registry import ClassCountError
from ..merge.artifact import export_onnx, save_merged
from ..merge.linearize import linearize_model
from ..merge.model import MergeReport, Savings, cost_table, merge_model, merge_report
from ..merge.plan import Plan, check_plan
from ..merge.spans import Latency, plan_spans
from .planner import best_plan

__all__ = ["MergeOutcome", "merge_to_file", "format_cost_table"]


@dataclass(frozen=True)
class MergeOutcome:
    """What `merge_to_file` produced."""

    model: nn.Module
    report: MergeReport
    costs: pd.DataFrame
    out: Path | None
    onnx: Path | None


def merge_to_file(
    model_name: str,
    plan: Plan | str | Path,
    *,
    options: dict[str, Any] | None = None,
    resolution: int | None = None,
    weights: bool | str | Path = False,
    checkpoint: str | Path | None = None,
    out: str | Path | None = None,
    onnx: str | Path | None = None,
    savings: Savings | None = None,
    num_classes: int | None = None,
    spans: str | tuple[tuple[int, int], ...] | None = None,
    max_span: int = 4,
    latency: Latency | None = None,
    lut: Any = None,
    device_key: Any = None,
) -> MergeOutcome:
    """Build ``model_name``, load ``checkpoint`` (a state dict of the linearised model from
    `linearize_model`, or of the original model), merge by ``plan``, write ``out`` / ``onnx``.

    A plan made for another model of the same family (``tf_efficientnet_lite0`` and
    ``efficientnet_lite0``) is re-targeted; one made for other options (width, depths) is refused.
    ``lut`` (a `dsprof.lut.LUT` or its file; ``device_key`` picks its context) decides where a linearised block
    merges (`dsprof.lut.cost.merge_pays`, as `predict` prices it; ``savings`` given by hand instead, else MACs);
    a plan's own ``merge`` list is replayed as written. ``spans``: ``"auto"`` merges runs of consecutive linear
    blocks into one convolution each where that pays (with ``lut`` the planner's partition for the plan's
    ``keep``, `dsprof.plan.best_plan`; else ``latency`` seconds or MACs; up to ``max_span`` blocks), explicit
    ``((start, stop), ...)`` ranges, or None for the plan's own. Both output paths are checked before anything
    is built or written.
    """
    options = dict(options or {})
    plan = check_plan(plan, model_name, options)
    for path in (out, onnx):  # before building anything: a bad second path must not come after the first file
        if path is not None:
            check_output_path(path)
    extra = {"num_classes": num_classes} if num_classes is not None else {}  # e.g. a model fine-tuned on 10 classes
    model = get_model(model_name, resolution=resolution, pretrained=weights, **options, **extra)
    if lut is not None:
        from ..lut import LUT
        from ..lut.cost import merge_savings

        lut = lut if isinstance(lut, LUT) else LUT.load(lut)
        savings = merge_savings(lut, device_key) if savings is None else savings
    if spans == "auto" and lut is not None:
        best = best_plan(model_name, lut, plan.keep, max_span=max_span, device=device_key, options=options,
                         resolution=resolution)
        plan = replace(plan, merge=best.merge, spans=best.spans)
    elif spans == "auto":
        plan = plan_spans(model, plan, max_len=max_span, latency=latency)
    elif spans is not None:
        plan = replace(plan, spans=tuple(spans), merge=None)
    source: nn.Module = model
    if checkpoint is not None:
        linear = linearize_model(model, plan)
        try:
            load_checkpoint(linear, checkpoint)
            source = linear
        except ClassCountError as exc:  # the linearised and the original model share their classifier
            raise MergeError(f"{exc.fact}; pass --num-classes {exc.num_classes} (Python: num_classes=)") from None
        except ValueError as first_error:
            try:
                load_checkpoint(model, checkpoint)
            except ValueError:
                raise MergeError(
                    f"{first_error}. It fits neither the linearised model (dsprof.merge.linearize_model) nor the original."
                ) from None
    merged = merge_model(source, plan, savings=savings)
    costs = cost_table(model, merged)
    # the export first: it is the step that can still fail (an operator ONNX lacks), and then no file is written
    onnx_path = export_onnx(merged, onnx) if onnx is not None else None
    out_path = save_merged(merged, out) if out is not None else None
    return MergeOutcome(merged, merge_report(merged), costs, out_path, onnx_path)


def format_cost_table(costs: pd.DataFrame) -> str:
    """The per-block cost table for the terminal: MMACs, thousand params, KiB (16-bit values)."""
    shown = pd.DataFrame(
        {
            "block": costs["block"],
            "state": costs["state"],
            "MMACs": costs["macs_before"] / 1e6,
            "->MMACs": costs["macs_after"] / 1e6,
            "kparams": costs["params_before"] / 1e3,
            "->kparams": costs["params_after"] / 1e3,
            "weights_KiB": costs.get("weight_bytes_before") / 1024,
            "->weights_KiB": costs.get("weight_bytes_after") / 1024,
            "peak_act_KiB": costs.get("peak_act_bytes_before") / 1024,
            "->peak_act_KiB": costs.get("peak_act_bytes_after") / 1024,
        }
    )
    return shown.to_string(index=False, float_format=lambda v: f"{v:.2f}", na_rep="")
