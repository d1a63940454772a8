"""Running a module once to look at it: the input channels it expects, and one eval-mode pass with hooks."""

from __future__ import annotations

from typing import Iterable

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

__all__ = ["eval_forward", "first_conv_in_channels"]


def first_conv_in_channels(module: nn.Module, default: int = 3) -> int:
    """Input channels of the module's first Conv2d (``default`` when it has none)."""
    conv = next((m for m in module.modules() if isinstance(m, nn.Conv2d)), None)
    return conv.in_channels if conv is not None else default


def example_input(module: nn.Module, size: tuple[int, int], in_channels: int | None = None) -> torch.Tensor:
    """One image of zeros of ``size`` (height, width) for ``module``: ``in_channels``, else its first convolution's
    (`first_conv_in_channels`), in its parameters' dtype and on their device (float32 on the CPU without any)."""
    param = next(module.parameters(), None)
    return torch.zeros(1, in_channels or first_conv_in_channels(module), *size,
                       dtype=param.dtype if param is not None else None, device=param.device if param is not None else None)


def eval_forward(module: nn.Module, x: torch.Tensor, handles: Iterable[RemovableHandle] = ()) -> torch.Tensor:
    """``module(x)`` once in eval mode without gradients; the training mode is restored and the
    given hook ``handles`` are removed afterwards, whatever happens."""
    was_training = module.training
    try:
        module.eval()
        with torch.no_grad():
            return module(x)
    finally:
        module.train(was_training)
        for handle in handles:
            handle.remove()
