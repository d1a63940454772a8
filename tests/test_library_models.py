"""Any timm or torchvision classification model by its own name, ``timm:NAME`` / ``torchvision:NAME``, through every
door that takes a zoo name: built, its blocks found, planned, merged exactly, named in suggested commands.

Expected values come from the architectures and the libraries' own published figures: MobileNetV2 has 17 bottleneck
blocks (Sandler et al., Tab. 2: 1 + 2 + 3 + 4 + 3 + 3 + 1); torchvision publishes EfficientNetV2-S's weights at a
384 px crop, timm MobileNetV4-Conv-Small's at 224 px (their model cards).
"""

from __future__ import annotations

import json

import pytest
import torch

from cli_run import dsprof_here
from dsprof.errors import DsprofError
from dsprof.cli.flags import parameters_as_flags
from dsprof.merging import linearize_model, merge_model, merge_report
from dsprof.models import discover_blocks, find_blocks, get_model
from dsprof.models.ref import ModelRef
from dsprof.models.build import library_entry
from dsprof.models.registry import is_library_name, meant_as_model_file, model_args
from dsprof.records.plan import load_plan
from test_any_cnn_merge import _build, _max_rel, _plan


@pytest.mark.parametrize("name", ["torchvision:mobilenet_v2", "timm:mobilenetv2_100"])
def test_a_library_name_builds_the_library_s_model_with_its_17_blocks(name):
    model = get_model(name, resolution=32)
    assert len(find_blocks(model)) == 17
    assert model(torch.zeros(1, 3, 32, 32)).shape == (1, 1000)
    assert len(find_blocks(get_model(name, resolution=32, num_classes=10))) == 17


def test_a_library_model_s_default_resolution_is_its_weights():
    assert library_entry("torchvision:efficientnet_v2_s").default_resolution == 384
    assert library_entry("timm:mobilenetv4_conv_small").default_resolution == 224
    assert library_entry("torchvision:efficientnet_v2_s").options() == ["num_classes"]


def test_a_library_name_is_not_a_model_file_and_is_read_without_the_library():
    assert is_library_name("timm:resnet18") and is_library_name("torchvision:vgg11")
    assert not is_library_name("keras:resnet18") and not is_library_name("timm:") and not is_library_name("resnet18")
    assert not meant_as_model_file("timm:resnet18")
    assert meant_as_model_file("net.py:build") and meant_as_model_file("net.txt:build")
    assert is_library_name("timm:resnet50.a1_in1k")  # timm's pretrained tags


@pytest.mark.parametrize("hostile", ['timm:$(touch pwned)', 'timm:=HYPERLINK("http://x")', "timm:<script>x</script>",
                                     "torchvision:../../etc/passwd", "timm:a b"])
def test_a_plan_file_naming_a_hostile_library_model_is_refused_as_an_unknown_model(hostile, tmp_path):
    """A plan file from someone else is data: a ``LIBRARY:NAME`` that no library could spell (a shell substitution, a
    formula, markup, a path) is not read as a library's model (nor as a model file), so the plan is refused as one
    for an unknown model, and nothing runs."""
    assert not is_library_name(hostile) and not meant_as_model_file(hostile)
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps({"format": "dsprof.plan", "version": 1, "model": hostile, "keep": [1, 0],
                                "options": {}, "name": "h"}))
    with pytest.raises(DsprofError, match="unknown model"):
        load_plan(path)
    refused = dsprof_here("blocks", "--model", hostile, cwd=tmp_path)
    assert refused.returncode != 0 and "unknown model" in refused.stderr
    assert list(tmp_path.iterdir()) == [path]  # nothing written, nothing run


@pytest.mark.parametrize("name, close", [("timm:mobilenetv4_small", "timm:mobilenetv4_conv_small"),
                                         ("torchvision:efficientnet_v3", "torchvision:efficientnet_v2_s")])
def test_an_unknown_library_name_names_the_closest_in_one_line(name, close):
    with pytest.raises(DsprofError) as info:
        ModelRef.of(name)
    message = str(info.value)
    assert "\n" not in message and close in message and "no classification model" in message


