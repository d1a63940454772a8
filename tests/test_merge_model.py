"""Whole models: merged against the whole linearised model; decisions; replay; file; ONNX Runtime."""

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch import nn

from conftest import randomise_bn
from dsprof.merging import (
    Linearized,
    MergedConv,
    export_onnx,
    linearize_model,
    load_merged,
    merge_linearized_model,
    merge_model,
    merge_report,
    save_merged,
)
from dsprof.records.plan import Plan, PlanError, load_preset
from dsprof.models import find_blocks, get_model
from dsprof.errors import UsageError
from dsprof.planning.decide import merge_rule

pytestmark = pytest.mark.usefixtures("one_thread")

RES = 32


def _model(name, dtype=torch.float64, **options):
    torch.manual_seed(0)
    return randomise_bn(get_model(name, resolution=RES, num_classes=10, **options)).to(dtype).eval()


def _relclose(got, expected, tol):
    torch.testing.assert_close(got, expected, rtol=0, atol=tol * expected.abs().max().item())


@pytest.mark.parametrize(
    "name,options,n_blocks,border",
    [
        ("mobilenet_v2", {}, 17, "in_front"),
        ("mobilenet_v2", {"width": 1.4}, 17, "in_place"),
        ("tf_efficientnet_lite0", {}, 16, "in_front"),
        ("efficientnet_lite0", {}, 16, "in_place"),
    ],
)
def test_every_block_merged_equals_the_linearised_model(name, options, n_blocks, border):
    model = _model(name, **options)
    plan = Plan(name, (0,) * n_blocks, options, border=border, merge=(True,) * n_blocks)  # merge all, paying or not
    linear = linearize_model(model, plan).eval()
    merged = merge_model(linear, plan)
    assert sum(isinstance(m, MergedConv) for m in merged.modules()) == n_blocks
    assert not any(isinstance(m, (Linearized, nn.BatchNorm2d)) for m in merged.modules())
    x = torch.randn(2, 3, RES, RES, dtype=torch.float64)
    with torch.no_grad():
        _relclose(merged(x), linear(x), 1e-9)


def test_a_linearised_model_is_merged_in_place_as_merge_model_merges_a_copy_of_it():
    model = _model("mobilenet_v2")
    plan = merge_rule(model, merge_by="macs").decide(load_preset("mbv2-ds-d")).plan
    linear = linearize_model(model, plan).eval()
    x = torch.randn(2, 3, RES, RES, dtype=torch.float64)
    with torch.no_grad():
        expected = linear(x)  # the linearised model is what the merged one computes
    copied = merge_model(linear, plan)
    assert sum(isinstance(m, Linearized) for m in linear.modules()) == len(plan.linearized)  # a copy was merged
    merged = merge_linearized_model(linear, plan)
    assert merged is linear and not any(isinstance(m, Linearized) for m in merged.modules())
    assert merge_report(merged).decisions == merge_report(copied).decisions
    with torch.no_grad():
        _relclose(merged(x), expected, 1e-9)
        _relclose(copied(x), expected, 1e-9)
    with pytest.raises(PlanError, match="merge"):  # nothing decided which linearised blocks merge
        merge_linearized_model(linearize_model(model, plan), Plan("mobilenet_v2", plan.keep))


def test_float32_whole_model_and_odd_input():
    model = _model("mobilenet_v2", dtype=torch.float32)
    plan = load_preset("mbv2-ds-d")
    linear = linearize_model(model, plan).eval()
    merged = merge_model(linear, merge_rule(model, merge_by="macs").decide(plan).plan)
    x = torch.randn(2, 3, 31, 31)
    with torch.no_grad():
        _relclose(merged(x), linear(x), 1e-4)


def test_first_depthwise_separable_block_is_not_merged_by_macs_and_decisions_are_reported():
    model = _model("mobilenet_v2", dtype=torch.float32)
    merges = merge_rule(model, merge_by="macs").decide(Plan("mobilenet_v2", (0,) * 17))  # the planner, on MACs
    assert merges.by == "macs" and "`merge_by='macs'`" in merges.describe()  # `dsprof merge` prints --merge-by macs
    # by hand at 32 px: block 0 (features.1: 3x3 depthwise over 32 channels, then 1x1 32 -> 16, at 16x16) is
    # 32*9*256 + 32*16*256 = 204,800 MACs as built and 9*32*16*256 = 1,179,648 merged: it stays linear; block 1
    # (features.2: 16 -> 96 -> 24, stride 2) is 16*96*256 + 96*9*64 + 96*24*64 = 595,968 as built and
    # 9*16*24*64 = 221,184 merged: it merges
    assert merges.plan.merge[:2] == (False, True)
    report = merge_report(merge_model(model, merges.plan))
    first, second = report.decisions[:2]
    assert (first.linear_macs, first.merged_macs, first.merged) == (204_800, 1_179_648, False)
    assert (second.linear_macs, second.merged_macs, second.merged) == (595_968, 221_184, True)
    # the MACs the planner read (the blocks' descriptions) and those of the modules merged here agree on every block
    assert all(d.merged == (d.merged_macs < d.linear_macs) for d in report.decisions)
    assert report.plan.merge == merges.plan.merge == tuple(d.merged for d in report.decisions)
    # a merge list (as a LUT's rule writes it) that says merging block 0 pays overrides MACs: replayed as written
    merged = merge_model(model, Plan("mobilenet_v2", (0,) * 17, merge=(True,) + (False,) * 16))
    assert [d.merged for d in merge_report(merged).decisions] == [True] + [False] * 16
    # without a list, MACs decide only when asked: one line that says what to pass
    with pytest.raises(PlanError, match=r"no merge list: pass `merge=MergeChoice\(lut=LUT\)` .* or `merge=MergeChoice\(merge_by='macs'\)`"):
        merge_model(model, Plan("mobilenet_v2", (0,) * 17))
    assert merge_model(model, Plan("mobilenet_v2", (1,) * 17)) is not None  # nothing linearised: nothing to decide
    with pytest.raises(UsageError, match=r"decides nothing: decide it first .*merge_rule\(model, merge_by='macs'\)"):
        merge_model(model, Plan("mobilenet_v2", (0,) * 17), merge_by="macs")  # merge/ no longer decides


