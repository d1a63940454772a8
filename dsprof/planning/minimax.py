"""One plan for several device contexts (`dsprof plan --for A,B`): at each k, the plan whose predicted latency relative
to each context's own front plan of that k is lowest in the worst case (``worst``) or on average (``mean``). Exact.

The pieces are the planner's (`dsprof.planning.dp`): a kept block; a linearised block alone, merged or not as each
context deploys it cheaper (where the contexts disagree on whether merging pays both are offered, and the plan's
``merge`` list says which it chose); a span
of linearised blocks merged as one convolution. In context c a plan's latency is ``base_c(k) - S_c``, with S_c the sum of
its pieces' savings there (`dsprof.lut.prices`) and base_c(k) the original's latency less what every plan of k takes
of c's calibration plan beyond its pieces (`dsprof.lut.inmodel.InModel.together`: the pairs' excess or the gap's
share, a term of k alone, read off c's own front plan of k), and its relative latency at k is
``(base_c(k) - S_c) / R_c(k)``, R_c(k) the latency of c's own front plan with k kept blocks.

- ``mean``: minimising the mean of the relative latencies is maximising ``sum_c S_c / R_c(k)``, a sum over the
  pieces of ``sum_c saving_c(piece) / R_c(k)``: one run of the planner's DP (`best_per_k`) per k with that weighted
  saving. O(n^2 x max_span x contexts) per k.
- ``worst``: the maximum over contexts does not add over pieces, but each context's relative latency falls as its
  S_c rises. So a partial plan of blocks 0..j-1 whose vector (S_1..S_m) another partial plan with the same k matches
  or beats in every context can be dropped: whatever follows, the other one is at least as good in every context,
  so in the worst one too. The DP keeps, per (j, k), the partial plans that no other one dominates (a Pareto set of
  savings vectors, extended piece by piece as the planner's accuracy-latency front is), and at the end takes the
  minimax over the complete plans it kept. Exact; its cost is the sizes of those sets, which `JointFront.states`
  reports (the largest set): O(n x max_span x K x F^2 x m) for F the largest set, K = n + 1. A partial plan that
  cannot beat a plan already known even if its remaining blocks saved, in each context, the most they can there, is
  dropped too (`_promising`): exact, and it keeps F small.

Ties (e.g. at k where every plan is one context's own) go to the lower mean. Every plan returned is priced by
`predict_plan` in each context, so its numbers are the ones `dsprof predict` shows.

With per-block importance (the accuracy a block loses without its activations), ``least_loss`` holds, for each k,
the plan of least summed importance and, among the plans of that loss, the least worst (or mean) relative latency:
what ``--keep K`` writes, as for one context. The loss is one more objective that adds over the pieces: for
``worst`` it is one more column of the Pareto sets (a partial plan another one matches in every saving *and* in
loss is dropped), and a partial plan is kept only while it can still end at the least loss of some k (`_reach` of
the losses); for ``mean`` the DP's score is (-loss, weighted saving), lexicographically.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..constants import DEFAULT_MAX_SPAN
from ..device_context import DeviceContext
from ..errors import LUTMissError, UsageError
from ..lut.piece import Piece
from ..lut.prices import Prices
from ..lut.interval import Estimate
from ..lut.predict import predict_plan, predict_ratio
from ..merging.partial import with_acts
from ..records.plan import Plan
from ..models.spans import span_ranges
from .dp import _kept, best_per_k, block_count
from .front import Front
from .planner import importance_values

__all__ = ["OBJECTIVES", "Joint", "JointFront", "JointPoint", "joint_front"]

OBJECTIVES = ("worst", "mean")
_CHUNK = 256  # rows of a set checked for dominance at once


@dataclass(frozen=True)
class Joint:
    """One plan for several contexts, as `dsprof.plan(joint=...)` asks for it: the ``contexts`` (labels as printed,
    keys or backends; a comma-separated string or a sequence), chosen at each k by the least ``objective`` loss
    against each context's own plan (`OBJECTIVES`: "worst" or "mean")."""

    contexts: str | Sequence[str]
    objective: str = "worst"


