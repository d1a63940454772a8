"""Folding BatchNorm into the convolution before it: pure arithmetic, and module surgery on top.

Every timed model and block in dsprof is folded first (DESIGN: fair timing), and the merge folds
before it composes convolutions.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

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


def conv_bn_pairs(model: nn.Module, example: torch.Tensor) -> list[tuple[str, str]]:
    """(conv name, BatchNorm name) for every BatchNorm2d that reads a Conv2d's output directly.

    Found by running ``example`` through the model and matching tensors, so it works for any
    module layout (Sequential, ResNet's conv1/bn1 attributes, timm's BatchNormAct2d).
    """
    names = {m: n for n, m in model.named_modules()}
    produced_by: dict[int, nn.Module] = {}
    keep_alive: list[torch.Tensor] = []  # so that tensor ids are not reused during the pass
    pairs: list[tuple[str, str]] = []

    def after_conv(conv: nn.Module, args: tuple, output: torch.Tensor) -> None:
        keep_alive.append(output)
        produced_by[id(output)] = conv

    def before_bn(bn: nn.Module, args: tuple) -> None:
        conv = produced_by.get(id(args[0]))
        if conv is not None and isinstance(conv, nn.Conv2d) and conv.out_channels == bn.num_features:
            pairs.append((names[conv], names[bn]))

    handles = []
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            handles.append(m.register_forward_hook(after_conv))
        elif isinstance(m, nn.BatchNorm2d):
            handles.append(m.register_forward_pre_hook(before_bn))
    eval_forward(model, example, handles)
    return list(dict.fromkeys(pairs))


def _after_bn(bn: nn.BatchNorm2d) -> nn.Module:
    """What remains of a BatchNorm once its affine part is folded: timm's BatchNormAct2d keeps its
    dropout and activation; a plain BatchNorm2d becomes Identity."""
    drop, act = getattr(bn, "drop", None), getattr(bn, "act", None)
    rest = [m for m in (drop, act) if m is not None and not isinstance(m, nn.Identity)]
    return nn.Sequential(*rest) if rest else nn.Identity()


def fold_batchnorm(model: nn.Module, example: torch.Tensor, *, inplace: bool = False) -> nn.Module:
    """The model with every BatchNorm2d that follows a Conv2d folded into it (eval-mode numerics).

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