def test_merge_model_leaves_its_input_untouched_and_replays_on_a_fresh_model(tmp_path):
    model = _model("mobilenet_v2", dtype=torch.float32)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    merged = merge_model(model, merge_rule(model, merge_by="macs").decide("mbv2-ds-c").plan)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert any(isinstance(m, nn.BatchNorm2d) for m in model.modules())
    replay_plan = Plan.from_json(merge_report(merged).plan.to_json())
    fresh = get_model("mobilenet_v2", resolution=RES, num_classes=10)
    replayed = merge_model(fresh, replay_plan)
    assert [type(m).__name__ for m in replayed.modules()] == [type(m).__name__ for m in merged.modules()]
    replayed.load_state_dict(merged.state_dict())  # same architecture, same parameter names and shapes


def test_wrong_plan_length_is_a_clear_error():
    with pytest.raises(PlanError, match="16 entries but the model has 17 blocks"):
        merge_model(_model("mobilenet_v2", dtype=torch.float32), Plan("mobilenet_v2", (0,) * 16))


@pytest.mark.parametrize("border", ["in_front", "in_place"])
def test_saved_file_loads_with_weights_only_and_onnx_runtime_agrees(tmp_path, border):
    model = _model("tf_efficientnet_lite0", dtype=torch.float32)
    plan = Plan("tf_efficientnet_lite0", load_preset("efflite0-ds-b").keep, border=border)
    merged = merge_model(model, merge_rule(model, merge_by="macs").decide(plan).plan)
    path = save_merged(merged, tmp_path / "merged.pt")
    payload = torch.load(path, weights_only=True)
    assert payload["model"] == "tf_efficientnet_lite0" and Plan.from_json(payload["plan"]).border == border
    loaded = load_merged(path)
    x = torch.randn(1, 3, RES, RES)
    with torch.no_grad():
        expected = merged(x)
        torch.testing.assert_close(loaded(x), expected, rtol=0, atol=0)
    onnx_path = export_onnx(loaded, tmp_path / "merged.onnx")
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input": x.numpy()})[0]
    np.testing.assert_allclose(got, expected.numpy(), rtol=0, atol=1e-4 * expected.abs().max().item())


def test_a_merged_model_whose_modules_check_their_state_version_loads_back(tmp_path):
    # found by a new user: torchvision's MNASNet refuses a state dict without its version (the state dict's
    # metadata), which the merged file dropped; `load_merged` then called its own file damaged
    model = get_model("mnasnet0_5", resolution=32).eval()
    n = len(find_blocks(model))
    merged = merge_model(model, Plan("mnasnet0_5", (0,) * n, merge=(True,) * n))
    loaded = load_merged(save_merged(merged, tmp_path / "mnasnet.pt"))
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), merged(x), rtol=0, atol=0)


def test_inexact_border_merge_is_reported_and_warned():
    # ResNet-18 at a quarter width: the same basic blocks (a 3x3 pair, padding in place), a sixteenth of the work
    model = _model("resnet18", dtype=torch.float32, width=0.25)
    plan = Plan("resnet18", (0,) * 8, {"width": 0.25}, border="in_place", merge=(True,) + (False,) * 7)
    with pytest.warns(UserWarning, match="border error"):
        merged = merge_model(model, plan)
    first = merge_report(merged).decisions[0]
    assert first.merged and not first.exact and first.border_error > 1e-3 and "NOT exact" in first.reason


