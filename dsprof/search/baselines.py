"""Baselines of the paper: random search (same k, seeded) and layer pruning (drop the blocks instead)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn


from ..errors import PlanError
from ..models import find_blocks, input_size_of, own_chains, replace_block
from .gates import counted_flags, resolve_k

__all__ = ["LayerPruneDecision", "layer_prune", "random_keep"]


def random_keep(n_blocks: int, keep: int | float, seed: int, counted: Sequence[bool] | None = None
                ) -> tuple[int, ...]:
    """A keep list with exactly k ones (k from ``keep``, count or fraction) at seeded random places, drawn among the
    ``counted`` blocks (None: all; the search passes `dsprof.merging.partial.with_acts`: those with a removable
    activation, which k counts, as the planner's k). A block not counted is 0 (linearised: it loses nothing, and the
    merge rule merges it or not by price). With every block counted, the draw is the one of all blocks."""
    places = [i for i, c in enumerate(counted_flags(counted, n_blocks)) if c]
    k = resolve_k(keep, len(places))
    order = torch.randperm(len(places), generator=torch.Generator().manual_seed(seed)).tolist()
    chosen = {places[j] for j in order[:k]}
    return tuple(int(i in chosen) for i in range(n_blocks))


@dataclass(frozen=True)
class LayerPruneDecision:
    """What layer pruning did with one block the plan linearises."""

    index: int
    name: str
    dropped: bool
    reason: str


def layer_prune(
    model: nn.Module, keep: tuple[int, ...], *, input_size: tuple[int, int] | None = None
) -> tuple[nn.Module, list[LayerPruneDecision]]:
    """A copy of ``model`` without the blocks whose ``keep`` entry is 0 (the blocks a search would linearise).

    A block can be dropped only where its output has its input's shape (stride 1, in = out channels:
    then it becomes the identity); any other block stays as it is, activations included, and its
    decision says so.
    """
    target = copy.deepcopy(model)
    blocks = find_blocks(target, input_size or input_size_of(model))
    if len(keep) != len(blocks):
        raise PlanError(f"keep has {len(keep)} entries but the model has {len(blocks)} blocks")
    target = own_chains(target, blocks)  # chains no module owns become modules (a rewritten graph)
    decisions = []
    for i, (block, k) in enumerate(zip(blocks, keep)):
        if k:
            continue
        s = block.spec
        if s.stride == 1 and s.in_channels == s.out_channels:
            replace_block(target, block.name, nn.Identity())
            decisions.append(LayerPruneDecision(i, block.name, True, "dropped (identity)"))
        else:
            decisions.append(
                LayerPruneDecision(
                    i, block.name, False,
                    f"kept: its output shape differs from its input's ({s.in_channels}->{s.out_channels} channels, "
                    f"stride {s.stride}), so removing it would break the network",
                )
            )
    return target, decisions
