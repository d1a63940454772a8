"""One check of a plan against its model (`check_plan`), the same in every command; flags that contradict.

Expected answers come from the models' definitions: MobileNetV2's defaults are width 1.0 and depths
1,2,3,4,3,3,1 (Sandler et al., Tab. 2), so spelling them out builds the same model; tests/models/mynet.py
has 5 blocks (its docstring).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dsprof.cli import main
from dsprof.records.plan import Plan, PlanError, check_plan, load_plan
from dsprof.lut import MergeChoice
from dsprof.workflows.merge import merge
from dsprof.cli.commands import model_flags
from dsprof.models import ModelRef, normalized_options
from dsprof.search import finetune

MYNET = str(Path(__file__).parent / "models" / "mynet.py") + ":build"
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("options", [{}, {"width": 1.0}, {"width": 1}, {"depths": [1, 2, 3, 4, 3, 3, 1]},
                                     {"depths": (1, 2, 3, 4, 3, 3, 1), "width": 1.0, "num_classes": 10}])
def test_an_explicit_default_is_the_same_model(options):
    assert normalized_options("mobilenet_v2", options) == {}
    assert check_plan("mbv2-ds-a", "mobilenet_v2", options).name == "mbv2-ds-a"


@pytest.mark.parametrize("options", [{"width": 1.4}, {"depths": [1, 1, 1, 1, 1, 1, 1]}])
def test_other_options_are_another_model(options):
    with pytest.raises(PlanError, match=r"mbv2-ds-a is for mobilenet_v2 with options \{\}"):
        check_plan("mbv2-ds-a", "mobilenet_v2", options)


def test_a_plan_of_the_same_family_is_retargeted_and_another_model_refused():
    assert check_plan("efflite0-ds-a", "efficientnet_lite0").model == "efficientnet_lite0"
    with pytest.raises(PlanError, match=re.escape(
            "use it with the plan's model (`model=ModelRef.of('mobilenet_v2', options={'width': 1.4})`)")):
        check_plan("mbv2-1.4-ds-a", "resnet18")


def test_merge_accepts_explicit_defaults_from_the_cli_and_python(tmp_path, capsys):
    assert main(["merge", "--model", "mobilenet_v2", "--width", "1.0", "--depths", "1,2,3,4,3,3,1", "--resolution", "32",
                 "--plan", "mbv2-ds-a", "--merge-by", "macs", "--out", str(tmp_path / "x.pt")]) == 0, capsys.readouterr().err
    outcome = merge(ModelRef.of("mobilenet_v2", options={"width": 1.0}, resolution=32), "mbv2-ds-a", merge=MergeChoice.macs())
    assert outcome.costs["state"].isin(["merged", "linear"]).sum() == load_plan("mbv2-ds-a").keep.count(0) == 5


def test_finetune_with_a_model_checks_the_plan_instead_of_building_the_plans_model(tmp_path, capsys):
    # refused before any data is loaded or model built
    assert main(["finetune", "--model-file", MYNET, "--plan", "mbv2-ds-a", "--out", str(tmp_path / "f.pt")]) == 2
    err = capsys.readouterr().err
    assert "mbv2-ds-a is for model 'mobilenet_v2', not 'file:mynet:build'" in err
    assert main(["finetune", "--model", "mobilenet_v2", "--width", "1.4", "--plan", "mbv2-ds-a"]) == 2
    assert "with options {}, not {'width': 1.4}" in capsys.readouterr().err
    with pytest.raises(PlanError, match="is for model 'mobilenet_v2', not 'resnet18'"):
        finetune("mbv2-ds-a", model="resnet18")
    assert not (tmp_path / "f.pt").exists()


def test_suggested_commands_for_a_users_model_name_its_file(tmp_path, capsys):
    wrong = json.dumps({"model": "file:mynet:build", "keep": [0, 1]})  # mynet has 5 blocks
    assert main(["merge", "--model-file", MYNET, "--resolution", "32", "--plan", wrong]) == 2
    err = capsys.readouterr().err
    assert f"`dsprof blocks` with --model-file {MYNET})" in err and "--model file:" not in err
    assert main(["finetune", "--model", "mobilenet_v2", "--plan", wrong]) == 2
    err = capsys.readouterr().err
    assert f"use it with the plan's model (--model-file {MYNET})" in err
    # the suggested command runs, as written
    assert main(["blocks", "--model-file", MYNET, "--resolution", "32"]) == 0
    assert model_flags("file:other:factory") == "--model-file PATH.py:factory"  # not registered in this process


@pytest.mark.parametrize("method", ["random", "differentiable"])
@pytest.mark.parametrize("keep", ["0", "6", "1.0", "0.0"])
def test_search_refuses_a_keep_that_leaves_nothing_to_choose(tmp_path, capsys, method, keep):
    out = tmp_path / "p.json"
    code = main(["search", "--model-file", MYNET, "--keep", keep, "--method", method, "--epochs", "1",
                 "--max-batches", "1", "--device", "cpu", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"--keep {keep} of 6 blocks" in err and "nothing to choose; give --keep 1..5" in err
    assert not out.exists()


def test_predict_refuses_a_plan_for_other_options(tmp_path, capsys):
    from dsprof.lut import build_lut
    from dsprof.lut.predict import predict_latency
    from dsprof.profiler import BackendSettings, TimingConfig, Workloads, measure
    from dsprof.models import ModelRef

    timing = TimingConfig(warmup_s=0.0, warmup_min_iters=1, warmup_max_s=0.01, first_warmup_s=0.0, min_samples=3,
                          max_samples=3, budget_s=0.01, min_sample_s=0.0)
    result = measure(ModelRef.of("mobilenet_v2", resolution=32), settings=BackendSettings(threads=1),
                     workloads=Workloads(blocks="features.1", variants=("original",), model_variants=()), timing=timing,
                     out=tmp_path / "m.jsonl", progress=False)
    lut = tmp_path / "lut.csv"
    build_lut([result.path]).save(lut)
    with pytest.raises(PlanError, match=r"is for mobilenet_v2 with options \{\}, not \{'width': 1.4\}"):
        predict_latency(ModelRef.of("mobilenet_v2", options={"width": 1.4}, resolution=32), lut, "mbv2-ds-a")
    assert main(["predict", "--model", "mobilenet_v2", "--width", "1.4", "--resolution", "32", "--lut", str(lut),
                 "--plan", "mbv2-ds-a"]) == 2
    assert "is for mobilenet_v2 with options {}, not {'width': 1.4}" in capsys.readouterr().err
    assert load_plan("mbv2-ds-a").options == {}


def test_a_merge_list_marks_the_blocks_of_its_spans_merged():
    # a span merges as one convolution, so a merge list that leaves one of its blocks unmerged contradicts itself:
    # the plan refuses it when it is made or read, whatever then replays it (issue #44: one owner of the check)
    keep, options, spans = (1, 1, 1, 0, 0, 1, 1), {"depths": [1] * 7}, ((3, 5),)
    fine = Plan("mobilenet_v2", keep, options, spans=spans, merge=(False,) * 3 + (True, True) + (False,) * 2)
    assert fine.merge[3:5] == (True, True) and Plan.from_json(fine.to_json()) == fine
    half = dict(fine.to_dict(), merge=[False] * 3 + [True, False] + [False] * 2)
    with pytest.raises(PlanError, match=r"leaves blocks \[4\] unmerged, but they lie in its spans"):
        Plan.from_json(json.dumps(half))
    with pytest.raises(PlanError, match=r"leaves blocks \[3, 4\] unmerged"):
        fine.with_merge([False] * 7)


def test_options_given_as_a_tuple_match_the_list_a_plan_file_reads_back(tmp_path):
    """A plan made with ``depths=(1,)*7`` is written as a JSON list; read back, it is the plan of the same model."""
    from dsprof.records.plan import Plan, check_plan, load_plan

    path = tmp_path / "p.json"
    path.write_text(Plan("mobilenet_v2", (0,) * 7, {"depths": (1,) * 7}, name="p").to_json())
    back = load_plan(path)
    assert back.options["depths"] == [1] * 7
    assert check_plan(back, "mobilenet_v2", {"depths": (1,) * 7}).keep == (0,) * 7
    with pytest.raises(PlanError, match="with options"):
        check_plan(back, "mobilenet_v2", {"depths": (1,) * 6 + (2,)})

