"""Squeeze-excitation blocks, partially (issue #47, item 3): in an MBConv with a gate, the chain before the gate (the
1x1 expansion and the depthwise) is a block once the activation between them goes; the gate, the multiplication and
the projection after it stay. Discovery, exact merge (float64, <= 1e-9 of max|y|, stride 1 and 2, even and odd sizes,
randomised BatchNorm statistics), its MAC count against FlopCounterMode, and the profiler's workloads that price it.

The test network is read by hand: stem 3x3 conv 3->16 (BN, SiLU), then timm's InvertedResidual 16 -> 24 with expansion
6 (conv_pw 1x1 16->96, BN, SiLU; conv_dw 3x3 96->96 groups 96 at the stride, BN, SiLU; SqueezeExcite; conv_pwl 1x1
96->24, BN), then pooling and a classifier. The stem's output feeds conv_pw alone, but the stem is its own module and
conv_pw's block module also holds the gate, so the chain conv_pw -> conv_dw is owned by no module: one block named
``block.conv_pw..block.conv_dw``, kind ``chain`` (1x1 then depthwise), not residual, ending on conv_dw's SiLU (kept).
"""

from __future__ import annotations

import pytest
import timm
import torch
from torch import nn

from conftest import randomise_bn
from dsprof.merging import linearize_model, merge_model, merge_report
from dsprof.models import count_macs, discover_blocks, list_models, register_model, spec_macs
from dsprof.records.plan import Plan
from dsprof.profiler.workloads import block_workloads


class GatedNet(nn.Module):
    def __init__(self, stride: int = 1, num_classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.SiLU())
        self.block = timm.models._efficientnet_blocks.InvertedResidual(
            16, 24, dw_kernel_size=3, stride=stride, exp_ratio=6.0, act_layer=nn.SiLU,
            se_layer=timm.layers.SqueezeExcite)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(24, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(self.stem(x)))


@pytest.mark.parametrize("stride", [1, 2])
def test_the_chain_before_the_gate_is_a_block(stride):
    found = discover_blocks(GatedNet(stride).eval(), (16, 16))
    assert found.refusals == []
    (block,) = found.blocks
    assert block.name == "block.conv_pw..block.conv_dw" and not block.residual
    assert [u.conv_name for u in block.units] == ["block.conv_pw", "block.conv_dw"]
    spec = block.spec
    assert spec.to_str() == f"chain(convs=16x96k1s1g1-96x96k3s{stride}g96,pad=symmetric,res=0,in=16x16,act=silu)"
    assert len(block.activations) == 1 and isinstance(block.tail, nn.SiLU)  # conv_dw's SiLU feeds the gate: kept


@pytest.mark.parametrize("stride", [1, 2])
def test_merging_the_chain_before_the_gate_is_exact(stride):
    name = f"test_se_partial.s{stride}"
    if name not in list_models():
        register_model(name, default_resolution=16, family="test", description="gated MBConv")(
            lambda num_classes=10, pretrained=False, stride=stride: GatedNet(stride, num_classes))
    torch.manual_seed(0)
    model = randomise_bn(GatedNet(stride)).double().eval()
    plan = Plan(name, (0,), border="in_front").with_merge([True])
    for size in (16, 15):
        linear = linearize_model(model, plan, input_size=(size, size)).eval()
        merged = merge_model(linear, plan, input_size=(size, size)).eval()
        assert [d.merged for d in merge_report(merged).decisions] == [True]
        # conv_pw and conv_dw became one dense 3x3 convolution 16 -> 96; stem, gate (2) and conv_pwl stay: 5 in all
        convs = [m for m in merged.modules() if isinstance(m, nn.Conv2d)]
        assert len(convs) == 5 and any(tuple(c.weight.shape) == (96, 16, 3, 3) and c.groups == 1 for c in convs)
        x = torch.randn(2, 3, size, size, dtype=torch.float64, generator=torch.Generator().manual_seed(size))
        with torch.no_grad():
            y_linear, y_merged = linear(x), merged(x)
        assert float((y_merged - y_linear).abs().max() / y_linear.abs().max()) <= 1e-9, (stride, size)


@pytest.mark.parametrize("size", [15, 16])
@pytest.mark.parametrize("stride", [1, 2])
def test_macs_and_workloads_of_the_chain_before_the_gate(stride, size):
    """spec_macs against FlopCounterMode, as built and merged, and the profiler's workloads: the original chain, the
    one dense convolution it merges into, and the chain run linear, each with the MACs its spec says."""
    model = GatedNet(stride).eval()
    (block,) = discover_blocks(model, (size, size)).blocks
    spec = block.spec
    out = -(-size // stride)
    by_hand = 96 * 16 * size * size + 96 * 9 * out * out  # 1x1 16->96, then depthwise 3x3 over 96 channels
    assert spec_macs(spec) == count_macs(block.module, (size, size), 16) == by_hand
    assert spec_macs(spec, merged=True) == 96 * 16 * 9 * out * out  # one dense 3x3 16->96 at the stride
    (group,) = block_workloads(model, ("original", "merged", "linear"), (size, size), [block])
    got = {w.variant: w for w in group}
    assert set(got) == {"original", "merged", "linear"}
    assert got["original"].macs == got["linear"].macs == spec_macs(spec)
    assert got["merged"].macs == spec_macs(spec, merged=True) and got["merged"].channels == (16, 96)
    assert all(w.spec == spec and w.input_shape == (16, size, size) for w in group)
