"""MACs, parameters and memory footprint, per model and per block.

Conventions (the README repeats them):

* **MACs** are multiply-accumulates of convolutions and linear layers, counted by
  ``torch.utils.flop_counter.FlopCounterMode`` (which reports 2 FLOPs per MAC) for one image.
  BatchNorm, activations, additions and pooling count zero. This is the convention of
  torchvision's published ``_ops`` figures (MobileNetV2: 0.301 G, ResNet-50: 4.089 G).
  `count_macs` counts a module so. Where there is no module to run, or thousands of shapes to price,
  the same count comes from shapes alone, here and nowhere else: `conv_macs` (one convolution) and
  `spec_macs` (a block from its `BlockSpec`, as built or merged into one convolution); merge, spans,
  the profiler's workloads and the search objective all use these, and tests/test_counting.py checks
  them against ``FlopCounterMode`` on every block kind and on spans, at stride 1 and 2, odd and even sizes.
* **params** are the model's trainable parameters as PyTorch stores them (BatchNorm weight and
  bias included), as in torchvision's ``num_params``.
* **Memory footprint** (paper Fig. 6), at 16 bits per value by default:
  *weights* as deployed, BatchNorm folded: each convolution's weights plus one bias per output
  channel, each linear layer's weights and bias; *peak activation*: the largest, over the
  convolutions of a block, of input map + output map + the block's input when a skip connection
  keeps it alive (counted once when the convolution reads the block input itself), for one image.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from .blocks import Block, find_blocks
from .blockspec import BlockSpec
from .registry import input_size_or_own
from .tracing import eval_forward, example_input

__all__ = ["conv_macs", "count_macs", "count_params", "MemoryFootprint", "memory_footprint", "spec_macs",
           "summarize_blocks"]


def _flop_counts(module: nn.Module, x: torch.Tensor) -> FlopCounterMode:
    counter = FlopCounterMode(display=False)
    with counter:
        eval_forward(module, x)
    return counter


def count_macs(
    module: nn.Module, input_size: tuple[int, int] | None = None, in_channels: int | None = None
) -> int:
    """Multiply-accumulates of one forward pass of one image of ``input_size`` (height, width).

    Works on a whole model or on one block (give the block's input size and channels).
    """
    x = example_input(module, input_size_or_own(module, input_size), in_channels)
    return _flop_counts(module, x).get_total_flops() // 2


def conv_macs(
    in_channels: int, out_channels: int, kernel: int | tuple[int, int], out_size: tuple[int, int], groups: int = 1
) -> int:
    """Multiply-accumulates of one convolution for one image, from its shape and its output (height, width):
    each output value takes ``in_channels / groups * kh * kw`` of them (bias and padding count zero)."""
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    return out_channels * (in_channels // groups) * kh * kw * out_size[0] * out_size[1]


def spec_macs(spec: BlockSpec, merged: bool = False, in_front: bool = False) -> int:
    """Multiply-accumulates of the block ``spec`` describes, for one image: as built (its convolutions, and the
    1x1 projection or the convolutions on its skip path where it has them), or, with ``merged``, of the one convolution it merges into
    (kernel `BlockSpec.merged_kernel`, the block's stride; grouped only where every convolution has the same
    groups, e.g. a chain of depthwise ones, and none is concatenated after its input). A Ghost module's
    concatenated input costs nothing as built. Block convolutions keep the map at ceil(size / stride) (odd kernels
    padded by half, or TensorFlow 'SAME': what block discovery accepts). ``in_front``: linearised, with all its
    padding in front (how a block whose padding cannot go back in place deploys unmerged,
    `dsprof.merging.block.deploys_alike`): each convolution also computes the ring of its output that the later ones
    read as their padding (symmetric padding; 'SAME' as built)."""
    if merged:
        groups = {c.groups for c in spec.convs}
        dense = spec.projection or any(c.cat for c in spec.convs)  # a concatenation after its input: dense
        shared = groups.pop() if len(groups) == 1 and not dense else 1
        return conv_macs(spec.in_channels, spec.out_channels, spec.merged_kernel, (spec.out_h, spec.out_w), shared)
    rings = _rings(spec.convs) if in_front and spec.padding == "symmetric" else [0] * len(spec.convs)
    macs, h, w = 0, spec.in_h, spec.in_w
    for c, ring in zip(spec.convs, rings):
        h, w = -(-h // c.stride), -(-w // c.stride)
        macs += conv_macs(c.cin, c.cout, c.kernel, (h + 2 * ring, w + 2 * ring), c.groups)
    if spec.skip:  # a skip path of other convolutions (GhostNet's depthwise then 1x1)
        h, w = spec.in_h, spec.in_w
        for c in spec.skip:
            h, w = -(-h // c.stride), -(-w // c.stride)
            macs += conv_macs(c.cin, c.cout, c.kernel, (h, w), c.groups)
    elif spec.projection:
        macs += conv_macs(spec.in_channels, spec.out_channels, 1, (spec.out_h, spec.out_w))
    return macs


def _rings(convs) -> list[int]:
    """Per convolution, the pixels on each side by which its output map grows when the block's padding is all in
    front: what the later convolutions read as their padding, each later stride multiplying it (the last: 0)."""
    rings, after = [], 0
    for c in reversed(convs):
        rings.append(after)
        after = (c.kernel - 1) // 2 + c.stride * after
    return rings[::-1]


def count_params(module: nn.Module) -> int:
    """Number of parameters (BatchNorm weight and bias included, buffers not)."""
    return sum(p.numel() for p in module.parameters())


@dataclass(frozen=True)
class MemoryFootprint:
    """Memory of one block in bytes: deployed weights and peak activation (one image)."""

    weight_bytes: int
    peak_activation_bytes: int


def memory_footprint(
    module: nn.Module,
    input_shape: tuple[int, int, int],
    residual: bool,
    bytes_per_value: int = 2,
) -> MemoryFootprint:
    """Weights and peak activation of a block whose input is ``input_shape`` = (C, H, W).

    ``residual`` says whether the block input stays alive for a skip connection. See the
    module docstring for the convention.
    """
    weights = 0
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            weights += m.weight.numel() + m.out_channels  # BatchNorm folds into one bias per channel
        elif isinstance(m, nn.Linear):
            weights += m.weight.numel() + m.out_features

    first = next(module.parameters(), None)
    if first is None:  # nothing left here (a block merged into a span that starts before it)
        return MemoryFootprint(0, 0)
    block_input = torch.zeros(1, *input_shape, dtype=first.dtype)
    live_sums: list[int] = []

    def record(conv: nn.Module, args: tuple, output: torch.Tensor) -> None:
        x = args[0]
        alive = x.numel() + output.numel()
        if residual and x is not block_input:
            alive += block_input.numel()
        live_sums.append(alive)

    handles = [m.register_forward_hook(record) for m in module.modules() if isinstance(m, nn.Conv2d)]
    eval_forward(module, block_input, handles)
    return MemoryFootprint(weights * bytes_per_value, max(live_sums, default=0) * bytes_per_value)


def summarize_blocks(
    model: nn.Module,
    input_size: tuple[int, int] | None = None,
    blocks: list[Block] | None = None,
    bytes_per_value: int = 2,
) -> pd.DataFrame:
    """One row per block: name, kind, spec, MACs, params, weight and peak activation bytes.

    MACs of all blocks come from one counted forward pass of the whole model.
    """
    input_size = input_size_or_own(model, input_size)
    blocks = blocks if blocks is not None else find_blocks(model, input_size)
    per_module = _flop_counts(model, example_input(model, input_size)).get_flop_counts()
    prefix = type(model).__name__
    rows = []
    for block in blocks:
        spec = block.spec
        if "[" in block.name or ".." in block.name:  # a run of a Sequential's children or a chain no module
            # owns is no module of the model: count it alone
            macs = count_macs(block.module, (spec.in_h, spec.in_w), spec.in_channels)
        else:
            macs = sum(per_module.get(f"{prefix}.{block.name}", {}).values()) // 2
        memory = memory_footprint(
            block.module, (spec.in_channels, spec.in_h, spec.in_w), spec.residual, bytes_per_value
        )
        rows.append(
            {
                "block": block.name,
                "kind": spec.kind,
                "spec": spec.to_str(),
                "macs": macs,
                "params": count_params(block.module),
                "weight_bytes": memory.weight_bytes,
                "peak_activation_bytes": memory.peak_activation_bytes,
            }
        )
    return pd.DataFrame(rows, columns=["block", "kind", "spec", "macs", "params", "weight_bytes", "peak_activation_bytes"])
