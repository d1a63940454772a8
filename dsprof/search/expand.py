"""DepthShrinker+ (paper Sec. 4.5, appendix "Design details"): expand, train, shrink back.

Chosen convolutions are replaced by inverted residual blocks for training (more parameters help the
optimisation); once their activations are removed (``set_linear``) each block is one convolution again,
and `shrink_model` puts exactly that convolution back: the original architecture, same state-dict keys
and shapes, same outputs as the linear expanded model.

Rules (`expand_model`):

* ``"vgg"``: every 3x3 convolution except the first two and the last becomes an inverted residual
  block with expansion 6 (depthwise kernel 3, the convolution's stride).
* ``"mobilenet_v2"``: in every second block (the 2nd, 4th, ... of `find_blocks`) that has one, the first
  pointwise (expansion) convolution becomes an inverted residual block with expansion 6 and depthwise
  kernel 1.

The expanded block pads its input in front (then its convolutions run unpadded), so that without
activations it is exactly one convolution with the original padding. A bias the original convolution
did not have is absorbed into the BatchNorm that follows it (``running_mean -= bias``, exact).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from ..errors import UsageError
from ..merging.algebra import MergeError, add_residual, compose_all, conv_from_module, fold_bn
from ..merging.fold import set_submodule
from ..models import find_blocks, input_size_of

__all__ = ["EXPAND_RULES", "ExpandedConv", "expand_model", "set_linear", "shrink_model"]

EXPAND_RULES = ("vgg", "mobilenet_v2")


class ExpandedConv(nn.Module):
    """An inverted residual block standing in for one convolution ``cin -> cout`` (kernel k, stride s):
    zero-pad in front, 1x1 to ``expansion * cin`` + BN + ReLU6, depthwise ``dw_kernel`` (stride s) + BN +
    ReLU6, 1x1 to ``cout`` + BN, plus the input when shapes match. ``linear=True`` drops the ReLU6s."""

    def __init__(self, conv: nn.Conv2d, *, expansion: int = 6, bn_path: str | None = None) -> None:
        super().__init__()
        cin, cout = conv.in_channels, conv.out_channels
        k, s = conv.kernel_size[0], conv.stride[0]
        if conv.kernel_size[0] != conv.kernel_size[1] or conv.stride[0] != conv.stride[1] or conv.groups != 1:
            raise UsageError("only square, ungrouped convolutions expand")
        if conv.dilation != (1, 1) or conv.padding_mode != "zeros" or conv.padding != (k // 2, k // 2):
            raise UsageError(f"only zero padding k//2 without dilation expands, got {conv}")
        hidden = expansion * cin
        dtype, device = conv.weight.dtype, conv.weight.device
        kw = dict(bias=False, dtype=dtype, device=device)
        self.pad = nn.ZeroPad2d(k // 2) if k // 2 else nn.Identity()
        self.pw = nn.Conv2d(cin, hidden, 1, **kw)
        self.bn1 = nn.BatchNorm2d(hidden, dtype=dtype, device=device)
        self.dw = nn.Conv2d(hidden, hidden, k, stride=s, groups=hidden, **kw)
        self.bn2 = nn.BatchNorm2d(hidden, dtype=dtype, device=device)
        self.pwl = nn.Conv2d(hidden, cout, 1, **kw)
        self.bn3 = nn.BatchNorm2d(cout, dtype=dtype, device=device)
        self.act = nn.ReLU6()
        self.residual = cin == cout and s == 1
        self.linear = False
        self.had_bias = conv.bias is not None
        self.padding = k // 2
        self.bn_path = bn_path  # the BatchNorm after the original convolution (absorbs the merged bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        act = (lambda t: t) if self.linear else self.act
        h = act(self.bn1(self.pw(self.pad(x))))
        h = act(self.bn2(self.dw(h)))
        h = self.bn3(self.pwl(h))
        return h + x if self.residual else h

    def merged_conv(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(weight, bias) of the one convolution (padding k//2) this block computes without activations."""
        if not self.linear:
            raise MergeError("the expanded block still has its activations; set_linear(model) and fine-tune first")
        chain = [fold_bn(conv_from_module(c), bn) for c, bn in ((self.pw, self.bn1), (self.dw, self.bn2), (self.pwl, self.bn3))]
        merged = compose_all(chain)
        if self.residual:
            p = self.padding
            merged = add_residual(type(merged)(merged.weight, merged.bias, merged.stride, (p, p, p, p), merged.dilation, merged.groups))
        return merged.weight, merged.bias

    def extra_repr(self) -> str:
        return f"linear={self.linear}, residual={self.residual}"


