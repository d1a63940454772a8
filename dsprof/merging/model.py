"""Merging a whole model by a plan, with one reported decision per block."""

from __future__ import annotations

import copy
import warnings
from dataclasses import asdict, dataclass
import pandas as pd
import torch
from torch import nn

from ..errors import PlanError, UsageError
from ..models import (
    block_modules,
    count_macs,
    count_params,
    discover_blocks,
    format_span,
    input_size_of,
    memory_footprint,
)
from .algebra import MergeError
from .block import BlockMergeInfo, deployed_unmerged, merge_linearized
from .fold import fold_batchnorm, set_submodule
from .linearize import Linearized, linearize_model
from .partial import PartialBlock
from ..records.merges import replayed
from .spans import SpanLinearized
from ..records.activations import ActLayout, is_crossing, run_variant
from ..models.tracing import example_input
from ..records.plan import Plan

__all__ = ["BlockDecision", "MergeReport", "merge_linearized_model", "merge_model", "merge_partial", "merge_report",
           "cost_table"]

REPORT_ATTR = "dsprof_merge_report"


@dataclass(frozen=True)
class BlockDecision:
    """What happened to one block: kept, merged, or linearised but left unmerged, and why. ``merged_runs``: for a
    block whose activations are partly kept, what merged of its linearised runs, one line each (``reason`` says
    them too)."""

    index: int
    name: str
    spec: str
    keep: bool
    merged: bool
    reason: str
    linear_macs: int | None = None
    merged_macs: int | None = None
    exact: bool | None = None
    border_corrected: bool | None = None
    border_error: float | None = None
    merged_runs: tuple[str, ...] = ()


@dataclass(frozen=True)
class MergeReport:
    """The decisions of one `merge_model` call and the plan that replays them (``merge`` filled in)."""

    plan: Plan
    decisions: tuple[BlockDecision, ...]

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([asdict(d) for d in self.decisions])

    def __str__(self) -> str:
        lines = []
        for d in self.decisions:
            state = "kept" if d.keep else ("merged" if d.merged else "linear")
            lines.append(f"{d.index:>3} {d.name:<14} {state:<7} {d.reason}")
        return "\n".join(lines)


def merge_report(model: nn.Module) -> MergeReport:
    """The `MergeReport` that `merge_model` attached to the model it returned."""
    report = getattr(model, REPORT_ATTR, None)
    if report is None:
        raise MergeError("this model was not produced by merge_model")
    return report


def merge_model(
    model: nn.Module,
    plan: Plan | str,
    *,
    input_size: tuple[int, int] | None = None,
    fold: bool = True,
    merge_by: str | None = None,
    rule: object = None,
) -> nn.Module:
    """A new model in which every block that the plan linearises, and whose ``merge`` entry says so, is one
    convolution (a span: its blocks as one); the others are deployed unmerged (`dsprof.merging.block.deployed_unmerged`).

    ``model`` is the original model (it is linearised by the plan first, padding in front unless the
    plan says otherwise) or a model from `linearize_model` after fine-tuning. It is not modified.
    merge/ merges what it is told: the plan's ``merge`` list, replayed. A plan without one, that linearises a block
    outside its spans, is refused (`PlanError`): the planner decides such blocks (`dsprof.planning.decide.merge_rule`:
    on a LUT's prices, or ``merge_by="macs"``; ``.decide(plan).plan`` is the plan to pass). Remaining BatchNorms are
    folded (``fold=True``). The decisions, and the plan with its list, are in `merge_report` of the result.
    ``merge_by`` and ``rule`` are gone (merge/ decides nothing): given, they are refused in one line that says what
    to call instead.
    """
    if merge_by is not None or rule is not None:
        raise UsageError("merge_model merges what the plan's merge list says and decides nothing: decide it first with "
                         "the planner, dsprof.planning.decide.merge_rule(model, merge_by='macs') (or lut=LUT)"
                         ".decide(plan).plan, and pass that plan")
    plan = Plan.coerce(plan)
    size = input_size or input_size_of(model)
    if any(isinstance(m, (Linearized, SpanLinearized)) for m in model.modules()):
        _check_linearized_by(model, plan)
        target = copy.deepcopy(model)
    else:
        target = linearize_model(model, plan, input_size=size)  # a plan of the wrong length first: nothing mends it
    return merge_linearized_model(target, plan, input_size=size, fold=fold)