@dataclass(frozen=True)
class JointPoint:
    """The plan for several contexts with ``k`` kept blocks: per context (in `JointFront.contexts` order) its
    predicted speed-up over that context's original and its latency (seconds per batch), each the `Estimate`
    `predict_plan` built (as `dsprof predict` and a front show it); that context's own front latency at k; and its
    loss against it (relative: 0.05 = 5 % slower, an `Estimate`: `dsprof.lut.predict.predict_ratio`). Read flat:
    ``speedup``, ``speedup_low``, ``speedup_high``, ``latency_s``, ``loss``, ``loss_low``, ``loss_high`` (tuples, one
    per context). ``importance``: the summed importance of the blocks it linearises (None without importance)."""

    k: int
    plan: Plan
    speedup_estimates: tuple[Estimate, ...]
    latency_estimates: tuple[Estimate, ...]
    own_latency_s: tuple[float, ...]
    loss_estimates: tuple[Estimate, ...]
    importance: float | None = None

    @property
    def speedup(self) -> tuple[float, ...]:
        return tuple(e.value for e in self.speedup_estimates)

    @property
    def speedup_low(self) -> tuple[float, ...]:
        return tuple(e.low for e in self.speedup_estimates)

    @property
    def speedup_high(self) -> tuple[float, ...]:
        return tuple(e.high for e in self.speedup_estimates)

    @property
    def latency_s(self) -> tuple[float, ...]:
        return tuple(e.value for e in self.latency_estimates)

    @property
    def loss(self) -> tuple[float, ...]:
        return tuple(e.value for e in self.loss_estimates)

    @property
    def loss_low(self) -> tuple[float, ...]:
        return tuple(e.low for e in self.loss_estimates)

    @property
    def loss_high(self) -> tuple[float, ...]:
        return tuple(e.high for e in self.loss_estimates)

    @property
    def worst(self) -> float:
        """The largest loss over the contexts."""
        return max(self.loss)

    @property
    def mean(self) -> float:
        """The mean loss over the contexts."""
        return statistics.fmean(self.loss)


@dataclass(frozen=True)
class JointFront:
    """`joint_front`'s answer: for each k the plan of least ``objective`` (worst or mean loss) over ``contexts``;
    with importance, ``least_loss``: for each k the plan of least summed importance, the least ``objective`` among
    equals (None without importance); ``states``: the largest set of partial plans the DP kept (worst case; 1 for
    the mean)."""

    contexts: tuple[DeviceContext, ...]
    objective: str
    points: tuple[JointPoint, ...]
    states: int
    least_loss: tuple[JointPoint, ...] | None = None

    def at_k(self, k: int) -> JointPoint:
        """The plan of least ``objective`` with ``k`` kept blocks."""
        return _at_k(self.points, k)

    def choose(self, k: int) -> JointPoint:
        """The plan ``--keep K`` writes: with importance the least loss at ``k`` (least ``objective`` among equals),
        else `at_k`."""
        return _at_k(self.least_loss, k) if self.least_loss is not None else self.at_k(k)

    def to_dict(self, labels: dict[DeviceContext, str]) -> dict[str, Any]:
        return {"contexts": [str(c) for c in self.contexts], "labels": [labels[c] for c in self.contexts],
                "objective": self.objective, "states": self.states, "points": [_point_dict(p) for p in self.points],
                "least_loss": [_point_dict(p) for p in self.least_loss] if self.least_loss is not None else None}


def _at_k(points: Sequence[JointPoint], k: int) -> JointPoint:
    for p in points:
        if p.k == k:
            return p
    ks = [p.k for p in points]
    raise UsageError(f"k is {min(ks)}..{max(ks)} (blocks that keep their activations), got {k}")


def _point_dict(p: JointPoint) -> dict[str, Any]:
    return {"k": p.k, "keep": list(p.plan.keep), "merge": list(p.plan.merge or ()),
            "spans": [list(s) for s in p.plan.spans or ()], "latency_s": list(p.latency_s),
            "own_latency_s": list(p.own_latency_s), "loss": list(p.loss), "loss_low": list(p.loss_low),
            "loss_high": list(p.loss_high), "worst": p.worst, "mean": p.mean, "speedup": list(p.speedup),
            "speedup_low": list(p.speedup_low), "speedup_high": list(p.speedup_high), "importance": p.importance}