def _vgg_targets(model: nn.Module) -> list[tuple[str, str | None]]:
    convs = [n for n, m in model.named_modules() if isinstance(m, nn.Conv2d) and m.kernel_size == (3, 3) and m.groups == 1]
    if len(convs) < 4:
        raise UsageError(f"the VGG rule needs at least 4 3x3 convolutions (it skips the first two and the last), found {len(convs)}")
    names = dict(model.named_modules())
    targets = []
    for name in convs[2:-1]:
        parent, _, idx = name.rpartition(".")
        nxt = f"{parent}.{int(idx) + 1}" if idx.isdigit() else None
        bn = nxt if nxt in names and isinstance(names[nxt], nn.BatchNorm2d) else None
        targets.append((name, bn))
    return targets


def _mbv2_targets(model: nn.Module, input_size) -> list[tuple[str, str | None]]:
    targets = []
    for i, block in enumerate(find_blocks(model, input_size)):
        if i % 2 == 0 or block.spec.kind != "inverted_residual":
            continue
        m = block.module
        if isinstance(getattr(m, "conv", None), nn.Sequential):  # torchvision: conv.0 = (conv, bn, act)
            targets.append((f"{block.name}.conv.0.0", f"{block.name}.conv.0.1"))
        elif hasattr(m, "conv_pw"):  # timm
            targets.append((f"{block.name}.conv_pw", f"{block.name}.bn1"))
    if not targets:
        raise UsageError("no inverted residual block with an expansion convolution in every second block")
    return targets


def expand_model(model: nn.Module, rule: str = "auto", *, expansion: int = 6, inplace: bool = False) -> nn.Module:
    """``model`` (a copy unless ``inplace``) with the convolutions that ``rule`` picks expanded into
    `ExpandedConv` blocks (activations on). ``rule="auto"``: ``mobilenet_v2`` when the model has inverted
    residual blocks, else ``vgg``."""
    target = model if inplace else copy.deepcopy(model)
    size = input_size_of(model)
    if rule == "auto":
        has_ir = any(b.spec.kind == "inverted_residual" for b in find_blocks(target, size))
        rule = "mobilenet_v2" if has_ir else "vgg"
    if rule not in EXPAND_RULES:
        raise UsageError(f"unknown expansion rule {rule!r}; choose one of {', '.join(EXPAND_RULES)} or 'auto'")
    targets = _vgg_targets(target) if rule == "vgg" else _mbv2_targets(target, size)
    for name, bn in targets:
        conv = target.get_submodule(name)
        if rule == "mobilenet_v2" and conv.kernel_size != (1, 1):
            raise UsageError(f"{name} is not a pointwise convolution")
        set_submodule(target, name, ExpandedConv(conv, expansion=expansion, bn_path=bn))
    target.dsprof_expand_rule = rule
    return target


def set_linear(model: nn.Module, linear: bool = True) -> nn.Module:
    """Remove (or restore) the activations of every `ExpandedConv` of ``model``, in place."""
    for m in model.modules():
        if isinstance(m, ExpandedConv):
            m.linear = linear
    return model


@torch.no_grad()
def shrink_model(model: nn.Module) -> nn.Module:
    """A copy of an expanded model (activations removed) with each `ExpandedConv` merged back into one
    ``nn.Conv2d`` of the original shape: the original architecture. Exact in eval mode."""
    target = copy.deepcopy(model)
    expanded = [(n, m) for n, m in target.named_modules() if isinstance(m, ExpandedConv)]
    if not expanded:
        raise UsageError("the model has no expanded convolutions (expand_model makes them)")
    for name, block in expanded:
        weight, bias = block.merged_conv()
        p = block.padding
        cout, cin, k, _ = weight.shape
        dtype, device = block.pw.weight.dtype, block.pw.weight.device
        conv = nn.Conv2d(cin, cout, k, stride=block.dw.stride, padding=p, bias=block.had_bias, dtype=dtype, device=device)
        conv.weight.copy_(weight.to(dtype))
        if block.had_bias:
            conv.bias.copy_(bias.to(dtype))
        else:
            bn = target.get_submodule(block.bn_path) if block.bn_path else None
            if not isinstance(bn, nn.BatchNorm2d):
                raise MergeError(f"{name}: the merged convolution has a bias, the original had none and no BatchNorm follows")
            bn.running_mean.sub_(bias.to(bn.running_mean.dtype))
        set_submodule(target, name, conv)
    if hasattr(target, "dsprof_expand_rule"):
        del target.dsprof_expand_rule
    return target
