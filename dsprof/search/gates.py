"""Activation gates: one learnable score per block, the top-k blocks keep their activations.

Paper Sec. 4.2: a gated activation computes ``m * act(x) + (1 - m) * x`` with a binary ``m`` that is
1 for the ``k`` blocks of highest score and 0 for the others (forward), while the gradient of ``m``
passes straight through to the real-valued score (backward). The activations of one block share its
score (both activations of an inverted residual block go or stay together). Only the blocks that
`find_blocks` reports are gated: the stem, the head and anything between blocks keep their activations.
k counts the blocks with a removable activation (`dsprof.merging.partial.with_acts`, as the planner's k): a block
without one (EfficientNet-B0's last) has a score but is never one of the top k; its mask entry is 0 (linearised,
which loses nothing: the merge rule merges it or not by price, as the planner does).

    gated = gate_model(model, keep=7)     # a copy; the scores are gated.gates.scores
    logits = gated(images)                # the mask is recomputed at every forward pass
    gated.gates.keep()                    # (1, 0, 0, 1, ...): the plan's keep list
"""

from __future__ import annotations

import copy
from typing import Sequence

import torch
from torch import nn

from ..errors import UsageError
from ..merging.partial import with_acts
from ..models import Block, find_blocks, input_size_of, own_chains, replace_block
from ..planning.front import resolve_k  # one meaning of --keep for plan and search

__all__ = [
    "ActivationGates",
    "GatedActivation",
    "GatedBlock",
    "GatedModel",
    "annealed_k",
    "counted_flags",
    "gate_model",
    "resolve_k",
    "runaway_spread",
    "ungate",
]


def counted_flags(counted: Sequence[bool] | None, n: int) -> tuple[bool, ...]:
    """One flag per block of ``n``: whether k counts it (the search passes `dsprof.merging.partial.with_acts`, the
    blocks with a removable activation, as the planner's k); None: every block. Another length is refused in one
    line."""
    flags = tuple(bool(c) for c in counted) if counted is not None else (True,) * n
    if len(flags) != n:
        raise UsageError(f"{len(flags)} counted flags for {n} blocks")
    return flags


def annealed_k(step: int, anneal_steps: int, n_blocks: int, k: int) -> int:
    """The number of kept blocks at ``step``: all ``n_blocks`` (those k counts) at step 0, falling linearly to ``k``
    at ``anneal_steps`` (and ``k`` from then on, or throughout when ``anneal_steps`` is 0)."""
    if anneal_steps <= 0 or step >= anneal_steps:
        return k
    return int(round(n_blocks - (n_blocks - k) * step / anneal_steps))


def runaway_spread(score_init: float) -> float:
    """The score spread (max - min) above which the search warns that the scores ran away."""
    return 10.0 * max(1.0, abs(score_init))


