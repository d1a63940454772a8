"""Plans: JSON round trip, validation with clear errors, the paper's presets, the CLI."""

import json
import warnings

import pytest
import torch

from dsprof.cli import main
from dsprof.merging import load_merged
from dsprof.records.plan import PRESETS, Plan, PlanError, list_presets, load_plan, load_preset
from dsprof.models import find_blocks, get_model
from dsprof.planning.decide import merge_rule

pytestmark = pytest.mark.usefixtures("one_thread")


def test_plan_json_round_trip():
    plan = Plan("mobilenet_v2", (1, 0) * 8 + (1,), {"width": 1.4}, border="in_place", merge=(False,) * 17, name="x")
    assert Plan.from_json(plan.to_json()) == plan
    assert json.loads(plan.to_json())["keep"] == list(plan.keep)


@pytest.mark.parametrize(
    "text,message",
    [
        ('{"model": "mobilenet_v2", "keep": [0, 1,', "not valid JSON"),
        ('{"model": "mobilenet_v3000", "keep": [0, 1]}', "unknown model 'mobilenet_v3000'"),
        ('{"model": "mobilenet_v2", "keep": [0, 2]}', "0/1"),
        ('{"model": "mobilenet_v2"}', "lacks 'keep'"),
        ('{"model": "mobilenet_v2", "keep": [0], "colour": "red"}', "unknown plan field"),
        ('{"model": "mobilenet_v2", "keep": [0], "border": "sideways"}', "'border' must be one of"),
        ('{"model": "mobilenet_v2", "keep": [1], "merge": [true]}', "activations are kept"),
        ("[0, 1]", "JSON object"),
    ],
)
def test_malformed_plans_get_clear_errors(text, message):
    with pytest.raises(PlanError, match=message):
        Plan.from_json(text)


def test_unknown_preset_lists_the_presets():
    with pytest.raises(PlanError, match="mbv2-1.4-ds-e"):
        load_preset("mbv2-ds-z")


@pytest.mark.parametrize("name", list_presets())
def test_presets_fit_their_models(name):
    plan = load_preset(name)
    model = get_model(plan.model, resolution=32, **plan.options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan.check_blocks(len(find_blocks(model, (32, 32))))


def test_presets_from_the_paper_table():
    assert len(PRESETS) == 4 + 6 + 4 + 4
    assert load_preset("MBV2-1.4-DS-E").keep == (1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1)
    assert load_preset("mbv2-1.4-ds-f").keep == (0,) * 17
    assert load_plan("mbv2-ds-a").options == {}


def test_cli_merge_writes_a_loadable_model(tmp_path, capsys):
    out = tmp_path / "merged.pt"
    code = main(["merge", "--model", "mobilenet_v2", "--width", "1.4", "--resolution", "32", "--plan", "mbv2-1.4-ds-e",
                 "--merge-by", "macs", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "features.2" in printed and "merged" in printed and "total" in printed
    assert "mbv2-1.4-ds-e: merged blocks " in printed and "decided by MACs (--merge-by macs" in printed
    model = load_merged(out)
    assert model(torch.zeros(1, 3, 32, 32)).shape == (1, 1000)


def test_cli_merge_replays_a_checkpoint_of_the_linearised_model(tmp_path):
    from dsprof.merging import linearize_model, merge_model

    model = get_model("mobilenet_v2", resolution=32)
    linear = linearize_model(model, "mbv2-ds-b")
    ckpt = tmp_path / "ft.pt"
    torch.save(linear.state_dict(), ckpt)
    out = tmp_path / "merged.pt"
    assert main(["merge", "--resolution", "32", "--plan", "mbv2-ds-b", "--checkpoint", str(ckpt), "--out", str(out),
                 "--merge-by", "macs"]) == 0
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(load_merged(out)(x), merge_model(linear, merge_rule(model, merge_by="macs").decide("mbv2-ds-b").plan)(x), rtol=0, atol=0)


def test_merge_loads_a_checkpoint_of_the_original_model_before_it_linearises_it(tmp_path):
    import dsprof
    from conftest import randomise_bn
    from dsprof.merging import linearize_model

    torch.manual_seed(0)
    trained = randomise_bn(get_model("mobilenet_v2", resolution=32, num_classes=10)).to(torch.float64).eval()
    ckpt = tmp_path / "original.pt"
    torch.save(trained.state_dict(), ckpt)
    given = get_model("mobilenet_v2", resolution=32, num_classes=10).to(torch.float64).eval()  # other weights
    before = {k: v.clone() for k, v in given.state_dict().items()}
    plan = merge_rule(trained, merge_by="macs").decide("mbv2-ds-b").plan
    out = dsprof.merge(given, plan, checkpoint=ckpt)
    assert all(torch.equal(before[k], v) for k, v in given.state_dict().items())  # the module given is never changed
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    with torch.no_grad():  # what merges is the checkpoint's model linearised: its output, to float64 rounding
        expected = linearize_model(trained, plan).eval()(x)
        torch.testing.assert_close(out.model(x), expected, rtol=0, atol=1e-9 * expected.abs().max().item())


@pytest.mark.parametrize(
    "plan_text,message",
    [
        ("{not json", "not valid JSON"),
        ('{"model": "mobilenet_v2", "keep": [0, 1, 0]}', "3 entries but the model has 17 blocks"),
        ('{"model": "nonet", "keep": [0]}', "unknown model"),
        ('{"model": "resnet18", "keep": [0]}', "1 entries but the model has 8 blocks"),  # no --model: the plan's
    ],
)
def test_cli_merge_bad_plan_files(tmp_path, capsys, plan_text, message):
    path = tmp_path / "plan.json"
    path.write_text(plan_text)
    assert main(["merge", "--resolution", "32", "--plan", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_cli_merge_plan_for_another_width(capsys):
    # a model given (without --model: the plan's model with its options) at another width than the plan's
    assert main(["merge", "--model", "mobilenet_v2", "--resolution", "32", "--plan", "mbv2-1.4-ds-a"]) == 2
    assert "--width 1.4" in capsys.readouterr().err
