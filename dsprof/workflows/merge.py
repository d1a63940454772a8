"""`dsprof merge` as a Python function: build, load a checkpoint, apply the plan (its merges and, with
``spans="auto"``, its spans chosen by the planner on a LUT or on MACs, `dsprof.planning.decide`), merge, save, export,
tabulate. It sits with the planner, above `dsprof.merging` (which merges what it is told and never reaches up here)."""

from __future__ import annotations

import contextlib
import copy
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

import pandas as pd
from torch import nn

from .._moved import as_request, moved_keywords
from ..errors import MergeError, UsageError
from ..fields import OPTION_BOUNDS
from ..io import check_output_path, load_torch
from ..planning.decide import merge_rule
from ..lut.choice import MergeChoice
from ..lut.table import LUT
from ..merging.artifact import export_onnx, save_merged
from ..merging.linearize import linearize_model
from ..merging.model import MergeReport, cost_table, merge_linearized_model, merge_report
from ..records.merges import Merges
from ..models import ModelRef, load_checkpoint, nothing_to_merge
from ..models.build import ClassCountError
from ..records.plan import Plan, PlanError, check_plan
from .measure import _MERGE_KEYWORDS, _MODEL_KEYWORDS

__all__ = ["MergeOutcome", "checkpoint_facts", "merge", "format_cost_table", "plan_model"]


@dataclass(frozen=True)
class MergeOutcome:
    """What `merge` produced; ``merges`` says which blocks merged and what decided it."""

    model: nn.Module
    report: MergeReport
    costs: pd.DataFrame
    out: Path | None
    onnx: Path | None
    merges: Merges | None = None

    def text(self, words: Callable[[str], str] = str) -> str:
        """What `dsprof merge` prints: which blocks merged and what decided it, the merge report, the per-block cost
        table and the files written; in the caller's words (``words``: `dsprof.cli.flags.command_line_text` gives the
        command line's options where this names parameters)."""
        lines = [words(self.merges.describe())] if self.merges is not None else []
        lines += [words(str(self.report)), "", words(format_cost_table(self.costs)),
                  "before: original blocks, BatchNorm folded; after: merged model; memory at 16 bits, MACs for one image"]
        lines += [f"wrote {path}" for path in (self.out, self.onnx) if path is not None]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


