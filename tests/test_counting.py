import pytest
import torch
import torchvision.models as tvm
from torch import nn
from torchvision.models.mobilenetv2 import InvertedResidual
from torchvision.models.resnet import BasicBlock, Bottleneck

from dsprof.merging import linearize_block, linearize_model, merge_linearized, merge_model
from dsprof.records.plan import Plan
from dsprof.models.spans import span_spec
from dsprof.models import (
    BlockSpec,
    conv_macs,
    count_macs,
    count_params,
    find_blocks,
    get_model,
    memory_footprint,
    spec_macs,
    summarize_blocks,
)
from dsprof.profiler import dense_conv
from dsprof.planning.decide import merge_rule

# torchvision publishes GFLOPs (= GMACs in its convention) and parameter counts in each
# weights enum's metadata; reading the metadata downloads nothing.
PUBLISHED = {
    "mobilenet_v2": tvm.MobileNet_V2_Weights.IMAGENET1K_V1,
    "resnet18": tvm.ResNet18_Weights.IMAGENET1K_V1,
    "resnet50": tvm.ResNet50_Weights.IMAGENET1K_V1,
    "resnet152": tvm.ResNet152_Weights.IMAGENET1K_V1,
    "vgg11": tvm.VGG11_Weights.IMAGENET1K_V1,
    "vgg13_bn": tvm.VGG13_BN_Weights.IMAGENET1K_V1,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_macs_and_params_match_torchvision_metadata(name):
    meta = PUBLISHED[name].meta
    model = get_model(name)
    assert count_params(model) == meta["num_params"]
    assert count_macs(model) / 1e9 == pytest.approx(meta["_ops"], rel=0.005)


def test_figures_quoted_in_the_issue():
    assert count_params(get_model("mobilenet_v2")) == 3_504_872
    assert count_macs(get_model("mobilenet_v2")) / 1e9 == pytest.approx(0.301, rel=0.005)
    assert count_params(get_model("resnet50")) == 25_557_032
    assert count_macs(get_model("resnet50")) / 1e9 == pytest.approx(4.089, rel=0.005)


def test_block_macs_by_hand_and_blocks_plus_stem_and_head_add_up():
    model = get_model("mobilenet_v2")
    table = summarize_blocks(model)
    assert len(table) == 17
    # features.2: 16->96->24, stride 2 at 112x112 (output 56x56).
    pw, dw, pwl = 16 * 96 * 112 * 112, 96 * 9 * 56 * 56, 96 * 24 * 56 * 56
    assert table.loc[1, "macs"] == pw + dw + pwl == 29_202_432
    stem = 3 * 32 * 9 * 112 * 112
    head = 320 * 1280 * 7 * 7 + 1280 * 1000
    assert table["macs"].sum() + stem + head == count_macs(model)
    assert table["params"].sum() < count_params(model)


def test_block_macs_equal_count_macs_of_the_block_alone():
    model = get_model("efficientnet_lite0", resolution=96)
    table = summarize_blocks(model)
    for block, macs in zip(find_blocks(model), table["macs"]):
        spec = block.spec
        assert count_macs(block.module, (spec.in_h, spec.in_w), spec.in_channels) == macs


def test_memory_footprint_by_hand():
    blocks = find_blocks(get_model("mobilenet_v2"))
    # features.2: 16->96->24, stride 2, no skip. Deployed weights (BN folded into a bias):
    weights = (16 * 96 + 96) + (96 * 9 + 96) + (96 * 24 + 24)
    # Live maps per conv: pw 16x112x112 + 96x112x112; dw 96x112x112 + 96x56x56; pwl 96x56x56 + 24x56x56.
    peak = max(16 * 112 * 112 + 96 * 112 * 112, 96 * 112 * 112 + 96 * 56 * 56, 96 * 56 * 56 + 24 * 56 * 56)
    block = blocks[1]
    mem = memory_footprint(block.module, (16, 112, 112), residual=False)
    assert (mem.weight_bytes, mem.peak_activation_bytes) == (2 * weights, 2 * peak)
    assert 2 * peak == 3_010_560

    # features.3: 24->144->24 at 56x56 with a skip: the block input stays alive during dw and pwl.
    x, h = 24 * 56 * 56, 144 * 56 * 56
    peak_res = max(x + h, h + h + x, h + x + x)
    mem = memory_footprint(blocks[2].module, (24, 56, 56), residual=True, bytes_per_value=4)
    assert mem.peak_activation_bytes == 4 * peak_res


def test_summary_table_columns_and_memory():
    table = summarize_blocks(get_model("mobilenet_v2"))
    assert list(table.columns) == ["block", "kind", "spec", "macs", "params", "weight_bytes", "peak_activation_bytes"]
    assert table.loc[1, "peak_activation_bytes"] == 3_010_560
    assert table.loc[1, "weight_bytes"] == 9_840
    assert table.loc[0, "kind"] == "depthwise_separable"


def test_counting_keeps_the_training_mode_and_weights():
    model = get_model("mobilenet_v2", resolution=32).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    count_macs(model)
    summarize_blocks(model)
    assert model.training
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k


# -- the shape formulas (`conv_macs`, `spec_macs`) against FlopCounterMode ---------------------------------------


def _cbr(cin: int, cout: int, kernel: int, stride: int, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU())


def _one_block(kind: str, stride: int) -> tuple[nn.Module, int]:
    """A block of ``kind`` at ``stride`` as the model zoo builds it (torchvision's classes), and its input channels;
    the skip is an identity where the shape stays, a projection where it changes."""
    if kind == "inverted_residual":
        return InvertedResidual(16, 16 if stride == 1 else 24, stride, expand_ratio=6), 16
    if kind == "depthwise_separable":
        return InvertedResidual(16, 24, stride, expand_ratio=1), 16
    if kind == "bottleneck":
        down = None if stride == 1 else nn.Sequential(nn.Conv2d(64, 64, 1, stride, bias=False), nn.BatchNorm2d(64))
        return Bottleneck(64, 16, stride, down), 64
    if kind == "basic":
        down = None if stride == 1 else nn.Sequential(nn.Conv2d(16, 32, 1, stride, bias=False), nn.BatchNorm2d(32))
        return BasicBlock(16, 16 if stride == 1 else 32, stride, down), 16
    assert kind == "chain"  # two depthwise convolutions: the merged one stays depthwise
    return nn.Sequential(_cbr(8, 8, 3, stride, 8), _cbr(8, 8, 5, 1, 8)), 8


@pytest.mark.parametrize("size", [15, 16])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("kind", ["inverted_residual", "depthwise_separable", "bottleneck", "basic", "chain"])
def test_spec_macs_are_flop_counter_macs_of_every_block_kind_as_built_and_merged(kind, stride, size):
    block, cin = _one_block(kind, stride)
    model = nn.Sequential(_cbr(3, cin, 3, 1), block, nn.AdaptiveAvgPool2d(1)).eval()
    (found,) = find_blocks(model, (size, size))
    spec = found.spec
    assert (spec.kind, spec.stride, spec.in_h, spec.in_w) == (kind, stride, size, size)
    assert spec.projection == (kind in ("bottleneck", "basic") and stride == 2)
    assert spec_macs(spec) == count_macs(found.module, (size, size), cin)
    merged, info = merge_linearized(linearize_block(found))
    assert spec_macs(spec, merged=True) == count_macs(merged, (size, size), cin) == info.merged_macs
    assert info.linear_macs == spec_macs(spec)  # what `merge --merge-by macs` compares: the same counts


@pytest.mark.parametrize("size", [15, 16])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("padding", ["symmetric", "tf_same"])
def test_spec_macs_of_a_plain_conv_are_flop_counter_macs(padding, stride, size):
    spec = BlockSpec("conv", 12, 20, 20, 3, stride, padding, False, size, size)
    module = dense_conv(12, 20, 3, stride, padding, in_hw=(size, size))
    assert spec_macs(spec) == spec_macs(spec, merged=True) == count_macs(module, (size, size), 12)
    out = -(-size // stride)
    assert spec_macs(spec) == conv_macs(12, 20, 3, (out, out)) == 20 * 12 * 9 * out * out  # by hand


def test_spec_macs_by_hand():
    # ResNet basic block 16 -> 32, stride 2, 1x1 projection, at 16x16 (output 8x8)
    spec = BlockSpec("basic", 16, 32, 32, 3, 2, "symmetric", True, 16, 16)
    assert spec_macs(spec) == 9 * 16 * 32 * 64 + 9 * 32 * 32 * 64 + 16 * 32 * 64 == 917_504
    assert spec_macs(spec, merged=True) == 7 * 7 * 16 * 32 * 64 == 1_605_632  # kernel 1 + 2 + 2 * 2
    # MobileNetV2 features.2: 16 -> 96 -> 24, stride 2 at 112x112; merged: 3x3, 16 -> 24 at 56x56
    spec = BlockSpec("inverted_residual", 16, 96, 24, 3, 2, "symmetric", False, 112, 112)
    assert spec_macs(spec) == 29_202_432
    assert spec_macs(spec, merged=True) == 9 * 16 * 24 * 56 * 56 == 10_838_016


@pytest.mark.parametrize("size", [31, 32])
@pytest.mark.parametrize("spans", [((1, 3),), ((2, 4), (4, 7))], ids=["stride2", "stride1"])
def test_span_spec_macs_are_flop_counter_macs_of_the_merged_span(spans, size):
    # MobileNetV2 at width 0.5: block 1 (features.2) has stride 2, blocks 2 and 4..6 identity skips at stride 1
    model = get_model("mobilenet_v2", width=0.5, resolution=size).eval()
    plan = Plan("mobilenet_v2", (1,) + (0,) * 16, {"width": 0.5}, free_activation=None, spans=spans)
    merged = merge_model(linearize_model(model, plan), merge_rule(model, merge_by="macs").decide(plan).plan).eval()
    blocks = find_blocks(model)
    for start, stop in spans:
        specs = [b.spec for b in blocks[start:stop]]
        first = specs[0]
        span = merged.get_submodule(f"features.{start + 1}")
        assert spec_macs(span_spec(specs)) == count_macs(span, (first.in_h, first.in_w), first.in_channels)
        assert spec_macs(span_spec(specs)) == spec_macs(span_spec(specs), merged=True)


@pytest.mark.parametrize("name", ["tf_efficientnet_lite0", "resnet18", "mnasnet0_5"])
def test_spec_macs_of_every_block_of_zoo_models_at_an_odd_size(name):
    """TensorFlow 'SAME' padding (timm's tf_ models), projections, 5x5 kernels: every block, as built and merged."""
    model = get_model(name, resolution=33).eval()
    for i, block in enumerate(find_blocks(model)):
        spec = block.spec
        assert spec_macs(spec) == count_macs(block.module, (spec.in_h, spec.in_w), spec.in_channels), block.name
        merged, info = merge_linearized(linearize_block(block, index=i))
        assert spec_macs(spec, merged=True) == count_macs(merged, (spec.in_h, spec.in_w), spec.in_channels), block.name
