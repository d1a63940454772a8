"""Merging one linearised block into one convolution (plus border correction and activation)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Sequence

import torch
from torch import nn

from ..models import format_span
from .algebra import (
    TF_SAME,
    LinearConv,
    MergeError,
    Padding,
    add_residual,
    apply_conv,
    compose_all,
    concat_input,
    conv_from_module,
    fold_bn,
    output_size,
)
from ..models import Block
from ..models.counting import conv_macs
from ..models.padding import as_pair, conv_padding
from ..models.ownership import shortcut_parts
from .layers import BorderBias, ConcatInput, MergedConv, ZeroPad, conv_module
from .linearize import Linearized
from .spans import SpanLinearized

__all__ = ["BlockMergeInfo", "deployed_unmerged", "deploys_alike", "folded_chain", "merge_linearized", "linear_reference",
           "pads_back_in_place", "unmerged_form"]


@dataclass(frozen=True)
class BlockMergeInfo:
    """How a block merged: the merged convolution (float64), whether it is exact, and its costs.

    ``exact`` is True when the merged block computes the linearised block everywhere (in float
    arithmetic); ``border_corrected`` when that needed a `BorderBias`; ``border_error`` is the
    measured max |merged - linearised| / max |linearised| along the borders when not exact.
    ``linear_macs`` is the block as built (original paddings), ``merged_macs`` the merged convolution,
    both for one image at ``input_size``.
    """

    conv: LinearConv
    exact: bool
    border_corrected: bool
    border_error: float | None
    linear_macs: int
    merged_macs: int
    input_size: tuple[int, int]


def folded_chain(block: Linearized) -> tuple[list[LinearConv], LinearConv | None]:
    """The block's convolutions with their BatchNorms folded (eval-mode numerics), float64, and the
    shortcut convolution (None for identity or no skip). A Ghost module's concatenation (`ConcatInput`) is one
    convolution (`concat_input`). Refuses anything else inside the body."""
    convs = _folded(block.body)
    shortcut = None
    if block.has_skip and not isinstance(block.shortcut, nn.Identity):
        parts = shortcut_parts(list(block.shortcut) if isinstance(block.shortcut, nn.Sequential) else [block.shortcut])
        if parts is None:
            raise MergeError("the shortcut is neither the identity nor convolutions (1x1 after the first), each with an "
                             "optional BatchNorm")
        shortcut = compose_all(_folded(parts))
    return convs, shortcut


def _folded(body: nn.Module) -> list[LinearConv]:
    """The convolutions of a linearised body, their BatchNorms folded, float64."""
    convs: list[LinearConv] = []
    for module in body:
        if isinstance(module, ConcatInput):
            inner = _folded(module.inner)
            if len(inner) != 1:
                raise MergeError("a concatenation after its input holds one convolution (with its BatchNorm)")
            convs.append(concat_input(inner[0], module.keep))
        elif isinstance(module, nn.Conv2d):
            convs.append(conv_from_module(module))
        elif isinstance(module, nn.BatchNorm2d):
            if not convs:
                raise MergeError("a BatchNorm before any convolution cannot fold")
            act = getattr(module, "act", None)
            if act is not None and not isinstance(act, nn.Identity):
                raise MergeError(f"activation {type(act).__name__} left after a BatchNorm: the block is not linear")
            convs[-1] = fold_bn(convs[-1], module)
        elif isinstance(module, nn.Identity):
            continue
        else:
            raise MergeError(
                f"{type(module).__name__} between the convolutions: an activation left in between makes the block "
                "non-linear, so it cannot merge into one convolution (the plan must mark it 0 to remove it)"
            )
    return convs


def linear_reference(block: Linearized, x: torch.Tensor, *, in_place: bool | None = None) -> torch.Tensor:
    """The linear part of ``block`` (no output activation) computed conv by conv from the folded chain.

    ``in_place`` True: each convolution with its original padding; False: padding in front; default:
    the block's own form."""
    convs, shortcut = folded_chain(block)
    in_place = block.border == "in_place" if in_place is None else in_place
    if in_place:
        convs = [replace(c, padding=p) for c, p in zip(convs, block.inner_padding)]
        h = x
    else:
        h = block.pad(x)
    for c in convs:
        h = apply_conv(c, h)
    if block.has_skip:
        h = h + (apply_conv(shortcut, x) if shortcut is not None else x)
    return h


