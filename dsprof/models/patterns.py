"""Reading the traced graph: units (convolution + BatchNorm + removable activation), what follows them,
what breaks a chain, and squeeze-excitation gates. No knowledge of modules' classes or ownership."""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
import torch.fx as fx
from torch import nn

from .leaves import _ACT_FUNCTIONS, _ACT_METHODS, _PASS_MODULES, act_module_name, is_pass_function
from .padding import padding_style

_ADD = {operator.add, operator.iadd, torch.add}
_MUL = {operator.mul, operator.imul, torch.mul}


def call_act_name(node: fx.Node) -> str | None:
    """The removable activation a function or method node computes (``F.relu``, ``x.relu()``), else None."""
    if node.op == "call_function":
        return _ACT_FUNCTIONS.get(node.target)  # type: ignore[arg-type]
    if node.op == "call_method":
        return _ACT_METHODS.get(node.target)  # type: ignore[arg-type]
    return None


def functional_act_module(node: fx.Node, name: str) -> nn.Module:
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


class GraphView:
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
            return act_module_name(self.module(node))  # type: ignore[arg-type]
        return call_act_name(node)

    def is_pass(self, node: fx.Node) -> bool:
        if node.op == "call_module":
            return isinstance(self.module(node), _PASS_MODULES)
        return node.op == "call_function" and is_pass_function(node.target)

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
class UnitNodes:
    conv: fx.Node
    nodes: list[fx.Node]
    norm: fx.Node | None = None
    act: fx.Node | None = None  # activation node (None: no activation, or it lives in the norm)
    act_in_norm: nn.Module | None = None
    bad: str | None = None  # why this convolution cannot be part of a block
    concat: int = 0  # > 0: the unit's output is cat([its input, conv output])[:, :concat] (a Ghost module)
    feeds: "UnitNodes | None" = None  # the concatenating unit that reads this unit's output beside its concatenation

    @property
    def out(self) -> fx.Node:
        return self.nodes[-1]

    @property
    def has_act(self) -> bool:
        return self.act is not None or self.act_in_norm is not None


#: Subclasses of nn.Conv2d whose own forward only pads (TensorFlow 'SAME', `dsprof.models.padding`) and then applies the
#: stored weight: they merge as any convolution.
PADDING_ONLY_CONVS = ("Conv2dSame", "Conv2dSameExport")


def conv_problem(conv: nn.Conv2d) -> str | None:
    kind = type(conv)
    if kind.forward is not nn.Conv2d.forward and kind.__name__ not in PADDING_ONLY_CONVS:
        # e.g. timm's StdConv2d / ScaledStdConv2d (NFNet, BiT): weights standardised in forward, which merging the
        # stored weight would silently get wrong
        return (f"{kind.__name__} computes its own forward (e.g. standardises its weights): dsprof merges convolutions "
                "that apply their stored weight (nn.Conv2d, timm's Conv2dSame)")
    if conv.dilation != (1, 1):
        return f"dilated convolution (dilation {conv.dilation}) is not merged by dsprof"
    if conv.padding_mode != "zeros":
        return f"padding mode {conv.padding_mode!r}: only zero padding merges exactly"
    if conv.kernel_size[0] != conv.kernel_size[1] or conv.stride[0] != conv.stride[1]:
        return f"non-square kernel or stride {conv.kernel_size}/{conv.stride}"
    if padding_style(conv) is None:
        return f"padding {conv.padding} for kernel {conv.kernel_size[0]} is neither symmetric nor TF 'SAME'"
    return None


def find_units(g: GraphView) -> list[UnitNodes]:
    def advance(unit: UnitNodes) -> fx.Node | None:
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
        unit = UnitNodes(node, [node])
        unit.bad = conv_problem(g.module(node))  # type: ignore[arg-type]
        nxt = advance(unit)
        if nxt is not None and g.is_norm(nxt):
            unit.norm = nxt
            unit.nodes.append(nxt)
            inner = getattr(g.module(nxt), "act", None)
            if inner is not None and not isinstance(inner, nn.Identity):
                if act_module_name(inner) is None:
                    unit.bad = f"{type(inner).__name__} inside {nxt.target} is not an activation dsprof can remove"
                unit.act_in_norm = inner
            nxt = advance(unit)
        if unit.act_in_norm is None and nxt is not None and g.act_name(nxt) is not None:
            unit.act = nxt
            unit.nodes.append(nxt)
            advance(unit)
        units.append(unit)
    by_conv = {u.conv: u for u in units}
    for unit in units:
        found = ghost_concat(g, unit, by_conv)
        if found is not None:
            cheap, tail, keep = found
            unit.feeds, cheap.concat = cheap, keep
            cheap.nodes.extend(tail)
            advance(cheap)
    return units


