"""One merge rule: which linearised blocks of a plan merge, decided once and written into its ``merge`` list.

A plan's own list (what `dsprof plan` writes and `merge_model` records) is replayed as written. A plan without
one (the paper's presets, a plan from `dsprof search` without a LUT) has it filled by

- a LUT (``lut``): `dsprof.lut.cost.PlanCosts.with_merges`, the rule `dsprof predict` prices: a lone linearised
  block merges where its ``merged`` entry is below the block left unmerged as deployed (its ``linear`` entry,
  else ``original``); a span merges;
- MACs (``macs``, asked for by name: ``--merge-by macs``): `merge_model`'s rule, where merging lowers the MACs.

Every command that builds a merged model (``merge``, ``measure --plan``, ``export --plan``, ``predict --measure``,
``report``, ``finetune``) goes through `decide_merges`, so the model it builds has the merges `predict` priced;
without a list, a LUT or ``--merge-by macs`` it refuses the plan in one line (`no_rule_message`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from torch import nn

from ..errors import PlanError, UsageError
from ..lut.schema import MERGE_BY
from .model import merge_model, merge_report
from .plan import Plan

__all__ = ["MERGE_BY", "Merges", "decide_merges", "merge_by_rule", "merge_rule", "no_rule_message"]


@dataclass(frozen=True)
class Merges:
    """A plan with its ``merge`` list, and what decided it: ``by`` is ``plan`` (its own list), ``lut`` (the rule, in
    the LUT context ``context``), ``planner`` (the planner's merges and spans for the plan's ``keep`` in that
    context, `dsprof.plan.best_plan`: ``merge --spans auto --lut``) or ``macs``."""

    plan: Plan
    by: str
    context: str = ""

    @property
    def merged(self) -> list[int]:
        """Indices of the blocks that merge (those inside a span included)."""
        return [i for i, m in enumerate(self.plan.merge or ()) if m]

    def describe(self) -> str:
        """One line for the terminal: which blocks merge, which stay linear, and what decided it."""
        how = {
            "plan": "the plan's merge list, replayed",
            "lut": f"the LUT in {self.context}: a block merges where its merged entry is below its unmerged one, "
                   "the rule predict prices",
            "planner": f"the planner on the LUT in {self.context}: the merges and spans it prices lowest for this keep",
            "macs": "MACs (--merge-by macs): a block merges where that lowers its MACs; predict prices the LUT's rule",
        }[self.by]
        linear = [i for i in self.plan.linearized if i not in self.merged]
        return (f"{self.plan.name or 'plan'}: merged blocks {_indices(self.merged)}; linear, unmerged "
                f"{_indices(linear)} (decided by {how})")


def _indices(values: list[int]) -> str:
    return " ".join(map(str, values)) if values else "none"


def no_rule_message(plan: Plan) -> str:
    """The one line that refuses a plan without a ``merge`` list when neither a LUT nor MACs may decide it."""
    return (f"{plan.name or 'the plan'} has no merge list: pass --lut LUT to merge where that LUT says merging pays "
            "(the rule `dsprof predict` prices; Python: decide_merges(..., lut=LUT)), or --merge-by macs to merge where "
            "MACs drop (Python: merge_by='macs')")


def merge_rule(plan: Plan, *, lut: bool, merge_by: str | None) -> str:
    """How ``plan``'s merges are decided: ``plan`` (its own list, replayed whatever else is given), ``lut`` (with
    a LUT, unless ``merge_by="macs"``) or ``macs``. Raises `PlanError` (`no_rule_message`) when the plan has no
    list and neither is given, `UsageError` for ``merge_by="lut"`` without a LUT."""
    if merge_by not in (None, *MERGE_BY):
        raise UsageError(f"--merge-by is one of {', '.join(MERGE_BY)}, got {merge_by!r}")
    if merge_by == "lut" and not lut:
        raise UsageError("--merge-by lut decides the merges from a LUT: pass --lut LUT (or --merge-by macs)")
    if plan.merge is not None:
        return "plan"
    if merge_by == "macs":
        return "macs"
    if lut:
        return "lut"
    raise PlanError(no_rule_message(plan))


def decide_merges(
    model: str | nn.Module,
    plan: Any,
    *,
    lut: Any = None,
    device: Any = None,
    merge_by: str | None = None,
    name: str | None = None,
    options: Mapping[str, Any] | None = None,
    resolution: int | None = None,
    strict: bool = True,
) -> Merges:
    """``plan`` (a `Plan`, preset name or plan file) with its ``merge`` list, for ``model`` (a registered name
    built with ``options`` at ``resolution``, or a module with its ``name``): its own list, else the LUT's rule
    in the context ``device`` of ``lut`` (a `dsprof.lut.LUT` or its file; `PlanCosts.with_merges`: a block the
    LUT cannot decide raises `LUTMissError` naming it, or with ``strict=False`` counts as merged, as a partial
    prediction does), else MACs (``merge_by="macs"``). See `merge_rule` for what is refused."""
    plan = Plan.coerce(plan)
    by = merge_rule(plan, lut=lut is not None, merge_by=merge_by)
    if by == "plan":
        return Merges(plan, by)
    if by == "lut":
        from ..lut.predict import plan_costs  # local: the LUT package prices plans of this one

        costs = plan_costs(model, lut, device=device, name=name, options=options, resolution=resolution,
                           method="isolated")  # the rule reads block entries only, whatever the method
        return Merges(costs.with_merges(plan, strict=strict), by, str(costs.key))
    if isinstance(model, str):
        from ..models import get_model

        model = get_model(model, resolution=resolution, **dict(options or {}))
    return Merges(merge_report(merge_model(model, plan, merge_by="macs", fold=False)).plan, by)


def merge_by_rule(model: nn.Module, plan: Any, **rule: Any) -> tuple[nn.Module, Merges]:
    """``model`` merged by ``plan`` with its merges decided as `decide_merges` decides them (``rule``: its
    keywords), and what decided them; MACs decide inside the one merge (``merge_by="macs"``)."""
    plan = Plan.coerce(plan)
    if merge_rule(plan, lut=rule.get("lut") is not None, merge_by=rule.get("merge_by")) == "macs":
        merged = merge_model(model, plan, merge_by="macs")
        return merged, Merges(merge_report(merged).plan, "macs")
    merges = decide_merges(model, plan, **rule)
    return merge_model(model, merges.plan), merges