def merge_linearized_model(target: nn.Module, plan: Plan, *, input_size: tuple[int, int] | None = None,
                           fold: bool = True) -> nn.Module:
    """``target``, a model that `linearize_model` returned by ``plan`` (a `Plan` with its ``merge`` list, as the
    planner settled it), merged in place and returned: what `merge_model` does once it holds a linearised copy (the
    caller that linearised the model itself, `dsprof.merge`, linearises it once). A plan without a ``merge`` list
    that linearises a block outside its spans is refused (`PlanError`) before anything merges."""
    size = input_size or input_size_of(target)
    target.eval()
    plan = replayed(plan).plan  # refused before anything merges where nothing decided it
    linear, interior = _linearized_blocks(target, plan)
    names = _block_names(target, plan, size)
    merged = {index: _merged(index, block, names[index]) for index, (_, block) in sorted(linear.items())}
    decisions: list[BlockDecision] = []
    partial = _merge_partials(target, names)  # a plan at the level of activations: the runs of partial blocks
    crossing = {i: start for start, stop in plan.spans or () if is_crossing(plan.acts, (start, stop))
                for i in range(start + 1, stop)}
    for index, keep in enumerate(plan.keep):
        if keep and index in crossing:  # the last block of a crossing span: its first run merged into the span
            rest = partial.get(index)
            more = rest.merged_runs if rest else ()  # its later runs merged
            decisions.append(BlockDecision(index, names[index], rest.spec if rest else "", True, False,
                                           "; ".join((f"activations {list(plan.acts[index])} kept", "its first run "
                                                      f"merged into the span starting at block {crossing[index]}",
                                                      *more)), merged_runs=more))
        elif keep:
            decisions.append(partial.get(index) or BlockDecision(index, names[index], "", True, False, "activations kept"))
        elif index in interior:
            start = interior[index]
            decisions.append(BlockDecision(index, names[index], "", False, True, f"merged into the span starting at block {start}"))
        else:
            path, block = linear[index]
            decisions.append(_merge_block(target, index, path, block, merged[index], plan.merge[index], names[index]))
    if fold:
        target = fold_batchnorm(target, example_input(target, size), inplace=True)
    report = MergeReport(plan.with_merge([d.merged for d in decisions]), tuple(decisions))
    setattr(target, REPORT_ATTR, report)
    target.dsprof_plan = report.plan.to_json()
    return target


def merge_partial(part: PartialBlock, name: str = "") -> list[tuple[tuple[int, int], str, BlockMergeInfo]]:
    """Every linearised run of the `PartialBlock` ``part`` merged into one convolution (`merge_linearized`), in
    place; per run, its units, its variant name (``fused-expand``...) and how it merged. ``name``: the block's, for
    messages."""
    done = []
    n_units = max(stop for _, stop in part.runs)
    for i, (stage, run) in enumerate(zip(list(part.stages), part.runs)):
        if isinstance(stage, (Linearized, SpanLinearized)):  # a span: the block's last run and the blocks after it
            module, info = _merged(part.index, stage, name)
            part.stages[i] = module
            variant = (f"span of blocks {format_span((stage.start, stage.stop))}" if isinstance(stage, SpanLinearized)
                       else run_variant(ActLayout((False,) * n_units), run))
            done.append((run, variant, info))
    return done


def _merge_partials(target: nn.Module, names: list[str]) -> dict[int, BlockDecision]:
    """Every `PartialBlock` of ``target`` merged (`merge_partial`), in place; per block, the decision (its
    activations kept, some of them: ``keep`` True, ``merged`` False in the block view) naming what merged."""
    out = {}
    for part in [m for m in target.modules() if isinstance(m, PartialBlock)]:
        name, done = names[part.index], []
        for run, variant, info in merge_partial(part, name):
            done.append(f"units {run[0]}..{run[1] - 1} merged ({variant}, MACs {info.linear_macs / 1e6:.2f}M -> "
                        f"{info.merged_macs / 1e6:.2f}M{'' if info.exact else ', NOT exact at the borders'})")
            if not info.exact:
                warnings.warn(f"block {part.index} ({name}): {variant} merged with a border error of "
                              f"{info.border_error:.2e} relative to max|y|; fine-tune with border='in_front' for an "
                              "exact merge", stacklevel=3)
        out[part.index] = BlockDecision(part.index, name, part.spec, True, False,
                                        f"activations {list(part.acts)} kept; " + "; ".join(done),
                                        merged_runs=tuple(done))
    return out


