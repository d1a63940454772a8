"""benchmarks/activation_front.py's bookkeeping (issue #47, item 6): which plans deploy the same model (timed once
in the check group) and how many activations a plan keeps (what matches the activation plan to the block plan).
The script itself runs end to end with ``--smoke`` (about a minute: not in the suite)."""

import importlib.util
import sys
from pathlib import Path

from dsprof.records.plan import Plan

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "activation_front.py"
COUNTS = [1, 2, 2, 2]  # removable activations per block: MobileNetV2's features.1, then three inverted residuals


def load_script():
    sys.path.insert(0, str(SCRIPT.parent))  # it imports planner_vs_random beside it
    try:
        spec = importlib.util.spec_from_file_location("activation_front", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(SCRIPT.parent))


def test_kept_activations_match_the_block_plan_by_hand():
    script = load_script()
    block = Plan("mobilenet_v2", (1, 0, 1, 0), merge=(False, True, False, False))
    assert script.kept_acts(block, COUNTS) == 1 + 2  # blocks 0 and 2 keep theirs
    partial = Plan.from_acts("mobilenet_v2", [(1,), (0, 1), (1, 1), (0, 0)], merge=(False, False, False, True))
    assert script.kept_acts(partial, COUNTS) == 1 + 1 + 2
    assert script.kept_acts(Plan("mobilenet_v2", (0, 0, 0, 0), merge=(True,) * 4), COUNTS) == 0


def test_plans_that_deploy_the_same_model_share_a_key():
    script = load_script()
    merge = (False, True, True, True)
    block = Plan("mobilenet_v2", (1, 0, 0, 0), merge=merge, spans=((1, 3),))
    same = Plan.from_acts("mobilenet_v2", [(1,), (0, 0), (0, 0), (0, 0)], merge=merge, spans=((1, 3),))
    assert script.deployed(block, COUNTS) == script.deployed(same, COUNTS)  # acts with no partial block: the block plan
    different = [
        Plan.from_acts("mobilenet_v2", [(1,), (0, 0), (0, 0), (1, 0)], merge=(False, True, True, False),
                       spans=((1, 3),)),  # block 3 partial (fused-project)
        Plan("mobilenet_v2", (1, 0, 0, 0), merge=merge),  # no span
        Plan("mobilenet_v2", (1, 0, 0, 0), merge=(False, True, True, False), spans=((1, 3),)),  # block 3 unmerged
        Plan("mobilenet_v2", (1, 0, 0, 0), merge=merge, spans=((1, 3),), border="in_place"),
        Plan("mobilenet_v2", (1, 0, 0, 0), merge=merge, spans=((1, 3),), free_activation=None),
    ]
    keys = {script.deployed(p, COUNTS) for p in [block, *different]}
    assert len(keys) == 1 + len(different)
