"""Library models no test had tried, through the doors a new user takes (found by an audit of twenty timm and
torchvision models, 2026-11-30): a torchvision checkpoint whose modules carry a state version, a classifier that is a
convolution, a model without a block given a plan. Expected values from the architectures and the libraries."""

import warnings
from collections import OrderedDict

import pytest
import torch

import dsprof
from dsprof.errors import UsageError
from dsprof.lut import MergeChoice
from dsprof.merging import load_merged
from dsprof.models import ModelRef, find_blocks, get_model, load_checkpoint
from dsprof.records.plan import Plan


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the refusals each model prints are not these tests' subject
        yield


def test_a_torchvision_mnasnet_checkpoint_loads_with_its_modules_state_versions(tmp_path):
    """torchvision's MNASNet refuses a state dict without its own version (``_metadata``), which `torch.save` of
    ``state_dict()`` keeps: it loads, every tensor as saved. A dict without it is refused in one line."""
    torch.manual_seed(0)
    source = get_model("torchvision:mnasnet0_5", resolution=32)
    state = source.state_dict()
    path = tmp_path / "mnas.pt"
    torch.save(state, path)
    loaded = load_checkpoint(get_model("torchvision:mnasnet0_5", resolution=32), path).state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in state.items())
    bare = tmp_path / "bare.pt"
    torch.save(OrderedDict(state.items()), bare)  # the tensors alone, no versions
    with pytest.raises(UsageError) as info:
        load_checkpoint(get_model("torchvision:mnasnet0_5", resolution=32), bare)
    assert str(info.value).startswith(f"checkpoint {bare} does not load into this model (version should be set to")
    assert "\n" not in str(info.value)


def test_a_model_whose_classifier_is_a_convolution_is_saved_merged_and_loads_again(tmp_path):
    """DLA-34's classifier is a 1x1 convolution (timm: ``fc``, 1000 classes, then flattened): the merged file says
    1000 classes and loads back into a model that computes what the merged one does."""
    ref = ModelRef.of("timm:dla34", resolution=32)
    n = len(find_blocks(ref.build()))
    plan = Plan("timm:dla34", (0,) * n)
    outcome = dsprof.merge(ref, plan, merge=MergeChoice(merge_by="macs"), out=tmp_path / "dla.pt")
    payload = torch.load(tmp_path / "dla.pt", weights_only=True)
    assert payload["num_classes"] == 1000
    again = load_merged(tmp_path / "dla.pt")
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(again(x), outcome.model(x), rtol=0, atol=0)


def test_a_plan_for_a_model_without_a_block_is_answered_with_why_there_is_none():
    """SqueezeNet-1.1's Fire modules read their squeeze output twice (two expand branches): no block. A plan of one
    entry is told why there is nothing to merge, not that a plan needs one entry per block (of none)."""
    ref = ModelRef.of("torchvision:squeezenet1_1", resolution=64)
    assert find_blocks(ref.build()) == []
    with pytest.raises(UsageError) as info:
        dsprof.merge(ref, Plan("torchvision:squeezenet1_1", (0,)), merge=MergeChoice(merge_by="macs"))
    assert "no block DepthShrinker can merge" in str(info.value) and "entries" not in str(info.value)


def test_ghostnetv2s_attention_ghost_modules_are_each_refused_once_by_name():
    """GhostNetV2's Ghost modules with decoupled attention (timm's GhostModuleV2: each bottleneck's first Ghost module
    past the first two) do not form a chain: each is refused once, named by its module, not as the whole model. The
    reason names the gate: timm's GhostModuleV2 (mode "attn") returns ``cat([x1, x2])[:, :out_chs] * gate``, the
    gate a sigmoid of a short convolution branch, not that the primary convolution's output is read twice (by the
    cheap convolution and the concatenation, as in every Ghost module dsprof merges)."""
    from dsprof.models import discover_blocks

    model = get_model("timm:ghostnetv2_100", resolution=64)
    attention = [name for name, m in model.named_modules() if type(m).__name__ == "GhostModuleV2"]
    refusals = discover_blocks(model).refusals
    assert len(attention) == 14
    assert sorted((r.name, r.type_name) for r in refusals) == sorted((n, "GhostModuleV2") for n in attention)
    for r in refusals:
        assert "Ghost concatenation" in r.reason and "multiplied by another tensor at mul" in r.reason, r.reason
        assert "read 2 times" not in r.reason


def test_calibration_times_only_spans_that_merge_even_where_another_run_shares_their_lut_key():
    """EfficientViT-M0 at 96 px: blocks 11-12 merge as one span; 10-12 do not (an attention module, kept whole, sits
    between 10 and 11), but block 10 is 1x1 convolutions, so the span 10-12 has the same shapes, and LUT key, as 11-12.
    The calibration's pieces counted it and then could not build it, so no piece was timed inside the model."""
    from dsprof.lut.lookup import span_key
    from dsprof.lut.prices import model_pieces

    blocks = find_blocks(get_model("timm:efficientvit_m0", resolution=96))
    assert span_key(blocks, 10, 13) == span_key(blocks, 11, 13)
    pieces = model_pieces(blocks, lambda a, b: True)
    assert (11, 13) in pieces and (10, 13) not in pieces
    assert [p for p in pieces if p[1] - p[0] > 1] == [(4, 6), (11, 13)]
