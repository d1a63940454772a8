"""Plans at the level of single activations (issue #47, item 2): the record (`Plan.acts`) and its rules
(`dsprof.records.activations`), on layouts worked by hand from MobileNetV2's architecture."""

from __future__ import annotations

import json

import pytest

from dsprof.errors import PlanError
from dsprof.records.activations import (
    ActLayout,
    acts_of_keep,
    block_runs,
    keep_of_acts,
    kept_activations,
    partial_runs,
    run_variant,
    segments,
)
from dsprof.records.plan import PRESETS, Plan, load_plan

# MobileNetV2 (torchvision, Sandler et al. Tab. 2): block 0 is depthwise (ReLU6) + projection; the other 16 are
# expansion (ReLU6) + depthwise (ReLU6) + projection, with an identity skip where stride is 1 and channels match.
MBV2_RESIDUAL = (0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 1, 0, 1, 1, 0)
MBV2 = [ActLayout((True, False))] + [ActLayout((True, True, False), residual=bool(r)) for r in MBV2_RESIDUAL[1:]]
MBV2_COUNTS = [1] + [2] * 16  # 33 removable activations


def test_block_view_and_activation_view_agree():
    acts = acts_of_keep(PRESETS["mbv2-ds-a"].keep, MBV2_COUNTS)
    assert acts[0] == (0,) and acts[2] == (1, 1) and acts[1] == (0, 0)
    assert keep_of_acts(acts) == PRESETS["mbv2-ds-a"].keep
    assert kept_activations(acts) == 2 * 12  # mbv2-ds-a keeps 12 blocks (0 0 1 0 1 1 1 0 0 1 1 ...), not block 0
    # a partial block keeps its activations in the block view
    assert keep_of_acts([(0,), (0, 1), (1, 0), (0, 0)]) == (0, 1, 1, 0)


def test_plan_round_trip_and_block_plans_unchanged():
    acts = [(1,), (0, 1), (1, 0)] + [(1, 1)] * 14
    plan = Plan.from_acts("mobilenet_v2", acts, name="partial")
    assert plan.keep == (1,) * 17
    data = json.loads(plan.to_json())
    assert data["acts"][:3] == [[1], [0, 1], [1, 0]]
    again = Plan.from_json(plan.to_json())
    assert again == plan and again.digest == plan.digest
    # the same keep list without acts is another plan (what it deploys differs)
    assert Plan("mobilenet_v2", plan.keep).digest != plan.digest
    # a block plan writes no 'acts' field and keeps its digest (values from the code before this change)
    assert "acts" not in json.loads(PRESETS["mbv2-ds-a"].to_json())
    assert PRESETS["mbv2-ds-a"].digest == "bf451a311725"
    assert PRESETS["efflite0-ds-d"].digest == "340f8846e81c"
    # the block view of an activation plan that removes all: the same blocks as the block plan, plus acts
    full = Plan.from_acts("mobilenet_v2", acts_of_keep(PRESETS["mbv2-ds-d"].keep, MBV2_COUNTS))
    assert full.keep == PRESETS["mbv2-ds-d"].keep


def test_plan_checks_acts(tmp_path):
    with pytest.raises(PlanError, match="disagrees with 'acts' at block 1"):
        Plan("mobilenet_v2", (1, 0) + (1,) * 15, acts=((1,), (0, 1)) + ((1, 1),) * 15)
    with pytest.raises(PlanError, match="'acts' has 2 entries but 'keep' has 17"):
        Plan("mobilenet_v2", (1,) * 17, acts=((1,), (1, 1)))
    plan = Plan.from_acts("mobilenet_v2", [(1,)] + [(1, 1)] * 16)
    plan.check_acts(MBV2_COUNTS)
    with pytest.raises(PlanError, match="lists 2 activations for block 0, which has 1"):
        Plan.from_acts("mobilenet_v2", [(1, 1)] * 17).check_acts(MBV2_COUNTS)
    for bad, words in [("1 0", "non-empty list"), ([[1]] * 16 + [[2, 1]], "0/1 only"), ([[1]] * 16 + [[True]], "0/1 only"),
                       ([[1]] * 16 + [[1] * 65], "at most 64"), ([[1]] * 16 + ["11"], "entry 16")]:
        path = tmp_path / "p.json"
        path.write_text(json.dumps({"format": "dsprof.plan", "version": 1, "model": "mobilenet_v2", "keep": [1] * 17,
                                    "acts": bad}))
        with pytest.raises(PlanError, match=words):
            load_plan(path)
    # an old plan file (no 'acts') still reads, as a block plan
    path.write_text(json.dumps({"format": "dsprof.plan", "version": 1, "model": "mobilenet_v2", "keep": [0] * 17}))
    assert load_plan(path).acts is None