def merge(
    model: str | nn.Module | ModelRef | None = None,
    plan: Plan | str | Path | None = None,
    *,
    checkpoint: str | Path | None = None,
    out: str | Path | None = None,
    onnx: str | Path | None = None,
    num_classes: int | None = None,
    spans: str | tuple[tuple[int, int], ...] | None = None,
    max_span: int | None = None,
    merge: MergeChoice | None = None,
    **deprecated: Any,
) -> MergeOutcome:
    """Build ``model`` (anything `dsprof.models.ModelRef.of` takes: a registered name, a ``path.py:factory`` file, an
    ``nn.Module`` -- merged into a copy, never changed --, or a `ModelRef` with its options, resolution and
    weights), load ``checkpoint`` (a state dict of the linearised model from `linearize_model`, or of the original
    model), merge by ``plan``, write ``out`` / ``onnx``.

    A checkpoint that `dsprof finetune` wrote carries its class count, its resolution and its plan
    (`checkpoint_facts`): then ``num_classes``, the resolution and ``plan`` may be None (a plan given must keep the same activations), and ``model``
    None is the plan's model, with its options.

    A plan made for another model of the same family (``tf_efficientnet_lite0`` and
    ``efficientnet_lite0``) is re-targeted; one made for other options (width, depths) is refused.
    Which linearised blocks merge: the plan's own ``merge`` list, replayed as written; else what ``merge`` chooses
    (a `dsprof.lut.MergeChoice`: a LUT's rule in its context, as `predict` prices it, or MACs); else the plan is
    refused in one line (one decision, the planner's: `dsprof.planning.decide.merge_rule`). ``spans``: ``"auto"``
    merges runs of consecutive linear blocks into one convolution each where that pays (the planner's partition and
    merges for the plan's ``keep``, on the LUT or on MACs; up to ``max_span`` blocks, None: as `dsprof.plan` offers
    them, up to 4 and no wider than the LUT holds, what that limited said in ``merges``), explicit
    ``((start, stop), ...)`` ranges (the other merges then decided again), or None for the plan's own. Both output
    paths are checked before anything is built, the plan's length and the merge rule before anything is merged or
    written. The keywords of before (``options=``, ``resolution=``, ``weights=``, the fields of ``model``'s
    `ModelRef`; ``lut=``, ``device_key=``, ``merge_by=``, ``accept_modified=``, the fields of ``merge``;
    ``model_name=``, ``model``'s name before) still work for a release (a `DeprecationWarning`).
    """
    if "model_name" in deprecated:
        warnings.warn("dsprof.merge(model_name=) is now dsprof.merge(model=)", DeprecationWarning, stacklevel=2)
        model = deprecated.pop("model_name") if model is None else model
    moved = moved_keywords("dsprof.merge", deprecated, {**_MODEL_KEYWORDS, **_MERGE_KEYWORDS})
    choice = as_request(merge, MergeChoice, "merge", moved)
    if isinstance(spans, str) and spans != "auto":
        raise UsageError(f"`spans={spans!r}`: give \"auto\" (the planner's), a sequence of [start, stop) block ranges "
                         "such as ((0, 2), (5, 8)), () for none, or None for the plan's own")
    if max_span is not None and (isinstance(max_span, bool) or not isinstance(max_span, int) or max_span < 1):
        raise UsageError(f"`max_span={max_span!r}`: give the most blocks one span merges, 1 or more")
    fields = moved.get("model", {})
    carried = checkpoint_facts(checkpoint) if checkpoint is not None else {}
    with _nothing_to_merge(ModelRef.of(model, **fields) if model is not None else None):
        plan = _plan_of(plan, carried, checkpoint)
    if model is None:  # the plan's model, with its options unless others are given
        plan = Plan.coerce(plan)
        model, fields = plan.model, {"options": dict(plan.options), **fields}
    ref = ModelRef.of(model, **fields)
    if ref.resolution is None and "resolution" in carried:  # the size it was fine-tuned at, unless one is given
        ref = ModelRef.of(ref, resolution=carried["resolution"])
    model_name, options = ref.name, dict(ref.options)
    with _nothing_to_merge(ref):
        plan = check_plan(plan, model_name, options)  # the one check of the plan against the model, at the door
    # before building anything: a bad second path must not come after the first file, nor a file of another kind
    # (the fine-tuned checkpoint itself) be replaced by the merged model
    for path, kind in ((out, "merged"), (onnx, "binary data")):
        if path is not None:
            check_output_path(path, kind=kind)
    if num_classes is None:
        num_classes = carried.get("num_classes")
    lut = choice.lut
    if lut is not None:
        lut = lut if isinstance(lut, LUT) else LUT.load(lut, accept_modified=choice.accept_modified)
    if spans is not None:  # spans chosen here: the merges are decided again
        if lut is None and choice.merge_by is None:  # (its own list was for its own spans)
            raise UsageError("`spans=` decides the plan's merges again, its own list being for its own spans: give "
                             "`merge=MergeChoice(lut=LUT)` to merge where that LUT says merging pays, or "
                             "`merge=MergeChoice(merge_by='macs')` to merge where MACs drop")
        plan = replace(plan, merge=None, spans=None)
    extra = {"num_classes": num_classes} if num_classes is not None else {}  # e.g. a model fine-tuned on 10 classes
    model = ref.build(**extra)
    # the planner settles the plan: its length checked first (no rule would mend it), then its merges (and spans)
    # decided, or its own list replayed; spans chosen by the search follow the LUT's method, as `dsprof plan`'s
    with _nothing_to_merge(ref):  # a plan of any length for a model without a block: why there is none
        rule = merge_rule(ModelRef.of(model, name=model_name, options=options), lut=lut, device=choice.device_key,
                          merge_by=choice.merge_by, plan=plan, method="auto" if spans == "auto" else "isolated")
        merges = rule.decide(plan, spans=spans, max_span=max_span)
    plan = merges.plan
    linear = linearize_model(model, plan)  # linearised once: its checkpoint loaded, then merged in place
    if checkpoint is not None:
        try:
            load_checkpoint(linear, checkpoint)
        except ClassCountError as exc:  # the linearised and the original model share their classifier
            raise MergeError(f"{exc.fact}; pass `num_classes={exc.num_classes}`") from None
        except ValueError as first_error:
            if ref.is_module:  # the weights go into a copy: a module passed in is never changed
                model = copy.deepcopy(model)
            try:
                load_checkpoint(model, checkpoint)
            except ValueError:
                raise MergeError(
                    f"{first_error}. It fits neither the linearised model (dsprof.merging.linearize_model) nor the original."
                ) from None
            linear = linearize_model(model, plan)  # the original's weights, linearised
    merged = merge_linearized_model(linear, plan)
    costs = cost_table(model, merged)
    # the export first: it is the step that can still fail (an operator ONNX lacks), and then no file is written
    onnx_path = export_onnx(merged, onnx) if onnx is not None else None
    out_path = save_merged(merged, out) if out is not None else None
    return MergeOutcome(merged, merge_report(merged), costs, out_path, onnx_path, merges)


