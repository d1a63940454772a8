"""Exact plans by dynamic programming over the block sequence (the planner's solver; pure arithmetic).

A plan deploys blocks 0..n-1 as consecutive pieces (`dsprof.lut.piece.Piece`, the one piece type): a block that keeps its activations, a
linearised block alone, or a span [a, b) of linearised blocks merged into one convolution. Under every
prediction method a plan's latency is ``base - sum of its pieces' gains`` (each piece's saving as a plan counts it:
`dsprof.lut.piece.Piece.gain_s`, `dsprof.lut.inmodel.InModel.together`; plus, where an in-model LUT's pieces combine
by pairs or share the calibration plan's gap, a term of k alone), so the fastest plan is the one whose pieces gain
most, and the choice splits at piece borders.

Fastest plan for each k (blocks that keep their activations), over the pieces p = [a, j) ending at j:

    best[0][0] = 0,    best[j][k] = max_p  best[a][k - kept(p)] + gain(p)

with kept(p) = 1 for a kept block and 0 otherwise (0 too for a kept block without a removable activation: it is
linear already, so it is kept or linearised by price alone, at no cost in k: `block_count`); O(n * n * max_span) steps, the plan read back through
the pointers (gain: the piece's ``gain_s``, seconds; a joint plan's mean, ``Joint(objective='mean')``, weighs each context's). The same recurrence,
scored lexicographically by (-loss, gain), gives the plan of least
summed loss at each k (the fastest among equals).

With a loss per piece (the accuracy the blocks it linearises lose, summed), the accuracy-latency front:
front[j] holds the plans of blocks 0..j-1 that no other one beats in both summed loss and summed gain,

    front[0] = {(0, 0)},    front[j] = nondominated( union over p = [a, j) of front[a] + (loss(p), gain(p)) )

Exact because both objectives add over pieces and a piece's terms depend on its own blocks only: a plan
of blocks 0..a-1 that another one dominates stays dominated whatever follows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..lut.piece import Piece

__all__ = ["Solution", "best_per_k", "best_of_k", "block_count", "nondominated", "pareto_front"]


@dataclass(frozen=True)
class Solution:
    """A plan as its pieces, with their summed gain and loss."""

    gain: float  # the pieces' summed ``gain_s``
    loss: float
    pieces: tuple[Piece, ...]

    @property
    def k(self) -> int:
        """Kept pieces (blocks left with their activations); the planner's k counts them with `block_count`."""
        return sum(p.kept for p in self.pieces)


def _by_end(n: int, options: Sequence[Piece]) -> list[list[Piece]]:
    ending: list[list[Piece]] = [[] for _ in range(n + 1)]
    for o in options:
        ending[o.stop].append(o)
    return ending


def _kept(o: Piece) -> int:
    return int(o.kept)


def block_count(counted: Sequence[bool]) -> Callable[[Piece], int]:
    """What a piece adds to k in the block view: 1 for a kept block that has a removable activation (``counted[i]``:
    `dsprof.merging.partial.with_acts`), else 0. A block without one costs no accuracy linearised, so keeping it or
    not is a matter of price alone, at no cost in k."""
    counted = tuple(counted)
    return lambda o: int(o.kept and counted[o.start])


def best_per_k(n: int, options: Sequence[Piece],
               score: Callable[[Piece], tuple[float, ...]] = lambda o: (o.gain_s,),
               count: Callable[[Piece], int] = _kept) -> dict[int, Solution]:
    """{k: the plan of blocks 0..n-1 with k kept blocks whose summed ``score`` is largest (lexicographically)},
    for every k some plan reaches. The default score is the gain: the fastest plan at each k. ``count``: what a piece
    adds to k (a kept block 1; the planner at the level of activations counts a piece's kept activations,
    `dsprof.planning.activations`)."""
    ending = _by_end(n, options)
    zero = tuple(0 * v for v in score(options[0])) if options else (0.0,)
    best: list[dict[int, tuple[tuple[float, ...], Piece | None]]] = [{0: (zero, None)}] + [{} for _ in range(n)]
    for j in range(1, n + 1):
        row = best[j]
        for o in ending[j]:
            s = score(o)
            for k, (total, _) in best[o.start].items():
                k2 = k + count(o)
                cand = tuple(a + b for a, b in zip(total, s))
                if k2 not in row or cand > row[k2][0]:
                    row[k2] = (cand, o)
    return {k: _read_back(best, n, k, count) for k in sorted(best[n])}


