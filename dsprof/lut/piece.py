"""`Piece`: one block, or one span of blocks, as a plan deploys it, priced (`dsprof.lut.prices` prices them,
`dsprof.lut.interval` adds up their errors). Plain data, so that both read it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Piece"]


@dataclass(frozen=True)
class Piece:
    """One block, or one span of blocks, as a plan deploys it, priced. ``latency_s`` is its LUT entry,
    ``saving_s`` how much it lowers the model's predicted latency under the method (0 for a kept block;
    NaN when an entry is missing, named by ``missing``), ``errors_s`` the median errors it adds to the
    interval."""

    start: int
    stop: int
    variant: str  # original, merged, linear, span (or the variant asked for every block)
    latency_s: float
    saving_s: float
    errors_s: tuple[float, ...] = ()
    missing: str | None = None
    noisy: bool = False
    in_model: bool = False  # its saving was measured inside the running model (`dsprof.lut.inmodel`)

    @property
    def found(self) -> bool:
        return self.missing is None
