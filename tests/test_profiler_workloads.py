"""What the profiler times: dense replacements, the FLOPs-matching rule, linearised blocks, dense models."""

import pytest
import torch
from torch import nn

from dsprof.models import BlockSpec, count_macs, find_blocks, get_model
from dsprof.profiler import block_workloads, dense_conv, dense_counterpart_model, flops_matched_channels, deployed_linear, model_workload

pytestmark = pytest.mark.usefixtures("one_thread")  # small convolutions; see conftest.py


@pytest.mark.parametrize(
    "name,options,resolution",
    [("mobilenet_v2", {}, 64), ("mobilenet_v2", {"width": 1.4}, 96), ("tf_efficientnet_lite0", {}, 64), ("resnet18", {}, 64)],
)
def test_every_variant_has_the_right_shapes_and_flops_matched_macs_within_5_percent(name, options, resolution):
    model = get_model(name, resolution=resolution, **options)
    groups = block_workloads(model, ("original", "merged", "flops_matched", "linear"))
    assert len(groups) == len(find_blocks(model))
    for group in groups:
        by = {w.variant: w for w in group}
        spec = by["original"].spec
        assert all(w.spec == spec for w in group)
        out_shape = (1, spec.out_channels, spec.out_h, spec.out_w)
        for variant in ("original", "merged", "linear"):
            w = by[variant]
            with torch.no_grad():
                assert tuple(w.module(torch.zeros(1, *w.input_shape)).shape) == out_shape, (w.name, variant)
        fm = by["flops_matched"]
        cin, cout = fm.channels
        with torch.no_grad():
            assert tuple(fm.module(torch.zeros(1, *fm.input_shape)).shape) == (1, cout, spec.out_h, spec.out_w)
        assert abs(fm.macs - by["original"].macs) <= 0.05 * by["original"].macs
        # the merged convolution: a basic block's two kxk convolutions compose into 1 + (k-1)(1+stride)
        k = 1 + (spec.kernel - 1) * (1 + spec.stride) if spec.kind == "basic" else spec.kernel
        assert by["merged"].macs == k**2 * spec.in_channels * spec.out_channels * spec.out_h * spec.out_w
        assert not any(isinstance(m, nn.BatchNorm2d) for w in group for m in w.module.modules())  # folded


def test_original_block_computes_what_the_unfolded_block_computes():
    model = get_model("mobilenet_v2", resolution=32)
    for m in model.modules():  # random BatchNorm statistics: default ones hide folding bugs
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
    block = find_blocks(model)[3]
    w = block_workloads(model, ("original",), blocks=[block])[0][0]
    x = torch.randn(2, *w.input_shape)
    with torch.no_grad():
        torch.testing.assert_close(w.module(x), block.module(x), rtol=1e-4, atol=1e-5)


def test_flops_matched_rule_on_a_known_block():
    spec = BlockSpec("inverted_residual", 24, 144, 24, 3, 1, "symmetric", True, 56, 56)
    macs = 56 * 56 * (24 * 144 + 144 * 9 + 144 * 24)
    cin, cout = flops_matched_channels(spec, macs)
    assert (cin, cout) == (30, 30)  # a = sqrt(8208 / 5184) = 1.258; 1.258 * 24 = 30.2
    assert abs(9 * cin * cout * 56 * 56 - macs) <= 0.05 * macs


@pytest.mark.parametrize("size", [15, 16])
@pytest.mark.parametrize("kernel", [3, 5])
def test_tf_same_dense_conv_output_size(size, kernel):
    conv = dense_conv(8, 4, kernel, 2, "tf_same", (size, size))
    assert tuple(conv(torch.zeros(1, 8, size, size)).shape) == (1, 4, -(-size // 2), -(-size // 2))


def test_deployed_linear_removes_the_activations_inside_only():
    block = find_blocks(get_model("mobilenet_v2", resolution=32))[2]
    linear = deployed_linear(block)
    assert sum(isinstance(m, nn.ReLU6) for m in block.module.modules()) == 2  # expansion and depthwise
    # none inside; after it the plan's free ReLU6, as merge_model deploys the block (its merged variant has it too)
    assert [type(m) for m in linear.modules() if isinstance(m, (nn.ReLU, nn.ReLU6))] == [nn.ReLU6]
    assert sum(isinstance(m, nn.Conv2d) for m in linear.modules()) == 3
    assert not any(isinstance(m, nn.BatchNorm2d) for m in linear.modules())  # folded, as every timed module


@pytest.mark.parametrize("width", [1.0, 1.4])
def test_dense_counterpart_model_matches_macs_within_5_percent(width):
    model = get_model("mobilenet_v2", width=width, resolution=64)
    original = count_macs(model, (64, 64))
    dense = dense_counterpart_model(model, "flops_matched")
    assert abs(count_macs(dense, (64, 64)) - original) <= 0.05 * original
    # every block replaced: no depthwise convolution is left between the stem and the head
    assert all(m.groups == 1 for m in dense.features[1:-1].modules() if isinstance(m, nn.Conv2d))
    with torch.no_grad():
        assert dense(torch.zeros(1, 3, 64, 64)).shape == (1, 1000)
    merged = dense_counterpart_model(model, "merged")
    with torch.no_grad():
        assert merged(torch.zeros(1, 3, 64, 64)).shape == (1, 1000)


def test_any_module_is_a_model_workload():
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    w = model_workload(net.eval(), "tiny", input_size=(16, 16))
    assert w.scope == "model" and w.input_shape == (3, 16, 16) and w.macs == 3 * 8 * 9 * 16 * 16
    assert not any(isinstance(m, nn.BatchNorm2d) for m in w.module.modules())
