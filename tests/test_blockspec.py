import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsprof.models import BLOCK_KINDS, PADDING_STYLES, BlockSpec
from dsprof.models.blockspec import ACTIVATION_NAMES, CHAIN_KINDS, ConvShape

positive = st.integers(min_value=1, max_value=100_000)
named_specs = st.builds(
    BlockSpec,
    kind=st.sampled_from([k for k in BLOCK_KINDS if k not in CHAIN_KINDS]),
    in_channels=positive,
    hidden_channels=positive,
    out_channels=positive,
    kernel=st.integers(1, 11),
    stride=st.integers(1, 4),
    padding=st.sampled_from(PADDING_STYLES),
    residual=st.booleans(),
    in_h=positive,
    in_w=positive,
    act=st.none() | st.sampled_from(ACTIVATION_NAMES),
)
# cat > 0: a Ghost module's concatenation after the convolution's input (a ghost spec, issue #47)
conv_shapes = st.builds(ConvShape, positive, positive, st.integers(1, 7), st.integers(1, 3), st.integers(1, 4),
                        st.sampled_from([0, 0, 0, 1, 48]))
chain_specs = st.builds(
    lambda convs, padding, res, h, w, act: BlockSpec.from_convs(
        convs, padding=padding, residual=res > 0, projection=res == 2, in_h=h, in_w=w, act=act
    ),
    st.lists(conv_shapes, min_size=2, max_size=5),
    st.sampled_from(PADDING_STYLES),
    st.integers(0, 2),
    positive,
    positive,
    st.none() | st.sampled_from(ACTIVATION_NAMES),
)
specs = named_specs | chain_specs


@given(specs)
def test_string_round_trip(spec):
    text = spec.to_str()
    assert BlockSpec.from_str(text) == spec
    assert BlockSpec.from_str(text).to_str() == text
    assert str(spec) == text


@given(specs, specs)
def test_distinct_specs_have_distinct_strings(a, b):
    assert (a == b) == (a.to_str() == b.to_str())


def test_known_string():
    spec = BlockSpec("inverted_residual", 24, 144, 32, 3, 2, "symmetric", False, 112, 112)
    assert spec.to_str() == "inverted_residual(cin=24,hidden=144,cout=32,k=3,s=2,pad=symmetric,res=0,in=112x112)"
    assert (spec.out_h, spec.out_w) == (56, 56)
    assert BlockSpec("conv", 3, 3, 3, 3, 2, "tf_same", False, 7, 8).out_h == 4


@pytest.mark.parametrize(
    "text",
    [
        "",
        "inverted_residual(cin=24)",
        "inverted_residual(cin=024,hidden=144,cout=32,k=3,s=2,pad=symmetric,res=0,in=112x112)",
        "inverted_residual(cin=24,hidden=144,cout=32,k=3,s=2,pad=symmetric,res=2,in=112x112)",
        "transformer(cin=24,hidden=144,cout=32,k=3,s=2,pad=symmetric,res=0,in=112x112)",
        "inverted_residual(cin=24,hidden=144,cout=32,k=3,s=2,pad=reflect,res=0,in=112x112)",
        "chain(cin=24,hidden=144,cout=32,k=3,s=2,pad=symmetric,res=0,in=112x112)",
        "chain(convs=32x32k1s1g1,pad=symmetric,res=1,in=16x16)",
        "chain(convs=32x32k1s1g1-32x32k3s1g1,pad=symmetric,res=2,in=16x16)",
        "inverted_residual(cin=24,hidden=144,cout=32,k=3,s=2,pad=symmetric,res=0,in=112x112,act=tanh)",
        "inverted_residual(cin=0,hidden=144,cout=32,k=3,s=2,pad=symmetric,res=0,in=112x112)",
    ],
)
def test_malformed_strings_are_rejected(text):
    with pytest.raises(ValueError):
        BlockSpec.from_str(text)


def test_bad_field_values_are_rejected():
    with pytest.raises(ValueError, match="kind"):
        BlockSpec("mystery", 1, 1, 1, 1, 1, "symmetric", False, 1, 1)
    with pytest.raises(ValueError, match="in_channels"):
        BlockSpec("conv", -1, 1, 1, 1, 1, "symmetric", False, 1, 1)
    with pytest.raises(ValueError, match="residual"):
        BlockSpec("conv", 1, 1, 1, 1, 1, "symmetric", 1, 1, 1)