def checkpoint_facts(path: str | Path) -> dict[str, Any]:
    """What a checkpoint says about the model it holds besides its weights: ``num_classes`` and ``resolution`` (ints)
    and ``plan`` (a `Plan`) where it carries them, as `dsprof finetune`'s do; {} for a plain state dict."""
    obj = load_torch(path, "checkpoint", "give the path of a saved state dict or of "
                     "`dsprof.search.finetune(run=TrainRun(checkpoint=))`")
    facts: dict[str, Any] = {}
    if isinstance(obj, dict):
        for key in ("num_classes", "resolution"):
            value = obj.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                low, high = OPTION_BOUNDS[key]  # a file's sizes are data: a million pixels would build for hours
                if not low <= value <= high:
                    raise MergeError(f"checkpoint {path} carries {key} {value}, outside {low}..{high}: give a "
                                     "checkpoint that `dsprof finetune` wrote, or a plain state dict")
                facts[key] = value
        if isinstance(obj.get("plan"), str):
            try:
                facts["plan"] = Plan.from_json(obj["plan"])
            except PlanError as exc:
                raise MergeError(f"checkpoint {path} carries a plan that cannot be read: {exc}") from None
    return facts


def plan_model(plan: Plan | str | Path | None, checkpoint: str | Path | None = None, **fields: Any) -> ModelRef:
    """The model of ``plan`` (None: the plan ``checkpoint`` carries), as `merge` builds it where given no model: a
    `ModelRef` of the plan's model with the plan's options, or with the ``fields`` given (``options``,
    ``resolution``, ``weights``; None or empty: the plan's)."""
    carried = checkpoint_facts(checkpoint) if checkpoint is not None else {}
    planned = Plan.coerce(_plan_of(plan, carried, checkpoint))
    return ModelRef.of(planned.model, **{"options": dict(planned.options), **{k: v for k, v in fields.items() if v}})


@contextlib.contextmanager
def _nothing_to_merge(ref: ModelRef | None) -> Iterator[None]:
    """A model without a block has no plan to merge by: a refused plan (one for another model, none given, an empty
    one) becomes the one line that says why (`dsprof.models.nothing_to_merge`), as `dsprof.plan` says it."""
    try:
        yield
    except (PlanError, UsageError):
        nothing = nothing_to_merge(ref.build()) if ref is not None else None
        if nothing is None:
            raise
        raise UsageError(f"{ref.name}: {nothing}; there is no plan to merge it by, only the whole model to time") from None


def _plan_of(plan: Plan | str | Path | None, carried: dict[str, Any], checkpoint) -> Plan | str | Path:
    """The plan to merge by: ``plan``, or the one the checkpoint carries; refused where both are there and
    keep different activations (the weights were fine-tuned without the carried plan's)."""
    own = carried.get("plan")
    if plan is None:
        if own is None:
            raise UsageError("give `plan=` (a preset or a plan file): "
                             + (f"the checkpoint {checkpoint} carries none" if checkpoint is not None else "nothing to merge by"))
        return own
    if own is not None:
        given = Plan.coerce(plan)
        if tuple(given.keep) != tuple(own.keep):
            bits = lambda keep: "".join(map(str, keep))  # noqa: E731
            raise MergeError(f"the checkpoint {checkpoint} was fine-tuned with activations kept {bits(own.keep)}, the "
                             f"plan given keeps {bits(given.keep)}: drop `plan=` to merge by the checkpoint's own plan")
        return given
    return plan


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
