"""The one merge decision: which linearised blocks of a plan merge, and which runs of them merge as one span.

Decided in one place, the planner's exact search (`dsprof.planning.planner.settle`, the dynamic programme of
`dsprof.planning.dp` for the plan's fixed ``keep``), over one price table: a LUT's `dsprof.lut.prices.Prices` (the
prices `dsprof predict` shows) or, asked for, MACs (`dsprof.lut.macs.MacPrices`). The decision is written into the
plan's ``merge`` list (and ``spans``); merge/ merges what the list says (`dsprof.merging.merge_model`), and every
command that builds a merged model replays it.

A `Decider` is built once per model from what the caller has (`merge_rule`: a LUT, MACs, or neither: then a plan's
own list is replayed and a plan without one is refused), and ``decide(plan)`` returns the plan with its list and what
decided it (`dsprof.records.merges.Merges`). A plan's own list is replayed whatever the table.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from torch import nn

from ..constants import DEFAULT_MAX_SPAN
from ..device_context import DeviceContext
from ..lut.macs import MacPrices
from ..lut.predict import prices_of
from ..lut.table import LUT
from ..records.merges import Merges, check_merges, replayed, rule_kind
from ..models import ModelRef, find_blocks
from ..records.plan import Plan
from .planner import settle, span_limit

__all__ = ["Decider", "merge_rule"]


@dataclass(frozen=True)
class Decider:
    """The planner's search on one model's price table (``costs``: a LUT's `Prices`, `MacPrices`, or None: replay
    only); ``by`` names it (``lut``, ``macs`` or ``plan``), ``context`` the LUT context."""

    by: str
    costs: Any = None
    context: str = ""
    blocks: int | None = None  # the model's block count where a replaying decider knows it (a table knows its own)

    def decide(self, plan: Any, *, spans: Any = None, max_span: int | None = None,
               strict: bool = True) -> Merges:
        """``plan`` (anything `Plan.coerce` reads) with its ``merge`` list, and what decided it: its own list where it
        has one (checked) and ``spans`` is None; else the planner's choice (`settle`) for its ``keep``. ``spans``:
        None keeps the plan's own; ``"auto"`` lets the search choose them too, of up to ``max_span`` blocks (None: as
        `dsprof.plan` offers them, up to the default and no wider than the LUT holds, saying what that limited); a
        sequence of [start, stop) ranges puts those instead (the merges then decided again). ``strict=False``: a
        block the LUT cannot decide counts as merged (a partial prediction, which names the miss)."""
        costs = self.costs
        plan = check_merges(plan, getattr(costs, "identity", None), self.blocks if costs is None else len(costs.blocks))
        if spans is not None:  # spans chosen here: the merges are decided again
            given = None if isinstance(spans, str) else tuple(tuple(s) for s in spans) or None
            plan = replace(plan, merge=None, spans=given)
        if plan.merge is not None:
            return Merges(plan, "plan")
        if costs is None:
            return replayed(plan)
        auto = isinstance(spans, str)
        by = "planner" if auto and self.by == "lut" else self.by
        limit = ""
        if auto and max_span is None:  # as the planner offers them: no wider than a LUT holds (MACs price any)
            max_span, limit = span_limit(costs, None) if self.by == "lut" else (DEFAULT_MAX_SPAN, "")
        return Merges(settle(costs, plan, max_span=max_span if auto else None, strict=strict), by, self.context,
                      limit)


def merge_rule(
    model: str | nn.Module | ModelRef,
    *,
    lut: LUT | str | Path | None = None,
    device: DeviceContext | str | None = None,
    merge_by: str | None = None,
    plan: Any = None,
    method: str = "isolated",
) -> Decider:
    """The `Decider` for ``model``'s plans (``model``: anything `ModelRef.of` takes; a `ModelRef` carries the name,
    options and resolution it is built with): the planner on ``lut``'s prices in the context ``device`` (a `LUT` or
    its file), unless ``merge_by="macs"``; on MACs with ``merge_by="macs"``; else one that replays a plan's own list
    and refuses one without. ``method``: what the LUT's prices read (a lone block's choice compares its entries
    whatever the method; spans chosen by the search follow it, ``auto`` as `dsprof plan`). With ``plan`` (anything
    `Plan.coerce` reads), what cannot decide it is refused before anything is built (`rule_kind`; a module built
    already: by `Decider.decide`, after the plan's length), and a plan with its own list gets the decider that replays
    it (nothing read)."""
    given = None if plan is None else Plan.coerce(plan)
    built = model.module if isinstance(model, ModelRef) else model if isinstance(model, nn.Module) else None
    if built is not None and given is not None and given.merge is None:  # its length first: `Decider.decide` after
        given = None
    kind = rule_kind(given, lut=lut is not None, merge_by=merge_by)
    if kind == "plan":  # a plan with its own list (replayed whatever else is given), or nothing to decide by
        return Decider("plan", blocks=len(find_blocks(built)) if built is not None and plan is not None else None)
    if kind == "lut":
        prices = prices_of(model, lut, device=device, method=method)
        return Decider("lut", prices, str(prices.key))
    net = built if built is not None else ModelRef.of(model).build()  # a module as given (its mode untouched)
    return Decider("macs", MacPrices(find_blocks(net)))
