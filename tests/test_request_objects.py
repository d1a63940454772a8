"""Issue #44: a Python caller who gives a verb's request object the wrong type, or gives a field twice (the object and
its old keyword) with two values, is told so in one line that names the parameter -- not a `TypeError` from
`dataclasses.replace` or an `AttributeError` seven frames down, and never a command-line flag. Found by a new-user
pass over the API (2026-11-29): each case below raised from inside before.
"""

import json

import pytest
from torch import nn

import dsprof
from dsprof.errors import DsprofError, UsageError
from dsprof.lut import Pricing
from dsprof.planning import LatencyBudget
from dsprof.profiler import Workloads


def _one_line(exc: DsprofError, *names: str) -> str:
    text = str(exc)
    assert "\n" not in text and "--" not in text, text  # one line, a parameter, no flag
    for name in names:
        assert name in text, (name, text)
    return text


@pytest.mark.parametrize("call, names", [
    (lambda tmp: dsprof.plan("mobilenet_v2", tmp / "no.csv", keep=1, pricing="x"), ("`pricing=`", "Pricing", "'x'")),
    (lambda tmp: dsprof.plan("mobilenet_v2", tmp / "no.csv", budget=5), ("`budget=`", "LatencyBudget", "int 5")),
    (lambda tmp: dsprof.predict("mobilenet_v2", tmp / "no.csv", "mbv2-ds-a", pricing={"max_span": 2}),
     ("`pricing=`", "dict")),
    (lambda tmp: dsprof.measure("mobilenet_v2", workloads="all", out=tmp), ("`workloads=`", "Workloads", "'all'")),
    (lambda tmp: dsprof.measure("mobilenet_v2", settings="onnxruntime", out=tmp),
     ("`settings=`", "BackendSettings", "'onnxruntime'")),
    (lambda tmp: dsprof.measure("mobilenet_v2", timing={}, out=tmp), ("`timing=`", "TimingConfig", "dict")),
    (lambda tmp: dsprof.merge("mobilenet_v2", "mbv2-ds-a", merge="lut"), ("`merge=`", "MergeChoice", "'lut'")),
    (lambda tmp: dsprof.predict("mobilenet_v2", tmp / "no.csv", "mbv2-ds-a", check="yes"),
     ("`check=`", "CheckSettings", "'yes'")),  # it ran a check: a string is truthy
])
def test_a_request_object_of_the_wrong_type_is_refused_naming_its_parameter(tmp_path, call, names):
    with pytest.raises(UsageError) as caught:
        call(tmp_path)
    _one_line(caught.value, *names)
    assert list(tmp_path.iterdir()) == []  # refused before anything is measured or written


def test_a_field_given_in_the_object_and_as_its_old_keyword_with_two_values_is_refused(tmp_path):
    with pytest.raises(UsageError) as caught, pytest.warns(DeprecationWarning):
        dsprof.plan("mobilenet_v2", tmp_path / "no.csv", keep=1, pricing=Pricing(max_span=3), max_span=2)
    assert _one_line(caught.value) == ("`max_span=` and `pricing=Pricing(max_span=)` disagree (2 and 3): give it once, "
                                       "in `pricing=` (`max_span=` is its old spelling)")
    # the same value twice is no contradiction: the old keyword only warns (and the missing LUT is what stops it)
    with pytest.raises(DsprofError, match="LUT file .* does not exist"), pytest.warns(DeprecationWarning):
        dsprof.plan("mobilenet_v2", tmp_path / "no.csv", keep=1, pricing=Pricing(max_span=3), max_span=3)


def test_keep_and_a_budget_together_or_a_keep_that_is_no_number_are_refused_by_their_parameters(tmp_path):
    with pytest.raises(UsageError) as both:
        dsprof.plan("mobilenet_v2", tmp_path / "no.csv", keep=1, budget=LatencyBudget(speedup=1.1))
    _one_line(both.value, "`keep=`", "`budget=LatencyBudget(budget_ms=, speedup=)`")
    from dsprof.planning.front import resolve_k
    for bad in ("two", None, float("nan"), True):
        with pytest.raises(UsageError) as caught:
            resolve_k(bad, 16)
        assert _one_line(caught.value) == f"`keep={bad!r}`: give a count of blocks (from 0 to 16) or a fraction in [0, 1]"


def test_a_path_parameter_given_no_path_names_what_it_takes(tmp_path):
    with pytest.raises(DsprofError) as lut:
        dsprof.plan("mobilenet_v2", 42, keep=1)
    assert _one_line(lut.value) == "`lut=` takes a LUT or the path of a LUT file, not int 42"
    with pytest.raises(DsprofError) as plan:
        dsprof.merge("mobilenet_v2", 3.5)
    assert _one_line(plan.value) == "`plan=` takes a Plan, a preset name, a plan file or its JSON text, not float 3.5"
    with pytest.raises(DsprofError) as files:
        dsprof.build_lut(123, out=tmp_path / "lut.csv")
    _one_line(files.value, "measurement files", "123")
    assert not (tmp_path / "lut.csv").exists()