def test_runs_inside_a_block():
    ir = ActLayout((True, True, False), residual=True)
    assert block_runs(ir, (1, 1)) == [(0, 1), (1, 2), (2, 3)]
    assert block_runs(ir, (0, 1)) == [(0, 2), (2, 3)]
    assert block_runs(ir, (1, 0)) == [(0, 1), (1, 3)]
    assert block_runs(ir, (0, 0)) == [(0, 3)]
    assert partial_runs(ir, (0, 1)) == [(0, 2)] and run_variant(ir, (0, 2)) == "fused-expand"
    assert partial_runs(ir, (1, 0)) == [(1, 3)] and run_variant(ir, (1, 3)) == "fused-project"
    assert partial_runs(ir, (0, 0)) == [] and partial_runs(ir, (1, 1)) == []
    chain = ActLayout((True, True, True, False))  # a plain chain of four convolutions
    assert partial_runs(chain, (1, 0, 0)) == [(1, 4)]
    assert partial_runs(chain, (1, 0, 1)) == [(1, 3)] and run_variant(chain, (1, 3)) == "fused-inner"
    with pytest.raises(PlanError, match="2 removable activations was given 3"):
        block_runs(ir, (1,) * 3)


def test_segments_on_mobilenet_v2():
    # all activations kept: every segment is one unit, but a projection runs into the next block's expansion unless
    # that block adds a skip (its input is shared with the addition)
    kept = [(1,)] + [(1, 1)] * 16
    seg = segments(MBV2, kept)
    assert seg[0] == ((0, 0),)
    assert seg[1] == ((0, 1), (1, 0))  # block 0's projection and block 1's expansion (block 1: no skip)
    assert seg[3] == ((1, 2),)  # block 2 adds a skip: block 1's projection cannot run into it
    assert ((2, 0),) in seg and ((2, 2),) in seg  # and block 2's projection ends at its addition
    assert ((3, 2),) in seg  # block 4 adds a skip too
    assert sum(len(s) for s in seg) == 2 + 16 * 3
    # a partial block inside: block 2 (skip) keeps its expansion's activation, removes the depthwise's
    acts = [(1,), (1, 1), (1, 0)] + [(1, 1)] * 14
    seg = segments(MBV2, acts)
    assert ((2, 1), (2, 2)) in seg
    # whole linearised blocks 1..2 in a span: block 0's projection runs through both, up to block 3 (skip, kept)
    acts = [(1,), (0, 0), (0, 0)] + [(1, 1)] * 14
    seg = segments(MBV2, acts, spans=[(1, 3)])
    assert ((0, 1), (1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)) in seg
    # without the span, the free activation after block 1 cuts it
    seg = segments(MBV2, acts)
    assert ((0, 1), (1, 0), (1, 1), (1, 2)) in seg and ((2, 0), (2, 1), (2, 2)) in seg
    # no free activation asked for: linear blocks run on into each other
    # (through block 2's identity skip, which it folds, and into block 3's expansion: block 3 adds no skip)
    assert ((0, 1), (1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2), (3, 0)) in segments(MBV2, acts, free_activation=False)
    # a tail (ResNet's ReLU after the addition) always ends a segment
    res = [ActLayout((True, True, False), residual=True, tail=True)] * 2
    assert segments(res, [(0, 0), (0, 0)], free_activation=False) == [((0, 0), (0, 1), (0, 2)), ((1, 0), (1, 1), (1, 2))]
