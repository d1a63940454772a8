"""Plans at the level of single activations (issue #47, item 2): the record's rules, in plain data.

A block is a chain of units (convolution, its BatchNorm, its removable activation; `dsprof.models.Unit`). A plan's
``acts`` field holds, per block, one 0/1 for each of the block's removable activations, in unit order (1 = kept).
What a block looks like to these rules is its `ActLayout`: which of its units carry a removable activation, whether
its output is added to a skip connection, whether an activation follows its output (a tail, never removed), and
whether its input is the previous block's output.

* **The block view.** A block keeps its activations (``keep`` 1) iff it keeps at least one of them; ``keep`` 0 is
  DepthShrinker's linearised block (all removed), and everything block-level (its merge, spans, the free activation
  after it) is as it was. A plan without ``acts`` is a block plan: its ``acts`` are derived (`acts_of_keep`).
* **A run** (`block_runs`) is a maximal range of a block's units with no kept activation between them. In a block
  that keeps some activations, a run of two or more units is one *partial merge*, always merged into one dense
  convolution (`dsprof.merging.partial`), named by where it lies (`run_variant`): ``fused-expand`` holds the block's
  first unit (an inverted residual's expansion and depthwise: the Fused-MBConv form), ``fused-project`` its last
  (the depthwise and the projection), ``fused-inner`` neither (chains of four units or more).
* **A segment** (`segments`) is a maximal run of linear units between kept activations across the whole model. It
  crosses a block border only where nothing non-linear or shared lies there: the block before has no tail, is not
  a linearised block followed by the plan's free activation, and the block after reads that output only, i.e. a
  block with a skip connection is crossed only when it is linear as a whole (as spans are). A segment's part inside
  one partial block (a run) always merges; across block borders, what merges is what the plan's ``spans`` ask for,
  and its other cuts at block borders run as separate pieces, exactly.
* **A crossing span** (`span_units`): in a plan with ``acts``, a span's first and last block may keep some of their
  activations (its interior blocks are linearised whole). The span then starts at its first block's last run and
  ends with its last block's first run, e.g. an inverted residual's depthwise and projection, the next block's
  expansion and depthwise: one dense convolution, when those units lie in one segment (`crossing_units`).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Sequence

from ..errors import PlanError
from ..fields import shown
from ..names import ACT_VARIANTS

__all__ = ["ACT_VARIANTS", "ActLayout", "acts_of_keep", "block_runs", "check_acts", "crossing_candidates",
           "crossing_units", "is_crossing", "is_partial_variant", "keep_of_acts", "kept_activations", "kept_runs",
           "partial_runs",
           "partial_states", "partial_variant", "run_variant", "segments", "span_units"]

#: Removable activations one block may list in a plan read from a file.
MAX_BLOCK_ACTS = 64


@dataclass(frozen=True)
class ActLayout:
    """What the activation rules need of one block: ``units`` (True where that unit carries a removable
    activation, in order), ``residual`` (its output is added to a skip connection), ``tail`` (an activation follows
    the addition or the output, and stays), ``follows`` (its input is the previous block's output and nothing else's).
    """

    units: tuple[bool, ...]
    residual: bool = False
    tail: bool = False
    follows: bool = True

    @property
    def n_acts(self) -> int:
        return sum(self.units)


def check_acts(acts: object, n_blocks: int | None = None) -> tuple[tuple[int, ...], ...]:
    """``acts`` (a list of lists of 0/1, one list per block) as a tuple of tuples; `PlanError` naming what is wrong.
    ``n_blocks``: the length it must have."""
    if not isinstance(acts, (list, tuple)) or not acts:
        raise PlanError(f"'acts' must be a non-empty list (one list of 0/1 per block), got {shown(acts)}")
    if n_blocks is not None and len(acts) != n_blocks:
        raise PlanError(f"'acts' has {len(acts)} entries but 'keep' has {n_blocks}: one list of 0/1 per block")
    out = []
    for i, block in enumerate(acts):
        if not isinstance(block, (list, tuple)) or len(block) > MAX_BLOCK_ACTS:
            raise PlanError(f"'acts' entry {i} must be a list of at most {MAX_BLOCK_ACTS} 0/1 (1 = activation kept), "
                            f"got {shown(block)}")
        if any(isinstance(a, bool) or a not in (0, 1) for a in block):
            raise PlanError(f"'acts' entry {i} must hold 0/1 only (1 = activation kept), got {shown(list(block))}")
        out.append(tuple(int(a) for a in block))
    return tuple(out)


def keep_of_acts(acts: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """The block view of an activation plan: 1 where a block keeps at least one activation, 0 where it keeps none."""
    return tuple(int(any(block)) for block in acts)


def acts_of_keep(keep: Sequence[int], counts: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """The activation view of a block plan: every activation of a kept block kept, every one of a linearised block
    removed; ``counts`` are the blocks' numbers of removable activations."""
    if len(keep) != len(counts):
        raise PlanError(f"the plan has {len(keep)} blocks but the model {len(counts)}")
    return tuple((int(k),) * n for k, n in zip(keep, counts))