class ActivationGates(nn.Module):
    """The scores of the gated blocks and the binary top-k mask made from them.

    ``scores`` (one per block, in `find_blocks` order) are a parameter; `refresh` computes the mask of
    the current forward pass: exactly ``k`` ones, straight-through gradient to ``scores``. ``counted`` (one per
    block; None: all): the blocks that can be among the k (`with_acts`: those with a removable activation); ``k`` (a
    count or a fraction, `resolve_k`) is resolved against their number, and a block not counted is never kept.

    Two options keep the scores a ranking rather than a blow-up (issue #13):
    ``normalize``: the straight-through part of the scores' gradient is divided by its largest absolute
    entry (each step moves the most affected score by the learning rate, whatever the loss's scale; the
    decay term's gradient is left as it is). ``bound``: `clamp_` (called after each optimiser step)
    re-centres the scores on ``init`` (the mask depends on their order only, and a shift common to all
    blocks says nothing about which matters) and clamps them into [init - bound, init + bound], so that a
    block switched off can still come back; with ``bound <= init`` the scores stay non-negative and the
    L1 decay always pulls them down. ``grad_scale``: the loss scale of a mixed-precision gradient scaler
    (set before each step), so that the normalised gradient is 1 after the scaler unscales it.
    """

    def __init__(self, names: list[str], k: int | float, init: float = 1.0, *, normalize: bool = False,
                 bound: float | None = None, counted: Sequence[bool] | None = None) -> None:
        super().__init__()
        self.names = tuple(names)
        self.counted = counted_flags(counted, len(self.names))
        self.k = resolve_k(k, self.n_counted)
        self.normalize = normalize
        self.bound = bound
        self.init = float(init)
        self.grad_scale = 1.0
        self.scores = nn.Parameter(torch.full((len(names),), float(init)))
        self.current: torch.Tensor | None = None
        self.current_on: list[bool] = []

    @property
    def n_counted(self) -> int:
        """The number of blocks k counts (``counted``)."""
        return sum(self.counted)

    def hard_mask(self) -> torch.Tensor:
        """The binary mask of the current scores (no gradient): 1 for the k highest scores of the counted blocks
        (ties: the earlier block), exactly k ones; 0 for a block not counted."""
        s = self.scores.detach()
        mask = torch.zeros_like(s)
        if self.k:  # a block not counted ranks last (k is at most the counted blocks' number)
            ranked = s
            if not all(self.counted):
                ranked = s.clone()
                ranked[[i for i, c in enumerate(self.counted) if not c]] = float("-inf")
            mask[torch.argsort(-ranked, stable=True)[: self.k]] = 1.0
        return mask

    def refresh(self) -> torch.Tensor:
        """Compute and store the mask for this forward pass: value ``hard_mask()`` exactly,
        gradient the identity to ``scores`` (straight-through estimator; normalised with ``normalize``)."""
        s = self.scores
        if self.normalize and s.requires_grad and torch.is_grad_enabled():
            s = _MaxNormGrad.apply(s, self.grad_scale)
        hard = self.hard_mask()
        self.current_on = [bool(v) for v in hard.tolist()]  # one host read per step: lets gates skip work
        self.current = hard + (s - s.detach())
        return self.current

    @torch.no_grad()
    def clamp_(self) -> None:
        """With a bound: re-centre the scores on ``init`` and clamp them into [init - bound, init + bound].
        Non-finite scores raise."""
        if not torch.isfinite(self.scores).all():
            raise FloatingPointError(f"gate scores are not finite: {self.scores.tolist()}; lower the score learning rate")
        if self.bound is not None:
            self.scores.add_(self.init - self.scores.mean())
            self.scores.clamp_(self.init - self.bound, self.init + self.bound)

    def spread(self) -> float:
        """max - min of the scores: how far apart the ranking has pushed them."""
        s = self.scores.detach()
        return float(s.max() - s.min()) if s.numel() else 0.0

    def keep(self) -> tuple[int, ...]:
        """The plan's keep list: 1 for the blocks whose activations the mask keeps."""
        return tuple(int(v) for v in self.hard_mask().tolist())

    def ranking(self) -> list[int]:
        """Block indices from the most to the least important (highest score first; ties by index)."""
        s = self.scores.detach().tolist()
        return sorted(range(len(s)), key=lambda i: (-s[i], i))

    def extra_repr(self) -> str:
        return (f"blocks={len(self.names)}, counted={self.n_counted}, k={self.k}, normalize={self.normalize}, "
                f"bound={self.bound}")


