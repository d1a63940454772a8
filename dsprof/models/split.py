"""A model's stem and head: what runs before its first block and after its last.

Timed on their own they let a latency table predict a whole model as stem + blocks + head, without
having measured that model. They are cut from the traced graph (`dsprof.models.graph`), so any model
whose blocks follow one another works (each block's output is the next block's only input); for any
other model -- blocks on parallel branches, refused blocks or other work between blocks -- `split_model`
returns None and a LUT falls back to the whole original model minus its blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.fx as fx
from torch import nn

from .graph import discover_blocks

__all__ = ["ModelSplit", "split_model"]


@dataclass(frozen=True)
class ModelSplit:
    """``head(blocks(stem(x)))`` is the model's forward (eval mode), the blocks applied in order."""

    stem: nn.Module
    head: nn.Module


def split_model(model: nn.Module, input_size: tuple[int, int] | None = None) -> ModelSplit | None:
    """The stem and head of ``model`` (sharing its modules), or None when its blocks do not follow one another."""
    found = discover_blocks(model, input_size)
    blocks = found.blocks
    if not blocks:
        return None
    gm = found.graph_module
    nodes = {n.name: n for n in gm.graph.nodes}
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for a, b in zip(blocks, blocks[1:]):
        if a.output_node != b.input_node:
            return None
    first_in, last_out = nodes[blocks[0].input_node], nodes[blocks[-1].output_node]
    inside = {n for n in gm.graph.nodes if order[first_in] < order[n] <= order[last_out]}
    # nothing after the last block may read anything before it, except the last block's output
    for n in gm.graph.nodes:
        if order[n] > order[last_out] and any(a is not last_out and (a in inside or order[a] <= order[first_in]) for a in n.all_input_nodes):
            return None
    return ModelSplit(_subgraph(gm, None, first_in), _subgraph(gm, last_out, None))


def _subgraph(gm: fx.GraphModule, start: fx.Node | None, end: fx.Node | None) -> fx.GraphModule:
    """The part of the graph from ``start`` (exclusive; None: the model input) up to ``end`` (None: the output)."""
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    if start is not None:
        env[start] = graph.placeholder("x")
        started = False
    else:
        started = True
    for node in gm.graph.nodes:
        if not started:
            started = node is start
            continue
        if node.op == "output" and end is not None:
            break
        env[node] = graph.node_copy(node, lambda n: env[n])
        if node is end:
            graph.output(env[node])
            break
    module = fx.GraphModule(gm, graph)
    module.graph.eliminate_dead_code()
    module.recompile()
    return module