def kept_activations(acts: Sequence[Sequence[int]]) -> int:
    """How many activations a plan keeps (the activation view's k)."""
    return sum(sum(block) for block in acts)


def _unit_acts(layout: ActLayout, acts: Sequence[int]) -> list[int | None]:
    """Per unit: 1/0 for its removable activation kept/removed, None where the unit has none."""
    if len(acts) != layout.n_acts:
        raise PlanError(f"a block with {layout.n_acts} removable activations was given {len(acts)} entries in 'acts'")
    it = iter(acts)
    return [next(it) if has else None for has in layout.units]


def block_runs(layout: ActLayout, acts: Sequence[int]) -> list[tuple[int, int]]:
    """A block's units cut into runs ``[start, stop)`` at every kept activation (the unit that carries it ends its
    run); all of them, single units included, in order."""
    runs, start = [], 0
    for j, a in enumerate(_unit_acts(layout, acts)):
        if a == 1:
            runs.append((start, j + 1))
            start = j + 1
    if start < len(layout.units):
        runs.append((start, len(layout.units)))
    return runs


def kept_runs(layouts: Sequence[ActLayout], acts: Sequence[Sequence[int]]) -> dict[int, list[tuple[int, int]]]:
    """{block index: its units cut into runs at the activations it keeps (`block_runs`)} for every block of a model
    (``layouts``, in order) that keeps some of its activations under a plan's ``acts``."""
    return {i: block_runs(layout, a) for i, (layout, a) in enumerate(zip(layouts, acts)) if any(a)}


def partial_runs(layout: ActLayout, acts: Sequence[int]) -> list[tuple[int, int]]:
    """The runs of two or more units of a block that keeps some of its activations: its partial merges. None for a
    block that keeps all (nothing merges) or none (the whole block is the block-level merge)."""
    if not any(acts):
        return []
    return [r for r in block_runs(layout, acts) if r[1] - r[0] >= 2]


def run_variant(layout: ActLayout, run: tuple[int, int]) -> str:
    """The name of a partial merge by where its run lies: ``fused-expand`` (holds the block's first unit),
    ``fused-project`` (its last), ``fused-inner`` (neither)."""
    start, stop = run
    return ACT_VARIANTS[0] if start == 0 else ACT_VARIANTS[1] if stop == len(layout.units) else ACT_VARIANTS[2]


#: A block of more than two removable activations has its partial states timed (`partial_states`) up to this many
#: (2^n - 2 states); a block of more is planned whole (kept or linearised), and a plan using one of its partial
#: states names the missing entry.
MAX_TIMED_ACTS = 6
#: The variant of a partial state of a block of more than two removable activations: ``fused-`` and one 0/1 per
#: activation, in unit order (1 = kept), e.g. ``fused-010``.
STATE_PREFIX = "fused-"
_STATE_VARIANT = re.compile(rf"{STATE_PREFIX}[01]{{3,{MAX_TIMED_ACTS}}}")


