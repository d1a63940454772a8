"""Entries by key: one LUT context's entries indexed once (`Lookup`), what a prediction reads of one model besides its
blocks' chosen variants (`ModelEntries`, and the `in_model_factor` of them), and the keys a piece goes by (`span_key`:
the LUT workload of a span's one convolution; `piece_name`: its name inside the model). Split from
`dsprof.lut.prices` (issue #44, item 11): the prices read their entries here."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from ..device_context import DeviceContext
from ..models.spans import span_spec
from ..models import Block
from ..records.measurement import IN_SITU_SCOPE, SESSION_AGAIN, session_pair_name
from .hints import label_model_args
from .schema import in_situ_workload, span_piece, split_label
from .table import LUT, LUTEntry

__all__ = ["Lookup", "ModelEntries", "in_model_factor", "piece_name", "span_key"]


@dataclass(frozen=True)
class Lookup:
    """Lookups in one device context of a LUT, indexed once, that miss quietly (None): a prediction
    gathers its misses and reports them once."""

    lut: LUT
    key: DeviceContext
    index: dict[tuple[str, str, str], LUTEntry] = field(repr=False, default_factory=dict)

    @classmethod
    def of(cls, lut: LUT, key: DeviceContext) -> "Lookup":
        index: dict[tuple[str, str, str], LUTEntry] = {}
        for r in lut.entries(key).itertuples(index=False):
            entry = LUTEntry.of(r)
            index.setdefault((r.scope, r.workload, r.variant), entry)  # the first row, as LUT.find
        return cls(lut, key, index)

    def __call__(self, workload: Any, variant: str, scope: str = "block") -> LUTEntry | None:
        workload = workload if isinstance(workload, str) else workload.to_str()
        return self.index.get((scope, workload, variant))

    def models(self) -> list[str]:
        """The labels of the whole models this context holds (timed whole, or as stem and head)."""
        return sorted({w for scope, w, variant in self.index if scope in ("model", "stem", "head") and variant == "original"})

    def other_model_note(self, label: str) -> str | None:
        """Where this context holds other models but not ``label``: one clause that says what it holds instead
        and, where only the resolution differs, the ``resolution`` that fixes it; None where it holds ``label`` (or
        no whole model at all)."""
        held = self.models()
        if not held or label in held:
            return None
        name, options = split_label(label)
        same = sorted({o.get("resolution") for n, o in map(split_label, held) if n == name
                       and {k: v for k, v in o.items() if k != "resolution"} == {k: v for k, v in options.items() if k != "resolution"}
                       and o.get("resolution") is not None}, key=str)
        if same:
            at = " or ".join(f"{r} px" for r in same)
            return (f"the LUT {self.lut.source} holds {name} at {at}, not at {options.get('resolution', '?')} px: "
                    f"pass `{label_model_args(label, same[0])}`")
        shown = ", ".join(held[:4]) + (f" and {len(held) - 4} more" if len(held) > 4 else "")
        if any(split_label(h)[0] == name for h in held):  # the same model with other build options
            return (f"this LUT ({self.lut.source}) holds another model ({shown}), not {label}: give the options it was "
                    "measured with")
        return f"this LUT ({self.lut.source}) holds another model ({shown}), not {label}: name the model it holds"


@dataclass(frozen=True)
class ModelEntries:
    """What a prediction reads of one model besides its blocks' chosen variants: each block's original,
    the whole model, its stem and head, the whole model in each block's in-situ group (by block name), and the
    session pairs' second sessions (`dsprof.records.measurement.SESSION_AGAIN`, in order, up to the first missing)."""

    label: str
    originals: list[LUTEntry | None]
    whole: LUTEntry | None
    stem: LUTEntry | None
    head: LUTEntry | None
    in_situ: dict[str, LUTEntry | None]
    sessions: tuple[LUTEntry, ...] = ()

    @classmethod
    def read(cls, lookup: Lookup, label: str, blocks: list[Block]) -> "ModelEntries":
        return cls(
            label,
            [lookup(b.spec.to_str(), "original") for b in blocks],
            lookup(label, "original", "model"),
            lookup(label, "original", "stem"),
            lookup(label, "original", "head"),
            {b.name: lookup(in_situ_workload(label, b.name), "original", IN_SITU_SCOPE) for b in blocks},
            tuple(_session_pairs(lookup, label)),
        )

    @property
    def references(self) -> list[LUTEntry]:
        """The whole model's medians the in-situ methods start from: its own entry and every in-situ group's."""
        return [e for e in [self.whole, *self.in_situ.values()] if e is not None]

    @property
    def whole_s(self) -> float:
        """The whole model's latency: the median of its `references`' medians (NaN without one). One slow group of
        the whole model's own entry moved the in-model factor from 1.7 to 2.3 in issue #27's seed-303 run, while
        its in-situ groups agreed with the later checks."""
        references = self.references
        return statistics.median(e.median_s for e in references) if references else math.nan


def _session_pairs(lookup: Lookup, label: str) -> list[LUTEntry]:
    """The second sessions of ``label``'s session pairs, (session 1) on, up to the first the LUT lacks."""
    found = []
    while (entry := lookup(in_situ_workload(label, session_pair_name(len(found) + 1)), SESSION_AGAIN,
                           IN_SITU_SCOPE)) is not None:
        found.append(entry)
    return found


def in_model_factor(entries: ModelEntries) -> float | None:
    """How much longer the model's blocks take inside the whole model than timed alone: the whole model minus its
    stem and head, over the sum of its blocks' originals (a model without a stem and head entry -- one dsprof
    cannot split -- counts them as 0: an upper bound); None where the LUT lacks the whole model or a block (or it
    is not positive). The whole model is `ModelEntries.whole_s`, the reference the scaled methods start from. The
    intervals' systematic term (`dsprof.lut.interval`) and the ``in-model`` method read it."""
    if entries.whole is None or any(o is None for o in entries.originals):
        return None
    blocks = sum(o.median_s for o in entries.originals)
    outside = entries.stem.median_s + entries.head.median_s if entries.stem and entries.head else 0.0
    inside = entries.whole_s - outside
    return inside / blocks if blocks > 0 and inside > 0 else None


def piece_name(blocks: list[Block], start: int, stop: int) -> str:
    """The name blocks start..stop-1 go by inside the model (their in-situ workload, `in_situ_workload`): a block's
    module name, or a span's (`span_piece`)."""
    if stop - start == 1:
        return blocks[start].name
    return span_piece(blocks[start].name, blocks[stop - 1].name)


def span_key(blocks: list[Block], start: int, stop: int) -> str:
    """The LUT workload of the one convolution that blocks start..stop-1 merge into (its ``conv`` spec)."""
    return span_spec([b.spec for b in blocks[start:stop]]).to_str()