def test_chain_string_and_named_kinds_from_convs():
    # MobileNetV2's features.2 read as a chain of convolutions is the named inverted residual kind
    ir = BlockSpec.from_convs(
        [ConvShape(16, 96, 1, 1), ConvShape(96, 96, 3, 2, 96), ConvShape(96, 24, 1, 1)],
        padding="symmetric", residual=False, projection=False, in_h=112, in_w=112,
    )
    assert ir.to_str() == "inverted_residual(cin=16,hidden=96,cout=24,k=3,s=2,pad=symmetric,res=0,in=112x112)"
    assert ir.merged_kernel == 3
    # a YOLO-style bottleneck (1x1 then 3x3, identity skip, SiLU) is a generic chain
    yolo = BlockSpec.from_convs(
        [ConvShape(32, 32, 1, 1), ConvShape(32, 32, 3, 1)],
        padding="symmetric", residual=True, projection=False, in_h=16, in_w=16, act="silu",
    )
    assert yolo.kind == "chain"
    assert yolo.to_str() == "chain(convs=32x32k1s1g1-32x32k3s1g1,pad=symmetric,res=1,in=16x16,act=silu)"
    assert BlockSpec.from_str(yolo.to_str()) == yolo
    # a ResNet basic block merges into a 5x5 convolution: 1 + (3-1) + (3-1)*stride
    basic = BlockSpec("basic", 64, 128, 128, 3, 2, "symmetric", True, 56, 56)
    assert basic.merged_kernel == 7 and basic.projection
    assert BlockSpec("basic", 64, 64, 64, 3, 1, "symmetric", True, 56, 56).merged_kernel == 5


def test_default_activation_is_not_written():
    a = BlockSpec("inverted_residual", 24, 144, 32, 3, 2, "symmetric", False, 112, 112, act="relu6")
    assert a == BlockSpec("inverted_residual", 24, 144, 32, 3, 2, "symmetric", False, 112, 112)
    assert "act=" not in a.to_str()
    b = BlockSpec("inverted_residual", 24, 144, 32, 3, 2, "symmetric", False, 112, 112, act="hardswish")
    assert b.to_str().endswith(",act=hardswish)")
    with pytest.raises(ValueError, match="canonical"):
        BlockSpec.from_str(a.to_str()[:-1] + ",act=relu6)")


def test_one_dense_convolution_is_one_constructor_and_its_lut_keys_are_those_of_before():
    """A span, a crossing span and one unit of a block merge to one dense convolution, each spelled by
    `BlockSpec.one_conv` (issue #44), under the keys LUTs written before hold. Expected keys by hand, MobileNetV2 at
    32 px: the stem halves to 16x16; block 0 is depthwise 3x3 on 32 then 1x1 to 16, block 1 expands 16 -> 96, depthwise
    3x3 stride 2 (to 8x8), projects to 24. Kernels compose as k1 + (k2 - 1) * s1."""
    from dsprof.merging.partial import crossing_spec, run_block
    from dsprof.models import find_blocks, get_model
    from dsprof.models.spans import span_spec

    assert BlockSpec.one_conv(16, 32, 5, 2, padding="symmetric", in_h=32, in_w=32).to_str() == (
        "conv(cin=16,hidden=32,cout=32,k=5,s=2,pad=symmetric,res=0,in=32x32)")
    assert BlockSpec.one_conv(8, 8, 1, 1, padding="tf_same", in_h=7, in_w=9, act="hardswish").to_str() == (
        "conv(cin=8,hidden=8,cout=8,k=1,s=1,pad=tf_same,res=0,in=7x9,act=hardswish)")
    blocks = find_blocks(get_model("mobilenet_v2", resolution=32, depths=[1] * 7), (32, 32))
    # a span of blocks 0-1: 3x3 then 3x3 stride 2 -> kernel 3 + 2 = 5, stride 2, 32 -> 24 channels at 16x16
    assert span_spec([blocks[0].spec, blocks[1].spec]).to_str() == (
        "conv(cin=32,hidden=24,cout=24,k=5,s=2,pad=symmetric,res=0,in=16x16)")
    # the same two blocks as a span of a plan at the level of activations, every activation removed
    assert crossing_spec(blocks, [(0,), (0, 0)] + [(1, 1)] * 5, (0, 2)).to_str() == (
        "conv(cin=32,hidden=24,cout=24,k=5,s=2,pad=symmetric,res=0,in=16x16)")
    # block 1's projection alone (its third unit), read at 8x8 after the stride-2 depthwise
    assert run_block(blocks[1], (2, 3), keep_last=False).spec.to_str() == (
        "conv(cin=96,hidden=24,cout=24,k=1,s=1,pad=symmetric,res=0,in=8x8)")