def is_partial_variant(variant: str) -> bool:
    """True for the LUT variant of a partial state (`partial_variant`): ``fused-expand``, ``fused-project`` (a block
    of two removable activations) or ``fused-`` and its kept activations (a block of more, e.g. ``fused-010``)."""
    return variant in ACT_VARIANTS[:2] or _STATE_VARIANT.fullmatch(variant) is not None


def partial_variant(layout: ActLayout, acts: Sequence[int]) -> str | None:
    """The LUT variant of a block in the partial state ``acts`` (some activations kept, some removed, a run of two or
    more units merged): for a block of two removable activations (an inverted residual, a bottleneck, a chain of
    three) its one partial run's name (`run_variant`), which is the state's alone; for a block of 3..`MAX_TIMED_ACTS`
    the state itself (``fused-010``: `STATE_PREFIX` and ``acts``); None for a block of more or a state that is not
    partial (nothing merges)."""
    runs = partial_runs(layout, acts)
    if layout.n_acts == 2:
        return run_variant(layout, runs[0]) if len(runs) == 1 else None
    if runs and not all(acts) and layout.n_acts <= MAX_TIMED_ACTS:
        return STATE_PREFIX + "".join(str(int(a)) for a in acts)
    return None


def partial_states(layout: ActLayout) -> dict[str, tuple[int, ...]]:
    """{variant: acts} of every partial state of a block that the LUT times (`partial_variant`): the inverse of
    `partial_variant`, the one mapping between a state and its variant. A block of n removable activations
    (3 <= n <= `MAX_TIMED_ACTS`) has up to 2^n - 2 (those where a run merges), in counting order."""
    n = layout.n_acts
    if n < 2 or n > MAX_TIMED_ACTS:
        return {}
    out = {}
    for acts in itertools.product((0, 1), repeat=n):
        if not 0 < sum(acts) < n:  # linearised or kept whole: not a partial state
            continue
        variant = partial_variant(layout, acts)
        if variant is not None:
            out[variant] = acts
    return out


def segments(layouts: Sequence[ActLayout], acts: Sequence[Sequence[int]], *, free_activation: bool = True,
             spans: Sequence[tuple[int, int]] | None = None) -> list[tuple[tuple[int, int], ...]]:
    """The model's linear segments: maximal runs of units, as ``(block, unit)`` pairs, with no activation and no
    shared map between them (the module docstring says where one crosses a block border). ``free_activation``: the
    plan puts one after a linearised block without a tail (outside ``spans``, the plan's span ranges)."""
    if len(layouts) != len(acts):
        raise PlanError(f"'acts' has {len(acts)} entries but the model has {len(layouts)} blocks")
    interior = {i for start, stop in spans or () for i in range(start, stop - 1)}  # blocks followed inside a span
    out: list[tuple[tuple[int, int], ...]] = []
    current: list[tuple[int, int]] = []
    for b, (layout, block_acts) in enumerate(zip(layouts, acts)):
        linear = not any(block_acts)
        if current and not (layout.follows and (linear or not layout.residual)):
            out.append(tuple(current))  # the previous segment cannot run into this block
            current = []
        unit_acts = _unit_acts(layout, block_acts)
        for j, a in enumerate(unit_acts):
            current.append((b, j))
            if a == 1:
                out.append(tuple(current))
                current = []
        ends = layout.tail or (layout.residual and not linear) or (linear and free_activation and b not in interior)
        if current and ends:
            out.append(tuple(current))
            current = []
    if current:
        out.append(tuple(current))
    return out


def is_crossing(acts: Sequence[Sequence[int]] | None, span: tuple[int, int]) -> bool:
    """True when the span ``[start, stop)`` of a plan with ``acts`` is a crossing span: its first or last block keeps
    some of its activations (a span of linearised blocks only is a span as block plans have them)."""
    start, stop = span
    return acts is not None and (any(acts[start]) or any(acts[stop - 1]))


