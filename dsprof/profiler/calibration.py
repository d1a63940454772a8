"""The calibration group that ends a `measure --calibrate` run (issue #27).

Blocks timed alone and in context say what each saves; how much of the *sum* a merged model saves while it runs
depends on the runtime (ONNX Runtime saved 0.3-1.0 of it on CPU models where PyTorch saved about all of it:
benchmarks/RESULTS.md, issue #27). One paired check says it for this model in this context: the whole model with
every block linearised, each merged where this run's entries say merging pays (the rule `dsprof predict` prices,
`dsprof.merge.rule.decide_merges`), timed against the original round by round in one group, the last group of the
run. Its records have scope ``model``, the model's name and variant `CALIBRATION`; the LUT keeps their paired
ratio, and `dsprof.lut.interval` compares it with what the LUT predicts for the same plan.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from torch import nn

from ..device_context import DeviceContext
from ..errors import UsageError
from .records import CALIBRATION, Measurement, MeasurementFile
from .workloads import Workload, model_workload

__all__ = ["CALIBRATION", "calibration_workloads", "check_calibration_request"]


def check_calibration_request(model: Any, variants: Sequence[str], model_variants: Sequence[str], blocks: Any) -> None:
    """Raise `UsageError` (one line, what to give) where a run cannot end with the calibration group."""
    from ..models.registry import model_identity

    if not isinstance(model, str) and model_identity(model) is None:
        raise UsageError("--calibrate merges the model by a plan, which names a registered model: give its name (or "
                         "--model-file), or a module built by dsprof.models.get_model")
    if blocks is None or "merged" not in variants or "original" not in variants or "original" not in model_variants:
        raise UsageError("--calibrate prices a plan from this run's own entries: it needs --variants with original and "
                         "merged (and linear), --model-variants with original, and blocks to time")


def calibration_workloads(net: nn.Module, label: str, input_size: tuple[int, int], records: Sequence[Measurement],
                          context: DeviceContext) -> list[Workload]:
    """The calibration group: ``net`` (variant ``original``) and ``net`` with every block linearised, merged where
    ``records`` (this run's) say it pays (variant `CALIBRATION`), both named ``label``."""
    from ..lut.build import lut_from_files  # local: the LUT package reads this one's records
    from ..merge import Plan, merge_model
    from ..merge.rule import decide_merges
    from ..models import find_blocks
    from ..models.registry import model_identity

    registered, options = model_identity(net)
    lut = lut_from_files([MeasurementFile(Path(f"{label} (this run)"), list(records), [], 0)])
    plan = Plan(registered, (0,) * len(find_blocks(net, input_size)), options, name=CALIBRATION)
    merges = decide_merges(net, plan, lut=lut, device=context, name=label, options=options, strict=False)
    merged = merge_model(net, merges.plan)
    return [model_workload(net, label, "original", input_size), model_workload(merged, label, CALIBRATION, input_size)]
