"""Blocks of any CNN, found in its traced graph.

The model is traced with ``torch.fx`` (convolutions, normalisations and activations are leaves) and
shapes are propagated once. Then, in the graph:

1. a *unit* is a Conv2d optionally followed by a BatchNorm and an elementwise activation (ReLU,
   ReLU6, Hardswish, SiLU, GELU, LeakyReLU, Hardtanh -- module, functional or method form);
2. a *chain* is a run of units in which every intermediate tensor has exactly one consumer (the next
   convolution), optionally closed by a residual addition of the chain's input (identity, or a
   convolution with an optional BatchNorm on the shortcut) and one activation after the addition;
3. a chain of two or more convolutions is split at module boundaries into *blocks*: a block is owned
   by one module whose forward is exactly the chain (the deepest such module that is not a plain
   container), or is a run of consecutive children of an ``nn.Sequential`` (named ``parent[a:b]``).

What breaks a chain is recorded and, where a module with two or more convolutions is left without a
block, reported as a `Refusal` with the reason and the node: squeeze-excitation (a multiplication by a
gate computed from the tensor itself), concatenation/split, pooling or another operation, a tensor
read twice, a convolution the merge cannot handle. Nothing else in dsprof knows a block's class name:
linearise, gate, merge, split and the profiler's workloads read the `Block` record.
"""

from __future__ import annotations

import operator
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp

from ..errors import GraphTraceError  # noqa: F401  (defined once, in dsprof.errors)
from .blockspec import BlockSpec, ConvShape
from .registry import input_size_of
from .tracing import first_conv_in_channels

__all__ = [
    "Block",
    "Discovery",
    "GraphTraceError",
    "Refusal",
    "Unit",
    "block_module",
    "discover_blocks",
    "register_leaf_module",
    "replace_block",
    "run_of",
]

# Removable activations: module types (ReLU6 before Hardtanh: it is a subclass), functions, methods.
_ACT_MODULES: tuple[tuple[type, str], ...] = (
    (nn.ReLU6, "relu6"), (nn.ReLU, "relu"), (nn.Hardswish, "hardswish"), (nn.SiLU, "silu"),
    (nn.GELU, "gelu"), (nn.LeakyReLU, "leaky_relu"), (nn.Hardtanh, "hardtanh"),
)
_ACT_FUNCTIONS: dict[Callable, str] = {
    F.relu: "relu", torch.relu: "relu", F.relu6: "relu6", F.hardswish: "hardswish", F.silu: "silu",
    F.gelu: "gelu", F.leaky_relu: "leaky_relu", F.hardtanh: "hardtanh",
}
_ACT_METHODS = {"relu": "relu", "relu_": "relu"}
_PASS_MODULES: tuple[type, ...] = (nn.Identity, nn.Dropout, nn.Dropout2d)
_PASS_FUNCTIONS: set[Callable] = {F.dropout, F.dropout2d}
_ADD = {operator.add, operator.iadd, torch.add}
_MUL = {operator.mul, operator.imul, torch.mul}
_CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)

#: Modules traced as opaque leaves (besides convolutions, normalisations and activations): dsprof's own
#: linearised/merged/gated blocks, and whatever `register_leaf_module` adds.
_LEAF_TYPES: list[type] = []


def register_leaf_module(cls: type) -> type:
    """Trace modules of class ``cls`` as opaque leaves (e.g. a module torch.fx cannot trace). A leaf ends
    any chain it touches. Usable as a class decorator."""
    if cls not in _LEAF_TYPES:
        _LEAF_TYPES.append(cls)
    return cls


def _stochastic_depth_functions() -> set[Callable]:
    try:
        from torchvision.ops import stochastic_depth  # torch.fx-wrapped in torchvision: a pass-through in eval

        return {stochastic_depth}
    except ImportError:  # pragma: no cover
        return set()


_PASS_FUNCTIONS |= _stochastic_depth_functions()


@dataclass(frozen=True, eq=False)
class Unit:
    """One convolution of a block with its BatchNorm and its *removable* activation.

    ``act`` is the activation the search may remove (a module; functional activations get one);
    ``act_in_norm`` is True when it lives inside ``norm`` (timm's BatchNormAct2d).
    """

    conv: nn.Conv2d
    norm: nn.Module | None
    act: nn.Module | None
    act_in_norm: bool
    conv_name: str
    act_name: str = "none"


