"""Linearised blocks: a block with the activations inside it removed, ready to fine-tune and to merge.

Two forms, chosen by ``border`` (a `Plan` field):

* ``"in_front"`` (default, recommended for fine-tuning): the block's zero padding is moved in front of
  it -- the input is padded once, then every convolution runs unpadded. The merged convolution
  computes exactly this, everywhere, for every input size. Costs a few extra MACs while fine-tuning
  (the first 1x1 convolution also runs over the padding ring).
* ``"in_place"`` (a block fine-tuned the ordinary way): every convolution keeps its own padding, so
  the intermediate map is padded with zeros where the merged convolution sees ``bias`` values.
  Then the merge is

  - exact with no correction when no padded convolution follows another convolution
    (depthwise-separable: dw then 1x1);
  - exact with a fixed border correction (`BorderBias`, a (C, H, W) map added after the merged
    convolution, non-zero only along the borders) when everything before the last padded
    convolution is 1x1 and stride 1 (inverted residual, ResNet bottleneck): the difference is then
    independent of the input. The correction ties the merged block to the input size it was
    computed for;
  - not exact when a padded spatial convolution precedes another one (ResNet basic block: 3x3 then
    3x3): the merged block is the padding-in-front form, and the border error is measured and
    reported (`BlockMergeInfo.border_error`).

Activations *inside* the block are removed; an activation after the block's output (ResNet's ReLU
after the addition) is outside what merges and stays; blocks that end without one get the plan's
free activation (ReLU6, paper Sec. 4.3).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

from ..errors import PlanError
from ..models import Block, discover_blocks, find_blocks, format_span, input_size_of, own_chains, replace_block
from .algebra import MergeError, Padding, conv_from_module
from .layers import ConcatInput, ZeroPad, front_pad
from ..records.plan import BORDER_MODES, FREE_ACTIVATIONS, Plan
from ..models.spans import span_runs
from .spans import build_span
from .partial import act_layouts, crossing_modules, partial_of_runs
from ..records.activations import crossing_units, is_crossing, kept_runs, partial_runs

__all__ = ["BORDER_MODES", "FREE_ACTIVATIONS", "Linearized", "linearize_block", "linearize_model", "make_activation"]

_ACTIVATIONS = {"relu6": nn.ReLU6, "relu": nn.ReLU, "none": None}


def make_activation(name: str | None) -> nn.Module | None:
    """The free activation module for a plan's ``free_activation`` name (None or "none": no activation)."""
    key = "none" if name is None else name.lower()
    if key not in FREE_ACTIVATIONS:
        raise PlanError(f"unknown free activation {name!r}; choose one of {', '.join(FREE_ACTIVATIONS)}")
    cls = _ACTIVATIONS[key]
    return cls() if cls is not None else None