def span_units(layouts: Sequence[ActLayout], acts: Sequence[Sequence[int]], span: tuple[int, int]
               ) -> list[tuple[int, int]]:
    """The units a span ``[start, stop)`` merges, as ``(block, unit)`` pairs: the first block's last run (all its units
    where it is linearised), every unit of the blocks inside, the last block's first run (all its units where it is
    linearised). `PlanError` where a block inside keeps an activation."""
    start, stop = span
    out: list[tuple[int, int]] = []
    for b in range(start, stop):
        n_units = len(layouts[b].units)
        if not any(acts[b]):
            out += [(b, j) for j in range(n_units)]
        elif b not in (start, stop - 1):
            raise PlanError(f"span [{start}, {stop}) includes block {b}, which keeps activations: only a span's "
                            "first and last block may keep some")
        elif b == start:
            first, _ = block_runs(layouts[b], acts[b])[-1]
            out += [(b, j) for j in range(first, n_units)]
        else:
            _, last = block_runs(layouts[b], acts[b])[0]
            out += [(b, j) for j in range(last)]
    return out


def crossing_units(layouts: Sequence[ActLayout], acts: Sequence[Sequence[int]], span: tuple[int, int], *,
                   free_activation: bool = True, spans: Sequence[tuple[int, int]] | None = None
                   ) -> list[tuple[int, int]]:
    """`span_units` of a span, checked to be linear: they lie in one segment (`segments` of the plan, whose spans are
    ``spans``), so nothing non-linear or shared lies between them. `PlanError` naming what does otherwise (a kept
    activation, a skip connection of a block that is not linear as a whole, a tail, a map read twice)."""
    units = span_units(layouts, acts, span)
    where = {u: n for n, seg in enumerate(segments(layouts, acts, free_activation=free_activation,
                                                   spans=spans if spans is not None else [span]))
             for u in seg}
    if len({where[u] for u in units}) != 1:
        start, stop = span
        raise PlanError(f"span [{start}, {stop}) is not linear across its blocks: an activation that the plan keeps, "
                        "a tail, or a skip connection of a block that is not linearised whole lies inside it; cut "
                        "the span there, or remove that activation")
    return units


def crossing_candidates(layouts: Sequence[ActLayout], max_len: int
                        ) -> list[tuple[tuple[int, int], tuple[tuple[int, ...], ...]]]:
    """The crossing spans of 2..``max_len`` blocks that are timed and planned, as ``(span, acts of its blocks)``: every
    range whose end blocks are each in a state the planner offers a block in (`_end_states`: linearised, keeping all,
    or a partial state the LUT times), not both linearised (a span of linearised blocks), the blocks between keeping
    none, and which is linear across its borders (`crossing_units`, the blocks outside it keeping all: e.g. a first
    block whose kept projection feeds its skip connection does not cross). The span takes its first block's last run
    and its last block's first run, whatever runs the rest of each end block holds (they deploy as in that state).
    What else a block must be to cross (symmetric padding, no skip but the identity) the blocks know
    (`dsprof.models.spans.span_runs`)."""
    kept = [(1,) * layout.n_acts for layout in layouts]
    out = []
    for start in range(len(layouts)):
        for stop in range(start + 2, min(len(layouts), start + max_len) + 1):
            for first in _end_states(layouts[start]):
                for last in _end_states(layouts[stop - 1]):
                    if not (any(first) or any(last)):
                        continue
                    acts = list(kept)
                    acts[start], acts[stop - 1] = first, last
                    for i in range(start + 1, stop - 1):
                        acts[i] = (0,) * layouts[i].n_acts
                    try:
                        crossing_units(layouts, acts, (start, stop))
                    except PlanError:
                        continue
                    out.append(((start, stop), tuple(acts[start:stop])))
    return out


def _end_states(layout: ActLayout) -> list[tuple[int, ...]]:
    """The states in which a block may end a crossing span: every state the planner offers it in, i.e. linearised,
    keeping all its activations, and each partial state the LUT times (`partial_states`); each once (a block without
    removable activations has one state). Whatever the state, the run at the span's border (the block's last run at
    its start, its first run at its end) is one linear run that crosses."""
    states = [(0,) * layout.n_acts, *partial_states(layout).values(), (1,) * layout.n_acts]
    return list(dict.fromkeys(states))
