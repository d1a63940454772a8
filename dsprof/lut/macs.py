"""A model's pieces priced in MACs: the price table the planner's search reads when MACs decide (``--merge-by
macs``), beside a LUT's `dsprof.lut.prices.Prices`.

The same pieces as a LUT's, in MACs for one image (`dsprof.models.spec_macs`, the one count, from the blocks'
descriptions): a kept block as built; a block linearised alone merged into its one convolution, or left unmerged
(as it deploys: as built, removing activations moves no MAC, or with the ring a padding in front adds); a span's one convolution (`dsprof.models.spans.span_spec`). A
piece's ``latency_s`` holds its MACs and ``saving_s`` the MACs it removes, so that the planner's dynamic programme
(`dsprof.planning.dp`) runs on it unchanged (`dsprof.planning.decide`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from ..merging.block import deploys_alike
from ..models.spans import span_spec
from ..models import Block, spec_macs
from .piece import Piece, cheaper

__all__ = ["MacPrices"]


@dataclass(frozen=True)
class MacPrices:
    """The pieces of one model (``blocks``, `find_blocks` order) priced in MACs; ``identity`` (registered name,
    options), where known, is what a plan is checked against."""

    blocks: list[Block]
    identity: tuple[str, dict] | None = None
    label: str = "MACs"
    key: str = "MACs"
    missing: tuple[str, ...] = ()
    _built: tuple[int, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_built", tuple(spec_macs(b.spec) for b in self.blocks))

    def kept(self, i: int) -> Piece:
        """Block ``i`` with its activations: its MACs as built."""
        return Piece(i, i + 1, "original", self._built[i], 0, kept=True)

    def linearized(self, i: int, merge: bool | None = None, border: str = "in_front") -> Piece:
        """Block ``i`` without activations, alone: merged into one convolution, left unmerged (as it deploys: its
        MACs as built, or with the ring its padding in front adds where ``border`` is in front and the padding cannot
        go back in place, `deploys_alike`: ResNet's basic blocks, VGG's 3x3 pairs), or (None) the one with fewer MACs
        (`dsprof.lut.piece.cheaper`)."""
        if merge is None:
            return cheaper(self.linearized(i, True, border), self.linearized(i, False, border))
        if not merge:
            ring = border == "in_front" and not deploys_alike(self.blocks[i])
            macs = spec_macs(self.blocks[i].spec, in_front=True) if ring else self._built[i]
            return Piece(i, i + 1, "linear", macs, self._built[i] - macs)
        macs = spec_macs(self.blocks[i].spec, merged=True)
        return Piece(i, i + 1, "merged", macs, self._built[i] - macs)

    def span(self, start: int, stop: int) -> Piece:
        """Blocks start..stop-1 merged into one convolution."""
        macs = spec_macs(span_spec([b.spec for b in self.blocks[start:stop]]))
        return Piece(start, stop, "span", macs, sum(self._built[start:stop]) - macs)
