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

import torch
from torch import nn

from ..models import find_blocks, input_size_of
from .algebra import LinearConv, MergeError, Padding, compose_all, conv_from_module
from .fold import set_submodule
from .layers import ZeroPad

__all__ = ["BORDER_MODES", "FREE_ACTIVATIONS", "Linearized", "linearize_block", "linearize_model", "make_activation"]

BORDER_MODES = ("in_front", "in_place")
FREE_ACTIVATIONS = {"relu6": nn.ReLU6, "relu": nn.ReLU, "none": None}


def make_activation(name: str | None) -> nn.Module | None:
    """The free activation module for a plan's ``free_activation`` name (None or "none": no activation)."""
    key = "none" if name is None else name.lower()
    if key not in FREE_ACTIVATIONS:
        raise ValueError(f"unknown free activation {name!r}; choose one of {', '.join(FREE_ACTIVATIONS)}")
    cls = FREE_ACTIVATIONS[key]
    return cls() if cls is not None else None


class Linearized(nn.Module):
    """A block without the activations inside it: ``act(body(pad(x)) + shortcut(x))``.

    ``body`` holds only convolutions and BatchNorms; ``pad`` is the padding moved in front
    (``border="in_front"``) or None (``"in_place"``: the convolutions keep their own padding).
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
            raise ValueError(f"border must be one of {BORDER_MODES}, got {border!r}")
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


def _is_identity(m: nn.Module | None) -> bool:
    return m is None or isinstance(m, nn.Identity)


def _check_linear_extras(block: nn.Module) -> None:
    """Refuse timm blocks whose extra stages are not removable activations."""
    se = getattr(block, "se", None)
    if not _is_identity(se):
        raise MergeError(
            f"{type(block).__name__} has squeeze-excitation ({type(se).__name__}): its sigmoid gate multiplies the "
            "features by an input-dependent factor, so the block stays non-linear and cannot merge; keep its "
            "activations (1) in the plan"
        )
    if not _is_identity(getattr(block, "aa", None)):
        raise MergeError("anti-aliasing (blur) pooling inside the block is not a convolution dsprof can merge")
    if getattr(block, "conv_s2d", None) is not None:
        raise MergeError("space-to-depth stems inside the block are not supported by the merge")


def _block_parts(block: nn.Module) -> tuple[list[tuple[nn.Conv2d, nn.Module | None]], nn.Module | None, nn.Module | None]:
    """(conv, BatchNorm) pairs in execution order, the shortcut (None: no skip; Identity; downsample), and
    the activation that follows the block's output (kept), for the block types `find_blocks` knows."""
    kind = type(block).__name__
    if kind == "InvertedResidual" and hasattr(block, "conv") and isinstance(block.conv, nn.Sequential):  # torchvision
        layers: list[tuple[nn.Conv2d, nn.Module | None]] = []
        for child in block.conv:
            if isinstance(child, nn.Sequential):  # Conv2dNormActivation: conv, norm, activation
                layers.append((child[0], child[1] if len(child) > 1 else None))
            elif isinstance(child, nn.Conv2d):
                layers.append((child, None))
            elif isinstance(child, nn.BatchNorm2d) and layers and layers[-1][1] is None:
                layers[-1] = (layers[-1][0], child)
            else:
                raise MergeError(f"unexpected {type(child).__name__} in torchvision InvertedResidual")
        return layers, (nn.Identity() if block.use_res_connect else None), None
    if kind == "InvertedResidual":  # timm
        _check_linear_extras(block)
        layers = [(block.conv_pw, block.bn1), (block.conv_dw, block.bn2), (block.conv_pwl, block.bn3)]
        tail = getattr(block.bn3, "act", None)
        return layers, (nn.Identity() if block.has_skip else None), (None if _is_identity(tail) else tail)
    if kind == "DepthwiseSeparableConv":  # timm
        _check_linear_extras(block)
        tail = getattr(block.bn2, "act", None)
        layers = [(block.conv_dw, block.bn1), (block.conv_pw, block.bn2)]
        return layers, (nn.Identity() if block.has_skip else None), (None if _is_identity(tail) else tail)
    if kind in ("Bottleneck", "BasicBlock"):  # torchvision ResNet
        n = 3 if kind == "Bottleneck" else 2
        layers = [(getattr(block, f"conv{i}"), getattr(block, f"bn{i}")) for i in range(1, n + 1)]
        shortcut = block.downsample if block.downsample is not None else nn.Identity()
        return layers, shortcut, block.relu
    raise MergeError(f"{kind} is not a block type the merge knows (inverted residual, depthwise-separable, ResNet)")


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


