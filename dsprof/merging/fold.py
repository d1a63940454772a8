"""Folding BatchNorm into the convolution before it: pure arithmetic, and module surgery on top.

Every timed model and block in dsprof is folded first (DESIGN: fair timing), and the merge folds
before it composes convolutions.
"""

from __future__ import annotations

import collections
import copy

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from ..errors import MergeError
from ..models.surgery import set_submodule
from ..models.tracing import eval_forward

__all__ = ["fold_bn_into_conv", "fold_batchnorm", "conv_bn_pairs", "set_submodule"]


def fold_bn_into_conv(
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    running_mean: torch.Tensor,
    running_var: torch.Tensor,
    bn_weight: torch.Tensor | None,
    bn_bias: torch.Tensor | None,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weight and bias of the convolution that computes ``bn(conv(x))`` in eval mode.

    Computed in float64 and returned in ``weight``'s dtype. Each BatchNorm's own ``eps`` matters:
    timm's tf_ models use 1e-3, PyTorch's default is 1e-5.
    """
    dtype = weight.dtype
    w = weight.detach().double()
    b = bias.detach().double() if bias is not None else torch.zeros(w.shape[0], dtype=torch.float64, device=w.device)
    gamma = bn_weight.detach().double() if bn_weight is not None else torch.ones_like(b)
    beta = bn_bias.detach().double() if bn_bias is not None else torch.zeros_like(b)
    scale = gamma / torch.sqrt(running_var.detach().double() + eps)
    folded_w = w * scale.reshape(-1, *([1] * (w.dim() - 1)))
    folded_b = (b - running_mean.detach().double()) * scale + beta
    return folded_w.to(dtype), folded_b.to(dtype)


class _Readers(TorchFunctionMode):
    """Counts, for each tensor, the torch functions that read it and return a tensor (or write into it) during one
    forward pass: a shape query reads no values, an in-place activation or a second branch does."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: collections.Counter[int] = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 (torch's protocol)
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func is torch.Tensor.__setitem__ or any(isinstance(o, torch.Tensor) for o in tree_flatten(out)[0]):
            for a in tree_flatten((args, kwargs))[0]:
                if isinstance(a, torch.Tensor):
                    self.reads[id(a)] += 1
        return out


def conv_bn_pairs(model: nn.Module, example: torch.Tensor) -> list[tuple[str, str]]:
    """(conv name, BatchNorm name) for every BatchNorm2d that is the only reader of a Conv2d's output.

    Found by running ``example`` through the model and matching tensors, so it works for any
    module layout (Sequential, ResNet's conv1/bn1 attributes, timm's BatchNormAct2d). Only reader: a
    convolution whose output something else reads too (RepGhost's second branch once its own BatchNorm is
    folded, an in-place activation between the two that leaves the tensor's identity) does not fold, since
    the other reader would see the folded values (issue #46: a merged RepGhostNet folded twice lost 31
    such BatchNorms, and timed 11 % faster than its original for that alone).
    """
    names = {m: n for n, m in model.named_modules()}
    produced_by: dict[int, nn.Module] = {}
    keep_alive: list[torch.Tensor] = []  # so that tensor ids are not reused during the pass
    found: list[tuple[int, str, str]] = []
    readers = _Readers()

    def after_conv(conv: nn.Module, args: tuple, output: torch.Tensor) -> None:
        keep_alive.append(output)
        produced_by[id(output)] = conv
        readers.reads[id(output)] = 0  # an id of a tensor freed before

    def before_bn(bn: nn.Module, args: tuple) -> None:
        conv = produced_by.get(id(args[0]))
        if conv is not None and isinstance(conv, nn.Conv2d) and conv.out_channels == bn.num_features:
            found.append((id(args[0]), names[conv], names[bn]))

    handles = []
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            handles.append(m.register_forward_hook(after_conv))
        elif isinstance(m, nn.BatchNorm2d):
            handles.append(m.register_forward_pre_hook(before_bn))
    with readers:
        eval_forward(model, example, handles)
    return list(dict.fromkeys((conv, bn) for tensor, conv, bn in found if readers.reads[tensor] == 1))


def _after_bn(bn: nn.BatchNorm2d) -> nn.Module:
    """What remains of a BatchNorm once its affine part is folded: timm's BatchNormAct2d keeps its
    dropout and activation; a plain BatchNorm2d becomes Identity."""
    drop, act = getattr(bn, "drop", None), getattr(bn, "act", None)
    rest = [m for m in (drop, act) if m is not None and not isinstance(m, nn.Identity)]
    return nn.Sequential(*rest) if rest else nn.Identity()


def fold_batchnorm(model: nn.Module, example: torch.Tensor, *, inplace: bool = False) -> nn.Module:
    """The model with every BatchNorm2d that alone reads a Conv2d's output folded into it (eval-mode numerics).

    ``example`` is one input batch (its values do not matter, only its shape). Returns a copy
    unless ``inplace``. A BatchNorm without running statistics cannot fold and raises.
    """
    target = model if inplace else copy.deepcopy(model)
    for conv_name, bn_name in conv_bn_pairs(target, example):
        conv, bn = target.get_submodule(conv_name), target.get_submodule(bn_name)
        if bn.running_mean is None or bn.running_var is None:
            raise MergeError(f"{bn_name} has no running statistics (track_running_stats=False); it cannot be folded")
        w, b = fold_bn_into_conv(conv.weight, conv.bias, bn.running_mean, bn.running_var, bn.weight, bn.bias, bn.eps)
        with torch.no_grad():
            conv.weight.copy_(w)
            if conv.bias is None:
                conv.bias = nn.Parameter(b)
            else:
                conv.bias.copy_(b)
        set_submodule(target, bn_name, _after_bn(bn))
    return target
