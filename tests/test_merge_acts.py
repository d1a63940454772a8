"""Partial merges (issue #47, item 2): a plan at the level of single activations merged exactly, float64.

The reference is built independently of dsprof's merge: the original model with the removed activations replaced by
``nn.Identity`` (padding in place, ``border="in_place"``: what the plan means for a model that is not fine-tuned), or,
where the activations are one shared module (torchvision's ResNet), each block's forward written out by hand.
With the padding in front (the default, the form fine-tuned), the merged model is compared with `linearize_model`'s.
"""

from __future__ import annotations

import copy
import itertools
import random

import pytest
import torch
from torch import nn

from conftest import randomise_bn
from dsprof.errors import PlanError
from dsprof.merging import MergedConv, linearize_model, merge_model, merge_report
from dsprof.merging.fold import set_submodule
from dsprof.merging.partial import PartialBlock, act_layouts
from dsprof.models import find_blocks, get_model
from dsprof.records.activations import partial_runs
from dsprof.records.plan import Plan

pytestmark = pytest.mark.usefixtures("one_thread")

RES = 32
TOL = 1e-9


def _model(name, **options):
    torch.manual_seed(0)
    return randomise_bn(get_model(name, resolution=RES, num_classes=10, **options)).double().eval()


def _rel(got, expected) -> float:
    return float((got - expected).abs().max() / expected.abs().max())


def _counts(blocks):
    return [sum(u.act is not None for u in b.units) for b in blocks]


def _alternating(blocks):
    """Every block with two activations partial, removing the first (fused-expand) and the second (fused-project)
    in turn; the others keep all."""
    return [((0, 1) if i % 2 else (1, 0)) if n == 2 else (1,) * n for i, n in enumerate(_counts(blocks))]


def _identity_reference(model, blocks, acts):
    """``model`` with the activations ``acts`` marks 0 replaced by Identity (each a module of its own)."""
    ref = copy.deepcopy(model)
    paths = {id(m): p for p, m in model.named_modules()}
    for block, block_acts in zip(blocks, acts):
        removed = iter(block_acts)
        for unit in block.units:
            if unit.act is not None and next(removed) == 0:
                set_submodule(ref, paths[id(unit.act)], nn.Identity())
    return ref


@pytest.mark.parametrize("name", ["mobilenet_v2", "mnasnet0_5", "efficientnet_lite0", "tf_efficientnet_lite0"])
def test_partial_merges_equal_the_model_without_those_activations(name):
    """MobileNetV2 (torchvision), MnasNet (a stem chain of three convolutions, ReLU), EfficientNet-Lite0 (timm: the
    activation inside BatchNormAct2d) and its TF port ('SAME' padding, dynamic at stride 2)."""
    model = _model(name)
    blocks = find_blocks(model, (RES, RES))
    acts = _alternating(blocks)
    plan = Plan.from_acts(name, acts, border="in_place")
    merged = merge_model(model, plan)
    n_runs = sum(len(partial_runs(lay, a)) for lay, a in zip(act_layouts(blocks), acts))
    assert n_runs >= 15
    assert sum(isinstance(m, MergedConv) for m in merged.modules()) == n_runs
    assert not any(isinstance(m, nn.BatchNorm2d) for m in merged.modules())
    x = torch.randn(2, 3, RES, RES, dtype=torch.float64)
    with torch.no_grad():
        assert _rel(merged(x), _identity_reference(model, blocks, acts)(x)) <= TOL
    report = merge_report(merged)
    assert report.plan.acts == plan.acts and report.plan.keep == (1,) * len(blocks)
    assert "fused-expand" in report.decisions[1].reason or "fused-project" in report.decisions[1].reason


def test_fused_expand_is_one_dense_convolution():
    """MobileNetV2's block 1 (features.2: 16 -> 96 -> 24, 3x3 depthwise stride 2) without its expansion's ReLU6:
    one dense 3x3 stride-2 convolution 16 -> 96, then ReLU6, then the projection; its border correction ties it to
    the 16x16 input (padding in place)."""
    model = _model("mobilenet_v2")
    acts = [(1,), (0, 1)] + [(1, 1)] * 15
    merged = merge_model(model, Plan.from_acts("mobilenet_v2", acts, border="in_place"))
    part = merged.features[2]
    assert isinstance(part, PartialBlock)
    fused = part.stages[0]
    assert isinstance(fused, MergedConv) and isinstance(fused.act, nn.ReLU6)
    conv = fused.conv
    assert (conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.groups) == (16, 96, (3, 3), (2, 2), 1)
    assert tuple(fused.border.correction.shape) == (96, 8, 8)
    # and the depthwise + projection of block 2 (features.3, 24 -> 144 -> 24 with its skip): one 3x3 144 -> 24
    acts = [(1,), (1, 1), (1, 0)] + [(1, 1)] * 14
    merged = merge_model(model, Plan.from_acts("mobilenet_v2", acts, border="in_place"))
    conv = merged.features[3].stages[1].conv
    assert (conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.groups) == (144, 24, (3, 3), (1, 1), 1)
    assert merged.features[3].has_skip


