"""The merge choice as one object (`MergeChoice`): what decides which linearised blocks of a plan without a ``merge``
list merge -- a LUT and its context (the planner's merge decision, as `predict` prices it:
`dsprof.planning.decide.merge_rule`), or MACs -- as `dsprof.measure` and `dsprof.export` take it. A plan's own list is
replayed whatever the choice. And how a LUT prices a model (`Pricing`): in which of its contexts, by which method, with
spans of up to how many blocks, as `dsprof.plan`, `dsprof.predict`, `dsprof.api.measure_few` and the search take it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..device_context import DeviceContext
from ..errors import UsageError
from ..names import MERGE_BY
from .table import LUT

__all__ = ["MergeChoice", "Pricing"]


@dataclass(frozen=True)
class MergeChoice:
    """``lut``: a `LUT` or its file, whose rule merges (in the context ``device_key`` where it holds several; else the
    one the run's backend, dtype and batch pick); ``merge_by``: ``"lut"`` or ``"macs"`` (where merging lowers the
    MACs); ``accept_modified``: use a LUT file changed after `dsprof build-lut` wrote it."""

    lut: LUT | str | Path | None = None
    device_key: Any = None
    merge_by: str | None = None
    accept_modified: bool = False

    def __post_init__(self) -> None:
        if self.merge_by not in (None, *MERGE_BY):
            raise UsageError(f"`merge=MergeChoice(merge_by=)` is one of {', '.join(MERGE_BY)}, got {self.merge_by!r}")
        if self.merge_by == "lut" and self.lut is None:  # said here, with the fields a caller gives
            raise UsageError("`merge=MergeChoice(merge_by='lut')` decides the merges from a LUT: pass "
                             "`merge=MergeChoice(lut=LUT)` (or `merge=MergeChoice(merge_by='macs')`)")

    @classmethod
    def macs(cls) -> "MergeChoice":
        """Merge where merging lowers the MACs (no LUT)."""
        return cls(merge_by="macs")


@dataclass(frozen=True)
class Pricing:
    """How a LUT prices a model. ``device_key``: its context (a `DeviceContext` or its string) where it holds several,
    else the only one that ``backend`` and ``batch`` leave (none given: the only one it holds). ``method`` and ``rest``:
    how block changes and the rest of the model are counted (`dsprof.lut.predict_latency`); ``strict``: a miss is an
    error, not a warning (the planner refuses every miss). ``max_span``: spans of up to that many blocks priced as
    one convolution where the planner chooses them (1: none; None: as wide as the LUT holds). ``resolution``: the
    input size the LUT's entries were measured at, for a model trained at another (a search at 32 px priced at 224;
    None: the model's own)."""

    device_key: DeviceContext | str | None = None
    backend: str | None = None
    batch: int | None = None
    method: str = "auto"
    rest: str = "auto"
    strict: bool = False
    max_span: int | None = None
    resolution: int | None = None

    @property
    def picks(self) -> bool:
        """Whether a context is named (``device_key``, ``backend`` or ``batch``)."""
        return self.device_key is not None or self.backend is not None or self.batch is not None

    def context(self, lut: LUT) -> DeviceContext:
        """The context of ``lut`` this pricing reads (`LUT.resolve`: none or several raise, listing what it has)."""
        return lut.resolve(self.device_key, backend=self.backend, batch=self.batch)