@dataclass(frozen=True, eq=False)
class Block:
    """One block of a model: where it is, its module, its shape, and what every stage needs of it.

    ``name`` is the owning module's path (``features.3``) or a run of an ``nn.Sequential``'s children
    (``layers[0:8]``); ``module`` the owning module (a new ``nn.Sequential`` over the run's children).
    ``units`` are its convolutions in order; ``shortcut`` is None without a skip connection, ``()`` for
    an identity skip, else the modules on the skip path; ``tail`` the activation after the block's
    output (kept by the merge: ResNet's ReLU after the addition, a chain's last activation).
    """

    name: str
    module: nn.Module
    spec: BlockSpec
    units: tuple[Unit, ...] = ()
    shortcut: tuple[nn.Module, ...] | None = None
    tail: nn.Module | None = None
    input_node: str = ""
    output_node: str = ""

    @property
    def residual(self) -> bool:
        return self.shortcut is not None

    @property
    def activations(self) -> tuple[nn.Module, ...]:
        """The removable activations (what gating and linearising act on)."""
        return tuple(u.act for u in self.units if u.act is not None)


@dataclass(frozen=True)
class Refusal:
    """A block-like part of the model that dsprof cannot treat as a block, and why."""

    name: str
    type_name: str
    reason: str
    node: str

    def __str__(self) -> str:
        return f"{self.name or '(model)'} ({self.type_name}): {self.reason} [node {self.node}]"


@dataclass(frozen=True, eq=False)
class Discovery:
    """What `discover_blocks` found: the blocks in execution order, the refusals, and the traced graph."""

    blocks: list[Block]
    refusals: list[Refusal]
    graph_module: fx.GraphModule = field(repr=False)


# --------------------------------------------------------------------------- tracing


class _Tracer(fx.Tracer):
    def __init__(self) -> None:
        super().__init__()
        self.path_stack: list[str] = []
        self.failed_at: str | None = None

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        if isinstance(m, (nn.Conv2d, nn.BatchNorm2d, _PASS_MODULES)) or _act_module_name(m) is not None:
            return True
        if isinstance(m, tuple(_LEAF_TYPES)) or getattr(type(m), "dsprof_leaf", False):
            return True
        return super().is_leaf_module(m, qualname)

    def call_module(self, m: nn.Module, forward: Callable, args: tuple, kwargs: dict) -> Any:
        path = self.path_of_module(m)
        self.path_stack.append(path)
        try:
            return super().call_module(m, forward, args, kwargs)
        except Exception:
            if self.failed_at is None:
                self.failed_at = path  # the innermost module whose forward could not be traced
            raise
        finally:
            self.path_stack.pop()


_timm_leaves_added = False


def _timm_leaves() -> None:
    """timm's own list of modules torch.fx cannot trace (dynamic padding, ...), added at the first trace after
    timm is imported (a model with timm's modules has imported it; importing it here would cost every command)."""
    global _timm_leaves_added
    if _timm_leaves_added or "timm" not in sys.modules:
        return
    _timm_leaves_added = True
    try:
        from timm.models._features_fx import _leaf_modules  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - timm reorganised: nothing to add
        return
    for cls in _leaf_modules:
        if not issubclass(cls, (nn.Conv2d, nn.BatchNorm2d)):
            register_leaf_module(cls)


def _trace(model: nn.Module) -> fx.GraphModule:
    _timm_leaves()
    tracer = _Tracer()
    was_training = model.training
    model.eval()  # tracing resolves `if self.training` branches: trace what inference runs
    try:
        graph = tracer.trace(model)
    except Exception as exc:  # noqa: BLE001 - any tracing failure becomes one clear error
        where = tracer.failed_at or ""
        module = model.get_submodule(where) if where else model
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise GraphTraceError(
            f"torch.fx cannot trace {where or 'the model'} ({type(module).__name__}): {first[:200]}. dsprof finds "
            "blocks in the traced graph: make that module traceable (no Python control flow on tensor values), or "
            "mark it opaque with dsprof.models.register_leaf_module(<its class>) so the rest can be traced"
        ) from None
    finally:
        model.train(was_training)
    return fx.GraphModule(model, graph)


# --------------------------------------------------------------------------- graph reading


def _act_module_name(m: nn.Module) -> str | None:
    for cls, name in _ACT_MODULES:
        if type(m) is cls:
            return name
    for cls, name in _ACT_MODULES:
        if isinstance(m, cls):
            return name
    return None