def merge_linearized(
    block: Linearized, *, input_size: tuple[int, int] | None = None, seed: int = 0
) -> tuple[MergedConv, BlockMergeInfo]:
    """One `MergedConv` computing ``block`` (a `Linearized`), and how it merged.

    ``input_size`` (H, W) defaults to the size recorded when the block was linearised; it matters
    for border corrections and MAC counts only.
    """
    size = tuple(input_size or block.input_size)
    if not all(size):
        raise MergeError("the block's input size is unknown; pass input_size=(H, W)")
    param = next(block.parameters())
    dtype, device = param.dtype, param.device
    if isinstance(block, SpanLinearized):
        return _merge_span(block, size, dtype, device)
    convs, shortcut = folded_chain(block)
    original = [replace(c, padding=p) for c, p in zip(convs, block.inner_padding)]
    try:
        if block.border == "in_front":
            merged = _in_front_conv(block, convs, shortcut)
        else:
            merged = compose_all(original)
            if block.has_skip:
                merged = add_residual(merged, shortcut)
    except MergeError as exc:
        raise MergeError(f"{block.spec or 'block'}: {exc}") from None

    exact, corrected, border_error, correction = True, False, None, None
    if block.border == "in_place":
        padded = [i for i, c in enumerate(original) if c.padding == TF_SAME or any(c.padding)]
        last = padded[-1] if padded else 0
        if last > 0:  # a padded convolution reads an intermediate map
            if all(c.is_pointwise() for c in original[:last]):
                zero = torch.zeros(1, merged.in_channels, *size, dtype=torch.float64)
                correction = (linear_reference(block, zero, in_place=True) - apply_conv(merged, zero))[0]
                corrected = True  # structural: present even when zero, so that the architecture replays
            else:
                exact = False
                g = torch.Generator().manual_seed(seed)
                x = torch.randn(2, merged.in_channels, *size, generator=g, dtype=torch.float64)
                ref = linear_reference(block, x, in_place=True)
                border_error = float((ref - apply_conv(merged, x)).abs().max() / ref.abs().max())

    linear_macs, _ = _linear_macs(block, size)
    info = BlockMergeInfo(merged, exact, corrected, border_error, linear_macs, _macs(merged, size), size)

    act = None if isinstance(block.act, nn.Identity) else copy.deepcopy(block.act)
    border = BorderBias(correction.to(dtype)) if corrected else None
    module = MergedConv(conv_module(merged, dtype), act=act, border=border).to(device)
    return module, info


def _macs(conv: LinearConv, size: tuple[int, int]) -> int:
    """MACs of ``conv`` on one image of ``size``: the one count (`dsprof.models.conv_macs`) of its shape."""
    return conv_macs(conv.in_channels, conv.out_channels, conv.kernel_size, output_size(conv, size), conv.groups)


def _linear_macs(block: Linearized, size: tuple[int, int]) -> tuple[int, tuple[int, int]]:
    """MACs of a linearised block as built (original paddings: a Ghost module's cheap convolution, its concatenated
    input costing nothing; a skip path convolution by convolution) and its output size."""
    def built(modules) -> list[LinearConv]:
        return [conv_from_module(m.inner[0] if isinstance(m, ConcatInput) else m) for m in modules
                if isinstance(m, (nn.Conv2d, ConcatInput))]

    macs, h = 0, size
    for c, p in zip(built(block.body), block.inner_padding):
        c = replace(c, padding=p)
        macs += _macs(c, h)
        h = output_size(c, h)
    if block.has_skip:
        s = size
        for c in built(block.shortcut.modules()):
            macs += _macs(c, s)
            s = output_size(c, s)
    return macs, h


def _in_front_conv(block: Linearized, convs: list[LinearConv], shortcut: LinearConv | None) -> LinearConv:
    """A padding-in-front block as one convolution: its folded chain composed, the front padding, the skip folded in."""
    merged = replace(compose_all(convs), padding=block.pad.padding)
    return add_residual(merged, shortcut) if block.has_skip else merged


def _merge_span(span: SpanLinearized, size: tuple[int, int], dtype: torch.dtype, device) -> tuple[MergedConv, BlockMergeInfo]:
    """A span of padding-in-front blocks: their merged convolutions composed into one (exact, padding in front)."""
    pieces, linear_macs, h = [], 0, size
    for b in span.blocks:
        convs, shortcut = folded_chain(b)
        pieces.append(_in_front_conv(b, convs, shortcut))
        macs, h = _linear_macs(b, h)
        linear_macs += macs
    try:
        merged = compose_all(pieces)
    except MergeError as exc:
        raise MergeError(f"span {format_span((span.start, span.stop))}: {exc}") from None
    info = BlockMergeInfo(merged, True, False, None, linear_macs, _macs(merged, size), size)
    act = None if isinstance(span.act, nn.Identity) else copy.deepcopy(span.act)
    return MergedConv(conv_module(merged, dtype), act=act).to(device), info


