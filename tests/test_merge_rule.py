"""One merge rule (issue #27, item 4): the merges `predict` prices are the merges every command builds, and a
linearised block left unmerged is timed in the form `merge_model` deploys.

Expected values come from the LUT's raw rows (which entry is lower), from a reading of the architectures (where
the padding of a block left unmerged goes) and from MAC counts of models merged by hand-written lists; no
timing is asserted.
"""

import json
import re

import pytest
import torch
from torch import nn

from dsprof.cli import main
from dsprof.cli.commands import hint_command
from dsprof.errors import LUTMissError, PlanError
from dsprof.lut import LUT, predict_latency
from dsprof.merging import ZeroPad, merge_model, merge_report
from dsprof.records.plan import Plan
from dsprof.planning.decide import merge_rule
from dsprof.models import block_module, count_macs, find_blocks, get_model
from dsprof.profiler import block_workloads
from dsprof.records.measurement import read_measurements
from dsprof.models import ModelRef

from conftest import randomise_bn
from rule_lut import rule_lut

pytestmark = pytest.mark.usefixtures("one_thread")
TINY = ["--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution", "32"]
OPTIONS = {"depths": [1] * 7}
MODEL = ModelRef.of("mobilenet_v2", options=OPTIONS, resolution=32)  # every test's model, as the engines take it
FAST = ["--threads", "1", "--warmup", "0", "--max-warmup", "0.05", "--min-samples", "3", "--max-samples", "4", "--budget", "0.01",
        "--min-sample-time", "0", "--no-progress"]
KEEP = (0, 0, 1, 0, 1, 0, 1)  # blocks 0, 1, 3, 5 linearised, as a preset would; no merge list


# -- a preset without a merge list: predicted, merged and measured through the command line ----------------------

@pytest.fixture(scope="module")
def tiny_lut(tmp_path_factory):
    """A real LUT of the tiny MobileNetV2 (timed here) with the medians of tests/rule_lut.py's rule (`predict`
    refuses a LUT whose plan comes out at or below 0, as a busy machine's medians can make it), with two entries
    moved so that the LUT's rule and MACs disagree in both directions: block 0 (depthwise-separable: merging raises
    its MACs) made to pay, block 1 (merging lowers its MACs) made not to."""
    tmp = tmp_path_factory.mktemp("rule")
    assert main(["measure", *TINY, *FAST, "--variants", "original,merged,linear", "--model-variants", "original",
                 "--out", str(tmp / "m.jsonl")]) == 0
    assert main(["build-lut", str(tmp / "m.jsonl"), "-o", str(tmp / "raw.csv")]) == 0
    frame = rule_lut(tmp / "raw.csv", tmp / "m.jsonl").to_dataframe()
    specs = [b.spec.to_str() for b in find_blocks(get_model("mobilenet_v2", resolution=32, **OPTIONS))]

    def rows(i, variant):
        return (frame.scope == "block") & (frame.workload == specs[i]) & (frame.variant == variant)

    frame.loc[rows(0, "merged"), "median_s"] = float(frame[rows(0, "linear")].median_s.iloc[0]) / 2
    frame.loc[rows(1, "merged"), "median_s"] = float(frame[rows(1, "linear")].median_s.iloc[0]) * 2
    path = LUT(frame).save(tmp / "lut.csv")
    return path, frame, specs


def _merged_line(text: str, name: str) -> list[int]:
    """The blocks a command said merge (`Merges.describe`: "NAME: merged blocks 0 2 ...; linear, ...")."""
    found = re.search(rf"^{re.escape(name)}: merged blocks ([0-9 ]+|none);", text, re.M)
    assert found, text
    return [] if found[1] == "none" else [int(v) for v in found[1].split()]


