"""`find_blocks`: the blocks of any model, from its traced graph (`dsprof.models.graph`).

A block that cannot be described (squeeze-excitation, a concatenation, a chain no module owns) is
reported: a warning, or an error with ``strict=True``; it is never skipped silently.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from ..errors import UsageError
from .graph import Block, Refusal, discover_blocks
from .registry import input_size_of
from .tracing import eval_forward, first_conv_in_channels

__all__ = ["Block", "UnsupportedBlock", "UnsupportedBlockWarning", "find_blocks", "trace_input_shapes"]

#: A part of the model that looks like a block but cannot be one (kept name; see `Refusal`).
UnsupportedBlock = Refusal


class UnsupportedBlockWarning(UserWarning):
    """Issued by `find_blocks` listing the parts it cannot treat as blocks, with reasons."""


def find_blocks(
    model: nn.Module, input_size: tuple[int, int] | None = None, *, strict: bool = False
) -> list[Block]:
    """The model's blocks in execution order, each with its `BlockSpec`.

    ``input_size`` is the model input (height, width) in pixels; default: the resolution the
    model was built for by `get_model`, else 224x224. Refusals raise with ``strict=True`` and give an
    `UnsupportedBlockWarning` otherwise. `discover_blocks` returns both without warning.
    """
    found = discover_blocks(model, input_size)
    if found.refusals:
        message = "parts dsprof cannot treat as blocks:\n  " + "\n  ".join(map(str, found.refusals))
        if strict:
            raise UsageError(message)
        if message not in _warned:  # once per process: every stage looks at the same model's blocks
            _warned.add(message)
            warnings.warn(message, UnsupportedBlockWarning, stacklevel=2)
    return found.blocks


_warned: set[str] = set()


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