def _shift_bias(first: LinearConv, second: LinearConv) -> tuple[LinearConv, LinearConv]:
    """Move ``first``'s bias through ``second``: a constant map b1 before a conv is ``sum(W2) b1`` after it."""
    g = second.groups
    taps_sum = second.weight.double().sum(dim=(2, 3)).reshape(g, second.out_channels // g, -1)
    moved = torch.bmm(taps_sum, first.bias.double().reshape(g, -1, 1)).reshape(-1)
    return replace(first, bias=torch.zeros_like(first.bias)), replace(second, bias=second.bias + moved)


def unmerged_form(block: Linearized) -> Linearized | None:
    """A padding-in-front block that is not merged, as deployed: BatchNorm folded and the padding back
    in place, at the cost of the original block (no convolution over the padding ring), exactly.

    In the padding-in-front form every pixel of the ring around the first padded convolution's input
    carries the constant bias of the 1x1 convolutions before it; moving that bias past the padded
    convolution (``+ sum(W) b``) makes the ordinary zero padding exact. Applies when only 1x1
    stride-1 convolutions precede the padded one (inverted residual, bottleneck). Otherwise (VGG's
    3x3 -> 3x3; a block with a Ghost module, which keeps its depthwise convolution and its concatenation) the
    padding in front is done by the block's first convolution where it is the same on opposite sides (same
    numbers, and no Pad operator, whose output size an exported ONNX graph loses);
    else, and for blocks already in place, None (the block stays as it is).
    """
    if block.border != "in_front":
        return None
    if any(isinstance(m, ConcatInput) for m in block.body):  # a Ghost module stays a depthwise and a concatenation
        return _front_pad_in_first_conv(block)
    convs, shortcut = folded_chain(block)
    padded = _padded(block.inner_padding)
    if len(padded) != 1 or not pads_back_in_place([(c.kernel_size, c.stride, c.dilation) for c in convs],
                                                  block.inner_padding):
        return _front_pad_in_first_conv(block)
    last = padded[0]
    for i in range(last):
        convs[i], convs[i + 1] = _shift_bias(convs[i], convs[i + 1])
    convs = [replace(c, padding=p) for c, p in zip(convs, block.inner_padding)]
    param = next(block.parameters())
    dtype = param.dtype
    body = nn.Sequential(*[conv_module(c, dtype) for c in convs])
    short = None
    if block.has_skip:
        short = conv_module(shortcut, dtype) if shortcut is not None else nn.Identity()
    act = None if isinstance(block.act, nn.Identity) else copy.deepcopy(block.act)
    form = Linearized(
        body, pad=None, shortcut=short, act=act, border="in_place", index=block.index, spec=block.spec,
        inner_padding=block.inner_padding, input_size=block.input_size,
    )
    return form.to(param.device).eval()


def _padded(paddings: Sequence[Padding]) -> list[int]:
    return [i for i, p in enumerate(paddings) if p == TF_SAME or any(p)]


def pads_back_in_place(geometry: Sequence[tuple[tuple[int, int], tuple[int, int], tuple[int, int]]],
                       paddings: Sequence[Padding]) -> bool:
    """Whether a linearised block whose convolutions have this ``geometry`` ((kernel, stride, dilation) each)
    and original ``paddings`` is deployed unmerged in the same form whatever its border: True when at most
    one convolution is padded and only 1x1 stride-1 convolutions precede it (`unmerged_form` then puts the
    padding back in place, exactly); False when a padding-in-front block keeps a larger first map (ResNet's
    basic block, VGG's 3x3 pairs)."""
    padded = _padded(paddings)
    if len(padded) > 1:
        return False
    return not padded or all(g == ((1, 1), (1, 1), (1, 1)) for g in geometry[:padded[0]])


def deploys_alike(block: Block) -> bool:
    """`pads_back_in_place` for a discovered block (its convolutions as built): whether it runs unmerged in the
    same form with its border in front or in place (what a LUT's ``linear`` entry, timed in front, then covers).
    A block with a Ghost module does not: in front, its first convolution runs over the larger map."""
    if any(u.concat for u in block.units):
        return False
    convs = [u.conv for u in block.units]
    return pads_back_in_place([(as_pair(c.kernel_size), as_pair(c.stride), as_pair(c.dilation)) for c in convs],
                              [conv_padding(c) for c in convs])


def deployed_unmerged(block: Linearized) -> nn.Module:
    """``block`` as `merge_model` deploys it where it does not merge: `unmerged_form` where that applies, else
    the block itself (BatchNorms, if any, are folded with the rest of the model). The profiler times its
    ``linear`` variant on this module (`dsprof.profiler.workloads.deployed_linear`), so that what a LUT
    prices for a block left unmerged is what runs."""
    form = unmerged_form(block)
    return form if form is not None else block


def _front_pad_in_first_conv(block: Linearized) -> Linearized | None:
    """``block`` (padding in front) with that padding done by its first convolution, when the padding is
    static and the same on opposite sides; else None."""
    pad = block.pad.padding if isinstance(block.pad, ZeroPad) else (0, 0, 0, 0)
    first = block.body[0]
    if pad == TF_SAME or not any(pad) or pad[0] != pad[1] or pad[2] != pad[3]:
        return None
    if type(first) is not nn.Conv2d or any(first.padding) or first.padding_mode != "zeros":  # type: ignore[arg-type]
        return None
    body = copy.deepcopy(block.body)
    body[0].padding = (pad[0], pad[2])
    shortcut = copy.deepcopy(block.shortcut) if block.has_skip else None
    act = None if isinstance(block.act, nn.Identity) else copy.deepcopy(block.act)
    return Linearized(
        body, pad=None, shortcut=shortcut, act=act, border="in_place", index=block.index, spec=block.spec,
        inner_padding=block.inner_padding, input_size=block.input_size,
    ).eval()