def test_measure_plan_times_the_merges_predict_priced(tiny_lut, tmp_path, capsys):
    lut_path, frame, specs = tiny_lut
    plan_path = tmp_path / "tiny-ds.json"
    plan_path.write_text(Plan("mobilenet_v2", KEEP, OPTIONS, name="tiny-ds").to_json())
    assert json.loads(plan_path.read_text())["merge"] is None

    # the LUT's rule read off its raw rows: a linearised block merges where merged < linear
    def median(i, variant):
        return float(frame[(frame.scope == "block") & (frame.workload == specs[i]) & (frame.variant == variant)]
                     .median_s.iloc[0])

    by_lut = [i for i, k in enumerate(KEEP) if not k and median(i, "merged") < median(i, "linear")]
    assert 0 in by_lut and 1 not in by_lut  # the entries moved above

    capsys.readouterr()
    assert main(["predict", "--lut", str(lut_path), *TINY, "--plan", str(plan_path)]) == 0
    predicted = _merged_line(capsys.readouterr().out, "tiny-ds")
    table = predict_latency(MODEL, str(lut_path), str(plan_path)).blocks
    priced = [int(i) for i in table[table.variant == "merged"]["index"]]
    assert predicted == priced == by_lut

    # measure --plan with the LUT times the model merged as priced
    out = tmp_path / "plan.jsonl"
    assert main(["measure", *TINY, *FAST, "--blocks", "none", "--model-variants", "original", "--plan",
                 str(plan_path), "--lut", str(lut_path), "--out", str(out)]) == 0
    assert _merged_line(capsys.readouterr().out, "tiny-ds") == by_lut
    (record,) = [r for r in read_measurements(out) if r.variant == "custom"]
    model = get_model("mobilenet_v2", resolution=32, **OPTIONS)
    expected = merge_model(model, Plan("mobilenet_v2", KEEP, OPTIONS).with_merge([i in by_lut for i in range(7)]))
    by_macs = merge_rule(model, merge_by="macs").decide(Plan("mobilenet_v2", KEEP, OPTIONS)).plan
    assert [i for i, m in enumerate(by_macs.merge) if m] != by_lut  # MACs would have built another model
    assert record.name == "tiny-ds" and record.macs == count_macs(expected, (32, 32))

    # without a LUT or --merge-by, one line that says what to pass; with --merge-by macs, MACs and said so
    assert main(["measure", *TINY, *FAST, "--blocks", "none", "--model-variants", "original", "--plan",
                 str(plan_path), "--out", str(tmp_path / "x.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no merge list" in err[0] and "--lut LUT" in err[0] and "--merge-by macs" in err[0]
    assert not (tmp_path / "x.jsonl").exists()
    assert main(["measure", *TINY, *FAST, "--blocks", "none", "--model-variants", "none", "--plan", str(plan_path),
                 "--merge-by", "macs", "--out", str(tmp_path / "macs.jsonl")]) == 0
    shown = capsys.readouterr().out
    assert _merged_line(shown, "tiny-ds") == [i for i, m in enumerate(by_macs.merge) if m] and "--merge-by macs" in shown


def test_merge_and_export_replay_the_same_list(tiny_lut, tmp_path, capsys):
    lut_path, _, _ = tiny_lut
    plan_path = tmp_path / "tiny-ds.json"
    plan_path.write_text(Plan("mobilenet_v2", KEEP, OPTIONS, name="tiny-ds").to_json())
    priced = merge_rule(MODEL, lut=str(lut_path)).decide(str(plan_path))
    assert priced.by == "lut"
    capsys.readouterr()
    out = tmp_path / "merged.pt"
    assert main(["merge", *TINY, "--plan", str(plan_path), "--lut", str(lut_path), "--out", str(out)]) == 0
    assert _merged_line(capsys.readouterr().out, "tiny-ds") == priced.merged
    from dsprof.merging import load_merged

    assert merge_report(load_merged(out)).plan.merge == priced.plan.merge
    assert main(["export", *TINY, "--blocks", "none", "--model-variants", "none", "--plan", str(plan_path),
                 "--lut", str(lut_path), "--out", str(tmp_path / "bundle"), "--quiet"]) == 0
    assert _merged_line(capsys.readouterr().out, "tiny-ds") == priced.merged
    assert main(["merge", *TINY, "--plan", str(plan_path)]) == 2  # neither a LUT nor --merge-by macs
    assert "--merge-by macs" in capsys.readouterr().err


def test_the_luts_rule_fills_a_plan_and_replays_one(tiny_lut):
    lut_path, frame, specs = tiny_lut
    rule = merge_rule(MODEL, lut=str(lut_path))
    plan = Plan("mobilenet_v2", KEEP, OPTIONS)
    filled = rule.decide(plan).plan
    assert filled.keep == plan.keep and filled.merge is not None
    assert not any(m for m, k in zip(filled.merge, KEEP) if k)  # kept blocks never merge
    given = plan.with_merge([False] * 7)
    assert rule.decide(given).plan is given  # a list is replayed as written
    # a span merges whatever the LUT says of its blocks alone; a list that says otherwise is refused
    spanned = Plan("mobilenet_v2", (1, 1, 1, 0, 0, 1, 1), OPTIONS, spans=((3, 5),))
    assert rule.decide(spanned).plan.merge[3:5] == (True, True)
    with pytest.raises(PlanError, match="spans"):
        rule.decide(spanned.with_merge([False] * 7))
    # an entry the LUT lacks: one rule -- named, with the command that times it (strict), or counted as merged
    missing = LUT(frame[~((frame.workload == specs[3]) & (frame.variant == "merged"))])
    gap = merge_rule(MODEL, lut=missing)
    with pytest.raises(LUTMissError) as err:
        gap.decide(plan)
    args = "model=ModelRef.of('mobilenet_v2', options={'depths': [1, 1, 1, 1, 1, 1, 1]}, resolution=32)"
    flags = "--model mobilenet_v2 --depths 1,1,1,1,1,1,1 --resolution 32"  # the same, as the command line spells it
    assert "block 3" in str(err.value) and err.value.hint.model == args
    assert (f"run `dsprof measure` (or dsprof.measure) in context {gap.costs.key} with the model's options ({args}), timing "
            "blocks original, merged and linear and rebuild the LUT") in str(err.value)  # in words, for Python
    command = hint_command(err.value.hint)  # the command line's: in the line, in backquotes
    assert command.startswith(f"dsprof measure {flags} --device cpu")
    assert f"run `{command}` and rebuild the LUT" in err.value.text(command)
    assert gap.decide(plan, strict=False).plan.merge[3] is True


def test_one_decision_the_planners_on_the_lut_and_on_macs(tiny_lut):
    """Which lone blocks merge is the planner's search for the plan's keep (`dsprof.planning.decide`), whatever the table:
    on the LUT, each block linearised alone merges where its raw merged row is below its linear one; on MACs, where
    the one convolution has fewer MACs than the block as built (both read here without the code under test's choice),
    and `merge_model` refuses to decide either."""
    lut_path, frame, specs = tiny_lut

    def median(i, variant):
        return float(frame[(frame.scope == "block") & (frame.workload == specs[i]) & (frame.variant == variant)]
                     .median_s.iloc[0])

    model = get_model("mobilenet_v2", resolution=32, **OPTIONS)
    on_lut = merge_rule(MODEL, lut=str(lut_path))
    on_macs = merge_rule(model, merge_by="macs")
    blocks = find_blocks(model)
    for i in range(7):
        alone = Plan("mobilenet_v2", tuple(0 if j == i else 1 for j in range(7)), OPTIONS)
        assert on_lut.decide(alone).plan.merge[i] == (median(i, "merged") < median(i, "linear")), i
        built = count_macs(blocks[i].module, (blocks[i].spec.in_h, blocks[i].spec.in_w), blocks[i].spec.in_channels)
        one_conv = 9 * blocks[i].spec.in_channels * blocks[i].spec.out_channels * blocks[i].spec.out_h ** 2
        assert on_macs.decide(alone).plan.merge[i] == (one_conv < built), i
    with pytest.raises(PlanError, match="no merge list"):
        merge_model(model, Plan("mobilenet_v2", KEEP, OPTIONS))


# -- the linear variant is the module merge_model deploys --------------------------------------------------------

def _layers(module: nn.Module) -> list[tuple]:
    """The convolutions and padding modules of ``module`` in order, with what fixes their cost."""
    out = []
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            pad = m.pad.padding if hasattr(m, "pad") else tuple(m.padding)  # (top, bottom, left, right) or (h, w)
            out.append(("conv", tuple(m.weight.shape), tuple(m.stride), pad, m.groups, tuple(m.dilation)))
        elif isinstance(m, (ZeroPad, nn.ZeroPad2d)):
            out.append(("pad", tuple(m.padding)))
    return out


# (model, options, block, expected (padding, stride) of its convolutions left unmerged, from the architecture):
# a basic block's padding moves in front and its first convolution does it over a larger map (1 + 1 x stride);
# an inverted residual's goes back in place (only 1x1 stride-1 convolutions precede its depthwise one)
CASES = {
    "basic-s1": ("resnet18", {"width": 0.25}, "layer1.0", [((2, 2), (1, 1)), ((0, 0), (1, 1))]),
    "basic-s2": ("resnet18", {"width": 0.25}, "layer2.0", [((3, 3), (2, 2)), ((0, 0), (1, 1)), ((0, 0), (2, 2))]),
    "ir-s1": ("mobilenet_v2", {"depths": [1] * 7}, "features.5", [((0, 0), (1, 1)), ((1, 1), (1, 1)), ((0, 0), (1, 1))]),
    "ir-s2": ("mobilenet_v2", {"depths": [1] * 7}, "features.2", [((0, 0), (1, 1)), ((1, 1), (2, 2)), ((0, 0), (1, 1))]),
}


@pytest.mark.parametrize("case", CASES)
def test_linear_workload_is_the_module_merge_model_deploys(case):
    name, options, block_name, expected = CASES[case]
    model = randomise_bn(get_model(name, resolution=32, **options)).eval()
    blocks = find_blocks(model)
    index = next(i for i, b in enumerate(blocks) if b.name == block_name)
    (workload,) = block_workloads(model, ("linear",), blocks=blocks)[index]
    keep = tuple(0 if i == index else 1 for i in range(len(blocks)))
    deployed = block_module(merge_model(model, Plan(name, keep, options, merge=(False,) * len(blocks))), block_name)
    assert _layers(workload.module) == _layers(deployed)
    convs = [(layer[3], layer[2]) for layer in _layers(deployed) if layer[0] == "conv"]
    assert convs == expected
    assert workload.macs == count_macs(deployed, workload.input_shape[1:], workload.input_shape[0])
    # the same function, not only the same shapes: both come from the model's own weights
    x = torch.randn(2, *workload.input_shape, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(workload.module(x), deployed(x), rtol=1e-5, atol=1e-5)
