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