class _RefBottleneck(nn.Module):
    """torchvision's Bottleneck.forward written out, with a plain ReLU only where ``acts`` keeps one."""

    def __init__(self, b, acts):
        super().__init__()
        self.b, self.acts = b, acts

    def forward(self, x):
        b = self.b
        act = lambda y, keep: torch.relu(y) if keep else y  # noqa: E731
        h = act(b.bn1(b.conv1(x)), self.acts[0])
        h = act(b.bn2(b.conv2(h)), self.acts[1])
        h = b.bn3(b.conv3(h))
        return torch.relu(h + (b.downsample(x) if b.downsample is not None else x))


def test_resnet_bottlenecks_with_their_shared_relu():
    """ResNet-50: one ReLU module serves all three activations of a block and the one after the addition (the tail,
    kept): the partial block copies it where kept and leaves it out where not; with a projection shortcut at
    stride 2 (block 3)."""
    model = _model("resnet50")
    blocks = find_blocks(model, (RES, RES))
    acts = _alternating(blocks)[:4] + [(1, 1)] * (len(blocks) - 4)  # layer1 and the first of layer2 (stride 2)
    merged = merge_model(model, Plan.from_acts("resnet50", acts, border="in_place"))
    ref = copy.deepcopy(model)
    for block, a in zip(blocks, acts):
        set_submodule(ref, block.name, _RefBottleneck(ref.get_submodule(block.name), a))
    x = torch.randn(2, 3, RES, RES, dtype=torch.float64)
    with torch.no_grad():
        assert _rel(merged(x), ref(x)) <= TOL


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_activation_plans_on_mobilenet_v2(seed):
    """Random plans (each activation kept or not; whole blocks merged or left linear; spans where they fit), padding
    in front: the merged model equals the linearised model that fine-tuning would train, and linearised then merged
    equals merged at once."""
    rng = random.Random(seed)
    model = _model("mobilenet_v2")
    blocks = find_blocks(model, (RES, RES))
    acts = [tuple(rng.randint(0, 1) for _ in range(n)) for n in _counts(blocks)]
    keep = [int(any(a)) for a in acts]
    spans = [(i, i + 2) for i in (3, 5, 9, 12, 14) if keep[i] == keep[i + 1] == 0 and rng.random() < 0.5]
    spans = [s for j, s in enumerate(spans) if j == 0 or s[0] >= spans[j - 1][1]]
    in_span = {i for a, b in spans for i in range(a, b)}
    merge = [not k and (i in in_span or rng.random() < 0.7) for i, k in enumerate(keep)]
    plan = Plan.from_acts("mobilenet_v2", acts, merge=merge, spans=spans or None)
    linear = linearize_model(model, plan).eval()
    merged = merge_model(model, plan)
    again = merge_model(linear, plan)
    x = torch.randn(2, 3, RES, RES, dtype=torch.float64)
    with torch.no_grad():
        expected = linear(x)
        assert _rel(merged(x), expected) <= TOL
        assert _rel(again(x), expected) <= TOL
    assert merge_report(merged).plan.acts == plan.acts


def test_every_activation_plan_of_a_tiny_model():
    """Brute force: every one of the 2^6 activation plans of TinyConv's three inverted residuals (tests/models), each
    merged with every linearised block merged, against the model with those activations replaced by Identity
    (padding in place, merged blocks border-corrected)."""
    from models.tinyconv import TinyConv

    torch.manual_seed(0)
    model = randomise_bn(TinyConv()).double().eval()
    blocks = find_blocks(model, (RES, RES))
    assert _counts(blocks) == [2, 2, 2]
    x = torch.randn(2, 3, RES, RES, dtype=torch.float64)
    for bits in itertools.product((0, 1), repeat=6):
        acts = [bits[0:2], bits[2:4], bits[4:6]]
        keep = [int(any(a)) for a in acts]
        plan = Plan.from_acts(model, acts, border="in_place", free_activation="none", merge=[not k for k in keep])
        merged = merge_model(model, plan, input_size=(RES, RES))
        with torch.no_grad():
            assert _rel(merged(x), _identity_reference(model, blocks, acts)(x)) <= TOL, bits


def test_acts_that_do_not_fit_the_model_are_refused():
    model = _model("mobilenet_v2")
    with pytest.raises(PlanError, match="lists 2 activations for block 0, which has 1"):
        merge_model(model, Plan.from_acts("mobilenet_v2", [(1, 0)] + [(1, 1)] * 16))