def _pieces(prices: Sequence[Prices], max_span: int, loss: Sequence[Fraction] | None = None) -> list[Piece]:
    """Every piece a plan can use, with its saving in each context as a plan there counts it (`Piece.gain_s`), and the
    summed ``loss`` of the blocks it linearises; one that a context cannot price is left out (a block merged alone
    where a LUT lacks its merged entry)."""
    n = len(prices[0].blocks)
    loss = list(loss) if loss is not None else [Fraction(0)] * n
    out = []

    def add(start: int, stop: int, kept: bool, merge: bool, priced) -> None:
        pieces = [priced(c) for c in prices]
        if all(p.found for p in pieces):
            lost = Fraction(0) if kept else sum(loss[start:stop], Fraction(0))
            variant = "original" if kept else ("span" if stop - start > 1 else ("merged" if merge else "linear"))
            out.append(Piece(start, stop, variant, kept=kept, loss=lost, savings_s=tuple(p.gain_s for p in pieces)))

    for i in range(n):
        add(i, i + 1, True, False, lambda c: c.kept(i))
        # merged or not as each context deploys it cheaper (`Prices.linearized`): one where they agree (the other is
        # slower in every context, so never better), both where they disagree (a block a LUT cannot decide counts
        # as merged)
        for merge in sorted({c.linearized(i).merges for c in prices}, reverse=True):
            add(i, i + 1, False, merge, lambda c, m=merge: c.linearized(i, m))
    for start, stop in span_ranges(prices[0].blocks, (0,) * n, max_span):
        add(start, stop, False, True, lambda c: c.span(start, stop))
    return out


def _plan(pieces: Sequence[Piece], n: int, name: str, options: dict, k: int, objective: str,
          contexts: Sequence[DeviceContext]) -> Plan:
    keep, merge, spans = [1] * n, [False] * n, []
    for p in pieces:
        if p.kept:
            continue
        if p.stop - p.start > 1:
            spans.append((p.start, p.stop))
        for i in range(p.start, p.stop):
            keep[i], merge[i] = 0, p.merges
    what = objective.replace("least-loss-", "least importance loss, then ")
    return Plan(name, tuple(keep), options, merge=tuple(merge), spans=tuple(spans) or None,
                name=f"joint-{objective}-k{k}",
                source=f"dsprof plan for several contexts ({what} loss over {', '.join(str(c) for c in contexts)})")


def _worst(n: int, pieces: list[Piece], base: dict[int, np.ndarray], own: dict[int, np.ndarray],
           least_loss: bool = False, count: Callable[[Piece], int] = _kept) -> tuple[dict[int, list[Piece]], int]:
    """The minimax plan (as pieces) for each k, by the Pareto DP of the module docstring; and the largest set kept.
    With ``least_loss``: for each k the plan of least summed ``loss`` of its pieces, the minimax among equals.

    Two exact shortcuts: a partial plan whose best conceivable completion -- in each context the most its remaining
    blocks can save there (`_reach`), each context on its own -- is still worse than a plan already known
    (`_incumbents`) for every k it can end at is dropped (it cannot be optimal); and the sets are filtered with
    NumPy. With ``least_loss`` the known plans are least-loss ones, and a k counts only while the partial plan can
    still reach that k's least loss. ``count``: what a piece adds to k (`dsprof.planning.dp.block_count`)."""
    m = len(pieces[0].savings_s)
    savings = np.array([p.savings_s for p in pieces], dtype=float).reshape(len(pieces), m)
    upper = _incumbents(n, pieces, savings, base, own, least_loss, count)
    reach = _reach(n, pieces, savings, count=count)
    losses = None
    if least_loss:  # one more column, to maximise: minus the loss
        lost = np.array([float(p.loss) for p in pieces])
        tolerance = 1e-9 * max(1.0, float(np.abs(lost).sum()))
        losses = (_least_losses(n, pieces, count), _reach(n, pieces, lost, np.minimum, np.inf, count), tolerance)
        savings = np.hstack([savings, -lost[:, None]])
    ending: list[list[int]] = [[] for _ in range(n + 1)]
    for i, p in enumerate(pieces):
        ending[p.stop].append(i)
    # per position j: {k: (savings vectors F x m, the last piece of each, its row in the set where that piece starts)}
    sets: list[dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]] = [{} for _ in range(n + 1)]
    sets[0][0] = (np.zeros((1, savings.shape[1])), np.array([-1]), np.array([-1]))
    largest = 1
    for j in range(1, n + 1):
        grouped: dict[int, list] = {}
        for i in ending[j]:
            p = pieces[i]
            for k, (vectors, _, _) in sets[p.start].items():
                grouped.setdefault(k + count(p), []).append(
                    (vectors + savings[i], np.full(len(vectors), i), np.arange(len(vectors))))
        for k, parts in grouped.items():
            vectors = np.vstack([v for v, _, _ in parts])
            last = np.concatenate([a for _, a, _ in parts])
            parent = np.concatenate([b for _, _, b in parts])
            alive = _promising(vectors[:, :m], j, k, n, base, own, upper, reach,
                               None if losses is None else (-vectors[:, m],) + losses)
            vectors, last, parent = vectors[alive], last[alive], parent[alive]
            keep = _nondominated(vectors)
            if len(keep):
                sets[j][k] = (vectors[keep], last[keep], parent[keep])
                largest = max(largest, len(keep))
    best = {}
    for k, (vectors, _, _) in sets[n].items():
        if k not in own:
            continue
        relative = (base[k] - vectors[:, :m]) / own[k]  # F x m
        rows = np.arange(len(vectors))
        if losses is not None:  # the least loss first (within rounding: equal sums added in another order)
            least, _, tol = losses
            rows = rows[-vectors[:, m] <= float(least[k]) + tol]
        order = np.lexsort((relative[rows].mean(axis=1), relative[rows].max(axis=1)))  # worst first, then the mean
        best[k] = _read_back(sets, pieces, n, k, int(rows[order[0]]), count)
    return best, largest


