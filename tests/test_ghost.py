"""GhostNet's Ghost modules (issue #47): ``cat([x1, cheap(x1)])[:, :n]`` after a primary convolution is part of a chain.

A Ghost module (timm `GhostModule`, Han et al. 2020): primary 1x1 convolution + BN (+ ReLU) -> x1, cheap depthwise
kxk + BN (+ ReLU) on x1 -> x2, output ``cat([x1, x2], dim=1)[:, :oup]``. Without its activations it is linear: the
first channels are the primary convolution embedded at the centre of a kxk kernel, the rest the depthwise after it.
References here are timm's own modules built with ``act_layer=nn.Identity`` (its linear Ghost module), float64,
randomised BatchNorm statistics, even and odd sizes, batch 2.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from timm.models.ghostnet import GhostBottleneck, GhostModule
from torch import nn

from cli_run import dsprof_here
from conftest import randomise_bn
from dsprof.merging import concat_input, linearize_block, linearize_model, load_merged, merge_linearized, merge_report
from dsprof.merging.block import deployed_unmerged
from dsprof.merging.layers import ConcatInput
from dsprof.merging.algebra import LinearConv, apply_conv, compose_convs, conv_from_module, fold_bn
from dsprof.models import BlockSpec, discover_blocks, get_model, spec_macs
from dsprof.models.blockspec import ConvShape
from dsprof.records.plan import Plan

SIZES = (12, 11)  # even, odd
TOL = 1e-9


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


def _linear_twin(module: nn.Module, build) -> nn.Module:
    """``build()`` (the same module with ``act_layer=nn.Identity``) carrying ``module``'s weights and statistics."""
    twin = build().double().eval()
    twin.load_state_dict(module.state_dict())
    return twin


# --------------------------------------------------------------------------- the spec


def test_a_ghost_spec_round_trips_and_counts_its_macs_by_hand():
    convs = [ConvShape(16, 8, 1, 1), ConvShape(8, 8, 3, 1, 8, cat=16), ConvShape(16, 8, 1, 1), ConvShape(8, 8, 3, 1, 8, cat=16)]
    spec = BlockSpec.from_convs(convs, padding="symmetric", residual=True, projection=False, in_h=10, in_w=10)
    text = "ghost(convs=16x8k1s1g1-8x8k3s1g8c16-16x8k1s1g1-8x8k3s1g8c16,pad=symmetric,res=1,in=10x10)"
    assert spec.kind == "ghost" and spec.to_str() == text and BlockSpec.from_str(text) == spec
    assert (spec.in_channels, spec.hidden_channels, spec.out_channels) == (16, 8, 16)  # hidden: the primary's output
    # as built, per pixel of the 10x10 map: 16*8 + 8*9 (the concatenated half costs nothing), twice
    assert spec_macs(spec) == 2 * (16 * 8 + 8 * 9) * 100
    # merged: one dense 5x5 (1 + 2 + 0 + 2) convolution 16 -> 16
    assert spec.merged_kernel == 5 and spec_macs(spec, merged=True) == 16 * 16 * 25 * 100
    with pytest.raises(Exception, match="canonical"):  # a concatenation is a ghost block, never a chain
        BlockSpec.from_str(text.replace("ghost(", "chain("))


def test_a_ghost_spec_with_a_depthwise_skip_path_round_trips_and_counts_it():
    # ghostnet_100's blocks.1.0 at 32 px (16x16 input): ghost1 16 -> 48, dw 3x3 s2, ghost2 48 -> 24, skip dw 3x3 s2 + 1x1
    text = ("ghost(convs=16x24k1s1g1-24x24k3s1g24c48-48x48k3s2g48-48x12k1s1g1-12x12k3s1g12c24,pad=symmetric,"
            "res=16x16k3s2g16-16x24k1s1g1,in=16x16)")
    spec = BlockSpec.from_str(text)
    assert spec.to_str() == text and spec.projection and spec.residual and spec.stride == 2
    # per pixel: 16*24 + 24*9 on 16x16; 48*9 + 48*12 + 12*9 on 8x8; the skip 16*9 + 16*24 on 8x8
    assert spec_macs(spec) == (16 * 24 + 24 * 9) * 256 + (48 * 9 + 48 * 12 + 12 * 9) * 64 + (16 * 9 + 16 * 24) * 64
    plain = BlockSpec.from_convs(spec.convs, padding="symmetric", residual=True, projection=True, in_h=16, in_w=16,
                                 skip=[ConvShape(16, 24, 1, 2)])  # one 1x1 projection is the plain form
    assert plain.skip == () and ",res=proj," in plain.to_str() and BlockSpec.from_str(plain.to_str()) == plain
    with pytest.raises(Exception, match="does not map"):
        BlockSpec.from_convs(spec.convs, padding="symmetric", residual=True, projection=True, in_h=16, in_w=16,
                             skip=[ConvShape(16, 24, 1, 1)])


