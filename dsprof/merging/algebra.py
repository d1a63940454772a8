"""Exact convolution algebra: pure functions on weight/bias tensors, float64 inside.

A `LinearConv` is one affine convolution (weight, bias, stride, padding, dilation, groups). Two of
them compose into one (`compose_convs`): kernel ``(k2 - 1) * d2 * s1 + (k1 - 1) * d1 + 1``
(``(k2 - 1) * s1 + k1`` without dilation), stride ``s1 * s2``, bias carried through. A skip
connection folds into the tap that reads the output's own pixel (`add_residual`); so does the input a Ghost
module concatenates before its cheap operation's output (`concat_input`).

**Padding convention.** The composite pads the *input* by ``p1 + s1 * p2`` on each side; it equals
"pad the input once, then run both convolutions without padding" -- the *padding-in-front* form.
It differs from running the two convolutions with their own zero padding along the borders whenever
the first one has a bias, because zero padding of the intermediate map is not zero padding of the
input (see `dsprof.merging.linearize` for the forms and what applies when).

TensorFlow 'SAME' padding (timm's ``tf_`` models) is dynamic: it depends on the input size. It is
kept symbolic (``"tf_same"``) and composes only with 1x1, stride-1 convolutions, which is all an
inverted residual or depthwise-separable block needs; at stride 1 with an odd kernel it is static
and symmetric and becomes ordinary padding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import MergeError  # noqa: F401  (defined once, in dsprof.errors)
from ..models.padding import TF_SAME, Padding, as_pair, conv_padding, static_tf_same, tf_same_chain_problem
from .fold import fold_bn_into_conv

__all__ = [
    "MergeError",
    "LinearConv",
    "Padding",
    "conv_from_module",
    "fold_bn",
    "compose_convs",
    "compose_all",
    "add_residual",
    "concat_input",
    "apply_conv",
    "pad_input",
    "tf_same_padding",
    "output_size",
]

@dataclass(frozen=True, eq=False)
class LinearConv:
    """One affine 2-D convolution: ``y = conv(pad(x), weight, stride, dilation, groups) + bias``.

    ``weight`` is (out, in / groups, kh, kw); ``bias`` is (out,); ``padding`` is zero padding of
    the input as (top, bottom, left, right), or ``"tf_same"``.
    """

    weight: torch.Tensor
    bias: torch.Tensor
    stride: tuple[int, int] = (1, 1)
    padding: Padding = (0, 0, 0, 0)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1

    @property
    def out_channels(self) -> int:
        return self.weight.shape[0]

    @property
    def in_channels(self) -> int:
        return self.weight.shape[1] * self.groups

    @property
    def kernel_size(self) -> tuple[int, int]:
        return (self.weight.shape[2], self.weight.shape[3])

    def is_pointwise(self) -> bool:
        """1x1, stride 1, no padding: maps each pixel to itself."""
        return self.kernel_size == (1, 1) and self.stride == (1, 1) and self.padding == (0, 0, 0, 0)

    def to(self, dtype: torch.dtype) -> "LinearConv":
        return replace(self, weight=self.weight.to(dtype), bias=self.bias.to(dtype))


def conv_from_module(conv: nn.Conv2d) -> LinearConv:
    """The `LinearConv` of an ``nn.Conv2d`` (also timm's ``Conv2dSame``), in float64.

    Raises `MergeError` for padding modes other than zeros: reflected or replicated borders of an
    intermediate map are not a fixed padding of the input, so no single convolution reproduces them.
    """
    if not isinstance(conv, nn.Conv2d):
        raise MergeError(f"{type(conv).__name__} is not a Conv2d")
    if conv.padding_mode != "zeros":
        raise MergeError(
            f"padding mode {conv.padding_mode!r}: only zero padding merges exactly (a {conv.padding_mode} border "
            "of an intermediate map is no fixed padding of the input); keep this block's activations"
        )
    weight = conv.weight.detach().double()
    bias = conv.bias.detach().double() if conv.bias is not None else torch.zeros(weight.shape[0], dtype=torch.float64)
    stride, dilation = as_pair(conv.stride), as_pair(conv.dilation)
    padding = conv_padding(conv)  # the one padding rule (dsprof.models.padding)
    return LinearConv(weight, bias, stride, padding, dilation, conv.groups)


def fold_bn(conv: LinearConv, bn: nn.BatchNorm2d) -> LinearConv:
    """``bn(conv(x))`` in eval mode as one `LinearConv` (each BatchNorm's own eps)."""
    if bn.running_mean is None or bn.running_var is None:
        raise MergeError("a BatchNorm without running statistics (track_running_stats=False) cannot fold")
    w, b = fold_bn_into_conv(conv.weight, conv.bias, bn.running_mean, bn.running_var, bn.weight, bn.bias, bn.eps)
    return replace(conv, weight=w.double(), bias=b.double())


def _dense(tap: torch.Tensor, groups: int) -> torch.Tensor:
    """A grouped (out, in / groups) tap matrix as the dense (out, in) block-diagonal matrix."""
    if groups == 1:
        return tap
    out, per_in = tap.shape
    return torch.block_diag(*tap.reshape(groups, out // groups, per_in).unbind(0))


def _is_depthwise(w: torch.Tensor, groups: int) -> bool:
    return groups > 1 and w.shape[1] == 1 and w.shape[0] == groups


def _tap_product(t2: torch.Tensor, g2: int, t1: torch.Tensor, g1: int, shared_groups: bool) -> torch.Tensor:
    """(second tap) @ (first tap) for one pair of taps, grouped when both have the same groups."""
    if shared_groups:
        g = g1
        c2, c1g = t2.shape
        c1, cing = t1.shape
        return torch.bmm(t2.reshape(g, c2 // g, c1g), t1.reshape(g, c1 // g, cing)).reshape(c2, cing)
    if _is_depthwise(t2, g2) and t2.shape[0] == t1.shape[0]:
        return t2[:, :1] * _dense(t1, g1)  # row scaling: no C x C diagonal matrix
    if _is_depthwise(t1, g1):
        return _dense(t2, g2) * t1[:, 0].unsqueeze(0)  # column scaling
    return _dense(t2, g2) @ _dense(t1, g1)


def compose_convs(first: LinearConv, second: LinearConv) -> LinearConv:
    """The one convolution equal to ``second(first(x))`` (padding-in-front convention), float64.

    Any kernel, stride, dilation, groups (depthwise included); kernel
    ``(k2 - 1) * d2 * s1 + (k1 - 1) * d1 + 1`` per axis, stride ``s1 * s2``, padding
    ``p1 + s1 * p2`` per side, bias ``b2 + sum(W2) b1``. The result is grouped when both are
    grouped alike (e.g. depthwise after depthwise), dense otherwise.
    """
    if second.in_channels != first.out_channels:
        raise MergeError(f"channels do not chain: {first.out_channels} out, then {second.in_channels} in")
    w1, w2 = first.weight.double(), second.weight.double()
    s1, s2, d1, d2 = first.stride, second.stride, first.dilation, second.dilation

    # Padding: static pads add up; dynamic TF 'SAME' survives only next to a pointwise convolution.
    padding: Padding
    if TF_SAME in (first.padding, second.padding):
        problem = tf_same_chain_problem([(c.padding, c.kernel_size, c.stride) for c in (first, second)])
        if problem:
            raise MergeError(problem)
        padding = TF_SAME
    else:
        p1, p2 = first.padding, second.padding
        padding = (p1[0] + s1[0] * p2[0], p1[1] + s1[0] * p2[1], p1[2] + s1[1] * p2[2], p1[3] + s1[1] * p2[3])

    # Tap positions: second's tap a2 and first's tap a1 read input offset a2*d2*s1 + a1*d1.
    step = tuple(math.gcd(d1[i], d2[i] * s1[i]) for i in range(2))
    k1, k2 = first.kernel_size, second.kernel_size
    size = tuple(((k2[i] - 1) * d2[i] * s1[i] + (k1[i] - 1) * d1[i]) // step[i] + 1 for i in range(2))
    shared = first.groups == second.groups and first.groups > 1
    groups = first.groups if shared else 1
    if groups == 1 and first.groups == 1 and second.groups == 1 and d1 == (1, 1) and d2 == (1, 1):
        # dense after dense: second's tap (a2, b2) times all of first's kernel over the middle channels lands at
        # offset (a2 * s1, b2 * s1): one matrix product per tap of W2 (float64 matrix products run on BLAS; a
        # float64 conv2d does not, and took seconds for a 512-channel pair)
        cout, cin = second.out_channels, first.in_channels
        weight = torch.zeros(cout, cin, *size, dtype=torch.float64)
        first_flat = w1.reshape(first.out_channels, -1)
        for a2 in range(k2[0]):
            for b2 in range(k2[1]):
                i, j = a2 * s1[0], b2 * s1[1]
                weight[:, :, i:i + k1[0], j:j + k1[1]] += (w2[:, :, a2, b2] @ first_flat).reshape(cout, cin, *k1)
    else:
        weight = torch.zeros(second.out_channels, first.in_channels // groups, *size, dtype=torch.float64)
        for a2 in range(k2[0]):
            for b2 in range(k2[1]):
                t2 = w2[:, :, a2, b2]
                for a1 in range(k1[0]):
                    for b1 in range(k1[1]):
                        i = (a2 * d2[0] * s1[0] + a1 * d1[0]) // step[0]
                        j = (b2 * d2[1] * s1[1] + b1 * d1[1]) // step[1]
                        weight[:, :, i, j] += _tap_product(t2, second.groups, w1[:, :, a1, b1], first.groups, shared)

    # Every intermediate pixel carries b1 (padding in front), so b1 passes through all of W2's taps.
    g2 = second.groups
    taps_sum = w2.sum(dim=(2, 3)).reshape(g2, second.out_channels // g2, -1)
    bias = second.bias.double() + torch.bmm(taps_sum, first.bias.double().reshape(g2, -1, 1)).reshape(-1)
    stride = (s1[0] * s2[0], s1[1] * s2[1])
    if padding == TF_SAME:
        padding = static_tf_same(size, stride, step)
    return LinearConv(weight, bias, stride, padding, step, groups)


def compose_all(convs: list[LinearConv]) -> LinearConv:
    """Left-to-right composition of a chain of convolutions (the first one runs first)."""
    if not convs:
        raise MergeError("nothing to compose")
    merged = convs[0]
    for conv in convs[1:]:
        merged = compose_convs(merged, conv)
    return merged


def add_residual(conv: LinearConv, shortcut: LinearConv | None = None) -> LinearConv:
    """``conv(x) + shortcut(x)`` as one convolution; ``shortcut=None`` is the identity.

    Legal when the shortcut is a 1x1 convolution without padding (or the identity) with the same
    stride as ``conv``, and ``conv``'s padding is static with the top-left pad on a tap: then the
    tap at (pad_top, pad_left) reads exactly the pixel the shortcut reads. A kxk shortcut (GhostNet's depthwise
    then 1x1, composed) with static padding q folds in at offset (pad_top - q_top, pad_left - q_left), where its
    taps read the pixels they read alone, when it fits inside ``conv``'s kernel.
    """
    if conv.padding == TF_SAME:
        raise MergeError(
            "a skip connection cannot fold into a convolution with dynamic TF 'SAME' padding: "
            "the pixel its centre tap reads depends on the input size"
        )
    top, _, left, _ = conv.padding
    dh, dw = conv.dilation
    if top % dh or left % dw or top // dh >= conv.kernel_size[0] or left // dw >= conv.kernel_size[1]:
        raise MergeError(f"padding {conv.padding} puts the output's own pixel on no tap of the kernel {conv.kernel_size}")
    ti, tj = top // dh, left // dw
    weight, bias = conv.weight.double().clone(), conv.bias.double().clone()
    if shortcut is None:
        if conv.in_channels != conv.out_channels or conv.stride != (1, 1):
            raise MergeError(
                f"an identity skip needs equal channels and stride 1; the block maps {conv.in_channels} -> "
                f"{conv.out_channels} channels at stride {conv.stride}"
            )
        per_in = conv.in_channels // conv.groups
        idx = torch.arange(conv.out_channels)
        weight[idx, idx % per_in, ti, tj] += 1.0
        return replace(conv, weight=weight, bias=bias)
    if shortcut.padding == TF_SAME or shortcut.dilation != (1, 1):
        raise MergeError("only an undilated shortcut with static padding folds into the block's convolution")
    if shortcut.stride != conv.stride:
        raise MergeError(f"shortcut stride {shortcut.stride} differs from the block's stride {conv.stride}")
    if (shortcut.in_channels, shortcut.out_channels) != (conv.in_channels, conv.out_channels):
        raise MergeError("shortcut channels differ from the block's")
    if conv.groups != 1:
        raise MergeError("a shortcut convolution folds only into a dense (groups=1) merged convolution")
    kh, kw = shortcut.kernel_size
    oi, oj = top - shortcut.padding[0], left - shortcut.padding[2]
    if (kh, kw) == (1, 1) and shortcut.padding == (0, 0, 0, 0):
        oi, oj = ti, tj  # the tap that reads the output's own pixel (any dilation)
    elif conv.dilation != (1, 1):
        raise MergeError("a shortcut with a kernel folds only into an undilated convolution")
    if oi < 0 or oj < 0 or oi + kh > conv.kernel_size[0] or oj + kw > conv.kernel_size[1]:
        raise MergeError(f"the shortcut's {kh}x{kw} kernel (padding {shortcut.padding}) does not fit inside the block's "
                         f"{conv.kernel_size} kernel (padding {conv.padding})")
    sw = shortcut.weight.double()
    for i in range(kh):
        for j in range(kw):
            weight[:, :, oi + i, oj + j] += _dense(sw[:, :, i, j], shortcut.groups)
    return replace(conv, weight=weight, bias=bias + shortcut.bias.double())


def concat_input(conv: LinearConv, keep: int) -> LinearConv:
    """``cat([x, conv(x)], dim=1)[:, :keep]`` as one dense convolution (a Ghost module's output, its cheap
    operation ``conv`` read from the primary convolution's output ``x``).

    ``conv`` must keep the map's size: stride 1, no dilation, an odd square kernel k, padded by k // 2 on every side
    (or TF 'SAME', the same at stride 1), or not at all (the padding-in-front form, where the input is cropped by
    k // 2 to the cheap operation's output). The input's channels are the identity at the kernel's centre tap, the
    tap that reads the output's own pixel in both forms; its bias is zero. Exact: every weight is copied or 1.
    """
    k = conv.kernel_size
    if conv.stride != (1, 1) or conv.dilation != (1, 1) or k[0] != k[1] or k[0] % 2 == 0:
        raise MergeError(
            f"a concatenation after its own input needs a stride-1, undilated, odd square kernel; got kernel {k}, "
            f"stride {conv.stride}, dilation {conv.dilation}"
        )
    c = k[0] // 2
    if conv.padding not in (TF_SAME, (0, 0, 0, 0), (c, c, c, c)):
        raise MergeError(f"padding {conv.padding} changes the map's size, so the input cannot be concatenated with "
                         f"the output of the {k[0]}x{k[1]} convolution")
    cin, cout = conv.in_channels, conv.out_channels
    if not 0 < keep <= cin + cout:
        raise MergeError(f"cannot keep {keep} of the {cin} + {cout} concatenated channels")
    weight = torch.zeros(cin + cout, cin, *k, dtype=torch.float64)
    weight[torch.arange(cin), torch.arange(cin), c, c] = 1.0
    w = conv.weight.double()
    for i in range(k[0]):
        for j in range(k[1]):
            weight[cin:, :, i, j] = _dense(w[:, :, i, j], conv.groups)
    bias = torch.cat([torch.zeros(cin, dtype=torch.float64), conv.bias.double()])
    padding = (c, c, c, c) if conv.padding == TF_SAME else conv.padding
    return replace(conv, weight=weight[:keep].contiguous(), bias=bias[:keep].contiguous(), padding=padding, groups=1)


def tf_same_padding(
    size: tuple[int, int], kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int] = (1, 1)
) -> tuple[int, int, int, int]:
    """TensorFlow 'SAME' padding (top, bottom, left, right) of an input of ``size`` = (H, W)."""
    pads = []
    for x, k, s, d in zip(size, kernel, stride, dilation):
        total = max((math.ceil(x / s) - 1) * s + (k - 1) * d + 1 - x, 0)
        pads += [total // 2, total - total // 2]
    return (pads[0], pads[1], pads[2], pads[3])


def _resolve(conv: LinearConv, size: tuple[int, int]) -> tuple[int, int, int, int]:
    if conv.padding == TF_SAME:
        return tf_same_padding(size, conv.kernel_size, conv.stride, conv.dilation)
    return conv.padding  # type: ignore[return-value]


def pad_input(x: torch.Tensor, padding: tuple[int, int, int, int]) -> torch.Tensor:
    """Zero-pad (top, bottom, left, right)."""
    top, bottom, left, right = padding
    return F.pad(x, (left, right, top, bottom)) if any(padding) else x


def apply_conv(conv: LinearConv, x: torch.Tensor) -> torch.Tensor:
    """Run ``conv`` on ``x`` (N, C, H, W), in ``x``'s dtype."""
    padded = pad_input(x, _resolve(conv, tuple(x.shape[-2:])))
    w, b = conv.weight.to(x.dtype), conv.bias.to(x.dtype)
    return F.conv2d(padded, w, b, conv.stride, 0, conv.dilation, conv.groups)


def output_size(conv: LinearConv, size: tuple[int, int]) -> tuple[int, int]:
    """Output (H, W) of ``conv`` for an input of ``size``."""
    top, bottom, left, right = _resolve(conv, size)
    pads = ((top, bottom), (left, right))
    return tuple(  # type: ignore[return-value]
        (size[i] + sum(pads[i]) - (conv.kernel_size[i] - 1) * conv.dilation[i] - 1) // conv.stride[i] + 1 for i in range(2)
    )

