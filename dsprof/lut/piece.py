"""`Piece`: one block, or one span of blocks, as a plan deploys it, priced: the one piece type. `dsprof.lut.prices`
prices them, `dsprof.lut.interval` adds up their errors, the planner's dynamic programme (`dsprof.planning.dp`) and the
plan for several contexts (`dsprof.planning.minimax`) choose among them. Plain data, so that all of them read it without
importing each other."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

__all__ = ["Piece", "cheaper", "comparable", "linearised"]


@dataclass(frozen=True)
class Piece:
    """One block, or one span of blocks, as a plan deploys it, priced. ``variant`` is the LUT variant it reads
    (``original``, ``merged``, ``linear``, ``span``, or the variant asked for every block); ``kept``: a block that
    keeps its activations (a linearised block left unmerged may read its ``original`` entry too). ``latency_s`` is
    its LUT entry, ``saving_s`` how much it lowers the model's predicted latency under the method (0 for a kept
    block; NaN when an entry is missing, named by ``missing``; for the planner's mean over contexts, a weighted
    share), ``errors_s`` the median errors it adds to the interval. ``loss``: the summed importance of the blocks it
    linearises (a `fractions.Fraction` keeps sums exact, so that equal losses tie); ``savings_s``: its saving in each
    of several contexts as a plan there counts it (each context's ``gain_s``; `dsprof.planning.minimax`).
    ``weight``: what one second of its saving counts for in a plan's (`dsprof.lut.inmodel.InModel.weight`: rho where
    a plan's pieces save rho times their savings and this piece saves, else 1); ``gain_s``, its saving so counted, is
    what the planner's searches add up."""

    start: int
    stop: int
    variant: str
    latency_s: float = math.nan
    saving_s: float = 0.0
    errors_s: tuple[float, ...] = ()
    missing: str | None = None
    noisy: bool = False
    in_model: bool = False  # its saving was measured inside the running model (`dsprof.lut.inmodel`)
    kept: bool = False
    loss: Fraction | float = Fraction(0)
    savings_s: tuple[float, ...] = ()
    weight: float = 1.0

    @property
    def gain_s(self) -> float:
        """What the piece adds to a plan's saving (seconds): ``weight`` times ``saving_s``."""
        return self.weight * self.saving_s

    @property
    def found(self) -> bool:
        return self.missing is None

    @property
    def merges(self) -> bool:
        """Whether its blocks merge into one convolution (a block merged alone, or a span)."""
        return self.variant in ("merged", "span")

    @property
    def changes(self) -> bool:
        """Whether deploying it changes the model there: a linearised block, merged or not, a span, a block keeping
        some of its activations; not a block as built (what `dsprof.lut.interval.PIECE_INTERACTION` counts)."""
        return not (self.kept and self.variant == "original")


def comparable(merged: Piece, unmerged: Piece) -> bool:
    """Whether the table holds both costs of a lone block (its merged and its unmerged ``latency_s``: entries, or
    MACs), so that `cheaper` can choose; a piece whose saving is missing for another reason (an in-situ entry) still
    has its cost."""
    return not (math.isnan(merged.latency_s) or math.isnan(unmerged.latency_s))


def cheaper(merged: Piece, unmerged: Piece) -> Piece:
    """Block ``i`` linearised alone, as a price table offers it to the planner: ``merged`` (its one convolution) where
    that costs less than ``unmerged`` (the block left unmerged as deployed), both in the table's unit (``latency_s``:
    a LUT's medians, or MACs); where either is missing, ``merged`` (it names what the table lacks). The one
    comparison of the two ways of deploying a lone block: the planner's search (`dsprof.planning.decide`) chooses every
    plan's merges and spans from pieces offered this way."""
    if not comparable(merged, unmerged):
        return merged
    return merged if merged.latency_s < unmerged.latency_s else unmerged


def linearised(pieces: "list[Piece] | tuple[Piece, ...]") -> tuple[int, int]:
    """(how many blocks ``pieces`` linearise, how many they cover): a plan's share of the calibration plan, which
    linearises every block (`dsprof.lut.inmodel.InModel.together`)."""
    return (sum(p.stop - p.start for p in pieces if not p.kept), sum(p.stop - p.start for p in pieces))
