"""Block discovery: the inverted residual / depthwise-separable / ResNet blocks of any model.

Blocks are recognised by the class names that torchvision and timm use (``InvertedResidual``,
``DepthwiseSeparableConv``, ``Bottleneck``, ``BasicBlock``) and then read from their convolutions,
so that models built from the same block types work without registration. A block that cannot
be described (squeeze-excitation, dilation, an unknown block type) is reported: a warning, or an
error with ``strict=True``; it is never skipped silently.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

import torch
from torch import nn

from .blockspec import BlockSpec
from .registry import input_size_of
from .tracing import eval_forward, first_conv_in_channels

__all__ = ["Block", "UnsupportedBlock", "UnsupportedBlockWarning", "find_blocks", "trace_input_shapes"]

_MOBILE_TYPES = {"InvertedResidual", "DepthwiseSeparableConv"}
_RESNET_TYPES = {"Bottleneck", "BasicBlock"}
# Other class names that look like blocks: reported as unsupported rather than walked through.
_SUSPECT = re.compile(r"Block|Residual|Bottleneck|Separable|MBConv|Fused", re.IGNORECASE)


@dataclass(frozen=True)
class Block:
    """One block of a model: its qualified module name, the module, and its shape."""

    name: str
    module: nn.Module
    spec: BlockSpec


@dataclass(frozen=True)
class UnsupportedBlock:
    """A block-like module that dsprof cannot describe, and why."""

    name: str
    type_name: str
    reason: str

    def __str__(self) -> str:
        return f"{self.name} ({self.type_name}): {self.reason}"


class UnsupportedBlockWarning(UserWarning):
    """Issued by `find_blocks` for each block it cannot describe."""


class _Unsupported(Exception):
    pass


def find_blocks(
    model: nn.Module, input_size: tuple[int, int] | None = None, *, strict: bool = False
) -> list[Block]:
    """The model's blocks in execution order, each with its `BlockSpec`.

    ``input_size`` is the model input (height, width) in pixels; default: the resolution the
    model was built for by `get_model`, else 224x224. Unsupported blocks raise with
    ``strict=True`` and give an `UnsupportedBlockWarning` otherwise.
    """
    found: list[tuple[str, nn.Module, tuple]] = []
    unsupported: list[UnsupportedBlock] = []
    _walk(model, "", found, unsupported)
    if unsupported:
        message = "blocks dsprof cannot describe:\n  " + "\n  ".join(map(str, unsupported))
        if strict:
            raise ValueError(message)
        warnings.warn(message, UnsupportedBlockWarning, stacklevel=2)

    shapes = trace_input_shapes(model, [m for _, m, _ in found], input_size)
    blocks = []
    for name, module, fields in found:
        _, _, h, w = shapes[module]
        blocks.append(Block(name, module, BlockSpec(*fields, in_h=h, in_w=w)))
    return blocks


def trace_input_shapes(
    model: nn.Module, modules: list[nn.Module], input_size: tuple[int, int] | None = None
) -> dict[nn.Module, tuple[int, ...]]:
    """Input shape of each of ``modules`` in one batch-1 forward pass of ``model`` (eval mode)."""
    h, w = input_size or input_size_of(model)
    shapes: dict[nn.Module, tuple[int, ...]] = {}

    def record(module: nn.Module, args: tuple) -> None:
        shapes.setdefault(module, tuple(args[0].shape))

    handles = [m.register_forward_pre_hook(record) for m in modules]
    param = next(model.parameters(), None)
    x = torch.zeros(1, first_conv_in_channels(model), h, w, dtype=param.dtype if param is not None else None)
    eval_forward(model, x, handles)
    missing = [m for m in modules if m not in shapes]
    if missing:
        raise RuntimeError(f"{len(missing)} block(s) did not run in the forward pass; cannot tell their input size")
    return shapes


def _walk(module: nn.Module, prefix: str, found: list, unsupported: list[UnsupportedBlock]) -> None:
    for child_name, child in module.named_children():
        name = f"{prefix}.{child_name}" if prefix else child_name
        type_name = type(child).__name__
        if type_name in _MOBILE_TYPES or type_name in _RESNET_TYPES:
            try:
                describe = _describe_mobile if type_name in _MOBILE_TYPES else _describe_resnet
                found.append((name, child, describe(child)))
            except _Unsupported as exc:
                unsupported.append(UnsupportedBlock(name, type_name, str(exc)))
        elif _SUSPECT.search(type_name):
            unsupported.append(UnsupportedBlock(name, type_name, "not a block type dsprof knows"))
        else:
            _walk(child, name, found, unsupported)


def _convs(block: nn.Module) -> list[nn.Conv2d]:
    for sub in block.modules():
        if "Squeeze" in type(sub).__name__ or type(sub).__name__ in ("SEModule", "EffectiveSEModule"):
            raise _Unsupported("squeeze-excitation: its sigmoid gate cannot be removed, so the block cannot merge")
    convs = [m for m in block.modules() if isinstance(m, nn.Conv2d)]
    for conv in convs:
        if conv.kernel_size[0] != conv.kernel_size[1] or conv.stride[0] != conv.stride[1]:
            raise _Unsupported(f"non-square kernel or stride {conv.kernel_size}/{conv.stride}")
        if conv.dilation != (1, 1):
            raise _Unsupported(f"dilated convolution (dilation {conv.dilation})")
        if conv.padding_mode != "zeros":
            raise _Unsupported(f"padding mode {conv.padding_mode!r}; only zero padding merges exactly")
    return convs


def _padding_style(conv: nn.Conv2d) -> str:
    if "Same" in type(conv).__name__:  # timm's Conv2dSame / Conv2dSameExport: TF 'SAME' padding
        return "tf_same"
    k = conv.kernel_size[0]
    if conv.padding in ((k // 2, k // 2), "same"):
        return "symmetric"
    raise _Unsupported(f"padding {conv.padding} for kernel {k} is neither symmetric nor TF 'SAME'")


def _residual(block: nn.Module) -> bool:
    for attr in ("use_res_connect", "has_skip", "has_residual"):  # torchvision, timm, older timm
        if hasattr(block, attr):
            return bool(getattr(block, attr))
    raise _Unsupported("cannot tell whether the block has a skip connection")


def _describe_mobile(block: nn.Module) -> tuple:
    convs = _convs(block)
    depthwise = [c for c in convs if c.groups > 1 and c.groups == c.in_channels == c.out_channels]
    if len(depthwise) != 1:
        raise _Unsupported(f"expected one depthwise convolution, found {len(depthwise)}")
    dw = depthwise[0]
    pointwise = [c for c in convs if c is not dw]
    if any(c.kernel_size != (1, 1) or c.stride != (1, 1) or c.groups != 1 for c in pointwise):
        raise _Unsupported("the convolutions besides the depthwise one are not plain 1x1 convolutions")
    if len(convs) == 3 and convs[1] is dw:
        kind, cin, hidden, cout = "inverted_residual", convs[0].in_channels, dw.in_channels, convs[2].out_channels
    elif len(convs) == 2 and convs[0] is dw:
        kind, cin, hidden, cout = "depthwise_separable", dw.in_channels, dw.in_channels, convs[1].out_channels
    else:
        raise _Unsupported(f"unexpected layout of {len(convs)} convolutions")
    return (kind, cin, hidden, cout, dw.kernel_size[0], dw.stride[0], _padding_style(dw), _residual(block))


def _describe_resnet(block: nn.Module) -> tuple:
    convs = _convs(block)
    main = [getattr(block, f"conv{i}", None) for i in (1, 2, 3)]
    main = [c for c in main if isinstance(c, nn.Conv2d)]
    if any(c.groups != 1 for c in main):
        raise _Unsupported("grouped convolution (ResNeXt-style) is not described by BlockSpec")
    stride = max(c.stride[0] for c in main)
    if len(main) == 3:
        kind, spatial = "bottleneck", main[1]
    elif len(main) == 2:
        kind, spatial = "basic", main[0]
    else:
        raise _Unsupported("expected conv1..conv2 (basic) or conv1..conv3 (bottleneck)")
    if len(convs) - len(main) > 1:
        raise _Unsupported("more convolutions than a ResNet block has")
    padding = _padding_style(spatial)
    return (kind, main[0].in_channels, main[0].out_channels, main[-1].out_channels, spatial.kernel_size[0], stride, padding, True)