def _channel_slice(index) -> int | None:
    """``n`` when ``index`` (a getitem's) is ``[:, :n]`` on an NCHW tensor (trailing full slices or ``...`` allowed)."""
    whole = slice(None, None, None)
    if not isinstance(index, tuple) or len(index) < 2 or index[0] != whole:
        return None
    channels = index[1]
    if not isinstance(channels, slice) or channels.start not in (None, 0) or channels.step not in (None, 1):
        return None
    if not isinstance(channels.stop, int) or channels.stop < 1:
        return None
    rest = index[2:]
    if len(rest) > 2 or not all(r == whole or r is Ellipsis for r in rest):
        return None
    return channels.stop


def ghost_concat(g: GraphView, unit: UnitNodes, by_conv: dict[fx.Node, UnitNodes]) -> tuple[UnitNodes, list[fx.Node], int] | None:
    """A Ghost module after ``unit`` (its primary convolution): (the cheap unit, the concatenation's nodes, the
    channels kept) when ``unit``'s output x is read by exactly one convolution unit and by ``cat([x, cheap(x)], dim=1)``,
    the cheap unit's output is read by that concatenation alone, the cheap convolution keeps the map's size (stride
    1, odd kernel padded by half), and the concatenation is followed by nothing or by a channel slice ``[:, :n]``.
    Linear once the activations go: ``[x; D x]`` is one convolution (`dsprof.merging.algebra.concat_input`)."""
    users = list(unit.out.users)
    if len(users) != 2:
        return None
    cat = next((u for u in users if target_name(u) in ("cat", "concat")), None)
    cheap = next((by_conv.get(u) for u in users if u is not cat), None)
    if cat is None or cheap is None or cheap.bad or list(cheap.out.users) != [cat]:
        return None
    tensors = cat.args[0] if cat.args else cat.kwargs.get("tensors")
    dim = cat.args[1] if len(cat.args) > 1 else cat.kwargs.get("dim", 0)
    if not isinstance(tensors, (list, tuple)) or list(tensors) != [unit.out, cheap.out] or dim not in (1, -3):
        return None
    conv = g.module(cheap.conv)
    k = conv.kernel_size[0]  # type: ignore[union-attr]
    if conv.stride != (1, 1) or k % 2 == 0 or padding_style(conv) != "symmetric":  # type: ignore[union-attr,arg-type]
        return None
    total = conv.in_channels + conv.out_channels  # type: ignore[union-attr]
    tail = [cat]
    users = list(cat.users)
    if len(users) == 1 and users[0].op == "call_function" and target_name(users[0]) == "getitem":
        n = _channel_slice(users[0].args[1])
        if n is not None:
            tail.append(users[0])
            total = min(total, n)
    return cheap, tail, total


def break_reason(g: GraphView, out: fx.Node) -> tuple[str, str]:
    """Why a chain cannot continue after ``out``: (reason, node name)."""
    users = list(out.users)
    while len(users) == 1 and g.is_pass(users[0]):
        users = list(users[0].users)
    if len(users) != 1:
        gated = _gated_concat(g, users)
        if gated is not None:
            return gated
        names = ", ".join(u.name for u in users[:4])
        return f"tensor {out.name} is read {len(users)} times ({names})", out.name
    user = users[0]
    if g.is_mul(user):
        return f"multiplication at {user.name}", user.name
    target = target_name(user)
    if target in ("cat", "concat", "stack"):
        return f"concatenation at {user.name}", user.name
    if target in ("split", "chunk", "getitem", "unbind"):
        return f"split at {user.name}", user.name
    return f"followed by {g.describe(user)} ({user.name})", user.name


def _gated_concat(g: GraphView, users: list[fx.Node]) -> tuple[str, str] | None:
    """Where a tensor is read by a convolution and a concatenation (a Ghost module) whose result, or a channel slice of
    it, is multiplied by another tensor (GhostNetV2's decoupled attention gate): that reason and the multiplication's
    node; else None."""
    cat = next((u for u in users if target_name(u) in ("cat", "concat")), None)
    if cat is None or len(users) != 2:
        return None
    node = cat
    for _ in range(2):  # the concatenation, then a channel slice of it; reads of its shape alone do not count
        readers = [u for u in node.users if not _reads_shape(u)]
        if len(readers) != 1:
            return None
        node = readers[0]
        if g.is_mul(node):
            return (f"a Ghost concatenation ({cat.name}) multiplied by another tensor at {node.name} (an attention "
                    "gate, as GhostNetV2's)"), node.name
        if target_name(node) != "getitem":
            return None
    return None


def _reads_shape(node: fx.Node) -> bool:
    """Whether ``node`` reads only a tensor's shape (``x.shape``, ``x.size()``), not its values."""
    return (node.op == "call_function" and target_name(node) == "getattr" and node.args[1:2] == ("shape",)) or \
        (node.op == "call_method" and node.target in ("size", "dim"))


def target_name(node: fx.Node) -> str:
    return str(getattr(node.target, "__name__", node.target))


def se_gates(g: GraphView) -> list[tuple[fx.Node, fx.Node]]:
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