class _MaxNormGrad(torch.autograd.Function):
    """The identity forward; backward rescales the gradient to largest absolute entry ``scale`` (0 stays 0)."""

    @staticmethod
    def forward(ctx, s: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        return s.view_as(s)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        peak = grad.abs().max().clamp_min(torch.finfo(grad.dtype).tiny)  # no host read
        return grad / peak * ctx.scale, None  # exactly grad / peak at scale 1


class _GatedClamp(torch.autograd.Function):
    """``m * clamp(x, lo, hi) + (1 - m) * x`` for a binary ``m`` whose value (``on``) is known: the forward
    pass is the clamp or nothing, the backward pass the clamp's gradient (or the identity) for ``x`` and
    the straight-through ``sum(grad * (clamp(x) - x))`` for ``m``. Same numbers as the generic lerp form,
    less memory traffic (ReLU, ReLU6, Hardtanh)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, m: torch.Tensor, on: bool, lo: float, hi: float) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.on, ctx.lo, ctx.hi = on, lo, hi
        return x.clamp(lo, hi) if on else x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (x,) = ctx.saved_tensors
        grad_m = None
        if ctx.needs_input_grad[1]:  # summed in float32 at least (float16 under autocast)
            grad_m = torch.sum(grad * (x.clamp(ctx.lo, ctx.hi) - x), dtype=torch.promote_types(grad.dtype, torch.float32))
        grad_x = torch.ops.aten.hardtanh_backward(grad, x, ctx.lo, ctx.hi) if ctx.on else grad
        return grad_x, grad_m, None, None, None


def _clamp_range(act: nn.Module) -> tuple[float, float] | None:
    if type(act) is nn.ReLU6:
        return (0.0, 6.0)
    if type(act) is nn.ReLU:
        return (0.0, float("inf"))
    if type(act) is nn.Hardtanh:
        return (float(act.min_val), float(act.max_val))
    return None


class GatedActivation(nn.Module):
    """``m * act(x) + (1 - m) * x`` with ``m`` the gate of block ``index``."""

    def __init__(self, act: nn.Module, gates: ActivationGates, index: int) -> None:
        super().__init__()
        self.act = act
        self.index = index
        self._gates = [gates]  # a plain list: the gates are registered once, on the GatedModel
        self._clamp = _clamp_range(act)

    @property
    def gates(self) -> ActivationGates:
        return self._gates[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = self.gates.current
        if mask is None:
            raise RuntimeError("the gates have no mask: call the GatedModel (it refreshes the mask), not the inner model")
        on = self.gates.current_on[self.index]
        if not torch.is_grad_enabled():
            return self.act(x) if on else x
        if self._clamp is not None:
            return _GatedClamp.apply(x, mask[self.index], on, *self._clamp)
        # lerp(x, a, m) = x + m (a - x), one fused kernel; exactly a at m = 1 and x at m = 0 (ATen evaluates
        # a - (a - x)(1 - m) for m >= 0.5); its gradient to m is sum((a - x) * grad): the straight-through one
        return torch.lerp(x, self.act(x), mask[self.index].to(x.dtype))


class GatedBlock(nn.Module):
    """A discovered block run from its record with its removable activations gated.

    The block's own module is kept (``block``) so that `ungate` puts it back; its convolutions and
    BatchNorms are the same modules (trained in place). Works for any block `find_blocks` reports --
    module or functional activations, one activation module used twice (ResNet's ``relu``), timm's
    BatchNorm with a fused activation -- because nothing here reads the block's class.
    """

    dsprof_leaf = True

    def __init__(self, record: Block, gates: ActivationGates, index: int) -> None:
        super().__init__()
        self.block = record.module
        self.name = record.name
        self._units = list(record.units)  # plain list: the modules are registered once, under `block`
        self._shortcut = list(record.shortcut) if record.shortcut else []
        self.has_skip = record.shortcut is not None
        self._tail = [record.tail]
        self.gated = nn.ModuleList(
            GatedActivation(_not_inplace(copy.deepcopy(u.act)), gates, index) if u.act is not None else nn.Identity()
            for u in record.units
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for unit, gate in zip(self._units, self.gated):
            given = h
            h = unit.conv(h)
            if unit.norm is not None:  # a fused activation (timm BatchNormAct2d) is the gate's or the tail's
                h = nn.BatchNorm2d.forward(unit.norm, h) if hasattr(unit.norm, "act") else unit.norm(h)
            h = gate(h)
            if unit.concat:  # a Ghost module: its input concatenated before the cheap operation's output
                h = torch.cat([given, h], dim=1)[:, : unit.concat]
        if self.has_skip:
            s = x
            for m in self._shortcut:
                s = m(s)
            h = h + s
        return self._tail[0](h) if self._tail[0] is not None else h


class GatedModel(nn.Module):
    """A model with gated block activations; its forward refreshes the mask, then runs the model."""

    def __init__(self, model: nn.Module, gates: ActivationGates) -> None:
        super().__init__()
        self.model = model
        self.gates = gates

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.gates.refresh()
        try:
            return self.model(x)
        finally:
            self.gates.current = None  # the graph holds the mask; keep the module copyable


def _not_inplace(act: nn.Module) -> nn.Module:
    if getattr(act, "inplace", False):
        act.inplace = False  # the gate needs the activation's input as well as its output
    return act


def gate_model(
    model: nn.Module,
    keep: int | float,
    *,
    input_size: tuple[int, int] | None = None,
    init: float = 1.0,
    inplace: bool = False,
) -> GatedModel:
    """``model`` (a copy unless ``inplace``) with the activations of its blocks gated, top-``keep`` kept.

    ``keep`` is a count of blocks or a fraction of them, of the blocks with a removable activation (`with_acts`: a
    block without one is never among them). Scores start at ``init``; stem and head are never gated. A model
    without blocks raises with what to do.
    """
    target = model if inplace else copy.deepcopy(model)
    size = input_size or input_size_of(model)
    blocks = find_blocks(target, size)
    if not blocks:
        raise UsageError(
            "the model has no blocks to gate (plain convolutions only?); the activation search works on models built "
            "from inverted residual, depthwise-separable or ResNet blocks (`dsprof blocks` lists them)"
        )
    gates = ActivationGates([b.name for b in blocks], keep, init, counted=with_acts(blocks))
    target = own_chains(target, blocks)  # chains no module owns become modules (a rewritten graph)
    for index, block in enumerate(blocks):
        replace_block(target, block.name, GatedBlock(block, gates, index))
    gated = GatedModel(target, gates)
    if hasattr(model, "dsprof_input_size"):
        gated.dsprof_input_size = tuple(size)
    return gated


def ungate(gated: GatedModel) -> nn.Module:
    """A copy of the inner model with the original activations and blocks back (state dict as the original's)."""
    model = copy.deepcopy(gated.model)
    for module in [m for m in model.modules() if isinstance(m, GatedBlock)]:
        replace_block(model, module.name, module.block)
    return model
