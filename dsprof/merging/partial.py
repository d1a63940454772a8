"""Partial merges: a block that keeps some of its activations, its runs of linear units each one convolution.

A plan at the level of single activations (`Plan.acts`, rules in `dsprof.records.activations`) may remove one
activation of an inverted residual and keep the other. The block's units are then cut into runs at the kept
activations (`block_runs`), and each run of two or more units is linear: it is linearised as a block is
(`Linearized`: its convolutions and BatchNorms, padding in front or in place by the plan's ``border``, no skip
connection) and merges into one convolution exactly as a block does (`merge_linearized`):

* expansion 1x1 then depthwise kxk -> one dense kxk convolution (``fused-expand``, the Fused-MBConv form); with the
  padding in place, the expansion's bias along the borders is the `BorderBias` correction, exactly as for a block;
* depthwise kxk then projection 1x1 -> one kxk convolution (``fused-project``); exact in both forms (the padded
  convolution comes first).

The activation after a run's last unit, where kept, follows its merged convolution; the block's skip connection and
tail stay where they were (a partial block's output is its original one: no free activation is added). Which blocks
are partial is the plan's; a partial run always merges (removing an activation without merging saves nothing).

Here: the fine-tunable form (`PartialBlock`, built by `linearize_model` through `partial_of_runs`), a run as a block
record of its own (`run_block`: what is linearised, and its spec, the LUT's key); `merge_model` merges its runs.
"""

from __future__ import annotations

import copy
from typing import Callable, Mapping, Sequence

import torch
from torch import nn

from ..models import Block, BlockSpec
from ..models.blockspec import ConvShape, _summary, composed
from ..records.activations import ActLayout, block_runs, partial_runs, span_units
from .algebra import MergeError
from .layers import ConcatInput
from .spans import build_span

__all__ = ["PartialBlock", "act_layout", "act_layouts", "crossing_modules", "crossing_spec", "partial_block",
           "partial_of_runs", "run_block", "with_acts"]


def act_layout(block: Block, previous: Block | None = None) -> ActLayout:
    """The `ActLayout` of a discovered block (``previous``: the block before it, to know whether it follows it)."""
    return ActLayout(tuple(u.act is not None for u in block.units), block.shortcut is not None, block.tail is not None,
                     previous is not None and block.follows(previous))


def act_layouts(blocks: Sequence[Block]) -> list[ActLayout]:
    """The `ActLayout` of every block of a model, in order."""
    return [act_layout(b, blocks[i - 1] if i else None) for i, b in enumerate(blocks)]


def with_acts(blocks: Sequence[Block]) -> tuple[bool, ...]:
    """Per block of a model, whether it has a removable activation (`ActLayout.n_acts` above 0): the blocks the block
    view's k counts. A block without one is a chain that is linear already (timm's EfficientNet-B0 ends in one):
    linearised, it loses no activation (no accuracy, only latency), so a plan keeps it or not by price alone, at no
    cost in k."""
    return tuple(layout.n_acts > 0 for layout in act_layouts(blocks))


class PartialBlock(nn.Module):
    """A block with some activations removed: ``tail(stages(x) + shortcut(x))``. Each stage is one unit as it was
    (an ``nn.Sequential`` of its convolution, BatchNorm and kept activation), or a run of units: a `Linearized`
    (fine-tune this form) or, once merged, a `MergedConv`. ``runs`` are the stages' unit ranges, ``index`` the
    block's position in the plan, ``acts`` its entry of the plan's ``acts``."""

    dsprof_leaf = True  # an opaque leaf for block discovery: a partial block is not found again

    def __init__(self, stages: list[nn.Module], runs: Sequence[tuple[int, int]], *, shortcut: nn.Module | None,
                 tail: nn.Module | None, index: int, acts: Sequence[int], spec: str) -> None:
        super().__init__()
        self.stages = nn.Sequential(*stages)
        self.runs = [tuple(r) for r in runs]
        self.has_skip = shortcut is not None
        self.shortcut = shortcut if shortcut is not None else nn.Identity()
        self.tail = tail if tail is not None else nn.Identity()
        self.index, self.acts, self.spec = index, tuple(acts), spec

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stages(x)
        if self.has_skip:
            y = y + self.shortcut(x)
        return self.tail(y)


