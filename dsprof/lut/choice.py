"""The merge choice as one object (`MergeChoice`): what decides which linearised blocks of a plan without a ``merge``
list merge -- a LUT and its context (the planner's merge decision, as `predict` prices it:
`dsprof.planning.decide.merge_rule`), or MACs -- as `dsprof.measure` and `dsprof.export` take it. A plan's own list is
replayed whatever the choice."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .table import LUT

__all__ = ["MergeChoice"]


@dataclass(frozen=True)
class MergeChoice:
    """``lut``: a `LUT` or its file, whose rule merges (in the context ``device_key`` where it holds several; else the
    one the run's backend, dtype and batch pick); ``merge_by``: ``"lut"`` or ``"macs"`` (where merging lowers the
    MACs); ``accept_modified``: use a LUT file changed after `dsprof build-lut` wrote it."""

    lut: LUT | str | Path | None = None
    device_key: Any = None
    merge_by: str | None = None
    accept_modified: bool = False

    @classmethod
    def macs(cls) -> "MergeChoice":
        """Merge where merging lowers the MACs (no LUT)."""
        return cls(merge_by="macs")