def _merged(index: int, block: nn.Module, name: str) -> tuple[nn.Module, BlockMergeInfo]:
    """Linearised block ``index`` merged into one convolution (`merge_linearized`), its failure naming the block."""
    try:
        return merge_linearized(block)
    except MergeError as exc:
        raise MergeError(f"block {index} ({name}): {exc}") from None


def _check_linearized_by(model: nn.Module, plan: Plan) -> None:
    """Refuses (`PlanError`) a linearised ``model`` whose stored plan (``dsprof_plan``, where it has one) keeps other
    blocks or other activations than ``plan``."""
    stored = getattr(model, "dsprof_plan", None)
    if stored is not None and Plan.from_json(stored).keep != plan.keep:
        raise PlanError("the model was linearised with a different plan (its 'keep' list differs)")
    if stored is not None and Plan.from_json(stored).acts != plan.acts:
        raise PlanError("the model was linearised with a different plan (its 'acts' list differs)")


def _block_names(target: nn.Module, plan: Plan, size: tuple[int, int]) -> list[str]:
    """The blocks' names, in plan order: those `linearize_model` stored, else the kept blocks' found again
    and the linearised blocks' module paths."""
    stored = getattr(target, "dsprof_block_names", None)
    if stored is not None and len(stored) == len(plan.keep):
        return list(stored)
    kept = iter(b.name for b in discover_blocks(target, size).blocks)
    paths = {m.index: name for name, m in target.named_modules() if isinstance(m, (Linearized, SpanLinearized))}
    return [next(kept, f"block {i}") if keep else paths.get(i, f"block {i}") for i, keep in enumerate(plan.keep)]


def _linearized_blocks(target: nn.Module, plan: Plan) -> tuple[dict[int, tuple[str, nn.Module]], dict[int, int]]:
    """The linearised blocks of ``target`` as {block index: (module name, module)}, a span under its first
    index; and {index of a block inside a span, after its first: the span's first index}. Raises
    `PlanError` when they are not the plan's."""
    parts = [f"{name}." for name, m in target.named_modules() if isinstance(m, PartialBlock)]
    found = [(name, m) for name, m in target.named_modules()
             if isinstance(m, (Linearized, SpanLinearized)) and not name.startswith(tuple(parts))]  # runs: not blocks
    spans = [name for name, m in found if isinstance(m, SpanLinearized)]
    linear = {m.index: (name, m) for name, m in found if not any(name.startswith(f"{s}.") for s in spans)}
    interior = {i: start for start, stop in plan.spans or () for i in range(start + 1, stop)}
    if sorted(linear) != [i for i in plan.linearized if i not in interior]:
        raise PlanError(f"the model's linearised blocks {sorted(linear)} are not the plan's {plan.linearized}")
    return linear, interior


def _merge_block(target: nn.Module, index: int, path: str, block: nn.Module, merged: tuple[nn.Module, BlockMergeInfo],
                 do: bool, name: str) -> BlockDecision:
    """Put block ``index`` of ``target`` (in place) as its ``merged`` form where the plan's list says so (``do``),
    else in its unmerged deployed form; the decision says which and why. Called from
    `merge_model` only: its warning points at that function's caller."""
    module, info = merged
    do, reason = _merge_reason(block, info, do)
    if do:
        set_submodule(target, path, module)
        if not info.exact:
            reason += f"; NOT exact at the borders (fine-tuned with padding in place): rel. error {info.border_error:.2e}"
            warnings.warn(
                f"block {index} ({name}) merged with a border error of {info.border_error:.2e} relative to max|y|: "
                "a padded convolution precedes another one, so the in-place form has no exact single convolution; "
                "fine-tune with border='in_front' for an exact merge",
                stacklevel=3,
            )
    else:
        set_submodule(target, path, deployed_unmerged(block))  # same function, the form the LUT's linear entry timed
    return _decision(index, name, block.spec, do, reason, info)