# --------------------------------------------------------------------------- the algebra


# (in, groups, out, kept): depthwise (GhostNet's ratio 2), sliced; two outputs per input (ratio 3); dense
@pytest.mark.parametrize("cin,groups,cout,keep", [(6, 6, 6, 12), (6, 6, 6, 9), (4, 4, 8, 10), (3, 1, 5, 7)])
def test_concat_input_is_the_concatenation_as_one_convolution(cin, groups, cout, keep):
    """cat([x, conv(x)])[:, :keep] against torch.cat of F.conv2d, with padding in place and unpadded (in front)."""
    g = torch.Generator().manual_seed(groups * 10 + keep)
    w = torch.randn(cout, cin // groups, 3, 3, generator=g, dtype=torch.float64)
    b = torch.randn(cout, generator=g, dtype=torch.float64)
    x = torch.randn(2, cin, 9, 8, generator=g, dtype=torch.float64)
    merged = concat_input(LinearConv(w, b, padding=(1, 1, 1, 1), groups=groups), keep)
    want = torch.cat([x, F.conv2d(x, w, b, padding=1, groups=groups)], dim=1)[:, :keep]
    assert merged.groups == 1 and merged.out_channels == keep
    torch.testing.assert_close(apply_conv(merged, x), want, rtol=0, atol=1e-12)
    front = concat_input(LinearConv(w, b, groups=groups), keep)  # unpadded: the input is cropped by one pixel
    want = torch.cat([x[:, :, 1:-1, 1:-1], F.conv2d(x, w, b, groups=groups)], dim=1)[:, :keep]
    torch.testing.assert_close(apply_conv(front, x), want, rtol=0, atol=1e-12)


def test_concat_input_refuses_what_changes_the_map():
    w, b = torch.ones(4, 1, 3, 3, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    with pytest.raises(Exception, match="stride-1"):
        concat_input(LinearConv(w, b, stride=(2, 2), padding=(1, 1, 1, 1), groups=4), 8)
    with pytest.raises(Exception, match="size"):
        concat_input(LinearConv(w, b, padding=(2, 2, 2, 2), groups=4), 8)


@pytest.mark.parametrize("out_chs,ratio", [(16, 2), (13, 2), (12, 3)])
def test_a_linear_ghost_module_is_one_convolution(out_chs, ratio):
    """timm's GhostModule without activations = compose(primary, concat_input(cheap)), float64, everywhere."""
    torch.manual_seed(out_chs)
    ghost = randomise_bn(GhostModule(8, out_chs, ratio=ratio, act_layer=nn.Identity)).double().eval()
    primary = fold_bn(conv_from_module(ghost.primary_conv[0]), ghost.primary_conv[1])
    cheap = fold_bn(conv_from_module(ghost.cheap_operation[0]), ghost.cheap_operation[1])
    merged = compose_convs(primary, concat_input(cheap, out_chs))
    assert merged.kernel_size == (3, 3) and merged.out_channels == out_chs
    for size in SIZES:
        x = torch.randn(2, 8, size, size, dtype=torch.float64)
        with torch.no_grad():
            want = ghost(x)
        # the padding-in-front form equals the module inside the one-pixel border (the cheap conv reads bias there)
        got = apply_conv(merged, x)
        assert _rel(got[..., 1:-1, 1:-1], want[..., 1:-1, 1:-1]) <= TOL


# --------------------------------------------------------------------------- discovery and merge


class GhostChain(nn.Module):
    """Ghost module -> depthwise 3x3 stride 2 + BN -> Ghost module without activation: a Ghost bottleneck's main
    path at stride 2 with no skip (timm's stride-2 bottleneck has a dw + 1x1 skip path, refused: see the doc)."""

    def __init__(self, act_layer=nn.ReLU) -> None:
        super().__init__()
        self.ghost1 = GhostModule(8, 12, act_layer=act_layer)
        self.conv_dw = nn.Conv2d(12, 12, 3, 2, 1, groups=12, bias=False)
        self.bn_dw = nn.BatchNorm2d(12)
        self.ghost2 = GhostModule(12, 10, act_layer=nn.Identity)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ghost2(self.bn_dw(self.conv_dw(self.ghost1(x))))


def _bottleneck(act_layer=nn.ReLU, stride: int = 1) -> nn.Module:
    torch.manual_seed(1)  # no SE; stride 1: identity skip; stride 2: conv_dw, and a dw 3x3 s2 + 1x1 skip path
    return GhostBottleneck(8, 20, 8 if stride == 1 else 12, stride=stride, act_layer=act_layer)


CASES = {
    # (build with activations, build without, the merged kernel: 1 + cheap 2 [+ dw 2 + 2 * cheap 2])
    "ghost_module": (lambda act=nn.ReLU: GhostModule(8, 13, act_layer=act), 3, 1),
    "bottleneck": (lambda act=nn.ReLU: _bottleneck(act), 5, 2),
    # 1 + 2 (cheap) + 2 (dw s2) + 2 * 2 (cheap after the stride); the 3x3 skip path folds inside the 9x9 kernel
    "bottleneck_stride2": (lambda act=nn.ReLU: _bottleneck(act, 2), 9, 2),
    "stride2_chain": (lambda act=nn.ReLU: GhostChain(act), 9, 2),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_ghost_block_is_found_and_merges_exactly(case):
    build, kernel, n_acts = CASES[case]
    torch.manual_seed(0)
    model = randomise_bn(build()).double().eval()
    twin = _linear_twin(model, lambda: build(nn.Identity))
    found = discover_blocks(model, (SIZES[0], SIZES[0]))
    assert found.refusals == [] and [b.name for b in found.blocks] == [""]
    block = found.blocks[0]
    assert block.spec.kind == "ghost" and len(block.activations) == n_acts
    assert block.spec.merged_kernel == kernel and block.residual == case.startswith("bottleneck")
    radius = kernel // 2
    for size in SIZES:
        x = torch.randn(2, 8, size, size, dtype=torch.float64, generator=torch.Generator().manual_seed(size))
        with torch.no_grad():
            want = twin(x)  # timm's module without activations, and the block's last activation kept on its output
            want = block.tail(want) if block.tail is not None else want
            for border in ("in_front", "in_place"):
                linear = linearize_block(block, border=border, free_activation=None).eval()
                conv, info = merge_linearized(linear, input_size=(size, size))
                y_linear, y_merged = linear(x), conv(x)
                if border == "in_place":  # the linearised block is the module without activations, everywhere
                    assert _rel(y_linear, want) <= TOL
                if info.exact:  # in front always; in place with the border correction where 1x1s precede the padding
                    assert _rel(y_merged, y_linear) <= TOL, f"{case} {border} at {size}px"
                else:  # a padded conv after a padded conv: the border error is measured and reported, never hidden
                    assert border == "in_place" and info.border_error > 1e-3
                    assert _rel(y_merged[..., 2:-2, 2:-2], y_linear[..., 2:-2, 2:-2]) <= TOL
                # inside the merged kernel's reach of the border, every form is the module without activations
                inner = (slice(None), slice(None), slice(radius, -radius), slice(radius, -radius))
                if y_merged.shape[-1] > 2 * radius:
                    assert _rel(y_merged[inner], want[inner]) <= TOL
                assert conv.conv.kernel_size == (kernel, kernel)
                if size == SIZES[0]:  # the block as built: the cheap convolutions, the concatenated inputs free
                    assert info.linear_macs == spec_macs(block.spec)
                # in place, exact (with a border correction) only where 1x1s alone precede the padded convolution
                assert info.exact == (border == "in_front" or case == "ghost_module")


@pytest.mark.slow  # about 30 s: GhostNet discovered five times (blocks, merge, load, the reference)
def test_ghostnet_blocks_and_merge_from_the_command_line(tmp_path):
    # timm ghostnet_100 (cfgs of timm/models/ghostnet.py): 16 GhostBottlenecks. The 9 without SE are one ghost block
    # each (ghost1 -> [dw s2] -> ghost2 + skip, the skip x or dw + 1x1); each of the 7 with SE has ghost1 (before the
    # gate) and ghost2 (after it) as blocks; the 3 dw + 1x1 skips beside an SE are depthwise-separable blocks: 26.
    out = dsprof_here("blocks", "--model", "ghostnet_100", "--resolution", "32")
    assert out.returncode == 0, out.stderr
    assert "26 blocks" in out.stdout and "blocks.1.0" in out.stdout and "blocks.3.0.ghost1" in out.stdout
    assert "refuse" not in out.stdout.lower()
    keep = [1] * 26
    keep[0] = 0  # blocks.0.0: a whole Ghost bottleneck (16 -> 16, identity skip)
    plan = Plan("ghostnet_100", tuple(keep), {}, border="in_front").with_merge([k == 0 for k in keep])
    path = tmp_path / "plan.json"
    path.write_text(plan.to_json())
    torch.manual_seed(0)
    model = randomise_bn(get_model("ghostnet_100", resolution=32, num_classes=10)).eval()
    checkpoint = tmp_path / "original.pt"
    torch.save(model.state_dict(), checkpoint)
    merged_path = tmp_path / "merged.pt"
    out = dsprof_here("merge", "--model", "ghostnet_100", "--resolution", "32", "--num-classes", "10", "--plan", str(path),
                      "--checkpoint", str(checkpoint), "--out", str(merged_path))
    assert out.returncode == 0, out.stderr
    merged = load_merged(merged_path).eval()
    assert [d.merged for d in merge_report(merged).decisions] == [i == 0 for i in range(26)]
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    # the command's float32 model against the linearised one, to float32's precision; in float64, with every block
    # merged, to 1e-9: tests/test_any_cnn_merge.py (ghostnet_100)
    with torch.no_grad():
        assert _rel(merged(x), linearize_model(model, plan).eval()(x)) <= 1e-4


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_ghost_block_left_unmerged_keeps_its_depthwise_and_concatenation(case):
    """What the LUT's ``linear`` entry times (`deployed_unmerged`): the linearised block with its padding done by its
    first convolution, the cheap convolution still depthwise (never the dense convolution of the merge)."""
    build, _, _ = CASES[case]
    torch.manual_seed(0)
    model = randomise_bn(build()).double().eval()
    (block,) = discover_blocks(model, (SIZES[0], SIZES[0])).blocks
    linear = linearize_block(block).eval()
    deployed = deployed_unmerged(linear)
    cheap = [m.inner[0] for m in deployed.modules() if isinstance(m, ConcatInput)]
    assert cheap and all(c.groups == c.in_channels for c in cheap)
    for size in SIZES:
        x = torch.randn(2, 8, size, size, dtype=torch.float64)
        with torch.no_grad():
            assert _rel(deployed(x), linear(x)) <= TOL


@pytest.mark.parametrize("case", ["bottleneck", "bottleneck_stride2"])
def test_a_gated_ghost_block_is_the_block_or_its_linear_form(case):
    """The activation search's gated block runs a Ghost module's concatenation: all gates on, the model as built;
    all off, timm's module without activations (padding in place, as fine-tuned)."""
    from dsprof.search.gates import gate_model

    build, _, _ = CASES[case]
    torch.manual_seed(0)
    model = randomise_bn(nn.Sequential(build())).double().eval()  # the block a child: gating replaces it in place
    twin = _linear_twin(model, lambda: nn.Sequential(build(nn.Identity)))
    x = torch.randn(2, 8, SIZES[1], SIZES[1], dtype=torch.float64)
    with torch.no_grad():
        for keep, want in ((1, model(x)), (0, twin(x))):
            gated = gate_model(model, keep, input_size=(SIZES[1], SIZES[1])).eval()
            assert _rel(gated(x), want) <= TOL