# ResNet-50 at a quarter width: the same 16 bottleneck blocks, 1/16 of the MACs (full width took a minute in float64)
@pytest.mark.parametrize("name,options", [("tf_efficientnet_lite0", {}), ("resnet50", {"width": 0.25})])
def test_unmerged_linear_blocks_cost_what_the_original_blocks_cost_and_stay_exact(name, options):
    """Blocks that do not pay stay linear, in the ordinary padded form with their biases moved."""
    model = _model(name, **options)
    n = 16
    plan = Plan(name, (0,) * n, options, merge=(False,) * n)
    linear = linearize_model(model, plan).eval()
    merged = merge_model(linear, plan)
    x = torch.randn(2, 3, RES, RES, dtype=torch.float64)
    with torch.no_grad():
        _relclose(merged(x), linear(x), 1e-9)
    from dsprof.models import count_macs
    from dsprof.merging import fold_batchnorm

    original = fold_batchnorm(model, x[:1])
    assert count_macs(merged, (RES, RES)) == count_macs(original, (RES, RES))


# ResNet-18 at a quarter width for the ring's MACs below: 64/128/256/512 channels become 16/32/64/128 (multiples of 8:
# no rounding), the layers, kernels, paddings and strides those of ResNet-18
QUARTER = 0.25


@pytest.mark.parametrize("res", [32, 63])
def test_unmerged_linear_basic_blocks_cost_the_ring_of_their_first_convolution(res):
    """ResNet basic blocks left linear stay in the padding-in-front form: their first 3x3 convolution also computes
    the one-pixel ring around its output, ((Ho+2)^2 - Ho^2) * cin * cout * 9 MACs more per block (docs/merging.md).
    At a quarter width (the same layers and strides, every channel count / 4): the ring's closed form holds at any
    width, and it is counted here with the quarter-width channels."""
    from dsprof.merging import fold_batchnorm
    from dsprof.models import count_macs

    torch.manual_seed(0)
    model = get_model("resnet18", resolution=res, num_classes=10, width=QUARTER).eval()
    plan = Plan("resnet18", (0,) * 8, {"width": QUARTER}, merge=(False,) * 8)
    merged = merge_model(model, plan)
    original = fold_batchnorm(model, torch.zeros(1, 3, res, res))
    # ResNet-18 from its architecture: stem stride 2 (7x7, pad 3) then max-pool stride 2 (3x3, pad 1);
    # stages of two basic blocks, 64/128/256/512 channels (at a quarter width 16/32/64/128, the stem's 16),
    # the first block of stages 2-4 with stride 2.
    size = (res + 2 * 3 - 7) // 2 + 1
    size = (size + 2 - 3) // 2 + 1
    extra, cin = 0, 16
    for stage, cout in enumerate((16, 32, 64, 128)):
        for block in range(2):
            stride = 2 if stage and not block else 1
            size = (size + 2 - 3) // stride + 1
            extra += ((size + 2) ** 2 - size**2) * cin * cout * 9
            cin = cout
    assert count_macs(merged, (res, res)) - count_macs(original, (res, res)) == extra
    assert all(not d.merged for d in merge_report(merged).decisions)


@pytest.mark.parametrize("res", [32, 63])
def test_macs_price_an_unmerged_basic_block_with_its_ring_so_merging_by_macs_counts_no_more(res):
    """MACs price a basic block left linear as it deploys: with the ring of its first 3x3 (the closed form of the
    test above, per block). So `merge_by='macs'` merges a block where that lowers the count, and the model it merges
    counts no more MACs (FlopCounterMode) than merging every block or none; before, it priced the block as built and
    kept blocks whose ring cost more than merging.

    At a quarter width (as above): every MAC count of a block (as built, linear with its ring, merged) is a product of
    two channel counts, so all of them scale by 1/16 and MACs decide every block as at full width (merged at 32 px:
    blocks 3-7, at 63 px: blocks 5-7, either width), for a sixteenth of the float64 compositions."""
    import dsprof
    from dsprof.lut import MergeChoice
    from dsprof.lut.macs import MacPrices
    from dsprof.models import ModelRef, count_macs, spec_macs

    ref = ModelRef.of("resnet18", options={"num_classes": 10, "width": QUARTER}, resolution=res)
    model = ref.build()
    prices = MacPrices(find_blocks(model))
    size = ((res + 2 * 3 - 7) // 2 + 1 + 2 - 3) // 2 + 1  # the stem and the max-pool, as above
    i, cin = 0, 16
    for stage, cout in enumerate((16, 32, 64, 128)):
        for block in range(2):
            size = (size + 2 - 3) // (2 if stage and not block else 1) + 1
            ring = ((size + 2) ** 2 - size**2) * cin * cout * 9
            assert prices.linearized(i, merge=False).latency_s == spec_macs(prices.blocks[i].spec) + ring
            i, cin = i + 1, cout
    plan = Plan("resnet18", (0,) * 8, {"width": QUARTER})
    by_macs = dsprof.merge(ref, plan, merge=MergeChoice(merge_by="macs")).model
    every = merge_model(ref.build(), plan.with_merge([True] * 8))
    none = merge_model(ref.build(), plan.with_merge([False] * 8))
    counted = {name: count_macs(m, (res, res)) for name, m in (("macs", by_macs), ("every", every), ("none", none))}
    assert counted["macs"] <= min(counted["every"], counted["none"]), counted