def _functional_act_module(node: fx.Node, name: str) -> nn.Module:
    """A module computing a functional activation node (``F.leaky_relu(x, 0.1)`` -> ``nn.LeakyReLU(0.1)``)."""
    args, kw = node.args[1:], dict(node.kwargs)
    kw.pop("inplace", None)
    if name == "leaky_relu":
        return nn.LeakyReLU(kw.get("negative_slope", args[0] if args else 0.01))
    if name == "hardtanh":
        return nn.Hardtanh(kw.get("min_val", args[0] if args else -1.0), kw.get("max_val", args[1] if len(args) > 1 else 1.0))
    if name == "gelu":
        return nn.GELU(approximate=kw.get("approximate", "none"))
    return {"relu": nn.ReLU, "relu6": nn.ReLU6, "hardswish": nn.Hardswish, "silu": nn.SiLU}[name]()


class _Graph:
    """The traced graph with what discovery asks of it."""

    def __init__(self, gm: fx.GraphModule, model: nn.Module) -> None:
        self.gm, self.model = gm, model
        self.nodes = [n for n in gm.graph.nodes]
        self.order = {n: i for i, n in enumerate(self.nodes)}
        self.modules = dict(model.named_modules())

    def module(self, node: fx.Node) -> nn.Module | None:
        return self.modules.get(node.target) if node.op == "call_module" else None  # type: ignore[arg-type]

    def stack(self, node: fx.Node) -> list[str]:
        """Module paths enclosing ``node``, outermost first (a leaf module's own path last)."""
        paths = list(node.meta.get("nn_module_stack", {}).keys())
        if node.op == "call_module" and (not paths or paths[-1] != node.target):
            paths.append(str(node.target))
        return [p for p in paths if p]

    def act_name(self, node: fx.Node) -> str | None:
        if node.op == "call_module":
            return _act_module_name(self.module(node))  # type: ignore[arg-type]
        if node.op == "call_function":
            return _ACT_FUNCTIONS.get(node.target)  # type: ignore[arg-type]
        if node.op == "call_method":
            return _ACT_METHODS.get(node.target)  # type: ignore[arg-type]
        return None

    def is_pass(self, node: fx.Node) -> bool:
        if node.op == "call_module":
            return isinstance(self.module(node), _PASS_MODULES)
        return node.op == "call_function" and node.target in _PASS_FUNCTIONS

    def is_conv(self, node: fx.Node) -> bool:
        return node.op == "call_module" and isinstance(self.module(node), nn.Conv2d)

    def is_norm(self, node: fx.Node) -> bool:
        return node.op == "call_module" and isinstance(self.module(node), nn.BatchNorm2d)

    def is_add(self, node: fx.Node) -> bool:
        return (node.op == "call_function" and node.target in _ADD) or (node.op == "call_method" and node.target in ("add", "add_"))

    def is_mul(self, node: fx.Node) -> bool:
        return (node.op == "call_function" and node.target in _MUL) or (node.op == "call_method" and node.target in ("mul", "mul_"))

    def single_user(self, node: fx.Node) -> fx.Node | None:
        """The one consumer of ``node``, looking through pass-through nodes (dropout, identity)."""
        while True:
            users = list(node.users)
            if len(users) != 1:
                return None
            user = users[0]
            if not self.is_pass(user):
                return user
            node = user

    def describe(self, node: fx.Node) -> str:
        if node.op == "call_module":
            return f"{type(self.module(node)).__name__} {node.target}"
        if node.op == "output":
            return "the model output"
        target = getattr(node.target, "__name__", str(node.target))
        return f"{target}"


# --------------------------------------------------------------------------- units and chains


@dataclass(eq=False)
class _Unit:
    conv: fx.Node
    nodes: list[fx.Node]
    norm: fx.Node | None = None
    act: fx.Node | None = None  # activation node (None: no activation, or it lives in the norm)
    act_in_norm: nn.Module | None = None
    bad: str | None = None  # why this convolution cannot be part of a block

    @property
    def out(self) -> fx.Node:
        return self.nodes[-1]

    @property
    def has_act(self) -> bool:
        return self.act is not None or self.act_in_norm is not None


