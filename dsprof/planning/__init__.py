"""Planning before training: the exact plan of lowest predicted latency for every budget (issue #20).

`plan_front` (CLI `dsprof plan`) searches every plan and span partition of a model by dynamic programming
(`dsprof.planning.dp`) over the LUT's prices (`dsprof.lut.prices`); `best_plan` does it for one fixed ``keep``.
Over several device contexts, `plan_contexts` plans each, prices each one's plans on the others (`dsprof.planning.cross`)
and finds one plan for several (`joint_front`, `dsprof.planning.minimax`). A plan itself (`Plan`: which blocks keep their
activations, which merge, which spans; plain JSON; the paper's presets) is `dsprof.records.plan`, which imports no
PyTorch; it is re-exported here. The API function is `dsprof.plan` (`dsprof.workflows.plan.plan`).

The names below are imported on first use.
"""

from .._lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(('BORDER_MODES', 'FREE_ACTIVATIONS', 'PRESETS', 'Plan', 'PlanError', 'PlanModelError', 'check_plan',
                     'list_presets', 'load_plan', 'load_preset', 'same_family'), "..records.plan"),
    **dict.fromkeys(('Front', 'FrontPoint', 'LatencyBudget', 'PresetPoint'), ".front"),
    **dict.fromkeys(('best_plan', 'plan_front'), ".planner"),
    **dict.fromkeys(('ContextFronts', 'plan_contexts'), ".contexts"),
    **dict.fromkeys(('Joint', 'JointFront', 'joint_front'), ".minimax"),
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
