"""The few modules that linearised and merged models are built from."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .algebra import TF_SAME, LinearConv, Padding, compose_all, conv_from_module, pad_input, tf_same_padding

__all__ = ["ZeroPad", "PaddedConv2d", "BorderBias", "ConcatInput", "MergedConv", "conv_module", "front_pad"]


class ZeroPad(nn.Module):
    """Zero padding (top, bottom, left, right), or TensorFlow 'SAME' padding computed from the input size
    for a convolution of ``kernel``, ``stride``, ``dilation``."""

    def __init__(
        self,
        padding: Padding,
        kernel: tuple[int, int] = (1, 1),
        stride: tuple[int, int] = (1, 1),
        dilation: tuple[int, int] = (1, 1),
    ) -> None:
        super().__init__()
        self.padding = padding if padding == TF_SAME else tuple(int(p) for p in padding)  # type: ignore[union-attr]
        self.kernel, self.stride, self.dilation = tuple(kernel), tuple(stride), tuple(dilation)

    def resolve(self, size: tuple[int, int]) -> tuple[int, int, int, int]:
        """The static padding for an input of ``size`` = (H, W)."""
        if self.padding == TF_SAME:
            return tf_same_padding(size, self.kernel, self.stride, self.dilation)  # type: ignore[arg-type]
        return self.padding  # type: ignore[return-value]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.padding != TF_SAME:  # static: reading the input size would make an exported graph's shapes dynamic
            return pad_input(x, self.padding)  # type: ignore[arg-type]
        return pad_input(x, self.resolve((int(x.shape[-2]), int(x.shape[-1]))))

    def extra_repr(self) -> str:
        return f"padding={self.padding}" + (f", kernel={self.kernel}, stride={self.stride}" if self.padding == TF_SAME else "")


class PaddedConv2d(nn.Conv2d):
    """An ``nn.Conv2d`` whose zero padding is asymmetric or TensorFlow 'SAME' (dynamic)."""

    def __init__(self, *args, pad: Padding, **kwargs) -> None:
        super().__init__(*args, padding=0, **kwargs)
        self.pad = ZeroPad(pad, self.kernel_size, self.stride, self.dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(self.pad(x), self.weight, self.bias, self.stride, 0, self.dilation, self.groups)


class BorderBias(nn.Module):
    """Adds a fixed (C, H, W) map: the exact border correction of a block fine-tuned with its padding
    in place (see `dsprof.merging.linearize`). Zero inside, non-zero along the borders; valid only for
    the feature-map size it was computed for."""

    def __init__(self, correction: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("correction", correction)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if tuple(x.shape[1:]) != tuple(self.correction.shape):
            raise RuntimeError(
                f"this merged block was corrected for feature maps of {tuple(self.correction.shape)}, got "
                f"{tuple(x.shape[1:])}; merge again at this resolution, or fine-tune with padding in front"
            )
        return x + self.correction


class ConcatInput(nn.Module):
    """A Ghost module's cheap operation as a unit runs it: ``cat([x, inner(x)], dim=1)[:, :keep]``, ``inner`` its
    convolution with BatchNorm (and activation, where kept). ``crop`` cuts the input to ``inner``'s output where that
    runs unpadded (the padding-in-front form: ``crop`` = its kernel // 2); 0 where it keeps its own padding. As one
    convolution: `dsprof.merging.algebra.concat_input`."""

    def __init__(self, inner: nn.Module, keep: int, crop: int = 0) -> None:
        super().__init__()
        self.inner, self.keep, self.crop = inner, int(keep), int(crop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.inner(x)
        if self.crop:
            c = self.crop
            x = x[:, :, c:x.shape[-2] - c, c:x.shape[-1] - c]
        return torch.cat([x, y], dim=1)[:, : self.keep]

    def extra_repr(self) -> str:
        return f"keep={self.keep}" + (f", crop={self.crop}" if self.crop else "")


class MergedConv(nn.Module):
    """A merged block: one convolution, its border correction if any, and its activation if any."""

    def __init__(self, conv: nn.Conv2d, act: nn.Module | None = None, border: BorderBias | None = None) -> None:
        super().__init__()
        self.conv = conv
        self.border = border if border is not None else nn.Identity()
        self.act = act if act is not None else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.border(self.conv(x)))


def conv_module(conv: LinearConv, dtype: torch.dtype = torch.float32) -> nn.Conv2d:
    """An ``nn.Conv2d`` computing ``conv`` (a `PaddedConv2d` when its padding is not symmetric)."""
    out_channels, _, kh, kw = conv.weight.shape
    kwargs = dict(stride=conv.stride, dilation=conv.dilation, groups=conv.groups, bias=True, dtype=dtype)
    pad = conv.padding
    if pad != TF_SAME and pad[0] == pad[1] and pad[2] == pad[3]:  # type: ignore[index]
        module: nn.Conv2d = nn.Conv2d(conv.in_channels, out_channels, (kh, kw), padding=(pad[0], pad[2]), **kwargs)
    else:
        module = PaddedConv2d(conv.in_channels, out_channels, (kh, kw), pad=pad, **kwargs)
    with torch.no_grad():
        module.weight.copy_(conv.weight.to(dtype))
        module.bias.copy_(conv.bias.to(dtype))
    return module


def front_pad(convs: list[nn.Conv2d], paddings: list[Padding] | None = None) -> ZeroPad:
    """The zero padding that, put in front of ``convs`` (run in order, unpadded), gives their composite's:
    the geometry of the chain only (1-channel zero weights). ``paddings`` overrides each convolution's own
    (an unpadded copy's original one)."""
    shapes = []
    for i, conv in enumerate(convs):
        c = conv_from_module(conv)
        shapes.append(
            LinearConv(torch.zeros(1, 1, *c.kernel_size, dtype=torch.float64), torch.zeros(1, dtype=torch.float64),
                       c.stride, paddings[i] if paddings is not None else c.padding, c.dilation, 1)
        )
    chain = compose_all(shapes)
    return ZeroPad(chain.padding, chain.kernel_size, chain.stride, chain.dilation)