def _padding_chain(convs: list[nn.Conv2d]) -> LinearConv:
    """Composite of the convolutions' geometry only (1-channel zero weights): its padding, kernel, stride."""
    shapes = []
    for conv in convs:
        c = conv_from_module(conv)
        shapes.append(
            LinearConv(torch.zeros(1, 1, *c.kernel_size, dtype=torch.float64), torch.zeros(1, dtype=torch.float64),
                       c.stride, c.padding, c.dilation, 1)
        )
    return compose_all(shapes)


def linearize_block(
    block: nn.Module,
    *,
    border: str = "in_front",
    free_activation: str | None = "relu6",
    index: int = 0,
    spec: str = "",
    input_size: tuple[int, int] = (0, 0),
) -> Linearized:
    """The `Linearized` form of one block (a copy: ``block`` is untouched).

    ``input_size`` is the block's input (H, W), used by the merge for border corrections.
    """
    if border not in BORDER_MODES:
        raise ValueError(f"border must be one of {BORDER_MODES}, got {border!r}")
    layers, shortcut, tail = _block_parts(block)
    convs = [conv for conv, _ in layers]
    for conv in convs:
        conv_from_module(conv)  # refuses non-zero padding modes with a message
    inner_padding = [conv_from_module(conv).padding for conv in convs]
    modules: list[nn.Module] = []
    for conv, bn in layers:
        modules.append(_unpadded(conv) if border == "in_front" else copy.deepcopy(conv))
        if bn is not None:
            modules.append(_linear_bn(bn))
    pad = None
    if border == "in_front":
        chain = _padding_chain(convs)
        pad = ZeroPad(chain.padding, chain.kernel_size, chain.stride, chain.dilation)
    act = copy.deepcopy(tail) if tail is not None else make_activation(free_activation)
    return Linearized(
        nn.Sequential(*modules),
        pad=pad,
        shortcut=copy.deepcopy(shortcut) if shortcut is not None else None,
        act=act,
        border=border,
        index=index,
        spec=spec,
        inner_padding=inner_padding,
        input_size=input_size,
    )


def linearize_model(model: nn.Module, plan, *, input_size: tuple[int, int] | None = None) -> nn.Module:
    """A copy of ``model`` in which every block the plan marks 0 is `Linearized` (fine-tune this one).

    ``plan`` is a `Plan` (or anything `Plan.coerce` accepts: a preset name, JSON text, a keep list).
    The model's input is untouched. The plan is stored on the copy (``dsprof_plan``, JSON) so that
    `merge_model` can check it later.
    """
    from .plan import Plan  # local: plan imports the model registry, which is light, but avoid a cycle

    plan = Plan.coerce(plan)
    if any(isinstance(m, Linearized) for m in model.modules()):
        raise ValueError("the model is already linearised; merge it with merge_model, or start from the original model")
    target = copy.deepcopy(model)
    size = input_size or input_size_of(model)
    blocks = find_blocks(target, size)
    plan.check_blocks(len(blocks))
    for i, (block, keep) in enumerate(zip(blocks, plan.keep)):
        if keep:
            continue
        try:
            lin = linearize_block(
                block.module,
                border=plan.border,
                free_activation=plan.free_activation,
                index=i,
                spec=block.spec.to_str(),
                input_size=(block.spec.in_h, block.spec.in_w),
            )
        except MergeError as exc:
            raise MergeError(f"block {i} ({block.name}): {exc}") from None
        set_submodule(target, block.name, lin)
    target.dsprof_plan = plan.to_json()
    return target

