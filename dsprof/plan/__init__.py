"""Planning before training: the exact plan of lowest predicted latency for every budget (issue #20).

`plan_front` (CLI `dsprof plan`) searches every plan and span partition of a model by dynamic programming
(`dsprof.plan.dp`) over the LUT's prices (`dsprof.lut.cost`); `best_plan` does it for one fixed ``keep``.
Over several device contexts, `plan_contexts` plans each, prices each one's plans on the others (`dsprof.plan.cross`)
and finds one plan for several (`joint_front`, `dsprof.plan.minimax`).
"""

from .front import Front, FrontPoint, PresetPoint
from .planner import best_plan, plan_front
from .contexts import ContextFronts, plan_contexts
from .minimax import JointFront, joint_front
from .run import ContextsOutcome, PlanOutcome, load_importance, plan_contexts_to_file, plan_to_file

__all__ = ["ContextFronts", "ContextsOutcome", "Front", "FrontPoint", "JointFront", "PlanOutcome", "PresetPoint",
           "best_plan", "joint_front", "load_importance", "plan_contexts", "plan_contexts_to_file",
           "plan_front", "plan_to_file"]
