"""Block surgery: putting a new module where a block is.

A block a module owns is replaced by setting that module (a run ``p[a:b]`` of an ``nn.Sequential``: the
new module at ``a``, Identity after it). A chain that no module owns (``conv1..conv3``) is first gathered
into one module by rewriting the traced graph (`own_chains`): the model becomes a `ChainGraph` (a
``torch.fx.GraphModule``) in which each such chain is one node calling a `Chain` module; every module the
chain does not run through stays whole under its own name, so the other blocks keep theirs. Then the
chain is replaced like any other block.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Sequence

import torch
import torch.fx as fx
from torch import nn

from ..errors import GraphTraceError
from .leaves import trace_model
from .patterns import call_act_name, functional_act_module
from .records import Block

__all__ = [
    "Chain",
    "ChainGraph",
    "build_chain",
    "chain_attr",
    "is_chain_name",
    "own_chains",
    "replace_block",
    "run_of",
    "set_submodule",
    "signature",
]


class Chain(nn.Module):
    """A chain of convolutions that no module owns, as one module: ``tail(body(x) + shortcut(x))``.

    ``body`` holds the chain's convolutions, BatchNorms and activations in order (the model's own modules;
    a functional activation gets one), ``shortcut`` the skip path's modules (None: no skip, []: identity),
    ``tail`` what follows the addition. ``block_name`` is the block's name (``conv1..conv3``).
    """

    def __init__(self, name: str, body: Sequence[nn.Module], shortcut: Sequence[nn.Module] | None,
                 tail: nn.Module | None = None) -> None:
        super().__init__()
        self.block_name = name
        self.body = nn.Sequential(*body)
        self.has_skip = shortcut is not None
        self.shortcut = nn.Sequential(*shortcut) if shortcut else nn.Identity()
        self.tail = tail if tail is not None else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        if self.has_skip:
            y = y + self.shortcut(x)
        return self.tail(y)


class ChainGraph(fx.GraphModule):
    """A model rewritten by `own_chains`. It keeps dsprof's attributes (``dsprof_*``: the input size, the
    model's identity, the plan) when copied, which a plain GraphModule drops."""

    def __deepcopy__(self, memo: dict[int, Any]) -> "ChainGraph":
        res = super().__deepcopy__(memo)
        for key, value in self.__dict__.items():
            if key.startswith("dsprof_"):
                setattr(res, key, copy.deepcopy(value, memo))
        return res


def is_chain_name(name: str) -> bool:
    """True for the name of a chain no module owns (``first..last``)."""
    return ".." in name


def chain_attr(name: str) -> str:
    """The attribute a `ChainGraph` holds chain ``name`` under (``conv1..conv3`` -> ``conv1__conv3``)."""
    return re.sub(r"\W", "_", name)


def signature(node: fx.Node) -> str:
    """What a node calls: a module's path, or a function's or method's name (stable across traces)."""
    if node.op == "call_module":
        return str(node.target)
    return str(getattr(node.target, "__name__", node.target))


def build_chain(model: nn.Module, name: str, main: Sequence[fx.Node], add: fx.Node | None,
                path: Sequence[fx.Node]) -> Chain:
    """The `Chain` of ``model``'s own modules that computes a chain's nodes: ``main`` from its first
    convolution to its output, ``add`` the residual addition among them (None: no skip), ``path`` the skip
    path's nodes. A functional activation gets a module; a functional pass-through (eval: nothing) none."""

    def module(node: fx.Node) -> nn.Module | None:
        if node.op == "call_module":
            return model.get_submodule(str(node.target))
        act = call_act_name(node)
        return functional_act_module(node, act) if act is not None else None

    cut = main.index(add) if add is not None else len(main)
    body = [m for m in map(module, main[:cut]) if m is not None]
    rest = [m for m in map(module, main[cut + 1:]) if m is not None]
    tail = (rest[0] if len(rest) == 1 else nn.Sequential(*rest)) if rest else None
    shortcut = [m for m in map(module, path) if m is not None] if add is not None else None
    return Chain(name, body, shortcut, tail)


