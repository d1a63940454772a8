"""One merge rule: which linearised blocks of a plan merge, decided in one place and written into its ``merge`` list.

A `MergeRule` decides each block that a plan linearises alone: it merges where what it costs merged is below what
it costs left unmerged as deployed (`pays`, the one comparison of the package). One class, built three ways:

- ``plan``: the plan's own list, replayed as written (what `dsprof plan` writes and `merge_model` records); a plan
  without one is refused in one line (`no_rule_message`);
- ``lut``: the LUT's medians in one context, the block's ``merged`` entry against the block left unmerged as
  deployed (its ``linear`` entry, else ``original``): the rule `dsprof predict` prices
  (`dsprof.lut.prices.Prices.rule`);
- ``macs``: the MACs of the one convolution it merges into against the block as built (`macs_rule`, or
  `merge_model(..., merge_by="macs")`).

A plan's own list is replayed whatever rule is given; a span always merges (a plan's spans were chosen where they
pay). Callers build one rule for a model (`dsprof.lut.rule.merge_rule`) and pass it: every command that builds a
merged model writes the list through it (``merge``, ``measure --plan``, ``export --plan``, ``predict --measure``,
``report``, ``finetune``), the planner prices a lone block as it deploys it, and `merge_model` replays the list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..errors import DsprofError, PlanError, UsageError
from ..models import BlockSpec, spec_macs
from ..names import MERGE_BY
from ..plan.plan import Plan, check_plan

__all__ = ["MERGE_BY", "MergeRule", "Merges", "macs_rule", "no_rule_message", "pays", "rule_kind"]

#: (merged, unmerged) cost of block ``i`` linearised alone under a plan's ``border``, in the rule's unit; None
#: where the rule cannot know one.
Costs = Callable[[int, str], "tuple[float | None, float | None]"]


def pays(merged: float | None, unmerged: float | None) -> bool | None:
    """The one comparison: merging pays where ``merged`` is below ``unmerged`` (two costs in one unit: seconds,
    MACs); None where either is unknown."""
    if merged is None or unmerged is None:
        return None
    return merged < unmerged


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
            "macs": "MACs (`merge_by='macs'`): a block merges where that lowers its MACs; predict prices the LUT's rule",
        }[self.by]
        linear = [i for i in self.plan.linearized if i not in self.merged]
        return (f"{self.plan.name or 'plan'}: merged blocks {_indices(self.merged)}; linear, unmerged "
                f"{_indices(linear)} (decided by {how})")


def _indices(values: list[int]) -> str:
    return " ".join(map(str, values)) if values else "none"


def no_rule_message(plan: Plan) -> str:
    """The one line that refuses a plan without a ``merge`` list when neither a LUT nor MACs may decide it."""
    return (f"{plan.name or 'the plan'} has no merge list: pass `lut=LUT` to merge where that LUT says merging pays "
            "(the rule `dsprof predict` prices), or `merge_by='macs'` to merge where MACs drop")


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


@dataclass(frozen=True)
class MergeRule:
    """Decides which linearised blocks of one model's plans merge (see the module docstring).

    ``costs(i, border)`` is the (merged, unmerged) cost of block ``i`` linearised alone (None for ``plan``, which
    decides nothing); ``context`` names the LUT context of a ``lut`` rule; ``blocks`` and ``identity`` (registered
    name, options), where known, are what a plan is checked against; ``miss(plan, undecided)`` is the error for
    blocks the rule cannot decide (a LUT that lacks an entry)."""

    by: str
    costs: Costs | None = None
    context: str = ""
    blocks: int | None = None
    identity: tuple[str, dict] | None = None
    miss: Callable[[Plan, list[int]], DsprofError] | None = None

    def merges(self, i: int, border: str = "in_front") -> bool | None:
        """Whether block ``i``, linearised alone under a plan's ``border``, merges (`pays`); None where the rule
        cannot decide (a ``plan`` rule, or a cost it lacks)."""
        if self.costs is None:
            return None
        return pays(*self.costs(i, border))

    def deployed(self, i: int, border: str = "in_front") -> float | None:
        """What block ``i`` linearised alone costs as the rule deploys it: merged where that pays, else unmerged."""
        merged, unmerged = self.costs(i, border) if self.costs is not None else (None, None)
        return merged if pays(merged, unmerged) else unmerged

    def check(self, plan: Any) -> Plan:
        """``plan`` (anything `Plan.coerce` reads) checked against the rule's model: its model and options
        (`check_plan`, where the rule knows them), one entry per block, its spans' blocks marked merged."""
        plan = Plan.coerce(plan)
        if self.identity is not None:  # one for another model (or other options) is refused, as merge refuses it
            plan = check_plan(plan, *self.identity)
        if self.blocks is not None:
            plan.check_blocks(self.blocks)
        if plan.merge is not None:
            in_span = {i for start, stop in plan.spans or () for i in range(start, stop)}
            unmarked = sorted(i for i in in_span if not plan.merge[i])
            if unmarked:
                raise PlanError(f"{plan.name or 'the plan'}'s merge list leaves blocks {unmarked} unmerged, but they "
                                "lie in its spans, which merge: mark them true (or drop the spans)")
        return plan

    def decide(self, plan: Any, *, strict: bool = True) -> Merges:
        """``plan`` with its ``merge`` list, and what decided it: its own list where it has one (checked, `check`),
        else this rule's decision for every block it linearises alone (a span merges). A block the rule cannot
        decide raises the rule's miss (a LUT's names the entry and the `dsprof measure` that times it); with
        ``strict=False`` it counts as merged (a partial prediction, which names the miss). A ``plan`` rule refuses a
        plan without a list that linearises a block outside its spans (`no_rule_message`)."""
        plan = self.check(plan)
        if plan.merge is not None:
            return Merges(plan, "plan")
        in_span = {i for start, stop in plan.spans or () for i in range(start, stop)}
        if self.by == "plan" and any(not keep and i not in in_span for i, keep in enumerate(plan.keep)):
            raise PlanError(no_rule_message(plan))
        merge, undecided = [], []
        for i, keep in enumerate(plan.keep):
            decided = True if i in in_span else (False if keep else self.merges(i, plan.border))
            if decided is None:
                undecided.append(i)
            merge.append(decided is not False)
        if undecided and strict:
            raise self.miss(plan, undecided) if self.miss is not None else PlanError(
                f"the {self.by} rule cannot decide blocks {undecided} of {plan.name or 'the plan'}")
        return Merges(plan.with_merge(merge), self.by, self.context)


def macs_rule(specs: Sequence[BlockSpec], identity: tuple[str, dict] | None = None) -> MergeRule:
    """The MACs rule for a model whose blocks are ``specs`` (`find_blocks` order): a block merges where the one
    convolution it merges into (`spec_macs(..., merged=True)`) has fewer MACs than the block as built
    (`dsprof.models.counting`, the one MAC count)."""
    costs = [(spec_macs(s, merged=True), spec_macs(s)) for s in specs]
    return MergeRule("macs", lambda i, border: costs[i], blocks=len(specs), identity=identity)