def _nondominated(vectors: np.ndarray) -> np.ndarray:
    """Indices of the rows that no other row matches or beats in every column (of equal rows, one)."""
    m = vectors.shape[1]
    order = np.lexsort(tuple(-vectors[:, c] for c in reversed(range(m))))  # by column 0 desc, then 1...
    ranked = vectors[order]
    if m == 2:  # a row survives where its second column beats every row before it (which all match its first)
        before = np.maximum.accumulate(np.concatenate(([-np.inf], ranked[:-1, 1])))
        return order[ranked[:, 1] > before]
    # Only a row ranked before another can dominate it, and a row dominated by a dropped row is dominated by what
    # dropped it: so each chunk of rows is checked against the rows kept so far and the rows before it in the chunk.
    kept, chosen = np.empty((0, m)), []
    for start in range(0, len(ranked), _CHUNK):
        chunk = ranked[start:start + _CHUNK]
        beaten = np.all(kept[None, :, :] >= chunk[:, None, :], axis=2).any(axis=1)
        earlier = np.tril(np.ones((len(chunk), len(chunk)), dtype=bool), -1)  # [i, j]: j before i
        beaten |= (np.all(chunk[None, :, :] >= chunk[:, None, :], axis=2) & earlier).any(axis=1)
        kept = np.vstack([kept, chunk[~beaten]])
        chosen.append(order[start:start + _CHUNK][~beaten])
    return np.concatenate(chosen) if chosen else np.empty(0, dtype=int)


def _reach(n: int, pieces: list[Piece], values: np.ndarray, best=np.maximum, none: float = -np.inf,
           count: Callable[[Piece], int] = _kept) -> np.ndarray:
    """reach[j, r(, c)]: the ``best`` (np.maximum for savings, np.minimum for losses) that blocks j..n-1 with r kept
    blocks can add of the pieces' ``values`` (one row per piece; per context c where it has columns, each context on
    its own); ``none`` where no plan has r kept blocks."""
    reach = np.full((n + 1, n + 1, *values.shape[1:]), none)
    reach[n, 0] = 0.0
    starting: list[list[int]] = [[] for _ in range(n)]
    for i, p in enumerate(pieces):
        starting[p.start].append(i)
    for j in range(n - 1, -1, -1):
        for i in starting[j]:
            p = pieces[i]
            if count(p):
                reach[j, 1:] = best(reach[j, 1:], values[i] + reach[p.stop, :-1])
            else:
                reach[j] = best(reach[j], values[i] + reach[p.stop])
    return reach


