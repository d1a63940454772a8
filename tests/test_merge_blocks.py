"""Every block kind, linearised and merged: merged equals linearised, in float64 and float32."""

import copy
import functools

import pytest
import timm
import torch
from timm.models._efficientnet_blocks import InvertedResidual as TimmInvertedResidual
from torch import nn
from torchvision.models.mobilenetv2 import InvertedResidual
from torchvision.models.resnet import BasicBlock, Bottleneck

from conftest import randomise_bn
from dsprof.merging import MergeError, linearize_block, linearize_model, merge_linearized
from dsprof.records.plan import Plan
from dsprof.merging.layers import BorderBias
from dsprof.models import get_model

pytestmark = pytest.mark.usefixtures("one_thread")

TOL = {torch.float64: 1e-9, torch.float32: 1e-4}


def _downsample(cin, cout, stride):
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))


@functools.lru_cache(maxsize=None)
def _timm_model(name):
    return timm.create_model(name, num_classes=10)


def _timm_block(name, index):
    stage, block = index
    return copy.deepcopy(_timm_model(name).blocks[stage][block])


# (label, builder, input channels, exact with padding in place)
BLOCKS = [
    ("tv_ir_t6_s1_res", lambda: InvertedResidual(16, 16, 1, 6), 16, True),
    ("tv_ir_t6_s2", lambda: InvertedResidual(16, 24, 2, 6), 16, True),
    ("tv_ds_t1", lambda: InvertedResidual(16, 8, 1, 1), 16, True),
    ("timm_tf_ds", lambda: _timm_block("tf_efficientnet_lite0", (0, 0)), 32, True),
    ("timm_tf_ir_k3_s2", lambda: _timm_block("tf_efficientnet_lite0", (1, 0)), 16, True),
    ("timm_tf_ir_k3_s1_res", lambda: _timm_block("tf_efficientnet_lite0", (1, 1)), 24, True),
    ("timm_tf_ir_k5_s2", lambda: _timm_block("tf_efficientnet_lite0", (2, 0)), 24, True),
    ("timm_ir_k5_s1_res", lambda: _timm_block("efficientnet_lite0", (2, 1)), 40, True),
    ("bottleneck_s1", lambda: Bottleneck(32, 8), 32, True),
    ("bottleneck_s2_down", lambda: Bottleneck(16, 8, 2, downsample=_downsample(16, 32, 2)), 16, True),
    ("basic_s1", lambda: BasicBlock(16, 16), 16, False),
    ("basic_s2_down", lambda: BasicBlock(16, 32, 2, downsample=_downsample(16, 32, 2)), 16, False),
]


def _random_block(builder, seed, dtype):
    torch.manual_seed(seed)
    block = builder()
    for m in block.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.normal_(m.weight, std=(1.0 / m.weight[0].numel()) ** 0.5)
    return randomise_bn(block, seed).to(dtype).eval()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("size", [(13, 13), (14, 11)], ids=["odd", "even_odd"])
@pytest.mark.parametrize("border", ["in_front", "in_place"])
@pytest.mark.parametrize("label,builder,cin,exact_in_place", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_merged_block_equals_linearised_block(label, builder, cin, exact_in_place, border, size, dtype):
    block = _random_block(builder, seed=len(label), dtype=dtype)
    lin = linearize_block(block, border=border, input_size=size).eval()
    merged, info = merge_linearized(lin)
    assert isinstance(merged.conv, nn.Conv2d)
    x = torch.randn(3, cin, *size, dtype=torch.float64).to(dtype)
    with torch.no_grad():
        expected, got = lin(x), merged(x)
    if border == "in_place" and not exact_in_place:
        # a padded 3x3 before a padded 3x3: no exact single conv; the error is measured and reported
        assert not info.exact and info.border_error > 1e-3
        return
    assert info.exact
    assert isinstance(merged.border, BorderBias) == (border == "in_place" and info.border_corrected)
    torch.testing.assert_close(got, expected, rtol=0, atol=TOL[dtype] * expected.abs().max().item())


@pytest.mark.parametrize("label,builder,cin,exact_in_place", BLOCKS[:8], ids=[b[0] for b in BLOCKS[:8]])
def test_linearised_in_place_is_the_block_without_its_activations(label, builder, cin, exact_in_place):
    """The in-place form is exactly the original block with its inner activations replaced by identities."""
    block = _random_block(builder, seed=1, dtype=torch.float64)
    lin = linearize_block(block, border="in_place", free_activation=None).eval()
    reference = copy.deepcopy(block)
    for name, m in list(reference.named_modules()):
        if isinstance(m, (nn.ReLU6, nn.ReLU)):
            parent, _, child = name.rpartition(".")
            setattr(reference.get_submodule(parent) if parent else reference, child, nn.Identity())
    x = torch.randn(2, cin, 11, 12, dtype=torch.float64)
    with torch.no_grad():
        expected = reference(x)
        torch.testing.assert_close(lin(x), expected, rtol=0, atol=1e-12 * expected.abs().max().item())


def test_free_relu6_follows_the_merged_conv():
    block = _random_block(lambda: InvertedResidual(8, 8, 1, 6), seed=3, dtype=torch.float64)
    merged, _ = merge_linearized(linearize_block(block, free_activation="relu6", input_size=(9, 9)).eval())
    assert isinstance(merged.act, nn.ReLU6)
    y = merged(torch.randn(2, 8, 9, 9, dtype=torch.float64) * 10)
    assert y.min() >= 0 and y.max() <= 6


def test_squeeze_excitation_is_refused_with_reason():
    """An MBConv with a gate is not one block as a whole (only the chain before its gate is, issue #47); a block of
    expansion 1 (depthwise -> gate -> pointwise) has no chain before its gate and is refused for it."""
    block = TimmInvertedResidual(16, 16, se_layer=timm.layers.SqueezeExcite)
    with pytest.raises(MergeError, match="not one block as a whole"):
        linearize_block(block)
    block = timm.models._efficientnet_blocks.DepthwiseSeparableConv(16, 16, se_layer=timm.layers.SqueezeExcite)
    with pytest.raises(MergeError, match="squeeze-excitation"):
        linearize_block(block)


def test_an_activation_left_in_between_is_refused():
    lin = linearize_block(_random_block(lambda: InvertedResidual(8, 8, 1, 6), 0, torch.float64), input_size=(8, 8))
    lin.body.insert(2, nn.ReLU6())
    with pytest.raises(MergeError, match="activation left in between"):
        merge_linearized(lin)


def test_linearize_model_does_not_touch_its_input():
    model = get_model("mobilenet_v2", resolution=32, num_classes=10)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    modules = [type(m) for m in model.modules()]
    linear = linearize_model(model, Plan("mobilenet_v2", (0,) * 17))
    assert [type(m) for m in model.modules()] == modules
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert sum(isinstance(m, nn.ReLU6) for m in linear.modules()) < sum(isinstance(m, nn.ReLU6) for m in model.modules())