def _conv_problem(conv: nn.Conv2d) -> str | None:
    if conv.dilation != (1, 1):
        return f"dilated convolution (dilation {conv.dilation}) is not merged by dsprof"
    if conv.padding_mode != "zeros":
        return f"padding mode {conv.padding_mode!r}: only zero padding merges exactly"
    if conv.kernel_size[0] != conv.kernel_size[1] or conv.stride[0] != conv.stride[1]:
        return f"non-square kernel or stride {conv.kernel_size}/{conv.stride}"
    if _padding_style(conv) is None:
        return f"padding {conv.padding} for kernel {conv.kernel_size[0]} is neither symmetric nor TF 'SAME'"
    return None


def _padding_style(conv: nn.Conv2d) -> str | None:
    if "Same" in type(conv).__name__:  # timm's Conv2dSame / Conv2dSameExport: TF 'SAME' padding
        return "tf_same" if conv.stride[0] > 1 or conv.kernel_size[0] % 2 == 0 else "symmetric"
    k = conv.kernel_size[0]
    if conv.padding in ((k // 2, k // 2), "same") and k % 2 == 1:
        return "symmetric"
    if k == 1 and conv.padding in ((0, 0), "valid"):
        return "symmetric"
    return None


def _units(g: _Graph) -> list[_Unit]:
    def advance(unit: _Unit) -> fx.Node | None:
        """Take the pass-through nodes after the unit's last node into it; return the next real consumer."""
        while True:
            users = list(unit.out.users)
            if len(users) != 1:
                return None
            if not g.is_pass(users[0]):
                return users[0]
            unit.nodes.append(users[0])

    units = []
    for node in g.nodes:
        if not g.is_conv(node):
            continue
        unit = _Unit(node, [node])
        unit.bad = _conv_problem(g.module(node))  # type: ignore[arg-type]
        nxt = advance(unit)
        if nxt is not None and g.is_norm(nxt):
            unit.norm = nxt
            unit.nodes.append(nxt)
            inner = getattr(g.module(nxt), "act", None)
            if inner is not None and not isinstance(inner, nn.Identity):
                if _act_module_name(inner) is None:
                    unit.bad = f"{type(inner).__name__} inside {nxt.target} is not an activation dsprof can remove"
                unit.act_in_norm = inner
            nxt = advance(unit)
        if unit.act_in_norm is None and nxt is not None and g.act_name(nxt) is not None:
            unit.act = nxt
            unit.nodes.append(nxt)
            advance(unit)
        units.append(unit)
    return units


def _break_reason(g: _Graph, out: fx.Node) -> tuple[str, str]:
    """Why a chain cannot continue after ``out``: (reason, node name)."""
    users = list(out.users)
    while len(users) == 1 and g.is_pass(users[0]):
        users = list(users[0].users)
    if len(users) != 1:
        names = ", ".join(u.name for u in users[:4])
        return f"tensor {out.name} is read {len(users)} times ({names})", out.name
    user = users[0]
    if g.is_mul(user):
        return f"multiplication {user.name}", user.name
    target = _target_name(user)
    if target in ("cat", "concat", "stack"):
        return f"concatenation {user.name}", user.name
    if target in ("split", "chunk", "getitem", "unbind"):
        return f"split {user.name}", user.name
    return f"followed by {g.describe(user)} ({user.name})", user.name


def _target_name(node: fx.Node) -> str:
    return str(getattr(node.target, "__name__", node.target))


def _se_gates(g: _Graph) -> list[tuple[fx.Node, fx.Node]]:
    """(mul node, gated tensor) for every multiplication of a tensor by a gate computed from itself."""
    found = []
    for node in g.nodes:
        if not g.is_mul(node):
            continue
        operands = [a for a in node.args if isinstance(a, fx.Node)]
        if len(operands) != 2:
            continue
        for x, gate in (operands, operands[::-1]):
            seen, todo = set(), [gate]
            while todo:
                n = todo.pop()
                if n is x:
                    found.append((node, x))
                    todo = []
                    break
                if n in seen or g.order[n] < g.order[x]:
                    continue
                seen.add(n)
                todo.extend(a for a in n.all_input_nodes)
            if found and found[-1][0] is node:
                break
    return found


# --------------------------------------------------------------------------- blocks


class _Discovery:
    def __init__(self, model: nn.Module, gm: fx.GraphModule) -> None:
        self.g = _Graph(gm, model)
        self.model = model
        self.under: dict[str, set[fx.Node]] = defaultdict(set)
        self.convs_under: dict[str, int] = defaultdict(int)
        for node in self.g.nodes:
            if node.op in ("placeholder", "output", "get_attr"):
                continue
            for path in ["", *self.g.stack(node)]:  # "" is the model itself
                self.under[path].add(node)
                if self.g.is_conv(node) or isinstance(self.g.module(node), nn.Linear):  # a Linear is a 1x1 conv
                    self.convs_under[path] += 1
        self.blocks: list[Block] = []
        self.refusals: list[Refusal] = []
        self.breaks: list[tuple[fx.Node, str, str]] = []  # (node, reason, node name)
        self.refused_paths: set[str] = set()

    # ---- ownership
    def _type(self, path: str) -> str:
        return type(self.g.modules[path]).__name__ if path in self.g.modules else "?"

    def _common(self, nodes: list[fx.Node]) -> list[str]:
        stacks = [["", *self.g.stack(n)] for n in nodes]
        common = []
        for level in zip(*stacks):
            if all(p == level[0] for p in level):
                common.append(level[0])
            else:
                break
        return common

    def _owner(self, nodes: set[fx.Node]) -> str | None:
        """The module that owns exactly ``nodes``: deepest non-container among equal owners."""
        common = self._common(sorted(nodes, key=self.g.order.get))
        exact = [p for p in common if self.under[p] == nodes]
        if not exact:
            return None
        plain = [p for p in exact if not isinstance(self.g.modules.get(p), _CONTAINERS)]
        return (plain or exact)[-1]

    def _run(self, nodes: set[fx.Node]) -> tuple[str, int, int] | None:
        """(parent, a, b) when ``nodes`` are exactly the children a..b-1 of an nn.Sequential."""
        common = self._common(sorted(nodes, key=self.g.order.get))
        parent = common[-1]
        seq = self.g.modules.get(parent) if parent else self.model
        if not isinstance(seq, nn.Sequential):
            return None
        prefix = f"{parent}." if parent else ""
        index = []
        for node in nodes:
            path = next((p for p in self.g.stack(node) if p.startswith(prefix) and "." not in p[len(prefix):]), None)
            if path is None:
                return None
            index.append(int(path[len(prefix):]))
        a, b = min(index), max(index) + 1
        covered = set().union(*(self.under[f"{prefix}{i}"] for i in range(a, b)))
        return (parent, a, b) if covered == nodes else None

    # ---- chains
    def run(self) -> None:
        g = self.g
        units = _units(g)
        by_conv = {u.conv: u for u in units}
        self._taint_se(units)
        nxt: dict[_Unit, _Unit] = {}
        for u in units:
            if u.bad:
                self.breaks.append((u.conv, u.bad, u.conv.name))
                continue
            user = g.single_user(u.out)
            v = by_conv.get(user) if user is not None else None
            if v is not None and not v.bad:
                nxt[u] = v
            else:
                reason, name = _break_reason(g, u.out)
                self.breaks.append((u.out, reason, name))
        has_prev = set(nxt.values())
        for u in units:
            if u.bad or u in has_prev:
                continue
            chain = [u]
            while chain[-1] in nxt:
                chain.append(nxt[chain[-1]])
            self._chain(chain)
        first_conv = {str(n.target): g.order[n] for n in g.nodes if g.is_conv(n)}
        self.blocks.sort(key=lambda b: first_conv[b.units[0].conv_name])
        self._refuse_leftovers()

    def _taint_se(self, units: list[_Unit]) -> None:
        g = self.g
        for mul, x in _se_gates(g):
            common = self._common([mul, x])
            plain = [p for p in common if not isinstance(g.modules.get(p), _CONTAINERS)]
            if not plain:
                continue
            path = plain[-1]
            if path in self.refused_paths:
                continue
            self.refused_paths.add(path)
            reason = (
                f"squeeze-excitation: {mul.name} multiplies the features by a gate computed from them, so the block "
                "stays non-linear and cannot merge; its activations stay"
            )
            self.refusals.append(Refusal(path, self._type(path), reason, mul.name))
            for u in units:
                if u.conv in self.under[path] and not u.bad:
                    u.bad = f"inside the squeeze-excitation block {path}"

    def _residual(self, chain: list[_Unit]) -> tuple[fx.Node, list[fx.Node], fx.Node | None, fx.Node] | None:
        """(add node, shortcut nodes, tail activation node, chain input) when the chain is closed by a skip."""
        g = self.g
        x = chain[0].conv.args[0]
        add = g.single_user(chain[-1].out)
        if not isinstance(x, fx.Node) or add is None or not g.is_add(add):
            return None
        operands = [a for a in add.args if isinstance(a, fx.Node)]
        # a unit's trailing pass-through nodes are part of it, so the add reads the unit's last node itself
        if len(operands) != 2 or chain[-1].out not in operands:
            return None
        other = operands[1] if operands[0] is chain[-1].out else operands[0]
        path: list[fx.Node] = []
        n = other
        while n is not x:
            if n.op != "call_module" or len(n.all_input_nodes) != 1 or len(n.users) != 1:
                return None
            path.append(n)
            n = n.all_input_nodes[0]
        path.reverse()
        tail = g.single_user(add)
        tail = tail if tail is not None and g.act_name(tail) is not None else None
        return add, path, tail, x

    def _chain(self, chain: list[_Unit]) -> None:
        closed = self._residual(chain)
        if closed is not None:
            self._candidate(chain, closed)
            return
        self._segment(chain)

    def _segment(self, chain: list[_Unit]) -> None:
        if len(chain) < 2:
            return
        nodes = self._with_passes(set().union(*(set(u.nodes) for u in chain)))
        owner = self._owner(nodes)
        if owner is not None and not isinstance(self.g.modules.get(owner), _CONTAINERS):
            self._candidate(chain, None)
            return
        depths = []
        for a, b in zip(chain, chain[1:]):
            depths.append(len(self._common([a.conv, b.conv])))
        low = min(depths)
        if low == max(depths):  # no module boundary to split at: a run of a Sequential, or nothing
            self._candidate(chain, None)
            return
        pieces, piece = [], [chain[0]]
        for u, d in zip(chain[1:], depths):
            if d == low:
                pieces.append(piece)
                piece = []
            piece.append(u)
        pieces.append(piece)
        # consecutive single convolutions (a flat nn.Sequential: conv, bn, relu, conv, ...) form one run
        grouped: list[list[_Unit]] = []
        for piece, previous in zip(pieces, [None, *pieces[:-1]]):
            if len(piece) == 1 and previous is not None and len(previous) == 1:
                grouped[-1] += piece
            else:
                grouped.append(list(piece))
        for piece in grouped:
            self._segment(piece)

    def _with_passes(self, nodes: set[fx.Node]) -> set[fx.Node]:
        """``nodes`` plus the pass-through nodes (dropout, identity, a folded BatchNorm) between two of them."""
        out = set(nodes)
        for n in nodes:
            for user in n.users:
                between = []
                while self.g.is_pass(user) and len(user.users) == 1:
                    between.append(user)
                    user = next(iter(user.users))
                if between and user in nodes:
                    out.update(between)
        return out

    def _candidate(self, chain: list[_Unit], closed) -> None:
        g = self.g
        if len(chain) < 2:
            return
        nodes = set().union(*(set(u.nodes) for u in chain))
        tail_node = None
        if closed is not None:
            add, path, tail_node, _ = closed
            nodes |= {add, *path}
            if tail_node is not None:
                nodes.add(tail_node)
        nodes = self._with_passes(nodes)
        owner = self._owner(nodes)
        if owner is None and closed is not None and tail_node is not None:
            nodes.discard(tail_node)  # the activation after the addition may live outside the block
            nodes = self._with_passes(nodes - {n for n in nodes if g.is_pass(n)})
            tail_node = None
            owner = self._owner(nodes)
        run = self._run(nodes) if owner is None and closed is None else None
        if owner is None and run is None:
            common = self._common(sorted(nodes, key=g.order.get))
            where = common[-1] if common else ""
            self.refusals.append(Refusal(
                where or "(model)", self._type(where) if where else type(self.model).__name__,
                self._unowned_reason(chain, nodes, where), chain[0].conv.name,
            ))
            return
        if owner is not None and owner in self.refused_paths:
            return
        if owner is not None:
            name, module = owner, g.modules[owner]
        else:
            parent, a, b = run  # type: ignore[misc]
            seq = g.modules[parent] if parent else self.model
            name, module = f"{parent}[{a}:{b}]", nn.Sequential(*list(seq)[a:b])
            module.dsprof_run = True  # replace_block puts these children back one by one
        self._record(name, module, chain, closed, tail_node)

    def _unowned_reason(self, chain: list[_Unit], nodes: set[fx.Node], where: str) -> str:
        """Why no module owns ``chain`` (its ``nodes``, inside module ``where``): specific where ``where``'s
        forward also concatenates the chain's input or normalises it before the first convolution
        (a pre-activation layer, as in DenseNet), else the general rule."""
        g = self.g
        first, last = chain[0].conv, chain[-1].out
        head = f"a chain of {len(chain)} convolutions ({first.name} .. {last.name})"
        extra = self.under[where] - nodes

        def beside(n: Any) -> bool:  # done by the module's own forward besides the chain (not by a child's)
            return isinstance(n, fx.Node) and n in extra and self._common([n, first])[-1] == where

        front: list[fx.Node] = []  # normalisation, activation, pass-through in front of the first convolution
        x = first.args[0]
        while beside(x) and (g.is_norm(x) or g.act_name(x) or g.is_pass(x)):
            front.append(x)
            x = x.args[0]
        cat = x if beside(x) and _target_name(x) in ("cat", "concat") else None
        shown = [n for n in reversed(front) if not g.is_pass(n)]
        pre = "+".join(type(g.module(n)).__name__ if n.op == "call_module" else str(g.act_name(n)) for n in shown)
        if not any(g.is_norm(n) for n in front):  # an activation alone in front is not a pre-activation layer
            pre = ""
        if cat is None and not pre:
            return (f"{head} is neither one module's whole forward nor a run of an nn.Sequential's children: wrap it "
                    "in its own nn.Module to merge it")
        does = [f"concatenates its inputs ({cat.name})"] if cat is not None else []
        if pre:
            does.append(f"applies {pre} before {first.target} (pre-activation{', as in DenseNet' if cat is not None else ''})")
        return (f"{head}: its module also {' and '.join(does)}, but a block starts at a convolution and is one module's "
                f"whole forward; move {first.target} .. {chain[-1].conv.target} into a module of their own to merge them")

    def _record(self, name: str, module: nn.Module, chain: list[_Unit], closed, tail_node: fx.Node | None) -> None:
        g = self.g
        units, act_names = [], []
        last_index = len(chain) - 1
        tail: nn.Module | None = None
        for i, u in enumerate(chain):
            act_module = u.act_in_norm
            act_name = None
            if u.act is not None:
                act_name = g.act_name(u.act)
                act_module = g.module(u.act) if u.act.op == "call_module" else _functional_act_module(u.act, act_name)  # type: ignore[arg-type]
            elif act_module is not None:
                act_name = _act_module_name(act_module)
            if closed is None and i == last_index:  # an open chain's last activation is its output's: kept
                tail, act_module, act_name = act_module, None, None
            units.append(Unit(
                g.module(u.conv), g.module(u.norm) if u.norm is not None else None,  # type: ignore[arg-type]
                act_module, u.act_in_norm is not None and act_module is not None, str(u.conv.target), act_name or "none",
            ))
            if act_name:
                act_names.append(act_name)
        shortcut = None
        x = chain[0].conv.args[0]
        out = chain[-1].out
        if closed is not None:
            add, path, _, x = closed
            shortcut = tuple(g.module(n) for n in path)
            out = add
            if tail_node is not None:
                tail = g.module(tail_node) if tail_node.op == "call_module" else _functional_act_module(tail_node, g.act_name(tail_node))  # type: ignore[arg-type]
                out = tail_node
        convs = tuple(ConvShape(u.conv.in_channels, u.conv.out_channels, u.conv.kernel_size[0], u.conv.stride[0], u.conv.groups) for u in units)
        styles = {_padding_style(u.conv) for u in units if u.conv.kernel_size[0] > 1} or {"symmetric"}
        if len(styles) > 1:
            self.refusals.append(Refusal(name, type(module).__name__, "mixed padding styles (symmetric and TF 'SAME')", chain[0].conv.name))
            return
        projection = bool(shortcut)  # anything on the skip path (a pooling one is refused by the merge)
        shape = chain[0].conv.args[0].meta.get("tensor_meta")  # type: ignore[union-attr]
        h, w = (int(shape.shape[-2]), int(shape.shape[-1])) if shape is not None else (1, 1)
        distinct = sorted(set(act_names))
        act = distinct[0] if distinct else "none"  # blocks with two kinds: the first name (alphabetical)
        spec = BlockSpec.from_convs(
            convs, padding=styles.pop(), residual=shortcut is not None, projection=projection, in_h=h, in_w=w, act=act,
        )
        self.blocks.append(Block(name, module, spec, tuple(units), shortcut, tail, x.name, out.name))  # type: ignore[union-attr]

    def _refuse_leftovers(self) -> None:
        """Modules with two or more convolutions (or linear layers) and no block in or around them, outermost
        first."""
        block_paths = []
        for b in self.blocks:
            run = run_of(b.name)
            if run is None:
                block_paths.append(b.name)
            else:  # a run covers its children, not its parent
                parent, a, z = run
                block_paths += [f"{parent}.{i}" if parent else str(i) for i in range(a, z)]

        def related(path: str) -> bool:
            for bp in block_paths:
                if bp == path or bp.startswith(path + ".") or path.startswith(bp + ".") or bp == "" or path == "":
                    return True
            return False

        reported: list[str] = list(self.refused_paths)  # refused blocks cover what is inside them
        chains = {r.name for r in self.refusals}  # a module already refused for an unowned chain: said once
        for path, module in self.g.modules.items():
            if not path or isinstance(module, _CONTAINERS) or self.convs_under[path] < 2 or related(path):
                continue
            if path in chains or any(r == "" or path == r or path.startswith(r + ".") for r in reported):
                continue
            inside = self.under[path]
            brk = next(((n, r, nm) for n, r, nm in self.breaks if n in inside), None)
            reason, node = (brk[1], brk[2]) if brk else ("its convolutions do not form a chain", path)
            self.refusals.append(Refusal(path, type(module).__name__, f"no mergeable chain: {reason}", node))
            reported.append(path)
        if not self.blocks and not self.refusals and self.convs_under[""] >= 2:  # the model as a whole
            n, reason, node = self.breaks[0] if self.breaks else (None, "its convolutions do not form a chain", "")
            self.refusals.append(Refusal("(model)", type(self.model).__name__, f"no mergeable chain: {reason}", node))


def discover_blocks(model: nn.Module, input_size: tuple[int, int] | None = None) -> Discovery:
    """Blocks and refusals of ``model``, found in its traced graph (see the module docstring).

    ``input_size`` is the model input (height, width) in pixels; default: the resolution the model was
    built for by `get_model`, else 224x224. Raises `GraphTraceError` when torch.fx cannot trace it.
    """
    gm = _trace(model)
    h, w = input_size or input_size_of(model)
    param = next(model.parameters(), None)
    x = torch.zeros(1, first_conv_in_channels(model), h, w, dtype=param.dtype if param is not None else None,
                    device=param.device if param is not None else None)
    was_training = model.training
    try:
        gm.eval()
        with torch.no_grad():
            ShapeProp(gm).propagate(x)
    finally:
        model.train(was_training)
    found = _Discovery(model, gm)
    found.run()
    return Discovery(found.blocks, found.refusals, gm)


# --------------------------------------------------------------------------- block surgery


def run_of(name: str) -> tuple[str, int, int] | None:
    """(parent path, a, b) of a block named as a run of an nn.Sequential's children ``parent[a:b]``, else None."""
    if not name.endswith("]") or "[" not in name:
        return None
    parent, rng = name[:-1].split("[")
    a, b = rng.split(":")
    return parent, int(a), int(b)


def block_module(model: nn.Module, name: str) -> nn.Module:
    """The module at a block's ``name`` in ``model`` (a run ``p[a:b]`` as an ``nn.Sequential`` of its children)."""
    run = run_of(name)
    if run is None:
        return model.get_submodule(name)
    parent, a, b = run
    seq = model.get_submodule(parent) if parent else model
    return nn.Sequential(*list(seq)[a:b])


def replace_block(model: nn.Module, name: str, new: nn.Module) -> None:
    """Put ``new`` where block ``name`` is, in place. A run ``p[a:b]``: ``new`` at ``a``, Identity after it;
    an ``nn.Sequential`` of the run's length puts its children back one by one (undoing a replacement)."""
    run = run_of(name)
    if run is None:
        from ..merge.fold import set_submodule  # local: merge imports models

        set_submodule(model, name, new)
        return
    parent, a, b = run
    seq = model.get_submodule(parent) if parent else model
    if isinstance(new, nn.Sequential) and len(new) == b - a and getattr(new, "dsprof_run", False):
        for i, child in enumerate(new):
            seq[a + i] = child
        return
    seq[a] = new
    for i in range(a + 1, b):
        seq[i] = nn.Identity()
