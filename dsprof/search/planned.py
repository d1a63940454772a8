"""The planner's search entry: a plan chosen by `dsprof.plan` from a LUT (issue #20).

`search(method="planner")` trains nothing: the plan (keep list, merges, spans) that the LUT predicts fastest
with k blocks keeping their activations, or the one that keeps most activations within a latency budget or
speed-up. The importance search chooses through the same entry (`planner_front` with the importance it
measured, `choose_point`), so that a searched plan is the planner's front plan and `merge` deploys it as
priced.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Sequence

from ..errors import LUTMissError, UsageError
from ..lut.choice import Pricing
from ..records.plan import Plan
from ..planning import Front, FrontPoint, plan_front
from .method import SearchRequest, SearchResult, write_plan

__all__ = ["choose_point", "planned", "planner_front", "search_planner"]


def planner_front(req: SearchRequest, importance: Sequence[float] | None = None) -> Front:
    """The planner's front for ``req``'s model on its LUT (``device_key``, ``lut_resolution``, spans up to
    ``max_span`` blocks), with per-block ``importance`` (accuracy lost without its activations) when given.
    A missing LUT, or an entry the LUT lacks, is one line that says what to measure (`plan_front`)."""
    if req.lut is None:
        raise UsageError(f"`method={req.method!r}` chooses with a LUT's latencies: give `lut=` (from `dsprof.measure()` "
                         "and `dsprof.build_lut()`)")
    try:
        return plan_front(req.ref, req.lut,
                          pricing=Pricing(device_key=req.device_key, max_span=req.max_span,
                                          resolution=req.lut_resolution or req.resolution),
                          importance=importance)
    except LUTMissError as exc:  # the planner's resolution is this search's LUT resolution: name that parameter
        exc.args = (re.sub(r"`(?:model=ModelRef\.of\([^`]*?)?resolution=([^`)]*)\)?`",
                           r"`pricing=Pricing(resolution=\1)`", str(exc.args[0])),
                    *exc.args[1:])
        raise


def _front_counted(front: Front) -> tuple[bool, ...]:
    """Per block, whether ``front``'s k counts it (all but its ``uncounted`` blocks: those without a removable
    activation)."""
    return tuple(i not in front.uncounted for i in range(len(front.blocks)))


def choose_point(front: Front, req: SearchRequest) -> FrontPoint:
    """The front plan for ``req``'s budget: ``keep`` blocks with activations, ``budget_ms`` or ``speedup``."""
    given = [v is not None for v in (req.keep, req.budget_ms, req.speedup)]
    if sum(given) != 1:
        raise UsageError("choose the plan by one of `keep=`, `budget=LatencyBudget(budget_ms=)` or "
                         "`budget=LatencyBudget(speedup=)`")
    if req.keep is not None:
        return front.choose(keep=req.keep)  # a count or a fraction of the blocks the front's k counts (`resolve_k`)
    budget_s = req.budget_ms / 1e3 if req.budget_ms is not None else None
    return front.choose(budget_s=budget_s, speedup=req.speedup)


def planned(req: SearchRequest, front: Front, point: FrontPoint, info: dict[str, Any]) -> Plan:
    """``point``'s plan named and annotated as ``req``'s search result: ``info`` plus what the planner
    predicted (latency, speed-up) and the front it chose from."""
    pareto = front.pareto if front.pareto is not None else front.points
    search = {
        "method": req.method, "k": point.k, **info,
        "budget_ms": req.budget_ms, "speedup_target": req.speedup,
        "planner": {
            "device": str(front.device), "lut_method": front.method, "max_span": front.max_span,
            "latency_s": point.latency_s, "low_s": point.low_s, "high_s": point.high_s,
            "original_s": front.original_s, "speedup": front.original_s / point.latency_s, "loss": point.importance,
            "front": [p.to_dict() for p in pareto],
        },
    }
    return replace(point.plan, name=req.name or f"{req.method}-k{point.k}",
                   source=f"dsprof search, method {req.method} (planner, {front.device})", search=search)


def search_planner(req: SearchRequest) -> SearchResult:
    """The LUT's fastest plan with ``keep`` blocks keeping activations, or the one keeping most within
    ``budget_ms`` / ``speedup`` (no training, no importance)."""
    front = planner_front(req)
    plan = planned(req, front, choose_point(front, req), {})
    return SearchResult(plan, [], [], [], write_plan(plan, req.out), _front_counted(front))
