"""`find_blocks`: the blocks of any model, from its traced graph (`dsprof.models.graph`).

A block that cannot be described (squeeze-excitation, a concatenation, a tensor read twice) is
reported: a warning, or an error with ``strict=True``; it is never skipped silently.
"""

from __future__ import annotations

import warnings

from torch import nn

from ..errors import UsageError
from .graph import Block, Refusal, discover_blocks
from .ownership import FUSE_OFFER

__all__ = ["Block", "NothingToMergeWarning", "UnsupportedBlock", "UnsupportedBlockWarning", "find_blocks", "nothing_to_merge"]

#: A part of the model that looks like a block but cannot be one (kept name; see `Refusal`).
UnsupportedBlock = Refusal


class UnsupportedBlockWarning(UserWarning):
    """Issued by `find_blocks` listing the parts it cannot treat as blocks, with reasons."""


class NothingToMergeWarning(UserWarning):
    """Issued where a model without a block is measured: why there is nothing to merge (`nothing_to_merge`)."""


def nothing_to_merge(model: nn.Module, input_size: tuple[int, int] | None = None) -> str | None:
    """Why DepthShrinker has nothing to merge in ``model``, in one line that fits it (no convolution, one, none
    followed by another, every candidate refused); None when the model has a block. The words are
    `Discovery.nothing`'s, decided in one place (`dsprof.models.ownership`)."""
    return discover_blocks(model, input_size).nothing


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
        if found.fusable:  # RepGhostNet as built: its Ghost modules refused, their branches not yet fused
            message += f"\nthe train-time branches of {', '.join(found.fusable)} {FUSE_OFFER}, which may make blocks of these parts"
        if strict:
            raise UsageError(message)
        if message not in _warned:  # once per process: every stage looks at the same model's blocks
            _warned.add(message)
            warnings.warn(message, UnsupportedBlockWarning, stacklevel=2)
    return found.blocks


_warned: set[str] = set()
