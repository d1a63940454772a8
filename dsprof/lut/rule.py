"""The `MergeRule` of a model, built once from what the caller has: a LUT (the rule `predict` prices), MACs, or
neither (a rule that only replays a plan's own list). Every command that builds a merged model asks here, then
passes the rule on (`dsprof.merge.rule` says what the rule decides and how)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from torch import nn

from ..device_context import DeviceContext
from ..merge.rule import MergeRule, macs_rule, rule_kind
from ..models import find_blocks, named_model
from ..plan.plan import Plan
from .predict import prices_of
from .table import LUT

__all__ = ["merge_rule"]


def merge_rule(
    model: str | nn.Module,
    *,
    lut: LUT | str | Path | None = None,
    device: DeviceContext | str | None = None,
    merge_by: str | None = None,
    name: str | None = None,
    options: Mapping[str, Any] | None = None,
    resolution: int | None = None,
    plan: Any = None,
) -> MergeRule:
    """The rule that decides which linearised blocks of ``model``'s plans merge (``model``: a registered name built
    with ``options`` at ``resolution``, or a module with its ``name``): the LUT's in the context ``device`` of ``lut``
    (a `LUT` or its file; `dsprof.lut.prices.Prices.rule`), unless ``merge_by="macs"``; MACs with
    ``merge_by="macs"`` (`macs_rule`); else a rule that replays a plan's own list and refuses one without. With
    ``plan`` (anything `Plan.coerce` reads), what cannot decide it is refused before anything is built
    (`rule_kind`), and a plan with its own list gets the rule that replays it (nothing read or built)."""
    kind = rule_kind(None if plan is None else Plan.coerce(plan), lut=lut is not None, merge_by=merge_by)
    if kind == "plan":  # a plan with its own list (replayed whatever else is given), or nothing to decide by
        return MergeRule("plan")
    if kind == "lut":  # the rule reads block entries only, whatever the method
        return prices_of(model, lut, device=device, name=name, options=options, resolution=resolution,
                         method="isolated").rule
    _, net = named_model(model, name, resolution, dict(options or {}))
    return macs_rule([b.spec for b in find_blocks(net)])