def _chain_nodes(graph: fx.Graph, block: Block) -> tuple[fx.Node, list[fx.Node], fx.Node | None, list[fx.Node]]:
    """(input, main path, addition, skip path) of chain ``block`` in ``graph``, checked node by node against
    its site."""
    site = block.site
    assert site is not None
    starts = [n for n in graph.nodes if n.op == "call_module" and n.target == site.main[0]]
    if len(starts) != 1:
        raise GraphTraceError(f"block {block.name}: {site.main[0]} is called {len(starts)} times in the traced graph")
    main = starts
    for expected in site.main[1:]:
        users = list(main[-1].users)
        if len(users) != 1 or signature(users[0]) != expected:
            raise GraphTraceError(f"block {block.name}: the traced graph differs from the one it was found in "
                                  f"(after {main[-1].name}: {[signature(u) for u in users]}, expected {expected})")
        main.append(users[0])
    x = main[0].args[0]
    path: list[fx.Node] = []
    add = None
    if block.shortcut is not None:
        add = next(n for n in main if len(n.all_input_nodes) == 2)  # the only node of a chain with two inputs
        n = next(a for a in add.all_input_nodes if a not in main)
        while n is not x:
            path.append(n)
            n = n.all_input_nodes[0]
        path.reverse()
        if tuple(map(signature, path)) != site.shortcut:
            raise GraphTraceError(f"block {block.name}: its skip path differs from the one it was found with")
    return x, main, add, path  # type: ignore[return-value]


def own_chains(model: nn.Module, blocks: Sequence[Block]) -> nn.Module:
    """``model`` with every chain among ``blocks`` that no module owns gathered into its `Chain` module.

    Returns ``model`` itself when there is none (or it owns them already), else a `ChainGraph` built from
    the model's graph traced through the modules the chains run through only, that shares the model's
    modules. It computes exactly what the model computes.
    """
    chains = [b for b in blocks if b.site is not None]
    if not chains or all(hasattr(model, chain_attr(b.name)) for b in chains):
        return model
    opened = set().union(*(b.site.opened for b in chains))  # type: ignore[union-attr]
    graph = trace_model(model, opened)
    modules = {}
    for block in chains:
        x, main, add, path = _chain_nodes(graph, block)
        modules[chain_attr(block.name)] = build_chain(model, block.name, main, add, path)
        with graph.inserting_before(main[-1]):
            node = graph.call_module(chain_attr(block.name), (x,))
        main[-1].replace_all_uses_with(node)
        for old in reversed([*path, *main]):  # consumers before producers
            graph.erase_node(old)
    for node in graph.nodes:
        node.type = None  # annotations TorchScript cannot resolve in the generated code
    graph.lint()
    owned = ChainGraph({**dict(model.named_modules()), **modules,
                        **dict(model.named_parameters()), **dict(model.named_buffers())}, graph,
                       class_name=type(model).__name__)
    owned.training = model.training
    # children in the order the graph first uses them, so that the first convolution is the model's input's
    order = [str(n.target).split(".")[0] for n in graph.nodes if n.op in ("call_module", "get_attr")]
    owned._modules = dict(sorted(owned._modules.items(), key=lambda kv: order.index(kv[0])))
    for key, value in vars(model).items():
        if key.startswith("dsprof_"):
            setattr(owned, key, value)
    return owned


def run_of(name: str) -> tuple[str, int, int] | None:
    """(parent path, a, b) of a block named as a run of an nn.Sequential's children ``parent[a:b]``, else None."""
    if not name.endswith("]") or "[" not in name:
        return None
    parent, rng = name[:-1].split("[")
    a, b = rng.split(":")
    return parent, int(a), int(b)


def set_submodule(root: nn.Module, name: str, module: nn.Module) -> None:
    """Replace the submodule at dotted path ``name`` with ``module``."""
    parent_name, _, child = name.rpartition(".")
    parent = root.get_submodule(parent_name) if parent_name else root
    setattr(parent, child, module)


def replace_block(model: nn.Module, name: str, new: nn.Module) -> None:
    """Put ``new`` where block ``name`` is, in place. A run ``p[a:b]``: ``new`` at ``a``, Identity after it;
    an ``nn.Sequential`` of the run's length puts its children back one by one (undoing a replacement).
    A chain no module owns: ``model`` must own it (`own_chains`)."""
    if is_chain_name(name):
        if not hasattr(model, chain_attr(name)):
            raise GraphTraceError(f"block {name} is a chain no module owns: gather it first, model = own_chains(model, blocks)")
        setattr(model, chain_attr(name), new)
        return
    run = run_of(name)
    if run is None:
        set_submodule(model, name, new)
        return
    parent, a, b = run
    seq = model.get_submodule(parent) if parent else model
    if isinstance(new, nn.Sequential) and len(new) == b - a and getattr(new, "dsprof_run", False):
        for i, child in enumerate(new):
            setattr(seq, str(a + i), child)
        return
    setattr(seq, str(a), new)
    for i in range(a + 1, b):
        setattr(seq, str(i), nn.Identity())