def _promising(vectors: np.ndarray, j: int, k: int, n: int, base: dict[int, np.ndarray], own: dict[int, np.ndarray],
               upper: dict[int, float], reach: np.ndarray, losses: tuple | None = None) -> np.ndarray:
    """Which partial plans of blocks 0..j-1 with k kept blocks could still end in a plan no worse than the best known,
    at some k they can reach (a tolerance keeps every tie). ``losses``: (the partial plans' losses, the least loss of
    each k, `_reach` of the losses, a tolerance): a k counts only where the plan can still end at its least loss."""
    alive = np.zeros(len(vectors), dtype=bool)
    for r in range(n - j + 1):
        if k + r not in upper or not np.all(np.isfinite(reach[j, r])):
            continue
        bound = ((base[k + r] - vectors - reach[j, r]) / own[k + r]).max(axis=1)
        ok = bound <= upper[k + r] * (1 + 1e-9) + 1e-12
        if losses is not None:
            lost, least, loss_reach, tol = losses
            ok &= lost + loss_reach[j, r] <= float(least[k + r]) + tol
        alive |= ok
    return alive


def _least_losses(n: int, pieces: list[Piece], count: Callable[[Piece], int] = _kept) -> dict[int, Fraction]:
    """The least summed loss of a complete plan with k kept blocks, for every k (exact)."""
    return {k: s.loss for k, s in best_per_k(n, pieces, score=lambda o: (-o.loss,), count=count).items()}


def _weighted(n: int, pieces: list[Piece], weights: np.ndarray, least_loss: bool = False,
              count: Callable[[Piece], int] = _kept) -> dict[int, list[Piece]]:
    """For every k, the plan (as pieces) of largest ``sum over contexts of weights[c] x saving[c]``: the planner's DP
    (with ``least_loss``: of least summed loss first, then that)."""
    options = [replace(p, saving_s=float(np.dot(p.savings_s, weights))) for p in pieces]
    piece_of = {id(o): p for o, p in zip(options, pieces)}
    score = (lambda o: (-o.loss, o.gain_s)) if least_loss else (lambda o: (o.gain_s,))
    return {k: [piece_of[id(o)] for o in s.pieces] for k, s in best_per_k(n, options, score, count).items()}


def _incumbents(n: int, pieces: list[Piece], savings: np.ndarray, base: dict[int, np.ndarray],
                own: dict[int, np.ndarray], least_loss: bool = False,
                count: Callable[[Piece], int] = _kept) -> dict[int, float]:
    """For each k, the worst relative latency of the best of a few plans: each context's fastest, the least mean
    (with ``least_loss``: each of them among the plans of least loss)."""
    m = savings.shape[1]
    upper = {k: np.inf for k in own}
    plans = [_weighted(n, pieces, np.eye(m)[c], least_loss, count) for c in range(m)] + [
        _mean(n, pieces, own, least_loss, count)]
    for by_k in plans:
        for k, chosen in by_k.items():
            if k in own:
                vector = np.sum([p.savings_s for p in chosen], axis=0)
                upper[k] = min(upper[k], float(((base[k] - vector) / own[k]).max()))
    return upper


def _read_back(sets, pieces: list[Piece], n: int, k: int, index: int,
               count: Callable[[Piece], int] = _kept) -> list[Piece]:
    out, j = [], n
    while j > 0:
        _, last, parent = sets[j][k]
        piece = pieces[int(last[index])]
        out.append(piece)
        j, k, index = piece.start, k - count(piece), int(parent[index])
    return out[::-1]


def _mean(n: int, pieces: list[Piece], own: dict[int, np.ndarray], least_loss: bool = False,
          count: Callable[[Piece], int] = _kept) -> dict[int, list[Piece]]:
    """The plan of least mean relative latency for each k: the planner's DP with each piece's savings weighted by
    1 / R_c(k), once per k (with ``least_loss``: among the plans of least loss at k)."""
    best = {}
    for k, reference in own.items():
        chosen = _weighted(n, pieces, 1.0 / reference, least_loss, count).get(k)
        if chosen is not None:
            best[k] = chosen
    return best


