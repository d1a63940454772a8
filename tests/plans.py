"""Plans for brute-force tests of the planner (issue #36): every plan of a small model, and random plans of a given k.

A plan here is (keep, spans): ``keep`` one bit per block (1 = keeps its activations), ``spans`` the [start, stop)
runs of linearised blocks merged as one convolution, each inside a run that `dsprof.models.spans.span_runs` allows.
Every plan is a candidate at its k: nothing is held back (a block that buys nothing linearised alone included).
"""

from __future__ import annotations

import itertools
import random

from dsprof.models.spans import span_runs


def partitions(run, max_span):
    """Every split of a run of block indices into consecutive pieces of 1..max_span blocks, as [start, stop)."""
    if not run:
        yield ()
        return
    for size in range(1, min(max_span, len(run)) + 1):
        for rest in partitions(run[size:], max_span):
            yield ((run[0], run[size - 1] + 1),) + rest


def every_plan(blocks, max_span):
    """Every (keep, spans) of ``blocks``: every keep list x every partition of its spannable runs into spans."""
    for keep in itertools.product((0, 1), repeat=len(blocks)):
        runs = span_runs(blocks, keep)
        for choice in itertools.product(*[list(partitions(run, max_span)) for run in runs]):
            yield keep, tuple(sorted(p for part in choice for p in part if p[1] - p[0] > 1))


def plan_count(blocks, max_span):
    """How many plans `every_plan` yields, counted without listing them (to say a model is small enough)."""
    total = 0
    for keep in itertools.product((0, 1), repeat=len(blocks)):
        count = 1
        for run in span_runs(blocks, keep):
            count *= sum(1 for _ in partitions(run, max_span))
        total += count
    return total


def random_plan(blocks, k, max_span, rng: random.Random):
    """A random (keep, spans) with ``k`` kept blocks: the kept blocks drawn uniformly, then each spannable run cut
    at random into pieces of 1..max_span blocks."""
    n = len(blocks)
    kept = set(rng.sample(range(n), k))
    keep = tuple(int(i in kept) for i in range(n))
    spans = []
    for run in span_runs(blocks, keep):
        i = 0
        while i < len(run):
            size = rng.randint(1, min(max_span, len(run) - i))
            if size > 1:
                spans.append((run[i], run[i + size - 1] + 1))
            i += size
    return keep, tuple(spans)
