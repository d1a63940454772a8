"""Plain chains (issue #47, item 4): consecutive convolution-activation units that no block module holds -- VGG-style
stacks, re-parameterised RepVGG and MobileOne -- are blocks of two convolutions (the last three together when their
number is odd), each with the activation between them removable, so such models plan and merge like the rest; and
re-parameterisation first is one model option (``reparameterize=True``, ``--reparameterize``).

Expected blocks come from reading the architectures (below and in each test); exactness from a float64 comparison of
the merged model with the linearised one (<= 1e-9 of max|y|), with randomised BatchNorm statistics, stride 1 and 2,
an even and an odd input size.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from cli_run import dsprof_here
from conftest import randomise_bn
from dsprof.errors import ModelOptionError
from dsprof.merging import linearize_model, merge_model, merge_report
from dsprof.models import discover_blocks, get_model, list_models, register_model, reparameterize
from dsprof.cli.commands import model_flags
from dsprof.records.plan import Plan
from models import nothing
from models.rep import mobileone

REP = str(Path(__file__).parent / "models" / "rep.py")


def conv_bn_relu(cin: int, cout: int, stride: int = 1, groups: int = 1, kernel: int = 3) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]


class FlatStack(nn.Module):
    """torchvision VGG's form: ``features`` one flat Sequential of conv, BN, ReLU children. Five convolutions in a row
    (3->8, 8->8, 8->16 stride 2, 16->16, 16->16), then a max-pool and a classifier: the pair features[0:6] and the
    triple features[6:15] (stride 2 inside it)."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        shapes = [(3, 8, 1), (8, 8, 1), (8, 16, 2), (16, 16, 1), (16, 16, 1)]
        self.features = nn.Sequential(*[m for cin, cout, s in shapes for m in conv_bn_relu(cin, cout, s)], nn.MaxPool2d(2))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class RepStack(nn.Module):
    """Re-parameterised RepVGG's form: a stem unit, then ``stage`` a Sequential of conv-BN-ReLU modules (a chain that
    runs through six modules: 8->16 stride 2, 16->16, 16->16 stride 2, 16->16, depthwise 16 -> pointwise 16->24); the
    stem's convolution alone is no block. Pairs stage[0:2], stage[2:4] (stride 2 first), stage[4:6] (depthwise
    separable)."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(*conv_bn_relu(3, 8))
        shapes = [(8, 16, 2, 1, 3), (16, 16, 1, 1, 3), (16, 16, 2, 1, 3), (16, 16, 1, 1, 3), (16, 16, 1, 16, 3), (16, 24, 1, 1, 1)]
        self.stage = nn.Sequential(*[nn.Sequential(*conv_bn_relu(cin, cout, s, g, k)) for cin, cout, s, g, k in shapes])
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(24, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.stage(self.stem(x)))


READINGS = {
    "flat": (FlatStack, [("features[0:6]", "chain", 1), ("features[6:15]", "chain", 2)]),
    "rep": (RepStack, [("stage[0:2]", "chain", 2), ("stage[2:4]", "chain", 2), ("stage[4:6]", "depthwise_separable", 1)]),
}


@pytest.mark.parametrize("key", sorted(READINGS))
def test_plain_chains_are_blocks_of_two(key):
    make, expected = READINGS[key]
    found = discover_blocks(make().eval(), (32, 32))
    assert [(b.name, b.spec.kind, b.spec.stride) for b in found.blocks] == expected
    assert found.refusals == []
    for b in found.blocks:  # every activation but each block's last is removable; the last stays after the merge
        assert len(b.activations) == len(b.units) - 1 and b.tail is not None and not b.residual


@pytest.mark.parametrize("key", sorted(READINGS))
def test_plain_chain_blocks_merge_exactly(key):
    make, expected = READINGS[key]
    if f"test_plain.{key}" not in list_models():  # a plan names a registered model
        register_model(f"test_plain.{key}", default_resolution=16, family="test", description=key)(
            lambda num_classes=10, pretrained=False, make=make: make(num_classes))
    torch.manual_seed(0)
    model = randomise_bn(make()).double().eval()
    n = len(expected)
    plan = Plan(f"test_plain.{key}", (0,) * n, border="in_front").with_merge([True] * n)
    for size in (16, 17):  # even, and odd: odd maps after the stride-2 convolutions
        linear = linearize_model(model, plan, input_size=(size, size)).eval()
        merged = merge_model(linear, plan, input_size=(size, size)).eval()
        assert all(d.merged for d in merge_report(merged).decisions)
        # each block's convolutions became one: FlatStack 5 -> 2, RepStack 1 + 6 -> 1 + 3
        assert sum(isinstance(m, nn.Conv2d) for m in merged.modules()) == {"flat": 2, "rep": 4}[key]
        x = torch.randn(3, 3, size, size, dtype=torch.float64, generator=torch.Generator().manual_seed(size))
        with torch.no_grad():
            y_linear, y_merged = linear(x), merged(x)
        assert float((y_merged - y_linear).abs().max() / y_linear.abs().max()) <= 1e-9, f"{key} at {size}px"


def test_reparameterize_is_a_model_option_that_fuses_first():
    """timm's MobileOne-S0 (timm/models/byobnet.py: _mobileone_bcfg d=(2, 8, 10, 1), widths 64*0.75, 128, 256,
    512*2; each block a depthwise 3x3 unit then a pointwise 1x1 unit, the first of a stage stride 2): once
    re-parameterised, one plain chain of units per stage, so 2 + 8 + 10 + 1 = 21 depthwise-separable pairs, four of
    them stride 2. The re-parameterised model computes what the original computes in eval mode."""
    if "test_plain.mobileone_s0" not in list_models():
        register_model("test_plain.mobileone_s0", default_resolution=32, family="test", description="mobileone_s0")(
            lambda num_classes=10, pretrained=False: mobileone(num_classes))
    built = get_model("test_plain.mobileone_s0", reparameterize=True)
    assert getattr(built, "dsprof_model") == ("test_plain.mobileone_s0", {"reparameterize": True})
    blocks = discover_blocks(built, (32, 32)).blocks
    assert len(blocks) == 21 and {b.spec.kind for b in blocks} == {"depthwise_separable"}
    assert [b.spec.stride for b in blocks].count(2) == 4
    assert [b.spec.out_channels for b in blocks] == [48] * 2 + [128] * 8 + [256] * 10 + [1024]
    # float32 (float64 convolutions of the 4-branch original take a minute here): agreement to float rounding
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    original = randomise_bn(get_model("test_plain.mobileone_s0")).eval()
    with torch.no_grad():
        y = original(x)
        y_fused = reparameterize(original)(x)
    assert float((y_fused - y).abs().max() / y.abs().max()) <= 1e-4
    assert model_flags("test_plain.mobileone_s0", {"reparameterize": True}) == "--model test_plain.mobileone_s0 --reparameterize"
    assert model_flags("test_plain.mobileone_s0", {"reparameterize": False}) == "--model test_plain.mobileone_s0"


def test_reparameterize_on_the_command_line_and_its_refusal():
    out = dsprof_here("blocks", "--model-file", f"{REP}:mobileone", "--reparameterize", "--resolution", "32")
    assert out.returncode == 0, out.stderr
    assert "21 blocks" in out.stdout and "stages.1[14:16]" in out.stdout
    out = dsprof_here("blocks", "--model-file", f"{REP}:plain", "--reparameterize", "--resolution", "32")
    assert out.returncode == 2
    assert "has no module to re-parameterise" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    with pytest.raises(ModelOptionError, match="no module to re-parameterise"):
        reparameterize(nn.Sequential(nn.Conv2d(3, 3, 1)))


def test_a_model_with_train_time_branches_and_no_block_is_told_to_reparameterize():
    """Found trying MobileOne-S0 as a new user (issue #47): built as it trains, every one of its 43 multi-branch
    modules is refused ("followed by add") and the one line said nothing of the option that opens it. Read from
    timm/models/byobnet.py: 1 stem + 2 + 8 + 10 + 1 blocks + 21 depthwise 3x3 units = 43 MobileOneBlocks, each with a
    ``reparameterize`` method. The line ends with the parameter (the command line prints it as its option); a model
    without such a module does not hear of it."""
    from dsprof.cli.flags import command_line_text
    import dsprof.cli.main  # noqa: F401  (reads the options from the parser)

    found = discover_blocks(mobileone(10).eval(), (32, 32))
    assert found.blocks == [] and len(found.refusals) == 43
    assert found.nothing.startswith("no block DepthShrinker can merge: all 43 candidates are refused, the first, stem: ")
    assert found.nothing.endswith("; its train-time branches fuse into one convolution each with `reparameterize=True`")
    assert command_line_text(found.nothing, "blocks").endswith(
        "; its train-time branches fuse into one convolution each with --reparameterize")
    out = dsprof_here("blocks", "--model-file", f"{REP}:mobileone", "--resolution", "32")
    assert out.returncode == 0 and out.stdout.splitlines()[-1] == f"file:rep:mobileone: {found.nothing}".replace(
        "`reparameterize=True`", "--reparameterize")

    # ResNet-D's pooled skip: refused, and nothing to re-parameterise
    assert "reparameterize" not in discover_blocks(nothing.PooledSkip().eval(), (16, 16)).nothing


def test_a_model_with_blocks_whose_train_time_branches_are_refused_is_told_to_reparameterize():
    """Found validating RepGhostNet-0.8 at 96 px as a new user (2026-12-01): built as it trains, each RepGhostModule
    is refused (its primary convolution's output is read twice, by the cheap depthwise branch and the fusion branch)
    while its shortcuts are blocks. The model has blocks, so the line that offers `reparameterize=True` (said only of
    a model without a block) never came, and the front's only plan kept every activation. Read from
    timm/models/repghost.py: RepGhostModule has ``reparameterize`` and ``switch_to_deploy``; RepGhostBottleneck and
    the rest have neither. The warning's last line names that class once and the parameter (the command line its
    option); re-parameterised, a model with no such module (ResNet-D's pooled skip), or one whose such modules are
    not what is refused (RepViT) does not hear of it."""
    from dsprof.errors import UsageError
    from dsprof.models import find_blocks

    net = get_model("timm:repghostnet_050", resolution=32).eval()
    found = discover_blocks(net, (32, 32))
    assert found.blocks and found.fusable == ("RepGhostModule",)
    assert any(r.type_name == "RepGhostModule" and "is read 2 times" in r.reason for r in found.refusals)
    with pytest.raises(UsageError) as refused:  # strict: the warning's words, raised (a warning is said once a process)
        find_blocks(net, (32, 32), strict=True)
    assert str(refused.value).splitlines()[-1] == ("the train-time branches of RepGhostModule fuse into one convolution "
                                                   "each with `reparameterize=True`, which may make blocks of these parts")

    out = dsprof_here("blocks", "--model", "timm:repghostnet_050", "--resolution", "32")
    assert out.returncode == 0, out.stderr
    assert ("the train-time branches of RepGhostModule fuse into one convolution each with --reparameterize, which "
            "may make blocks of these parts") in out.stderr
    fused = discover_blocks(get_model("timm:repghostnet_050", resolution=32, reparameterize=True).eval(), (32, 32))
    assert fused.fusable == () and not any(r.type_name == "RepGhostModule" for r in fused.refusals)
    assert discover_blocks(nothing.PooledSkip().eval(), (16, 16)).fusable == ()
    # RepViT (timm/models/repvit.py): its RepVggDw and ConvNorm fuse, but inside RepViTBlocks refused for their
    # squeeze-excitation; its refused head, RepVitClassifier, fuses two Linear heads, no convolution: not offered
    repvit = discover_blocks(get_model("timm:repvit_m0_9", resolution=32).eval(), (32, 32))
    assert {"RepViTBlock", "RepVitClassifier"} <= {r.type_name for r in repvit.refusals} and repvit.fusable == ()