def best_of_k(n: int, options: Sequence[Piece], k: int, count: int,
              kept: Callable[[Piece], int] = _kept) -> list[Solution]:
    """The ``count`` plans of blocks 0..n-1 with exactly ``k`` kept blocks whose summed gain is largest, largest
    first (fewer where fewer exist): the k-best form of `best_per_k`, each state keeping its ``count`` best partial
    plans (``kept``: what a piece adds to k, as `best_per_k`'s ``count``),

        top[j][k] = the count largest of  { t + gain(p) : p = [a, j),  t in top[a][k - kept(p)] }

    Exact because the gain adds over pieces: a plan in the ``count`` best of the whole has a prefix in the ``count``
    best of its state (else ``count`` better prefixes with the same suffix would beat it). Every plan differs from
    the others in its pieces; of equal gains, the one built first comes first. O(n * n * max_span * count) steps."""
    ending = _by_end(n, options)
    # a partial plan: (gain, its last piece, its rank in the state it extends)
    top: list[dict[int, list[tuple[float, Piece | None, int]]]] = [{0: [(0.0, None, -1)]}] + [{} for _ in range(n)]
    for j in range(1, n + 1):
        row: dict[int, list[tuple[float, Piece | None, int]]] = {}
        for o in ending[j]:
            for kk, partial in top[o.start].items():
                k2 = kk + kept(o)
                if k2 > k:
                    continue
                row.setdefault(k2, []).extend((g + o.gain_s, o, rank) for rank, (g, _, _) in enumerate(partial))
        for k2, found in row.items():  # sorted() is stable: of equal gains, the first built stays first
            row[k2] = sorted(found, key=lambda t: -t[0])[:count]
        top[j] = row
    out = []
    for rank in range(len(top[n].get(k, ()))):
        pieces, j, kk, r = [], n, k, rank
        while j > 0:
            _, o, r = top[j][kk][r]
            pieces.append(o)
            j, kk = o.start, kk - kept(o)
        pieces.reverse()
        out.append(Solution(sum(p.gain_s for p in pieces), sum(p.loss for p in pieces), tuple(pieces)))
    return out


def _read_back(best, n: int, k: int, count: Callable[[Piece], int] = _kept) -> Solution:
    pieces, j = [], n
    while j > 0:
        o = best[j][k][1]
        pieces.append(o)
        j, k = o.start, k - count(o)
    pieces.reverse()
    return Solution(sum(p.gain_s for p in pieces), sum(p.loss for p in pieces), tuple(pieces))


def nondominated(costs: Sequence[Any], values: Sequence[Any]) -> list[int]:
    """The one Pareto filter: indices of the points that no other point beats (none is at most as costly and worth
    more, or cheaper and worth at least as much), sorted by cost; of equal points, the first. The planner's front
    (`pareto_front`) keeps its partial plans with it (cost: summed loss, value: summed saving), the search's ground
    truth its plans (cost: MACs, value: accuracy)."""
    order = sorted(range(len(costs)), key=lambda i: (costs[i], -values[i]))
    front, best = [], float("-inf")
    for i in order:
        if values[i] > best:
            front.append(i)
            best = values[i]
    return front


def pareto_front(n: int, options: Sequence[Piece]) -> list[Solution]:
    """The plans of blocks 0..n-1 that no other plan beats in both summed loss (lower) and summed gain
    (higher), ordered by loss (so by gain too); one plan for each point."""
    ending = _by_end(n, options)
    # a partial plan: (loss, gain, its last piece, the partial plan before it)
    front: list[list[tuple[float, float, Piece | None, tuple | None]]] = [[(0 * options[0].loss, 0.0, None, None)]]
    for j in range(1, n + 1):
        candidates = [(loss + o.loss, gain + o.gain_s, o, prev)
                      for o in ending[j] for prev in front[o.start] for loss, gain in [prev[:2]]]
        front.append([candidates[i] for i in nondominated([c[0] for c in candidates], [c[1] for c in candidates])])
    out = []
    for loss, gain, last, prev in front[n]:
        pieces, node = [last], prev
        while node is not None and node[2] is not None:
            pieces.append(node[2])
            node = node[3]
        pieces.reverse()
        out.append(Solution(gain, loss, tuple(pieces)))
    return out
