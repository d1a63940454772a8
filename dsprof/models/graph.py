"""Blocks of any CNN, found in its traced graph.

The model is traced with ``torch.fx`` (convolutions, normalisations and activations are leaves:
`dsprof.models.leaves`) and shapes are propagated once. Then, in the graph (`dsprof.models.patterns`):

1. a *unit* is a Conv2d optionally followed by a BatchNorm and an elementwise activation (ReLU,
   ReLU6, Hardswish, SiLU, GELU, LeakyReLU, Hardtanh -- module, functional or method form);
2. a *chain* is a run of units in which every intermediate tensor has exactly one consumer (the next
   convolution), optionally closed by a residual addition of the chain's input (identity, or convolutions --
   1x1 after the first -- each with an optional BatchNorm on the shortcut) and one activation after the addition;
   a Ghost module's ``cat([x, cheap(x)])[:, :n]`` continues a chain (the cheap unit concatenates its input,
   `dsprof.models.patterns.ghost_concat`);
3. a chain of two or more convolutions is split at module boundaries into *blocks*
   (`dsprof.models.ownership`): a block is owned by one module whose forward is exactly the chain (the
   deepest such module that is not a plain container), or is a run of consecutive children of an
   ``nn.Sequential`` (named ``parent[a:b]``), or, owned by no module, is named after its first and last
   convolutions (``conv1..conv3``) and replaced by rewriting the graph (`dsprof.models.surgery`).

What breaks a chain is recorded and, where a module with two or more convolutions is left without a
block, reported as a `Refusal` with the reason and the node: squeeze-excitation (a multiplication by a
gate computed from the tensor itself), concatenation/split, pooling or another operation, a tensor
read twice, a convolution the merge cannot handle. Nothing else in dsprof knows a block's class name:
linearise, gate, merge, split and the profiler's workloads read the `Block` record.
"""

from __future__ import annotations

import contextlib
import io
import sys
import weakref
from dataclasses import replace
from typing import Sequence

import torch
import torch.fx as fx
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp

from ..errors import GraphTraceError, ModelRunError
from .leaves import leaf_types, register_leaf_module, trace_opaque
from .ownership import _Discovery
from .records import Block, ChainSite, Discovery, Refusal, Unit
from .registry import input_size_or_own
from .surgery import Chain, ChainGraph, chain_attr, is_chain_name, own_chains, replace_block, run_of
from .tracing import example_input

__all__ = [
    "Block",
    "Chain",
    "ChainGraph",
    "ChainSite",
    "Discovery",
    "GraphTraceError",
    "Refusal",
    "Unit",
    "block_module",
    "block_modules",
    "discover_blocks",
    "own_chains",
    "register_leaf_module",
    "replace_block",
    "run_of",
]


def discover_blocks(model: nn.Module, input_size: tuple[int, int] | None = None) -> Discovery:
    """Blocks and refusals of ``model``, found in its traced graph (see the module docstring).

    ``input_size`` is the model input (height, width) in pixels; default: the resolution the model was
    built for by `get_model`, else 224x224. Raises `GraphTraceError` when torch.fx cannot trace it.

    The last few answers are kept (`_Recent`): a workflow's stages look at one model's blocks several times (a
    measure run three times, a predict run three), and each trace costs 0.1-1 s. A model changed since (a module
    replaced, a convolution's settings, a parameter's shape, a graph rewritten) is traced again.
    """
    h, w = input_size_or_own(model, input_size)
    found = _RECENT.get(model, (h, w))
    if found is None:
        found = _discover(model, h, w)
        _RECENT.put(model, (h, w), found)
    return replace(found, blocks=list(found.blocks), refusals=list(found.refusals))  # a caller's lists are its own


