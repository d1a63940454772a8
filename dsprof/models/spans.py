"""Which runs of blocks could merge as one span (`span_runs`; every span within them, `span_ranges`), and the one
dense convolution a span merges into (`span_spec`, its LUT key): block knowledge that the merge
(`dsprof.merging.spans`), the planner, the LUT and the profiler read alike. Span merge itself (the fine-tuned form,
the exact merge) is `dsprof.merging.spans`; what a crossing span deploys, its LUT key, is
`dsprof.merging.partial.crossing_spec`."""

from __future__ import annotations

from .blockspec import BlockSpec, composed
from .records import Block

__all__ = ["span_ranges", "span_runs", "span_spec"]


def span_runs(blocks: list[Block], keep: tuple[int, ...]) -> list[list[int]]:
    """Maximal runs of >= 2 consecutive linearised blocks that could merge as one span.

    A block ends a run when it keeps its activations, has an activation after its output (its tail),
    uses TF 'SAME' padding, or has a skip connection that is not the identity at stride 1; a run continues only into
    a block that `follows` it (reads its output, and nothing outside that block reads it too). (The plan's free
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
        if ok and run and blocks[i].follows(blocks[run[-1]]) and blocks[run[-1]].tail is None:
            run.append(i)
            continue
        if len(run) >= 2:
            runs.append(run)
        run = [i] if ok else []
    if len(run) >= 2:
        runs.append(run)
    return runs


def span_ranges(blocks: list[Block], keep: tuple[int, ...], max_span: int) -> list[tuple[int, int]]:
    """Every span of 2..``max_span`` consecutive blocks that ``keep`` linearises and that merge as one convolution
    (`span_runs`), as [start, stop), run by run, shortest first from each start."""
    out = []
    for run in span_runs(blocks, tuple(keep)):
        for a in range(len(run)):
            for b in range(a + 2, min(len(run), a + max_span) + 1):
                out.append((run[a], run[b - 1] + 1))
    return out


def span_spec(specs: list[BlockSpec]) -> BlockSpec:
    """The one dense convolution a span of blocks merges into, as a ``conv`` spec (its LUT key)."""
    kernel, step = composed((s.merged_kernel, s.stride) for s in specs)
    first, last = specs[0], specs[-1]
    return BlockSpec.one_conv(first.in_channels, last.out_channels, kernel, step, padding=first.padding,
                              in_h=first.in_h, in_w=first.in_w)
