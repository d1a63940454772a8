"""The conv algebra against PyTorch running the convolutions one after the other."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from timm.layers import Conv2dSame
from torch import nn

from dsprof.merging import LinearConv, MergeError, add_residual, apply_conv, compose_convs, conv_from_module
from dsprof.merging.algebra import TF_SAME, output_size, pad_input
from dsprof.models.padding import tf_same_chain_problem

pytestmark = pytest.mark.usefixtures("one_thread")

TOL = {torch.float64: 1e-9, torch.float32: 1e-4}


def assert_relclose(got, expected, dtype):
    scale = expected.abs().max().item()
    torch.testing.assert_close(got, expected, rtol=0, atol=TOL[dtype] * scale)


def random_conv(g, cin, cout, k, s, d, groups, pad):
    w = torch.randn(cout, cin // groups, k, k, generator=g, dtype=torch.float64)
    b = torch.randn(cout, generator=g, dtype=torch.float64)
    return LinearConv(w, b, (s, s), pad, (d, d), groups)


@st.composite
def conv_pairs(draw):
    c0 = draw(st.sampled_from([2, 4, 6]))
    c1 = draw(st.sampled_from([2, 4, 6]))
    c2 = draw(st.sampled_from([2, 4, 6]))
    kinds = []
    for cin, cout in ((c0, c1), (c1, c2)):
        options = [1] + ([cin] if cin == cout else []) + ([2] if cin % 2 == 0 and cout % 2 == 0 else [])
        kinds.append(draw(st.sampled_from(options)))
    spec = []
    for i in range(2):
        spec.append(
            dict(
                k=draw(st.sampled_from([1, 2, 3, 5])),
                s=draw(st.sampled_from([1, 2])),
                d=draw(st.sampled_from([1, 1, 2])),
                pad=tuple(draw(st.integers(0, 2)) for _ in range(4)),
            )
        )
    size = (draw(st.integers(11, 16)), draw(st.integers(11, 16)))
    return (c0, c1, c2), kinds, spec, size, draw(st.integers(0, 2**31 - 1))


@settings(max_examples=25, deadline=None)
@given(conv_pairs(), st.sampled_from([torch.float64, torch.float32]))
def test_compose_equals_padding_in_front_then_both_convs(case, dtype):
    (c0, c1, c2), (g1, g2), (a, b), size, seed = case
    g = torch.Generator().manual_seed(seed)
    first = random_conv(g, c0, c1, a["k"], a["s"], a["d"], g1, a["pad"])
    second = random_conv(g, c1, c2, b["k"], b["s"], b["d"], g2, b["pad"])
    merged = compose_convs(first, second)
    # kernel (k2 - 1) * d2 * s1 + (k1 - 1) * d1 + 1 spans the same input window; stride s1 * s2
    span = (b["k"] - 1) * b["d"] * a["s"] + (a["k"] - 1) * a["d"] + 1
    assert (merged.kernel_size[0] - 1) * merged.dilation[0] + 1 == span
    assert merged.stride == (a["s"] * b["s"],) * 2
    x = torch.randn(3, c0, *size, generator=g, dtype=torch.float64).to(dtype)
    try:
        output_size(merged, size)
        h = pad_input(x, merged.padding)
        h = F.conv2d(h, first.weight.to(dtype), first.bias.to(dtype), first.stride, 0, first.dilation, g1)
        expected = F.conv2d(h, second.weight.to(dtype), second.bias.to(dtype), second.stride, 0, second.dilation, g2)
    except RuntimeError:  # input smaller than the kernel: nothing to compare
        return
    assert_relclose(apply_conv(merged.to(dtype), x), expected, dtype)


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("size", [(9, 9), (10, 11)])
def test_border_problem_pointwise_then_padded_depthwise(stride, size):
    """1x1 then padded depthwise: the merge equals the ordinary padded pair inside the map always, and
    along the border only when the 1x1 has no bias (zero padding of the intermediate map is not zero
    padding of the input once there is a bias)."""
    g = torch.Generator().manual_seed(1)
    first = random_conv(g, 4, 8, 1, 1, 1, 1, (0, 0, 0, 0))
    second = random_conv(g, 8, 8, 3, stride, 1, 8, (1, 1, 1, 1))
    x = torch.randn(2, 4, *size, generator=g, dtype=torch.float64)

    def ordinary(f):
        return F.conv2d(F.conv2d(x, f.weight, f.bias), second.weight, second.bias, stride, 1, groups=8)

    merged = apply_conv(compose_convs(first, second), x)
    expected = ordinary(first)
    inner = (slice(None), slice(None), slice(1, -1), slice(1, -1))
    assert_relclose(merged[inner], expected[inner], torch.float64)
    assert (merged - expected).abs().max() > 1e-3 * expected.abs().max()  # the border differs
    unbiased = LinearConv(first.weight, torch.zeros(8, dtype=torch.float64))
    assert_relclose(apply_conv(compose_convs(unbiased, second), x), ordinary(unbiased), torch.float64)


@pytest.mark.parametrize("size", [(9, 9), (10, 11)])
@pytest.mark.parametrize("k", [3, 5])
def test_tf_same_composes_with_pointwise_neighbours(size, k):
    torch.manual_seed(0)
    pw1 = nn.Conv2d(4, 12, 1, bias=True).double()
    dw = Conv2dSame(12, 12, k, stride=2, groups=12, bias=True).double()
    pw2 = nn.Conv2d(12, 6, 1, bias=True).double()
    merged = compose_convs(compose_convs(conv_from_module(pw1), conv_from_module(dw)), conv_from_module(pw2))
    assert merged.padding == TF_SAME and merged.stride == (2, 2)
    x = torch.randn(2, 4, *size, dtype=torch.float64)
    # TF 'SAME' pads the pw1 output with zeros; the merged conv pads x. Equal only without pw1's bias.
    with torch.no_grad():
        pw1.bias.zero_()
        merged = compose_convs(compose_convs(conv_from_module(pw1), conv_from_module(dw)), conv_from_module(pw2))
        expected = pw2(dw(pw1(x)))
    assert_relclose(apply_conv(merged, x), expected, torch.float64)


def test_tf_same_next_to_a_spatial_conv_is_refused():
    a = conv_from_module(Conv2dSame(4, 4, 3, stride=2, groups=4))
    b = conv_from_module(nn.Conv2d(4, 4, 3, padding=1))
    with pytest.raises(MergeError, match="dynamic"):
        compose_convs(a, b)


def test_two_stride_2_tf_same_convolutions_need_a_padding_no_tf_same_gives():
    """Why such a chain is refused, checked by hand: on a 32 px input a 3x3 stride-2 'SAME' convolution pads
    (0, 1) (total (16 - 1) * 2 + 3 - 32 = 1); on its 16 px output the next one pads (0, 1) too. Padded in front of
    both, that is 0 + 2 * 0 = 0 at the top and 1 + 2 * 1 = 3 at the bottom. The composite 7x7 stride-4 'SAME'
    convolution pads (1, 2) (total (8 - 1) * 4 + 7 - 32 = 3). Unbiased, so padding in front is exact: the two
    convolutions run in float64 equal the composite padded (0, 3), not (1, 2)."""
    torch.manual_seed(0)
    a, b = Conv2dSame(2, 3, 3, stride=2, bias=False).double(), Conv2dSame(3, 2, 3, stride=2, bias=False).double()
    x = torch.randn(1, 2, 32, 32, dtype=torch.float64)
    with torch.no_grad():
        expected = b(a(x))
    la, lb = conv_from_module(a), conv_from_module(b)
    assert tf_same_chain_problem([(c.padding, c.kernel_size, c.stride) for c in (la, lb)]) is not None
    with pytest.raises(MergeError, match="dynamic"):
        compose_convs(la, lb)
    static = compose_convs(LinearConv(la.weight, la.bias, la.stride, (0, 1, 0, 1)),
                           LinearConv(lb.weight, lb.bias, lb.stride, (0, 1, 0, 1)))
    assert static.padding == (0, 3, 0, 3) and static.kernel_size == (7, 7) and static.stride == (4, 4)
    assert_relclose(apply_conv(static, x), expected, torch.float64)
    assert not torch.allclose(apply_conv(LinearConv(static.weight, static.bias, (4, 4), TF_SAME), x), expected)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_non_zero_padding_modes_are_refused(mode):
    with pytest.raises(MergeError, match="only zero padding merges exactly"):
        conv_from_module(nn.Conv2d(4, 4, 3, padding=1, padding_mode=mode))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("groups", [1, 4])
def test_identity_residual_folds_into_the_centre_tap(dtype, groups):
    g = torch.Generator().manual_seed(2)
    conv = random_conv(g, 8, 8, 5, 1, 1, groups, (2, 2, 2, 2))
    x = torch.randn(2, 8, 9, 10, generator=g, dtype=torch.float64).to(dtype)
    assert_relclose(apply_conv(add_residual(conv).to(dtype), x), apply_conv(conv.to(dtype), x) + x, dtype)


@pytest.mark.parametrize("size", [(9, 9), (10, 12)])
def test_strided_shortcut_conv_folds_into_the_centre_tap(size):
    g = torch.Generator().manual_seed(3)
    conv = random_conv(g, 4, 8, 3, 2, 1, 1, (1, 1, 1, 1))
    shortcut = random_conv(g, 4, 8, 1, 2, 1, 1, (0, 0, 0, 0))
    x = torch.randn(2, 4, *size, generator=g, dtype=torch.float64)
    expected = apply_conv(conv, x) + apply_conv(shortcut, x)
    assert_relclose(apply_conv(add_residual(conv, shortcut), x), expected, torch.float64)


def test_illegal_residuals_are_refused():
    g = torch.Generator().manual_seed(4)
    with pytest.raises(MergeError, match="equal channels and stride 1"):
        add_residual(random_conv(g, 4, 8, 3, 1, 1, 1, (1, 1, 1, 1)))
    with pytest.raises(MergeError, match="stride"):
        add_residual(random_conv(g, 4, 8, 3, 2, 1, 1, (1, 1, 1, 1)), random_conv(g, 4, 8, 1, 1, 1, 1, (0, 0, 0, 0)))
    with pytest.raises(MergeError, match="no tap"):
        add_residual(random_conv(g, 4, 4, 3, 1, 1, 1, (3, 3, 3, 3)))
    with pytest.raises(MergeError, match="dynamic"):
        add_residual(LinearConv(torch.zeros(4, 4, 3, 3), torch.zeros(4), (2, 2), TF_SAME))