def test_merge_refuses_spans_it_cannot_read_instead_of_planning_them_itself():
    # before: any string was taken for "auto" (the planner's spans), "0-1" and "garbage" alike
    for spans in ("0-1", "garbage", "none"):
        with pytest.raises(UsageError) as caught:
            dsprof.merge("mobilenet_v2", "mbv2-ds-a", spans=spans)
        _one_line(caught.value, f"`spans={spans!r}`", '"auto"', "((0, 2), (5, 8))")
    for max_span in (0, -1, 2.5, True):
        with pytest.raises(UsageError) as caught:
            dsprof.merge("mobilenet_v2", "mbv2-ds-a", spans="auto", max_span=max_span)
        _one_line(caught.value, f"`max_span={max_span!r}`", "1 or more")
    # spans of one's own decide the merges again: without a LUT or MACs to decide them it said the plan "has no merge
    # list" (a new user's plan had one, for its own spans)
    with pytest.raises(UsageError) as caught:
        dsprof.merge("mobilenet_v2", "mbv2-ds-a", spans=((1, 3),))
    _one_line(caught.value, "`spans=` decides the plan's merges again", "`merge=MergeChoice(lut=LUT)`",
              "`merge=MergeChoice(merge_by='macs')`")
    with pytest.raises(UsageError) as caught:
        Workloads(spans=-1)
    _one_line(caught.value, "`Workloads(spans=-1)`", "0 for no spans")


class _Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.Conv2d(8, 8, 1), nn.BatchNorm2d(8))

    def forward(self, x):
        return self.body(x)


def test_a_plan_file_of_a_users_module_says_how_to_read_it_in_a_new_process(tmp_path):
    # a plan file written for an nn.Module names the module's class; a later process that has not been given the
    # module cannot build that model. It used to say "unknown model 'X'. Known models: <the zoo>"; it now says how
    # to name the module, and once it is named the same file reads
    path = tmp_path / "mine.plan.json"
    path.write_text(json.dumps({"format": "dsprof.plan", "version": 1, "model": "TinyOfMine", "keep": [0, 1]}))
    with pytest.raises(DsprofError) as caught:
        dsprof.merge(plan=path)
    text = _one_line(caught.value, "unknown model 'TinyOfMine'", "dsprof.ModelRef.of(module, name='TinyOfMine')")
    assert "efficientnet" not in text  # not the zoo's list: the model is the user's
    mine = _Tiny()  # named while it lives (the process holds no module of its own)
    dsprof.ModelRef.of(mine, name="TinyOfMine")
    from dsprof.records.plan import Plan
    assert Plan.coerce(str(path)).model == "TinyOfMine"


def test_calibrating_a_model_with_nothing_to_merge_is_refused_before_anything_is_timed(tmp_path, capsys):
    # found by a new user: `measure --calibrate` of an MLP timed the whole model, then failed on an empty plan
    # ("'keep' must be a non-empty list of 0/1") with its records written
    from dsprof.cli.main import main

    (tmp_path / "mlp.py").write_text("from torch import nn\n\ndef mlp():\n    return nn.Sequential(nn.Flatten(), "
                                     "nn.Linear(3 * 16 * 16, 32), nn.ReLU(), nn.Linear(32, 10))\n")
    out = tmp_path / "results"
    code = main(["measure", "--model-file", f"{tmp_path / 'mlp.py'}:mlp", "--resolution", "16", "--calibrate",
                 "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1] == ("dsprof measure: error: no convolution: nothing for DepthShrinker to merge: there "
                                     "is no plan to calibrate; time the whole model without --calibrate")
    assert not out.exists()


def test_a_report_given_a_plan_of_a_model_it_has_no_records_of_names_both_and_no_flag_it_lacks(tmp_path):
    # found by a new user: `dsprof report r1 --plans other/front.plan.json` suggested `--model ...`, which `dsprof
    # report` does not take (the words of the check that `merge` and `measure` make, where a model is given)
    from pathlib import Path

    fixtures = Path(__file__).parent / "fixtures" / "reports"  # real runs of a 7-block MobileNetV2 at 32 px
    plan = tmp_path / "other.plan.json"
    plan.write_text(json.dumps({"format": "dsprof.plan", "version": 1, "model": "resnet18", "keep": [0] * 8,
                                "name": "other-k0"}))
    with pytest.raises(DsprofError) as caught:
        dsprof.report([fixtures / "tiny_torch.jsonl"], tmp_path / "report", plans=[plan])
    assert _one_line(caught.value) == ("plan other-k0 is for resnet18, which the measurement files do not hold (they "
                                       "hold mobilenet_v2): give the plans of the measured models")
    assert not (tmp_path / "report").exists()


def test_a_checkpoint_whose_sizes_are_out_of_bounds_is_refused_before_anything_is_built(tmp_path):
    # the resolution a fine-tuning checkpoint carries is used where none is given: a file's size is data, and a
    # hostile one (a million pixels) must not build a model for hours
    import torch

    from dsprof.workflows.merge import checkpoint_facts

    path = tmp_path / "ft.pt"
    torch.save({"state_dict": {}, "num_classes": 10, "resolution": 32}, path)
    assert checkpoint_facts(path) == {"num_classes": 10, "resolution": 32}
    torch.save({"state_dict": {}, "num_classes": 10, "resolution": 1_000_000}, path)
    with pytest.raises(DsprofError) as caught:
        dsprof.merge("mobilenet_v2", "mbv2-ds-a", checkpoint=path, merge=dsprof.lut.MergeChoice.macs())
    assert _one_line(caught.value) == (f"checkpoint {path} carries resolution 1000000, outside 8..4096: give a "
                                       "checkpoint that `dsprof finetune` wrote, or a plain state dict")
