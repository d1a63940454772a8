"""Which module owns a chain: blocks from the chains of the traced graph (`discover_blocks` runs this).

A chain of two or more convolutions is a block owned by one module whose forward is exactly the chain
(the deepest such module that is not a plain container), or by a run of consecutive children of an
``nn.Sequential`` (``parent[a:b]``); a chain that runs through several modules is split at module
boundaries first. A chain (or piece) that no module owns is a block all the same, named after its first
and last convolutions (``conv1..conv3``): graph surgery (`dsprof.models.surgery.own_chains`) gathers it
into one module when it is replaced. Modules with two or more convolutions left without a block are
refused with the reason that broke their chains.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import torch.fx as fx
from torch import nn

from .blockspec import BlockSpec, ConvShape
from .leaves import act_module_name
from .padding import conv_padding, padding_style, tf_same_chain_problem
from .patterns import GraphView, UnitNodes, break_reason, find_units, functional_act_module, se_gates
from .records import Block, ChainSite, Refusal, Unit
from .registry import REPARAMETERIZE_METHODS, model_identity
from .surgery import Chain, build_chain, run_of, signature

_CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)


class _Discovery:
    def __init__(self, model: nn.Module, gm: fx.GraphModule) -> None:
        self.g = GraphView(gm, model)
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
        self.break_convs: list[fx.Node] = []  # the convolution of each break's unit
        self.refused_paths: set[str] = set()
        self.refused_around: set[str] = set()  # the innermost module around each chain `_record` refused
        self.se_paths: dict[str, fx.Node] = {}  # module holding a squeeze-excitation gate -> its multiplication
        self.partial_paths: set[str] = set()  # such modules with a block before the gate

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
            if path is None or not path[len(prefix):].isdigit():  # a Sequential with named children: no run
                return None
            index.append(int(path[len(prefix):]))
        a, b = min(index), max(index) + 1
        covered = set().union(*(self.under[f"{prefix}{i}"] for i in range(a, b)))
        return (parent, a, b) if covered == nodes else None

    # ---- chains
    def run(self) -> None:
        g = self.g
        units = find_units(g)
        by_conv = {u.conv: u for u in units}
        self._taint_se(units)
        nxt: dict[UnitNodes, UnitNodes] = {}
        for u in units:
            if u.bad:
                self.breaks.append((u.conv, u.bad, u.conv.name))
                self.break_convs.append(u.conv)
                continue
            user = g.single_user(u.out)
            v = by_conv.get(user) if user is not None else u.feeds  # a Ghost module: the cheap unit beside the cat
            if v is not None and not v.bad:
                nxt[u] = v
            else:
                reason, name = break_reason(g, u.out)
                self.breaks.append((u.out, reason, name))
                self.break_convs.append(u.conv)
        has_prev = set(nxt.values())
        for u in units:
            if u.bad or u in has_prev:
                continue
            chain = [u]
            while chain[-1] in nxt:
                chain.append(nxt[chain[-1]])
            self._chain(chain)
        first_conv = {str(n.target): g.order[n] for n in g.nodes if g.is_conv(n)}
        # a chain that is another block's skip path (GhostNet's depthwise + 1x1) merges with that block, not alone
        on_skips = {id(m) for b in self.blocks for m in b.shortcut or ()}
        self.blocks = [b for b in self.blocks if not all(id(u.conv) in on_skips for u in b.units)]
        self.blocks.sort(key=lambda b: first_conv[b.units[0].conv_name])
        self._refuse_bare_gates()
        self._refuse_leftovers()

    def _taint_se(self, units: list[UnitNodes]) -> None:
        """Squeeze-excitation: the gate's own convolutions stay (they compute the gate), and so does the multiplication
        by it; the chain before the gate (an MBConv's expansion and depthwise) is a block like any other, and the
        module holding the gate is refused only where no such chain is left in it (`_refuse_bare_gates`)."""
        g = self.g
        for mul, x in se_gates(g):
            gate = [a for a in mul.all_input_nodes if a is not x]
            inside, todo = set(), list(gate)
            while todo:  # the gate's nodes: from the multiplication back to the gated tensor
                n = todo.pop()
                if n is x or n in inside or g.order[n] < g.order[x]:
                    continue
                inside.add(n)
                todo.extend(n.all_input_nodes)
            for u in units:
                if u.conv in inside and not u.bad:
                    u.bad = f"inside the squeeze-excitation gate of {mul.name}"
            common = self._common([mul, x])
            plain = [p for p in common if not isinstance(g.modules.get(p), _CONTAINERS)]
            if plain and plain[-1] not in self.se_paths:
                self.se_paths[plain[-1]] = mul

    def _refuse_bare_gates(self) -> None:
        """A module holding a squeeze-excitation gate and no block: refused, with the gate as the reason."""
        in_blocks = {u.conv_name for b in self.blocks for u in b.units}
        for path, mul in self.se_paths.items():
            convs = {str(n.target) for n in self.under[path] if self.g.is_conv(n)}
            if convs & in_blocks:  # the chain before the gate merges; the gate and what it multiplies stay, unreported
                self.partial_paths.add(path)
                continue
            if path in self.refused_paths:
                continue
            self.refused_paths.add(path)
            reason = (
                f"squeeze-excitation: {mul.name} multiplies the features by a gate computed from them, and no chain of "
                "two convolutions precedes the gate, so nothing here merges; its activations stay"
            )
            self.refusals.append(Refusal(path, self._type(path), reason, mul.name))

    def _residual(self, chain: list[UnitNodes]) -> tuple[fx.Node, list[fx.Node], fx.Node | None, fx.Node] | None:
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

    def _chain(self, chain: list[UnitNodes]) -> None:
        closed = self._residual(chain)
        if closed is not None:
            self._candidate(chain, closed)
            return
        self._segment(chain)

    def _segment(self, chain: list[UnitNodes]) -> None:
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
        grouped: list[list[UnitNodes]] = []
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

    def _candidate(self, chain: list[UnitNodes], closed) -> None:
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
        if closed is None and len(chain) >= 4 and (owner is None or isinstance(g.modules.get(owner), _CONTAINERS)):
            for piece in plain_pairs(chain):  # a plain chain that no block module holds (VGG, RepVGG, MobileOne)
                self._candidate(piece, None)
            return
        if owner is None and run is None:
            self._graph_chain(chain, closed)
            return
        if owner is not None and owner in self.refused_paths:
            return
        if owner is not None:  # a Chain that surgery installed keeps its block's name
            module = g.modules[owner]
            name = module.block_name if isinstance(module, Chain) and owner else owner
        else:
            parent, a, b = run  # type: ignore[misc]
            seq = g.modules[parent] if parent else self.model
            name, module = f"{parent}[{a}:{b}]", nn.Sequential(*list(seq)[a:b])
            module.dsprof_run = True  # replace_block puts these children back one by one
        self._record(name, module, chain, closed, tail_node)

    def _graph_chain(self, chain: list[UnitNodes], closed) -> None:
        """A chain no module owns: a block named after its first and last convolutions, whose module is a
        `Chain` over the model's own modules (graph surgery installs it) and whose site says where it lies."""
        g = self.g
        add, path, tail_node = (closed[0], closed[1], closed[2]) if closed is not None else (None, [], None)
        out = tail_node or add or chain[-1].out
        main = [chain[0].conv]
        while main[-1] is not out:  # every node before the output has one consumer, the next one
            users = list(main[-1].users)
            if len(users) != 1:  # said as the innermost module around the chain (a Ghost module), once
                reason, node = break_reason(g, main[-1])
                where = next((p for p in reversed(self._common([u.conv for u in chain]))
                              if p and not isinstance(g.modules[p], _CONTAINERS)), "")
                around = g.modules[where] if where else self.model
                if not (where and any(r.name == where for r in self.refusals)):
                    self.refusals.append(Refusal(where or "(model)", type(around).__name__,
                                                 f"no mergeable chain: {reason}", node))
                return
            main.append(users[0])
        opened = {""}
        for node in [*main, *path]:
            opened.update(p for p in g.stack(node) if not (node.op == "call_module" and p == node.target))
        name = f"{chain[0].conv.target}..{chain[-1].conv.target}"
        module = build_chain(self.model, name, main, add, path)
        site = ChainSite(tuple(sorted(opened)), tuple(map(signature, main)), tuple(map(signature, path)))
        self._record(name, module, chain, closed, tail_node, site)

    def _refuse(self, name: str, module: nn.Module, chain: list[UnitNodes], reason: str) -> None:
        """Refuse the chain ``name``: said once, as the chain, and not again as the module right around it (DLA's
        stride-2 basic block around a chain whose skip path cannot merge)."""
        self.refusals.append(Refusal(name, type(module).__name__, reason, chain[0].conv.name))
        self.refused_around.add(self._common([u.conv for u in chain])[-1])

    def _record(self, name: str, module: nn.Module, chain: list[UnitNodes], closed, tail_node: fx.Node | None,
                site: ChainSite | None = None) -> None:
        g = self.g
        units, act_names = [], []
        last_index = len(chain) - 1
        tail: nn.Module | None = None
        for i, u in enumerate(chain):
            act_module = u.act_in_norm
            act_name = None
            if u.act is not None:
                act_name = g.act_name(u.act)
                act_module = g.module(u.act) if u.act.op == "call_module" else functional_act_module(u.act, act_name)  # type: ignore[arg-type]
            elif act_module is not None:
                act_name = act_module_name(act_module)
            if closed is None and i == last_index:  # an open chain's last activation is its output's: kept
                tail, act_module, act_name = act_module, None, None
            units.append(Unit(
                g.module(u.conv), g.module(u.norm) if u.norm is not None else None,  # type: ignore[arg-type]
                act_module, u.act_in_norm is not None and act_module is not None, str(u.conv.target), act_name or "none",
                u.concat,
            ))
            if act_name:
                act_names.append(act_name)
        shortcut = None
        x = chain[0].conv.args[0]
        out = chain[-1].out
        if closed is not None:
            add, path, _, x = closed
            # pass-through modules on the skip path (timm's nn.Identity downsample) compute nothing: an identity skip
            shortcut = tuple(g.module(n) for n in path if not g.is_pass(n))
            out = add
            if tail_node is not None:
                tail = g.module(tail_node) if tail_node.op == "call_module" else functional_act_module(tail_node, g.act_name(tail_node))  # type: ignore[arg-type]
                out = tail_node
        convs = tuple(ConvShape(u.conv.in_channels, u.conv.out_channels, u.conv.kernel_size[0], u.conv.stride[0], u.conv.groups,
                                u.concat) for u in units)
        styles = {padding_style(u.conv) for u in units if u.conv.kernel_size[0] > 1} or {"symmetric"}
        if len(styles) > 1:
            self._refuse(name, module, chain, "mixed padding styles (symmetric and TF 'SAME')")
            return
        same = tf_same_chain_problem([(conv_padding(u.conv), u.conv.kernel_size, u.conv.stride) for u in units])
        if same:  # e.g. timm's tf_ MobileNetV3: the stem's stride-2 convolution chained into a stride-2 depthwise
            self._refuse(name, module, chain, f"{same}, so its activations stay")
            return
        if shortcut and shortcut_parts(shortcut) is None:
            # e.g. ResNet-D's average pooling before the 1x1 convolution: neither merged nor timed linear
            kinds = " -> ".join(type(m).__name__ if m is not None else "a function" for m in shortcut)
            self._refuse(name, module, chain, f"its skip path ({kinds}) is neither the identity nor a convolution with "
                         "an optional BatchNorm, so the block cannot merge into one convolution; its activations stay")
            return
        projection = bool(shortcut)  # convolutions (and BatchNorms) on the skip path
        skip = tuple(ConvShape(m.in_channels, m.out_channels, m.kernel_size[0], m.stride[0], m.groups)
                     for m in (shortcut_parts(shortcut) or () if shortcut else ()) if isinstance(m, nn.Conv2d))
        shape = chain[0].conv.args[0].meta.get("tensor_meta")  # type: ignore[union-attr]
        h, w = (int(shape.shape[-2]), int(shape.shape[-1])) if shape is not None else (1, 1)
        distinct = sorted(set(act_names))
        act = distinct[0] if distinct else "none"  # blocks with two kinds: the first name (alphabetical)
        spec = BlockSpec.from_convs(
            convs, padding=styles.pop(), residual=shortcut is not None, projection=projection, in_h=h, in_w=w, act=act,
            skip=skip,
        )
        readers = {chain[0].conv}  # of the block's input: its first convolution, and its addition and skip path
        if closed is not None:
            readers |= {closed[0], *closed[1]}
        shared = any(user not in readers for user in x.users)  # type: ignore[union-attr]
        self.blocks.append(Block(name, module, spec, tuple(units), shortcut, tail, x.name, out.name, site,  # type: ignore[union-attr]
                                 shared))

    def _refuse_leftovers(self) -> None:
        """Modules with two or more convolutions (or linear layers) and no block in or around them, outermost
        first."""
        block_paths = []
        in_chains = {u.conv_name for b in self.blocks if b.site is not None for u in b.units}
        for b in self.blocks:
            run = run_of(b.name)
            if b.site is not None:  # a chain no module owns: it covers the modules all of whose convolutions it holds
                continue
            if run is None:
                block_paths.append(b.name)
            else:  # a run covers its children, not its parent
                parent, a, z = run
                block_paths += [f"{parent}.{i}" if parent else str(i) for i in range(a, z)]

        def related(path: str) -> bool:
            convs = [n for n in self.under[path] if self.g.is_conv(n)]
            if len(convs) == self.convs_under[path] and all(str(n.target) in in_chains for n in convs):
                return True
            for bp in block_paths:
                if bp == path or bp.startswith(path + ".") or path.startswith(bp + ".") or bp == "" or path == "":
                    return True
            # a module around a gated block whose chain before the gate is a block (RegNetY's stages)
            return any(pp.startswith(path + ".") for pp in self.partial_paths)

        reported: list[str] = [*self.refused_paths, *self.partial_paths]  # they cover what is inside them
        chains = {r.name for r in self.refusals}  # a module already refused (mixed padding, skip path): said once,
        for path, module in self.g.modules.items():  # with the modules inside it (a Ghost bottleneck's Ghost modules)
            if not path or isinstance(module, _CONTAINERS) or self.convs_under[path] < 2 or related(path):
                continue
            if path in self.refused_around:  # the module right around a refused chain: said as the chain
                continue
            if any(path == r or path.startswith(r + ".") for r in chains if r and r != "(model)"):
                continue
            if any(r == "" or path == r or path.startswith(r + ".") for r in reported):
                continue
            inside = self.under[path]
            brk = next(((n, r, nm) for n, r, nm in self.breaks if n in inside), None)
            reason, node = (brk[1], brk[2]) if brk else ("its convolutions do not form a chain", path)
            self.refusals.append(Refusal(path, type(module).__name__, f"no mergeable chain: {reason}", node))
            reported.append(path)

    def fusable(self) -> list[str]:
        """The types of the modules with train-time branches (a method of `REPARAMETERIZE_METHODS`, what timm's
        `reparameterize_model` calls) at or around a refused part, where the model is not re-parameterised yet: the
        parts `reparameterize=True` may turn into blocks (RepGhostNet's Ghost modules are refused as built, a tensor
        read by both branches). Not one inside a refused part (RepViT's blocks are refused for their
        squeeze-excitation, whatever their depthwise branches fuse into), nor one without a convolution (RepViT's
        two-headed classifier), nor the model itself. Empty where nothing is refused or nothing fuses."""
        if (model_identity(self.model) or ("", {}))[1].get("reparameterize", False):
            return []
        refused = [r.name for r in self.refusals]
        types: list[str] = []
        for path, module in self.model.named_modules():
            if not path or not any(hasattr(module, a) for a in REPARAMETERIZE_METHODS):
                continue
            if not any(isinstance(m, nn.Conv2d) for m in module.modules()):  # RepViT's head: linear branches
                continue
            if any(name == path or name.startswith(path + ".") for name in refused) and type(module).__name__ not in types:
                types.append(type(module).__name__)
        return types

    def nothing_to_merge(self, fusable: Sequence[str]) -> str | None:
        """Why the model has no block, in one line that fits it (None when it has one): no convolution, one, none
        followed by another, or every candidate refused (with ``fusable``, `fusable`'s answer, the offer to
        re-parameterise). `dsprof blocks`, `measure` and `plan` all say this."""
        if self.blocks:
            return None
        convs = [n for n in self.g.nodes if self.g.is_conv(n)]
        if self.refusals:
            n, first = len(self.refusals), self.refusals[0]
            name = first.name or "(model)"
            which = f"the one candidate, {name}, is refused" if n == 1 else f"all {n} candidates are refused, the first, {name}"
            offer = f"; its train-time branches {FUSE_OFFER}" if fusable else ""
            return f"no block DepthShrinker can merge: {which}: {first.reason}{offer}"
        if not convs:
            return "no convolution: nothing for DepthShrinker to merge"
        if len(convs) == 1:
            return f"one convolution ({convs[0].target}) and no other: nothing for DepthShrinker to merge"
        why = f" (convolution {self.break_convs[0].target}: {self.breaks[0][1]})" if self.breaks else ""
        return f"no two convolutions in a row{why}: nothing for DepthShrinker to merge"


#: What a model with train-time branches next to a refused part is offered (`_Discovery.fusable`); the command line
#: prints the parameter as its option.
FUSE_OFFER = "fuse into one convolution each with `reparameterize=True`"


def plain_pairs(chain: list) -> list[list]:
    """A plain chain of four or more convolutions that no block module holds, cut into the units DepthShrinker removes
    one activation from: consecutive pairs, the last three together when their number is odd (so that every
    activation but the chain's last stays removable). A chain of two or three is one block as it is."""
    n = len(chain)
    starts = list(range(0, n - 1, 2))[: n // 2]
    return [chain[a:b] for a, b in zip(starts, [*starts[1:], n])]


def shortcut_parts(shortcut) -> list | None:
    """A skip path's convolutions, each with an optional BatchNorm, the form that merges with its chain
    (`dsprof.merging.block.folded_chain`): one convolution, or several where every one after the first is 1x1,
    stride 1 and unpadded (GhostNet's depthwise kxk then 1x1), so that the path as built is the composite of its
    convolutions exactly. None for any other path. Identities (a BatchNorm already folded) drop out."""
    parts = [m for m in shortcut if not isinstance(m, nn.Identity)]
    if not parts or not isinstance(parts[0], nn.Conv2d):
        return None
    for i, m in enumerate(parts[1:], 1):
        if isinstance(m, nn.BatchNorm2d) and type(parts[i - 1]) is not nn.BatchNorm2d:
            continue
        if type(m) is not nn.Conv2d or m.kernel_size != (1, 1) or m.stride != (1, 1) or any(m.padding) or m.groups != 1:
            return None
    return parts

