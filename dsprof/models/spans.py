"""Which runs of blocks could merge as one span (`span_runs`), and the one dense convolution a span merges into
(`span_spec`, its LUT key): block knowledge that the merge (`dsprof.merging.spans`), the planner, the LUT and the
profiler read alike. Span merge itself (the fine-tuned form, the exact merge) is `dsprof.merging.spans`. A crossing
span (a plan with ``acts`` whose span's end blocks keep some activations, `dsprof.records.activations.span_units`)
deploys more than one convolution: `crossing_spec` is what it deploys, its LUT key with the variant ``crossing``."""

from __future__ import annotations

from typing import Sequence

from ..records.activations import ActLayout, block_runs, span_units
from .blockspec import BlockSpec, ConvShape, _summary, composed
from .records import Block

__all__ = ["crossing_spec", "span_runs", "span_spec"]


def _adjacent(a: Block, b: Block) -> bool:
    return a.output_node == b.input_node


def span_runs(blocks: list[Block], keep: tuple[int, ...]) -> list[list[int]]:
    """Maximal runs of >= 2 consecutive linearised blocks that could merge as one span.

    A block ends a run when it keeps its activations, has an activation after its output (its tail),
    uses TF 'SAME' padding, or has a skip connection that is not the identity at stride 1. (The plan's free
    activation is not run inside a span: asking for a span is asking for none there.)
    """

    def spannable(i: int) -> bool:
        b = blocks[i]
        if keep[i] or b.spec.padding != "symmetric":
            return False
        if b.shortcut is not None and (b.shortcut != () or b.spec.stride != 1):
            return False
        return True

    runs, run = [], []
    for i in range(len(blocks)):
        ok = spannable(i)
        if ok and run and _adjacent(blocks[run[-1]], blocks[i]) and blocks[run[-1]].tail is None:
            run.append(i)
            continue
        if len(run) >= 2:
            runs.append(run)
        run = [i] if ok else []
    if len(run) >= 2:
        runs.append(run)
    return runs


def span_spec(specs: list[BlockSpec]) -> BlockSpec:
    """The one dense convolution a span of blocks merges into, as a ``conv`` spec (its LUT key)."""
    kernel, step = composed((s.merged_kernel, s.stride) for s in specs)
    first, last = specs[0], specs[-1]
    return BlockSpec("conv", first.in_channels, last.out_channels, last.out_channels, kernel, step, first.padding,
                     False, first.in_h, first.in_w)


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
    layouts = [ActLayout(tuple(u.act is not None for u in b.units)) for b in blocks]
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
        return BlockSpec("conv", c.cin, c.cout, c.cout, c.kernel, c.stride, first.padding, False, first.in_h, first.in_w)
    return BlockSpec("chain", *_summary(tuple(deployed)), first.padding, False, first.in_h, first.in_w, first.act,
                     tuple(deployed))
