"""Blocks timed in situ: the whole model with one block swapped, against the whole model (issue #14).

A block timed alone sees its input and weights in a warm cache and nothing around it; inside the
running model the same block reads what the previous block just wrote and evicts what the next one
needs, so the time merging saves *in the model* can differ from the saving of the block timed alone
(on the 2-core CPU, merged MobileNetV2s ran 2-13 % faster than isolated savings predicted).

`in_situ_workloads` builds, for each block, one interleaved group of whole models: the original
model (variant ``original``) and the model with only that block swapped for its merged dense
convolution (``merged``) or its activation-free form (``linear``). Scope `IN_SITU_SCOPE`, name the
block's module path, spec the block's `BlockSpec`. The paired rounds give the saving in situ; the
original model timed in every group also shows how much the device drifts from group to group.

The swapped models share every weight with the original (a shallow copy along the block's path),
so building 17 x 3 whole models costs no memory; backends copy what they time.
"""

from __future__ import annotations

import copy
from typing import Sequence

import torch
from torch import nn

from ..errors import UsageError
from ..merging.fold import fold_batchnorm
from ..models import (
    Block, block_modules, count_macs, count_params, find_blocks, first_conv_in_channels, input_size_of, own_chains, run_of,
)
from ..models.surgery import chain_attr, is_chain_name
from ..names import IN_SITU_VARIANTS
from ..records.measurement import IN_SITU_SCOPE
from .workloads import Workload, dense_conv, deployed_linear

__all__ = ["in_situ_workloads", "swapped"]


def swapped(model: nn.Module, path: str, module: nn.Module) -> nn.Module:
    """``model`` with the block at ``path`` replaced by ``module``; everything else shared, not copied.
    A run of an nn.Sequential's children (``parent[a:b]``): ``module`` at ``a``, identities after it. A chain
    no module owns: ``model`` owns it (`own_chains`)."""
    path = chain_attr(path) if is_chain_name(path) else path
    run = run_of(path)
    parts = (run[0].split(".") if run[0] else []) if run else path.split(".")[:-1]
    root = copy.copy(model)
    root._modules = dict(model._modules)
    parent = root
    for part in parts:
        child = copy.copy(parent._modules[part])
        child._modules = dict(child._modules)
        parent._modules[part] = child
        parent = child
    if run is None:
        parent._modules[path.split(".")[-1]] = module
    else:
        for i in range(run[1], run[2]):
            parent._modules[str(i)] = module if i == run[1] else nn.Identity()
    return root


def in_situ_workloads(
    model: nn.Module,
    variants: Sequence[str] = ("merged", "linear"),
    input_size: tuple[int, int] | None = None,
    blocks: list[Block] | None = None,
) -> list[list[Workload]]:
    """One group per block: the whole (BatchNorm-folded) model, and the model with that block in each
    of ``variants`` (``merged``, ``linear``); see the module docstring."""
    bad = [v for v in variants if v not in IN_SITU_VARIANTS]
    if bad or not variants:
        raise UsageError(f"in-situ variants are {', '.join(IN_SITU_VARIANTS)}; got {list(variants)}")
    input_size = input_size or input_size_of(model)
    in_ch = first_conv_in_channels(model)
    blocks = blocks if blocks is not None else find_blocks(model, input_size)
    folded = own_chains(fold_batchnorm(model, torch.zeros(1, in_ch, *input_size)), blocks).eval()
    shape = (in_ch, *input_size)
    whole_macs, whole_params = count_macs(folded, input_size, in_ch), count_params(folded)
    groups = []
    for index, (block, original) in enumerate(zip(blocks, block_modules(folded, [b.name for b in blocks]))):
        spec = block.spec
        block_macs = count_macs(original, (spec.in_h, spec.in_w), spec.in_channels)
        group = [Workload(IN_SITU_SCOPE, block.name, "original", folded, shape, whole_macs, whole_params, spec, index)]
        for variant in variants:
            if variant == "merged":
                part = dense_conv(spec.in_channels, spec.out_channels, spec.merged_kernel, spec.stride, spec.padding,
                                  (spec.in_h, spec.in_w)).eval()
                part_macs = count_macs(part, (spec.in_h, spec.in_w), spec.in_channels)
            else:  # the block left unmerged as merge_model deploys it (the linear variant's module)
                part = deployed_linear(block, index)
                part_macs = count_macs(part, (spec.in_h, spec.in_w), spec.in_channels)
            net = swapped(folded, block.name, part).eval()
            macs = whole_macs - block_macs + part_macs
            params = whole_params - count_params(original) + count_params(part)
            group.append(Workload(IN_SITU_SCOPE, block.name, variant, net, shape, macs, params, spec, index))
        groups.append(group)
    return groups