def joint_front(prices: Sequence[Prices], fronts: Sequence[Front], *, objective: str = "worst",
                max_span: int = DEFAULT_MAX_SPAN,
                importance: Mapping[int, float] | Sequence[float] | None = None) -> JointFront:
    """For each k, the plan of least worst (or mean) loss over the contexts of ``prices`` (one `Prices` per
    context, of one model), each against its own front (``fronts``, in the same order); spans of up to
    ``max_span`` blocks. With ``importance`` ({block index: accuracy loss without its activations}, or one value per
    block, as `plan_front` takes it), also the plan of least summed importance for each k (``least_loss``). See the
    module docstring for why it is exact and what it prices."""
    if objective not in OBJECTIVES:
        raise UsageError(f"objective is one of {', '.join(OBJECTIVES)}, got {objective!r}")
    if len(prices) != len(fronts) or len(prices) < 2:
        raise UsageError("a plan for several contexts needs at least two contexts, each with its front")
    n = len(prices[0].blocks)
    if any(len(c.blocks) != n for c in prices) or len({c.label for c in prices}) != 1:
        raise UsageError(f"the contexts hold different models ({', '.join(sorted({c.label for c in prices}))}); "
                         "plan one model at a time")
    name, options = fronts[0].name, fronts[0].options
    loss = None
    if importance is not None:
        loss = [Fraction(v) for v in importance_values(importance, n)]
    pieces = _pieces(prices, max_span, loss)
    count = block_count(with_acts(prices[0].blocks))  # k counts the blocks with a removable activation, as the fronts'
    ks = sorted(set.intersection(*[{p.k for p in f.points} for f in fronts]))
    if not ks:
        raise LUTMissError("the contexts' fronts share no k; measure the same blocks in every context")
    own = {k: np.array([f.at_k(k).latency_s for f in fronts]) for k in ks}
    original = np.array([predict_plan(c, None, strict=True).total_s for c in prices])
    base = {k: original - np.array([_beyond(c, f.at_k(k).plan) for c, f in zip(prices, fronts)]) for k in ks}
    contexts = tuple(c.key for c in prices)

    def points(chosen: dict[int, list[Piece]], label: str) -> tuple[JointPoint, ...]:
        out = []
        for k in ks:
            if k in chosen:
                plan = _plan(chosen[k], n, name, options, k, label, contexts)
                out.append(_joint_point(k, plan, prices, fronts, own[k], chosen[k] if loss is not None else None))
        return tuple(out)

    if objective == "worst":
        chosen, states = _worst(n, pieces, base, own, count=count)
    else:
        chosen, states = _mean(n, pieces, own, count=count), 1
    least_loss = None
    if loss is not None:
        if objective == "worst":
            by_loss, more = _worst(n, pieces, base, own, least_loss=True, count=count)
            states = max(states, more)
        else:
            by_loss = _mean(n, pieces, own, least_loss=True, count=count)
        least_loss = points(by_loss, f"least-loss-{objective}")
    return JointFront(contexts, objective, points(chosen, objective), states, least_loss)


def _beyond(prices: Prices, plan: Plan) -> float:
    """What a plan saves in ``prices``' context beyond its pieces' sum (seconds): its share of the calibration plan's
    excess or gap (`dsprof.lut.inmodel.InModel.together`), the same for every plan of its k."""
    pieces = prices.pieces(plan)
    return prices.total_s(pieces, together=False) - prices.total_s(pieces)


def _joint_point(k: int, plan: Plan, prices: Sequence[Prices], fronts: Sequence[Front], own: np.ndarray,
                 pieces: list[Piece] | None) -> JointPoint:
    """``plan`` priced in every context (`predict_plan`) against each one's own front plan of ``k``; ``pieces``: its
    pieces, for its summed importance (None: no importance)."""
    losses = tuple(predict_ratio(c, plan, f.at_k(k).plan).shifted(-1) for c, f in zip(prices, fronts))
    preds = [predict_plan(c, plan, strict=True) for c in prices]
    importance = float(sum((p.loss for p in pieces), Fraction(0))) if pieces is not None else None
    return JointPoint(k, plan, tuple(p.speedup_estimate for p in preds), tuple(p.latency_estimate for p in preds),
                      tuple(own), losses, importance)