def _discover(model: nn.Module, h: int, w: int) -> Discovery:
    graph, opaque = trace_opaque(model)
    gm = fx.GraphModule(model, graph)
    x = example_input(model, (h, w))
    was_training = model.training
    try:
        gm.eval()
        said = io.StringIO()  # ShapeProp prints a failing node's traceback itself: kept only where it succeeds
        with torch.no_grad(), contextlib.redirect_stderr(said):
            ShapeProp(gm).propagate(x)
        sys.stderr.write(said.getvalue())
    except RuntimeError as exc:  # e.g. attention over a fixed grid, at another size: one line, not fx's traceback
        root = exc
        while root.__cause__ is not None:
            root = root.__cause__
        first = str(root).strip().splitlines()[0] if str(root).strip() else type(root).__name__
        raise ModelRunError(f"the model does not run on a {h}x{w} px input ({first}); give a `resolution=` it "
                            "takes (the one it was made for)") from None
    finally:
        model.train(was_training)
    found = _Discovery(model, gm)
    found.run()
    kept = [Refusal(path, type(model.get_submodule(path)).__name__,
                    f"torch.fx cannot trace it ({why}), so every module of its class is kept whole and its activations "
                    "stay", path.replace(".", "_")) for path, why in opaque.items()]
    fusable = tuple(found.fusable())
    return Discovery(found.blocks, kept + found.refusals, gm, found.nothing_to_merge(fusable), fusable)


class _Recent:
    """The last `SIZE` discoveries, each kept with the model's `fingerprint` when it was traced. Nothing here keeps a
    model alive: an entry holds its model and modules by weak reference, and goes when its model does (a dead module's
    reference equals no other, so a new module at a reused address is never taken for it)."""

    SIZE = 3

    def __init__(self) -> None:
        self._entries: list[tuple[weakref.ref, tuple[int, int], tuple, Discovery]] = []

    @staticmethod
    def fingerprint(model: nn.Module) -> tuple:
        """What discovery reads of a model besides its weights' values: every module (by identity) with its settings
        (``extra_repr``: channels, kernel, stride, padding...), its parameters' shapes, a forward set on the instance
        and, for a GraphModule, its code; and the leaf classes registered so far."""
        return (leaf_types(), tuple(
            (name, weakref.ref(m), m.extra_repr(), m.__dict__.get("forward"),
             getattr(m, "code", None) if isinstance(m, fx.GraphModule) else None,
             tuple((k, tuple(p.shape)) for k, p in m._parameters.items() if p is not None))
            for name, m in model.named_modules(remove_duplicate=False)))

    def get(self, model: nn.Module, size: tuple[int, int]) -> Discovery | None:
        for entry in self._entries:
            ref, s, fingerprint, found = entry
            if ref() is model and s == size:
                if fingerprint == self.fingerprint(model):
                    return found
                # removed by identity: `_forget` may replace the list meanwhile (the collector runs it at any time)
                self._entries = [e for e in self._entries if e is not entry]
                return None
        return None

    def put(self, model: nn.Module, size: tuple[int, int], found: Discovery) -> None:
        self._entries.insert(0, (weakref.ref(model, self._forget), size, self.fingerprint(model), found))
        del self._entries[self.SIZE:]

    def _forget(self, ref: weakref.ref) -> None:
        """A model's entries go with it (its discovery holds its modules: their weights would stay)."""
        self._entries = [e for e in self._entries if e[0] is not ref]


_RECENT = _Recent()


def block_module(model: nn.Module, name: str) -> nn.Module:
    """The module at a block's ``name`` in ``model`` (a run ``p[a:b]`` as an ``nn.Sequential`` of its children;
    a chain no module owns as its `Chain`, found again in the model's graph unless the model owns it)."""
    return block_modules(model, [name])[0]


def block_modules(model: nn.Module, names: Sequence[str]) -> list[nn.Module]:
    """`block_module` of each of ``names``, the model traced at most once (for the chains it does not own): a loop
    over a model's blocks costs one trace, not one a block."""
    found: dict[str, nn.Module] | None = None
    modules = []
    for name in names:
        if is_chain_name(name):
            if hasattr(model, chain_attr(name)):
                modules.append(getattr(model, chain_attr(name)))
                continue
            if found is None:
                found = {b.name: b.module for b in discover_blocks(model).blocks}
            if name not in found:
                raise GraphTraceError(f"no block {name} in this model")
            modules.append(found[name])
        elif (run := run_of(name)) is None:
            modules.append(model.get_submodule(name))
        else:
            parent, a, b = run
            seq = model.get_submodule(parent) if parent else model
            modules.append(nn.Sequential(*[seq.get_submodule(str(i)) for i in range(a, b)]))
    return modules