def test_the_command_line_finds_merges_and_names_a_library_model(tmp_path):
    name = "timm:mobilenetv2_100"
    shown = dsprof_here("blocks", "--model", name, "--resolution", "32")
    assert shown.returncode == 0, shown.stderr
    assert "17 blocks" in shown.stdout
    plan = {"format": "dsprof.plan", "version": 1, "model": name, "options": {}, "name": "odd",
            "keep": [i % 2 for i in range(17)]}
    (tmp_path / "odd.json").write_text(json.dumps(plan))
    merged = dsprof_here("merge", "--model", name, "--resolution", "32", "--plan", tmp_path / "odd.json",
                         "--merge-by", "macs", "--out", tmp_path / "merged.pt")
    assert merged.returncode == 0, merged.stderr
    assert (tmp_path / "merged.pt").is_file() and load_plan(tmp_path / "odd.json").model == name
    # the one API argument and the command line's options that name it, as messages suggest them
    assert model_args(name, resolution=32) == "model=ModelRef.of('timm:mobilenetv2_100', resolution=32)"
    library_entry("torchvision:efficientnet_v2_s")  # registered: its default resolution is left out
    assert model_args("torchvision:efficientnet_v2_s", resolution=384) == "model='torchvision:efficientnet_v2_s'"
    assert parameters_as_flags(model_args(name, resolution=32)) == f"--model {name} --resolution 32"


@pytest.mark.parametrize("name", ["timm:mobilenetv4_conv_small_035", "timm:test_efficientnet"])
def test_every_block_of_a_library_model_merges_exactly_in_float64(name):
    """MobileNetV4's universal inverted bottlenecks and timm's small test EfficientNet (blocks with squeeze-excitation),
    neither in the zoo: merged, the model computes what the linearised one does, to 1e-9 of max|y| (float64, random
    BatchNorm statistics, batch 2), as tests/test_any_cnn_merge.py holds the zoo's families to."""
    size = 48
    model = _build(name, {}, size)
    n_blocks = len(discover_blocks(model, input_size=(size, size)).blocks)
    assert n_blocks > 0
    plan = _plan(name, {}, n_blocks)
    linear = linearize_model(model, plan, input_size=(size, size)).eval()
    merged = merge_model(linear, plan, input_size=(size, size)).eval()
    x = torch.randn(2, 3, size, size, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert _max_rel(merged(x), linear(x)) <= 1e-9
    assert all(d.merged for d in merge_report(merged).decisions)


def test_a_model_that_does_not_run_at_the_resolution_asked_says_so_in_one_line(tmp_path):
    """A model made for one size (here a classifier over a fixed 32x32 grid; timm's EfficientFormer is one such at
    64 px) fails inside torch.fx's shape propagation, which prints its own traceback: the user gets one line that
    says what failed and to give a resolution the model takes, and no traceback."""
    (tmp_path / "fixed.py").write_text(
        "from torch import nn\n\n"
        "def build(num_classes: int = 10):\n"
        "    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),\n"
        "                         nn.Conv2d(8, 8, 1), nn.Flatten(), nn.Linear(8 * 32 * 32, num_classes))\n")
    spec = f"{tmp_path / 'fixed.py'}:build"
    refused = dsprof_here("blocks", "--model-file", spec, "--resolution", "64")
    assert refused.returncode != 0
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not run on a 64x64 px input" in lines[0] and "--resolution" in lines[0], lines
    shown = dsprof_here("blocks", "--model-file", spec, "--resolution", "32")
    assert shown.returncode == 0, shown.stderr


def test_a_convolution_that_standardises_its_weights_is_refused_not_merged_wrong():
    """timm's StdConv2d (BiT) and ScaledStdConv2d (NFNet) standardise their weights in forward: merging the stored weight
    would compute another function. Such a chain is refused, naming the class; the same chain of nn.Conv2d is a block."""
    from timm.layers import StdConv2d
    from torch import nn

    def chain(conv):
        return nn.Sequential(conv(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), conv(8, 8, 3, padding=1),
                             nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 1), nn.BatchNorm2d(8))

    plain = discover_blocks(chain(nn.Conv2d).eval(), input_size=(16, 16))
    assert len(plain.blocks) == 1 and not plain.refusals
    std = discover_blocks(chain(StdConv2d).eval(), input_size=(16, 16))
    assert not std.blocks and "StdConv2d computes its own forward" in std.nothing