def _merge_reason(block: nn.Module, info: BlockMergeInfo, do: bool) -> tuple[bool, str]:
    """(merge, why) for one linearised block: a span always merges (the planner chose it where it pays); else the
    merge list (``do``), whatever decided it -- the plan's own list, a LUT, MACs: `dsprof.records.merges.Merges`
    says which, above the rows."""
    macs = f"MACs {info.linear_macs / 1e6:.2f}M -> {info.merged_macs / 1e6:.2f}M merged"
    if isinstance(block, SpanLinearized):
        return True, f"span of blocks {format_span((block.start, block.stop))}: {macs}"
    return do, f"by the merge list; {macs}"


def _decision(index: int, name: str, spec: str, merged: bool, reason: str, info: BlockMergeInfo) -> BlockDecision:
    return BlockDecision(
        index, name, spec, False, merged, reason, info.linear_macs, info.merged_macs,
        info.exact, info.border_corrected, info.border_error,
    )


def _inputs_reaching(model: nn.Module, modules: list[nn.Module], example: torch.Tensor) -> dict[int, tuple[int, ...]]:
    """{i: (channels, height, width) of the input that reaches ``modules[i]``} in one forward pass of ``model``."""
    seen: dict[int, tuple[int, ...]] = {}

    def record(i: int):
        def hook(_module, args) -> None:  # returns None: the input passes unchanged
            seen.setdefault(i, tuple(args[0].shape[1:]))
        return hook

    hooks = [m.register_forward_pre_hook(record(i)) for i, m in enumerate(modules)]
    try:
        with torch.no_grad():
            model.eval()(example.to(next(model.parameters()).dtype))
    finally:
        for h in hooks:
            h.remove()
    return seen


def cost_table(original: nn.Module, merged: nn.Module, input_size: tuple[int, int] | None = None) -> pd.DataFrame:
    """MACs, params and memory (16-bit weights, peak activation) of every block before and after merging.

    "Before" is the original block with BatchNorm folded, "after" what sits at the same place in
    ``merged`` (one convolution, a linearised block, or the kept block); one row per block and a
    ``total`` row for the whole models (MACs and params).
    """
    size = input_size or input_size_of(original)
    report = merge_report(merged)
    example = example_input(original, size)
    before_model = fold_batchnorm(original, example)
    blocks = discover_blocks(before_model, size).blocks  # its refusals were said when the original's blocks were found
    afters = block_modules(merged, [b.name for b in blocks])
    reaching = _inputs_reaching(merged, afters, example)
    rows = []
    for i, (block, decision, after) in enumerate(zip(blocks, report.decisions, afters)):
        spec = block.spec
        shape = (spec.in_channels, spec.in_h, spec.in_w)
        # what sits at a crossing span's later place reads the span's output, not the block's own input
        after_shape = reaching.get(i, shape) if not isinstance(after, nn.Identity) else shape
        after_shape = after_shape if after_shape[0] != shape[0] else shape
        mem_before = memory_footprint(block.module, shape, spec.residual)
        mem_after = memory_footprint(after, after_shape, spec.residual and not decision.merged)
        rows.append(
            {
                "block": block.name,
                "state": "kept" if decision.keep else ("merged" if decision.merged else "linear"),
                "macs_before": count_macs(block.module, (spec.in_h, spec.in_w), spec.in_channels),
                "macs_after": count_macs(after, after_shape[1:], after_shape[0]),
                "params_before": count_params(block.module),
                "params_after": count_params(after),
                "weight_bytes_before": mem_before.weight_bytes,
                "weight_bytes_after": mem_after.weight_bytes,
                "peak_act_bytes_before": mem_before.peak_activation_bytes,
                "peak_act_bytes_after": mem_after.peak_activation_bytes,
            }
        )
    rows.append(
        {
            "block": "total",
            "state": "",
            "macs_before": count_macs(before_model, size),
            "macs_after": count_macs(merged, size),
            "params_before": count_params(before_model),
            "params_after": count_params(merged),
        }
    )
    return pd.DataFrame(rows)
