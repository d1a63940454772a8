"""Planning before training: the exact plan of lowest predicted latency for every budget (issue #20).

`plan_front` (CLI `dsprof plan`) searches every plan and span partition of a model by dynamic programming
(`dsprof.plan.dp`) over the LUT's prices (`dsprof.lut.cost`); `best_plan` does it for one fixed ``keep``.
"""

from .front import Front, FrontPoint, PresetPoint
from .planner import best_plan, plan_front
from .run import PlanOutcome, load_importance, plan_to_file

__all__ = ["Front", "FrontPoint", "PlanOutcome", "PresetPoint", "best_plan", "load_importance",
           "plan_front", "plan_to_file"]