def _unit_stage(unit) -> nn.Sequential:
    """One unit that keeps its activation (or has none), as it runs: its convolution, BatchNorm and activation."""
    parts: list[nn.Module] = [copy.deepcopy(unit.conv)]
    if unit.norm is not None:
        parts.append(copy.deepcopy(unit.norm))  # with its activation inside (timm's BatchNormAct2d), kept
    if unit.act is not None and not unit.act_in_norm:
        parts.append(copy.deepcopy(unit.act))
    if unit.concat:  # a Ghost module's cheap operation: its input concatenated before its output
        return nn.Sequential(ConcatInput(nn.Sequential(*parts), unit.concat))
    return nn.Sequential(*parts)


def run_block(block: Block, run: tuple[int, int], keep_last: bool) -> Block:
    """Units ``run`` = [start, stop) of ``block`` as a block record of their own: no skip connection, the last unit's
    activation as its tail where the plan keeps it, its spec the run's chain of convolutions at the run's input size
    (an inverted residual's depthwise and projection are a ``depthwise_separable`` spec; its expansion and depthwise a
    ``chain``). `linearize_block` linearises it as it does a block."""
    start, stop = run
    spec = block.spec
    h, w = spec.in_h, spec.in_w
    for c in spec.convs[:start]:  # every padding style dsprof merges gives ceil(in / stride)
        h, w = -(-h // c.stride), -(-w // c.stride)
    if stop - start == 1:  # one unit (a crossing span's end, `crossing_modules`): a ``conv`` spec, as a span's is
        c = spec.convs[start]
        run_spec = BlockSpec.one_conv(c.cin, c.cout, c.kernel, c.stride, padding=spec.padding, in_h=h, in_w=w,
                                      act=spec.act)
    else:
        run_spec = BlockSpec.from_convs(spec.convs[start:stop], padding=spec.padding, residual=False, projection=False,
                                        in_h=h, in_w=w, act=spec.act)
    last = block.units[stop - 1]
    tail = copy.deepcopy(last.act) if keep_last and last.act is not None else None
    return Block(f"{block.name} units {start}..{stop - 1}", block.module, run_spec, units=block.units[start:stop],
                 shortcut=None, tail=tail)


def partial_block(block: Block, acts: Sequence[int], linearize: Callable[[Block], nn.Module], *,
                  index: int = 0) -> PartialBlock:
    """The fine-tunable form of ``block`` with the activations ``acts`` marks 0 removed (copies: the model is
    untouched): its units as stages, each run that removes an activation linearised by ``linearize`` (given a
    `run_block` record: `linearize_block` with the plan's border). Refused (`MergeError`) for a block that keeps all
    its activations or none (the block-level forms are for that)."""
    layout = act_layout(block)
    if not partial_runs(layout, acts):
        raise MergeError(f"block {block.name} keeps {'all' if all(acts) else 'none'} of its activations: nothing "
                         "merges partially (a block that keeps none is linearised whole)")
    return partial_of_runs(block, acts, block_runs(layout, acts), linearize, index=index)


def partial_of_runs(block: Block, acts: Sequence[int], runs: Sequence[tuple[int, int]],
                    linearize: Callable[[Block], nn.Module], *, index: int = 0) -> PartialBlock:
    """The `PartialBlock` of ``block`` over its ``runs`` (`block_runs` of its ``acts``, read by the caller:
    `partial_block`, or `linearize_model` from the whole plan): its units as stages, each run of two or more
    linearised by ``linearize``, its skip connection and tail copied."""
    stages = _stages(block, acts, runs, linearize)
    shortcut = None
    if block.shortcut is not None:
        shortcut = nn.Sequential(*copy.deepcopy(list(block.shortcut))) if block.shortcut else nn.Identity()
    tail = copy.deepcopy(block.tail) if block.tail is not None else None
    return PartialBlock(stages, runs, shortcut=shortcut, tail=tail, index=index, acts=acts, spec=block.spec.to_str())


def _kept(block: Block, acts: Sequence[int]) -> list[int | None]:
    """Per unit of ``block``: 1/0 for its removable activation kept/removed by ``acts``, None where it has none."""
    unit_acts = iter(acts)
    return [next(unit_acts) if u.act is not None else None for u in block.units]


def _stages(block: Block, acts: Sequence[int], runs: Sequence[tuple[int, int]],
            linearize: Callable[[Block], nn.Module]) -> list[nn.Module]:
    """The stages of ``block`` over its ``runs`` (of the plan's ``acts``): a single unit as it runs, a longer run
    linearised by ``linearize`` (a `run_block` record). Refused (`MergeError`) for a single unit whose activation goes."""
    kept, stages = _kept(block, acts), []
    for start, stop in runs:
        if stop - start == 1 and kept[start] == 0:
            raise MergeError(f"block {block.name} removes the activation of its unit {start} alone, with no linear unit "
                             "beside it to merge with: keep that activation")
        if stop - start == 1:
            stages.append(_unit_stage(block.units[start]))
        else:
            stages.append(linearize(run_block(block, (start, stop), kept[stop - 1] == 1)))
    return stages


def crossing_modules(blocks: Sequence[Block], acts: Sequence[Sequence[int]],
                     runs: Mapping[int, Sequence[tuple[int, int]]], span: tuple[int, int], linear: dict[int, nn.Module],
                     linearize: Callable[[Block, int], nn.Module]) -> dict[int, nn.Module]:
    """{block index: the module that takes its place} for the crossing span ``[start, stop)`` of a plan with ``acts``
    (``runs``: their `dsprof.records.activations.kept_runs`; `dsprof.records.activations.span_units`; checked linear
    by the caller, `crossing_units`): its units run as one `SpanLinearized` (padding in front) built from the first
    block's last run, the linearised blocks inside
    (``linear``: `Linearized`, padding in front) and the last block's first run (``linearize(run, index)``: a
    `run_block` record linearised). The first block's place holds what runs before its last run, then the span (a
    `PartialBlock`, or the span itself where it is linearised whole); the last block's place what runs after its
    first run, then its tail; the places between are ``nn.Identity``."""
    start, stop = span
    pieces: list[nn.Module] = []
    rests: dict[int, list[tuple[int, int]]] = {}
    joined: dict[int, tuple[int, int]] = {}
    for b in range(start, stop):
        block, block_acts = blocks[b], acts[b]
        if not any(block_acts):
            pieces.append(linear[b])
            continue
        cut = runs[b]
        run, rests[b] = (cut[-1], cut[:-1]) if b == start else (cut[0], cut[1:])
        joined[b] = run
        pieces.append(linearize(run_block(block, run, b != start and _kept(block, block_acts)[run[1] - 1] == 1), b))
    merged = build_span(pieces, start, stop)
    out: dict[int, nn.Module] = {i: nn.Identity() for i in range(start + 1, stop)}
    out[start] = merged
    for b, rest in rests.items():
        block = blocks[b]
        stages = _stages(block, acts[b], rest, lambda run, b=b: linearize(run, b))
        places = list(rest)
        if b == start:
            stages, places = stages + [merged], places + [joined[b]]
        elif not stages:  # the first run was the whole block: only its tail is left
            out[b] = copy.deepcopy(block.tail) if block.tail is not None else nn.Identity()
            continue
        tail = copy.deepcopy(block.tail) if block.tail is not None and b != start else None
        out[b] = PartialBlock(stages, places, shortcut=None, tail=tail, index=b, acts=acts[b], spec=block.spec.to_str())
    return out


def _merged(convs: list[ConvShape]) -> ConvShape:
    """The one convolution a run of convolutions merges into: a single one as it is, else dense, kernel
    ``1 + sum((k_i - 1) * stride before i)``, stride the product."""
    if len(convs) == 1:
        return convs[0]
    return ConvShape(convs[0].cin, convs[-1].out, *composed((c.kernel, c.stride) for c in convs))


def crossing_spec(blocks: Sequence[Block], acts: Sequence[Sequence[int]], span: tuple[int, int]) -> BlockSpec:
    """What the crossing span ``[start, stop)`` of a plan with ``acts`` deploys, as one ``chain`` spec at its input
    size: the first block's runs before its last run, the span's one convolution, the last block's runs after its
    first run; a run of two or more units one dense convolution, a single unit as it is (a ``conv`` spec where only
    the span's convolution is left). With the variant ``crossing``, its LUT key."""
    start, stop = span
    layouts = act_layouts(blocks)
    convs = [b.spec.convs for b in blocks]
    deployed: list[ConvShape] = []
    if any(acts[start]):
        deployed += [_merged(list(convs[start][a:b])) for a, b in block_runs(layouts[start], acts[start])[:-1]]
    deployed.append(_merged([convs[b][j] for b, j in span_units(layouts, acts, span)]))
    if any(acts[stop - 1]):
        deployed += [_merged(list(convs[stop - 1][a:b])) for a, b in block_runs(layouts[stop - 1], acts[stop - 1])[1:]]
    first = blocks[start].spec
    if len(deployed) == 1:
        c = deployed[0]
        return BlockSpec.one_conv(c.cin, c.cout, c.kernel, c.stride, padding=first.padding, in_h=first.in_h,
                                  in_w=first.in_w)
    return BlockSpec("chain", *_summary(tuple(deployed)), first.padding, False, first.in_h, first.in_w, first.act,
                     tuple(deployed))