class Linearized(nn.Module):
    dsprof_leaf = True  # an opaque leaf for block discovery: a linearised block is not found again

    """A block without the activations inside it: ``act(body(pad(x)) + shortcut(x))``.

    ``body`` holds only convolutions and BatchNorms (a Ghost module's cheap one inside a `ConcatInput`); ``pad`` is
    the padding moved in front (``border="in_front"``) or None (``"in_place"``: the convolutions keep their own padding).
    ``index`` is the block's position in the plan, ``spec`` its `BlockSpec` string and
    ``inner_padding`` the padding each body convolution had in the original block.
    """

    def __init__(
        self,
        body: nn.Sequential,
        *,
        pad: ZeroPad | None,
        shortcut: nn.Module | None,
        act: nn.Module | None,
        border: str,
        index: int,
        spec: str,
        inner_padding: list[Padding],
        input_size: tuple[int, int],
    ) -> None:
        super().__init__()
        if border not in BORDER_MODES:
            raise PlanError(f"border must be one of {BORDER_MODES}, got {border!r}")
        self.pad = pad if pad is not None else nn.Identity()
        self.body = body
        self.has_skip = shortcut is not None
        self.shortcut = shortcut if shortcut is not None else nn.Identity()
        self.act = act if act is not None else nn.Identity()
        self.border, self.index, self.spec = border, index, spec
        self.inner_padding = list(inner_padding)
        self.input_size = tuple(input_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(self.pad(x))
        if self.has_skip:
            y = y + self.shortcut(x)
        return self.act(y)


def _unpadded(conv: nn.Conv2d) -> nn.Conv2d:
    """A plain nn.Conv2d with ``conv``'s weights and no padding."""
    new = nn.Conv2d(
        conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, 0, conv.dilation, conv.groups,
        bias=conv.bias is not None, dtype=conv.weight.dtype, device=conv.weight.device,
    )
    new.load_state_dict(conv.state_dict())
    return new


def _linear_bn(bn: nn.Module) -> nn.Module:
    """A copy of a BatchNorm without its fused activation/dropout (timm's BatchNormAct2d)."""
    bn = copy.deepcopy(bn)
    for attr in ("act", "drop"):
        if hasattr(bn, attr):
            setattr(bn, attr, nn.Identity())
    return bn


def linearize_block(
    block: Block | nn.Module,
    *,
    border: str = BORDER_MODES[0],
    free_activation: str | None = FREE_ACTIVATIONS[0],
    index: int = 0,
    input_size: tuple[int, int] | None = None,
) -> Linearized:
    """The `Linearized` form of one discovered block (a copy: the model is untouched).

    Reads the block record: its convolutions with their BatchNorms (activations dropped), its skip
    connection, and the activation after its output (kept; the plan's free activation where there is none).
    A module that is one block as a whole is discovered first (``input_size``: its input (H, W)).
    """
    if not isinstance(block, Block):
        found = discover_blocks(block, input_size or (8, 8))
        whole = [b for b in found.blocks if b.name == ""]
        if not whole:
            why = "; ".join(r.reason for r in found.refusals) or "dsprof blocks lists what it finds"
            raise MergeError(f"{type(block).__name__} is not one block as a whole: {why}")
        block = whole[0]
    if border not in BORDER_MODES:
        raise PlanError(f"border must be one of {BORDER_MODES}, got {border!r}")
    convs = [u.conv for u in block.units]
    for conv in convs:
        conv_from_module(conv)  # refuses non-zero padding modes with a message
    inner_padding = [conv_from_module(conv).padding for conv in convs]
    modules: list[nn.Module] = []
    for unit in block.units:
        parts = [_unpadded(unit.conv) if border == "in_front" else copy.deepcopy(unit.conv)]
        if unit.norm is not None:
            parts.append(_linear_bn(unit.norm))
        if unit.concat:  # unpadded (in front): the concatenated input is cut to the convolution's output
            crop = unit.conv.kernel_size[0] // 2 if border == "in_front" else 0
            parts = [ConcatInput(nn.Sequential(*parts), unit.concat, crop)]
        modules.extend(parts)
    pad = None
    if border == "in_front":
        pad = front_pad(convs)
    shortcut: nn.Module | None = None
    if block.shortcut is not None:
        shortcut = nn.Sequential(*copy.deepcopy(list(block.shortcut))) if block.shortcut else nn.Identity()
        if isinstance(shortcut, nn.Sequential) and len(shortcut) == 1:
            shortcut = shortcut[0]
    act = copy.deepcopy(block.tail) if block.tail is not None else make_activation(free_activation)
    spec = block.spec
    return Linearized(
        nn.Sequential(*modules),
        pad=pad,
        shortcut=shortcut,
        act=act,
        border=border,
        index=index,
        spec=spec.to_str(),
        inner_padding=inner_padding,
        input_size=(spec.in_h, spec.in_w),
    )


def linearize_model(model: nn.Module, plan, *, input_size: tuple[int, int] | None = None) -> nn.Module:
    """A copy of ``model`` in which every block the plan marks 0 is `Linearized` (fine-tune this one).

    ``plan`` is a `Plan` (or anything `Plan.coerce` accepts: a preset name, JSON text, a keep list).
    A plan with ``acts`` (activation level) also puts each block that keeps some of its activations as a
    `dsprof.merging.partial.PartialBlock`, its runs without an activation linearised.
    The model's input is untouched. The plan is stored on the copy (``dsprof_plan``, JSON) so that
    `merge_model` can check it later, with the blocks' names (``dsprof_block_names``). A model with chains
    that no module owns comes back as a `dsprof.models.ChainGraph` (a torch.fx GraphModule) in which each
    such chain is one module (`dsprof.models.own_chains`).
    """
    plan = Plan.coerce(plan)
    plan.check_model(model)
    if any(isinstance(m, Linearized) for m in model.modules()):
        raise MergeError("the model is already linearised; merge it with merge_model, or start from the original model")
    target = copy.deepcopy(model)
    size = input_size or input_size_of(model)
    blocks = find_blocks(target, size)
    work = _read(blocks, plan)  # the plan read against the blocks, once: the build below reads only this
    target = own_chains(target, blocks)  # chains no module owns become modules of a rewritten graph
    linear: dict[int, Linearized] = {}
    for i, (block, keep) in enumerate(zip(blocks, plan.keep)):
        if keep:
            continue
        try:
            linear[i] = linearize_block(block, border=plan.border, free_activation=plan.free_activation, index=i)
        except MergeError as exc:
            raise MergeError(f"block {i} ({block.name}): {exc}") from None
    interior = set()
    for start, stop in work.spans:
        linear[start] = build_span([linear[i] for i in range(start, stop)], start, stop)
        interior.update(range(start + 1, stop))
    crossed: dict[int, nn.Module] = {}  # the places of crossing spans' blocks (a plan with 'acts')
    for span in work.crossing:
        try:
            crossed.update(crossing_modules(blocks, plan.acts, work.runs, span, linear, lambda run, i: linearize_block(
                run, border=plan.border, free_activation=None, index=i)))
        except MergeError as exc:
            raise MergeError(f"blocks {format_span(span)}: {exc}") from None
    for i, lin in linear.items():
        if i not in crossed:
            replace_block(target, blocks[i].name, nn.Identity() if i in interior else lin)
    # a plan at the level of activations: blocks that keep some, their runs linearised as blocks are
    partial: dict[int, nn.Module] = {}
    for i in work.partial:
        try:
            partial[i] = partial_of_runs(blocks[i], plan.acts[i], work.runs[i], lambda run, i=i: linearize_block(
                run, border=plan.border, free_activation=None, index=i), index=i)
        except MergeError as exc:
            raise MergeError(f"block {i} ({blocks[i].name}): {exc}") from None
    for i, part in {**partial, **crossed}.items():
        replace_block(target, blocks[i].name, part)
    target.dsprof_plan = plan.to_json()
    target.dsprof_block_names = [b.name for b in blocks]  # a rewritten graph does not show every name again
    return target


@dataclass(frozen=True)
class _Work:
    """What `linearize_model` builds, read once from a plan and the model's blocks (`_read`): ``spans``, the plan's
    spans of linearised blocks (each merges as one, `build_span`); ``crossing``, its crossing spans (a plan with
    ``acts``: their end blocks keep some activations, `crossing_modules`); ``runs``, {block index: its units cut into
    runs at the activations it keeps} for every block that keeps some (`kept_runs`); ``partial``, the blocks outside
    crossing spans that merge a run of their units (`partial_of_runs`)."""

    spans: tuple[tuple[int, int], ...]
    crossing: tuple[tuple[int, int], ...]
    runs: dict[int, list[tuple[int, int]]]
    partial: tuple[int, ...]


def _read(blocks: list[Block], plan: Plan) -> _Work:
    """The plan checked against ``blocks`` and read into `_Work`: its length and its ``acts``, then every span, a
    crossing one checked linear (`crossing_units`) and every one spannable (`span_runs`: linearised blocks that
    follow one another, symmetric padding, no skip but the identity), in the plan's order."""
    layouts = act_layouts(blocks)
    free = make_activation(plan.free_activation) is not None  # a free activation ends a linearised block
    plan.check_blocks(len(blocks))
    plan.check_acts([layout.n_acts for layout in layouts])
    crossing = tuple(s for s in plan.spans or () if is_crossing(plan.acts, s))
    crossed = {i for start, stop in crossing for i in range(start, stop)}
    runs = kept_runs(layouts, plan.acts or ())
    partial = tuple(i for i in runs if i not in crossed and partial_runs(layouts[i], plan.acts[i]))
    for start, stop in plan.spans or ():
        if (start, stop) in crossing:
            crossing_units(layouts, plan.acts, (start, stop), spans=plan.spans, free_activation=free)
            keep, why = (0,) * (stop - start), ("each must follow the previous one and have symmetric padding and no "
                                                "skip but the identity at stride 1")
        else:
            keep, why = plan.keep[start:stop], ("each must be linearised, follow the previous one, have no activation "
                                                "after its output (but the last), symmetric padding and no skip but "
                                                "the identity")
        if span_runs(blocks[start:stop], keep) != [list(range(stop - start))]:
            raise MergeError(f"blocks {format_span((start, stop))} cannot merge as one span: {why}")
    return _Work(tuple(s for s in plan.spans or () if s not in crossing), crossing, runs, partial)
