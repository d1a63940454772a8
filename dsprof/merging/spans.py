"""Span merge: consecutive linearised blocks with no activation between them become one convolution.

When a plan linearises blocks i..j-1 that follow one another (each block's output is the next one's
only input) and nothing non-linear separates them -- no activation after a block's output, no free
activation between them -- the whole span is one linear map, and one convolution computes it: kernel
``1 + sum((k_b - 1) * stride before b)``, stride the product, the channels of the span's ends (the
LayerMerge idea, applied to DepthShrinker's merged blocks). Identity skip connections inside the span
fold in on the way, as they do for single blocks.

The fine-tuned form is *padding in front of the span* (`SpanLinearized`): the input is padded once by the
span's composite padding and every block runs unpadded, its skip connection reading the centre crop of
its input. The merged convolution computes exactly that, for every input size.

Which spans merge is the planner's choice (`dsprof.planning.decide`: on a LUT, from the span workloads `dsprof measure
--spans N` times, priced as `predict` prices them, or on MACs, asked for with ``--merge-by macs``). Which runs
of blocks could merge as one, and the convolution a span merges into, are block knowledge in `dsprof.models.spans`
(`span_runs`, `span_spec`: the planner, the LUT and the profiler read them too); here, the fine-tuned form
(`SpanLinearized`) and its exact merge.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from .algebra import MergeError
from .layers import ConcatInput, ZeroPad, front_pad

__all__ = ["SpanLinearized", "build_span"]

class SpanLinearized(nn.Module):
    """Linearised blocks ``start..stop-1`` run as one: ``act(B_n(...B_1(pad(x))))`` with every block unpadded.

    ``blocks`` are `Linearized` blocks in the padding-in-front form (their own ``pad`` and ``act`` unused);
    an identity skip adds the centre crop of the block's (padded) input.
    """

    dsprof_leaf = True

    def __init__(self, blocks: list[nn.Module], pad: ZeroPad, act: nn.Module | None, start: int, stop: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.pad = pad
        self.act = act if act is not None else nn.Identity()
        self.start, self.stop = start, stop
        self.index = start
        self.border = "in_front"
        self.spec = " + ".join(b.spec for b in blocks)
        self.input_size = blocks[0].input_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.pad(x)
        for b in self.blocks:
            y = b.body(h)
            if b.has_skip:
                top, bottom, left, right = b.pad.padding
                y = y + b.shortcut(h[..., top : h.shape[-2] - bottom, left : h.shape[-1] - right])
            h = y
        return self.act(h)


def _body_convs(body: nn.Module) -> list[nn.Conv2d]:
    """A linearised block's convolutions in order, one per unit (its ``inner_padding``'s): a Ghost module's cheap
    operation's too, inside its `ConcatInput` (left out, a span's front padding fell short by its kernel, and a span
    of Ghost blocks returned a smaller map than its blocks: 8x8 in, 4x4 out at stride 1)."""
    convs: list[nn.Conv2d] = []
    for m in body:
        if isinstance(m, nn.Conv2d):
            convs.append(m)
        elif isinstance(m, ConcatInput):
            convs += [c for c in m.inner.modules() if isinstance(c, nn.Conv2d)]
    return convs


def build_span(linearized: list[nn.Module], start: int, stop: int) -> SpanLinearized:
    """One `SpanLinearized` from the padding-in-front `Linearized` blocks start..stop-1 (copies).

    No activation runs inside the span; after it, the last block's (its tail, or the plan's free activation).
    """
    for b in linearized:
        if getattr(b, "border", None) != "in_front":
            raise MergeError("a span is built from linearised blocks in the padding-in-front form (border 'in_front')")
    convs = [conv for b in linearized for conv in _body_convs(b.body)]
    pad = front_pad(convs, paddings=[p for b in linearized for p in b.inner_padding])
    last_act = linearized[-1].act
    act = None if isinstance(last_act, nn.Identity) else copy.deepcopy(last_act)
    return SpanLinearized([copy.deepcopy(b) for b in linearized], pad, act, start, stop)
