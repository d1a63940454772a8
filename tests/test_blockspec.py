import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsprof.models import BLOCK_KINDS, PADDING_STYLES, BlockSpec

positive = st.integers(min_value=1, max_value=100_000)
specs = st.builds(
    BlockSpec,
    kind=st.sampled_from(BLOCK_KINDS),
    in_channels=positive,
    hidden_channels=positive,
    out_channels=positive,
    kernel=st.integers(1, 11),
    stride=st.integers(1, 4),
    padding=st.sampled_from(PADDING_STYLES),
    residual=st.booleans(),
    in_h=positive,
    in_w=positive,
)


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
