"""The padding rule, written once: what zero padding a convolution applies to its input.

Block discovery asks it for a block's padding style (symmetric or TensorFlow 'SAME'); the merge algebra
(`dsprof.merging.algebra`) for the exact (top, bottom, left, right) padding it composes.

TensorFlow 'SAME' padding (timm's ``Conv2dSame``) depends on the input size; it is kept symbolic
(``"tf_same"``) except at stride 1 with an odd kernel, where it is static and symmetric.
"""

from __future__ import annotations

from typing import Union

from torch import nn

__all__ = ["TF_SAME", "Padding", "as_pair", "conv_padding", "padding_style", "static_tf_same", "tf_same_chain_problem"]

TF_SAME = "tf_same"
# (top, bottom, left, right) zero padding of the input, or "tf_same" (dynamic, TensorFlow 'SAME').
Padding = Union[tuple[int, int, int, int], str]


def as_pair(v: int | tuple[int, ...]) -> tuple[int, int]:
    """``v`` as (height, width)."""
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def static_tf_same(kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int]) -> Padding:
    """'SAME' padding is input-independent (and symmetric) at stride 1 with an odd effective kernel."""
    pads = []
    for k, s, d in zip(kernel, stride, dilation):
        total = (k - 1) * d
        if s != 1 or total % 2:
            return TF_SAME
        pads += [total // 2, total // 2]
    return (pads[0], pads[1], pads[2], pads[3])


def conv_padding(conv: nn.Conv2d) -> Padding:
    """The zero padding ``conv`` applies to its input: (top, bottom, left, right), or ``"tf_same"``."""
    kernel = (int(conv.kernel_size[0]), int(conv.kernel_size[1]))
    stride, dilation = as_pair(conv.stride), as_pair(conv.dilation)
    if "Same" in type(conv).__name__:  # timm Conv2dSame / Conv2dSameExport: dynamic TF 'SAME'
        return static_tf_same(kernel, stride, dilation)
    if conv.padding == "same":  # PyTorch 'same' (stride 1): the odd pixel goes to the bottom/right
        th, tw = [(k - 1) * d for k, d in zip(kernel, dilation)]
        return (th // 2, th - th // 2, tw // 2, tw - tw // 2)
    if conv.padding == "valid":
        return (0, 0, 0, 0)
    ph, pw = as_pair(conv.padding)
    return (ph, ph, pw, pw)


def padding_style(conv: nn.Conv2d) -> str | None:
    """``"symmetric"`` (an odd square kernel padded by half its size: the map keeps its size at stride 1),
    ``"tf_same"``, or None for any other padding (which no block may have)."""
    padding = conv_padding(conv)
    if padding == TF_SAME:
        return TF_SAME
    k = conv.kernel_size[0]
    return "symmetric" if k % 2 == 1 and all(p == k // 2 for p in padding) else None


#: Why a chain with dynamic TF 'SAME' padding does not compose (`tf_same_chain_problem`).
TF_SAME_CHAIN = ("TensorFlow 'SAME' padding is dynamic (it depends on the input size) and merges only next to 1x1 "
                 "stride-1 convolutions")


def tf_same_chain_problem(convs: list[tuple[Padding, tuple[int, int], tuple[int, int]]]) -> str | None:
    """Why a chain of convolutions, each given as (padding, kernel, stride), cannot compose into one convolution with
    one padding in front; None when it can.

    Static paddings always add up. A dynamic 'SAME' padding composes only when every other convolution of the chain
    is pointwise (1x1, stride 1, unpadded): beside any other spatial convolution, the padding in front would depend on
    the input size in a way that is no 'SAME' padding of the composite kernel (two 3x3 stride-2 'SAME' convolutions
    pad a 32 px input (0, 3); the composite 7x7 stride-4 'SAME' convolution pads it (1, 2)).
    """
    dynamic = [i for i, (padding, _, _) in enumerate(convs) if padding == TF_SAME]
    pointwise = [tuple(k) == (1, 1) and tuple(s) == (1, 1) and p == (0, 0, 0, 0) for p, k, s in convs]
    if dynamic and not all(pointwise[i] for i in range(len(convs)) if i != dynamic[0]):
        return f"{TF_SAME_CHAIN}; this chain has a second spatial convolution"
    return None
