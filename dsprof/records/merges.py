"""What merges, as merging/ is told it: a plan's ``merge`` list and spans, checked, with what decided them.

merging/ decides nothing. Which linearised blocks of a plan merge, and which runs of them merge as one span, is
chosen in one place: the planner's exact search (`dsprof.planning.decide`), over a price table (a LUT's `Prices`, the
rule `dsprof predict` prices, or MACs, `dsprof.lut.macs.MacPrices`), and written into the plan's ``merge`` list;
every command that builds a merged model replays it (``merge``, ``measure --plan``, ``export --plan``, ``predict
--measure``, ``report``, ``finetune``), and `merge_model` merges what the list says. Here: the record of a decision
(`Merges`), the check of a plan's list (`check_merges`), the list of a plan with nothing to decide (`replayed`), and
the one line that refuses a plan without a list when nothing may decide it (`no_rule_message`, `rule_kind`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import PlanError, UsageError
from ..names import MERGE_BY
from .plan import Plan, check_plan

__all__ = ["MERGE_BY", "Merges", "check_merges", "no_rule_message", "replayed", "rule_kind"]


@dataclass(frozen=True)
class Merges:
    """A plan with its ``merge`` list, and what decided it: ``by`` is ``plan`` (its own list), ``lut`` (the planner's
    search on the LUT context ``context``, the plan's spans as given), ``planner`` (the same, choosing the spans too:
    ``merge --spans auto --lut``) or ``macs`` (the planner's search on MACs); see `dsprof.planning.decide`."""

    plan: Plan
    by: str
    context: str = ""
    #: what the LUT limited where the search chose spans (`dsprof.planning.planner.span_limit`: "spans up to 2
    #: blocks, not the default 4: ..."), else ""
    limit: str = ""

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
            "macs": "MACs (`merge_by='macs'`): a block merges where that lowers its MACs; predict prices the LUT's rule",
        }[self.by]
        linear = [i for i in self.plan.linearized if i not in self.merged]
        return (f"{self.plan.name or 'plan'}: merged blocks {_indices(self.merged)}; linear, unmerged "
                f"{_indices(linear)} (decided by {how})" + (f"; {self.limit}" if self.limit else ""))


def _indices(values: list[int]) -> str:
    return " ".join(map(str, values)) if values else "none"


def no_rule_message(plan: Plan) -> str:
    """The one line that refuses a plan without a ``merge`` list when neither a LUT nor MACs may decide it."""
    return (f"{plan.name or 'the plan'} has no merge list: pass `merge=MergeChoice(lut=LUT)` to merge where that LUT "
            "says merging pays (the rule `dsprof predict` prices), or `merge=MergeChoice(merge_by='macs')` to merge "
            "where MACs drop")


def rule_kind(plan: Plan | None, *, lut: bool, merge_by: str | None) -> str:
    """Which rule decides ``plan``'s merges: ``plan`` (its own list, replayed whatever else is given), ``lut`` (with a
    LUT, unless ``merge_by="macs"``) or ``macs``; without a plan, the rule the options ask for (``plan`` for
    neither). Raises `PlanError` (`no_rule_message`) for a plan without a list when neither is given, `UsageError`
    for an unknown ``merge_by`` or ``merge_by="lut"`` without a LUT: what every command refuses before it builds
    anything."""
    if merge_by not in (None, *MERGE_BY):
        raise UsageError(f"`merge_by=` is one of {', '.join(MERGE_BY)}, got {merge_by!r}")
    if merge_by == "lut" and not lut:
        raise UsageError("`merge_by='lut'` decides the merges from a LUT: pass `lut=LUT` (or `merge_by='macs'`)")
    if plan is not None and plan.merge is not None:
        return "plan"
    if merge_by == "macs":
        return "macs"
    if lut:
        return "lut"
    if plan is not None:
        raise PlanError(no_rule_message(plan))
    return "plan"


def check_merges(plan: Any, identity: tuple[str, dict] | None = None, blocks: int | None = None) -> Plan:
    """``plan`` (anything `Plan.coerce` reads) checked against its model, where known: its model and options
    (``identity``: registered name and options, `check_plan`) and one entry per block (``blocks``). (That a merge
    list marks its spans' blocks merged, the `Plan` checks itself.)"""
    plan = Plan.coerce(plan)
    if identity is not None:  # one for another model (or other options) is refused, as merge refuses it
        plan = check_plan(plan, *identity)
    if blocks is not None:
        plan.check_blocks(blocks)
    return plan


def replayed(plan: Plan) -> Merges:
    """``plan`` (read and checked by the caller) with its ``merge`` list where nothing is left to decide: its own
    list, or, where it linearises no block outside its spans, the list that merges its spans' blocks and nothing else.
    A plan that linearises a lone block and has no list is refused (`no_rule_message`): the planner decides such
    blocks (`dsprof.planning.decide`), merge/ does not."""
    if plan.merge is not None:
        return Merges(plan, "plan")
    in_span = _in_spans(plan)
    if any(not keep and i not in in_span for i, keep in enumerate(plan.keep)):
        raise PlanError(no_rule_message(plan))
    return Merges(plan.with_merge([i in in_span for i in range(len(plan.keep))]), "plan")


def _in_spans(plan: Plan) -> set[int]:
    """The linearised blocks inside the plan's spans (a crossing span's ends keep some activations: not these)."""
    return {i for start, stop in plan.spans or () for i in range(start, stop) if not plan.keep[i]}
