"""Crossing spans (issue #47, item 2): a run of linear units across block borders merged into one convolution,
exactly, float64.

The reference is written here from torchvision's MobileNetV2 as built (each ``InvertedResidual`` is
``x + conv(x)`` or ``conv(x)``, ``conv`` its chain of convolution, BatchNorm and ReLU6), not from dsprof's merge: the
model with the removed activations replaced by ``nn.Identity``, and, for every linear piece the plan merges (a partial
run, a linearised block, a span), its zero padding moved in front of it: the input of the piece padded once by
``sum(p_j * prod(strides before j))`` and its convolutions unpadded, a skip connection inside it adding the centre of
its (padded) input; the plan's free activation (ReLU6) after a linearised block that ends a piece.
"""

from __future__ import annotations

import copy
import itertools
import random
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from conftest import randomise_bn
from dsprof.errors import DsprofError, PlanError
from dsprof.merging import MergedConv, linearize_model, merge_model, merge_report
from dsprof.merging.fold import set_submodule
from dsprof.merging.partial import PartialBlock
from dsprof.models import find_blocks, get_model
from dsprof.records.plan import Plan

pytestmark = pytest.mark.usefixtures("one_thread")

RES = 32
TOL = 1e-9
KEPT = [(1,)] + [(1, 1)] * 16  # MobileNetV2: a depthwise-separable block, then 16 inverted residuals
# For the tests that check no channel count: the same layers and skip connections at half the channels (a quarter of
# the float64 work of the wide span convolutions)
NARROW = {"width": 0.5}


def _model(**options):
    torch.manual_seed(0)
    return randomise_bn(get_model("mobilenet_v2", resolution=RES, num_classes=10, **options)).double().eval()


def _rel(got, expected) -> float:
    return float((got - expected).abs().max() / expected.abs().max())


def _acts(**changes):
    acts = list(KEPT)
    for key, value in changes.items():
        acts[int(key[1:])] = value
    return acts


def _convs(module):
    """The convolutions of one torchvision InvertedResidual, in order (each carries its own activation or none)."""
    return [m for m in module.conv.modules() if isinstance(m, nn.Conv2d)]


def _acts_of(module):
    """The activation after each convolution of an InvertedResidual (None for the projection), as torchvision builds
    it: ``Conv2dNormActivation`` is (conv, BatchNorm, ReLU6)."""
    return [seq[2] if isinstance(seq, nn.Sequential) and len(seq) == 3 else None for seq in module.conv]


def _first_run_end(acts):
    """Units [0, end) of a block up to and including its first kept activation (all its units when it keeps none)."""
    return acts.index(1) + 1 if 1 in acts else len(acts) + 1


def _last_run_start(acts):
    """The first unit after the block's last kept activation (0 when it keeps none)."""
    return max(j + 1 for j, a in enumerate(acts) if a) if 1 in acts else 0


def _pieces(acts, spans):
    """The linear pieces the plan merges, as lists of (block, unit): spans (from the first block's last run to the last
    block's first run), linearised blocks outside them, and each run of two or more units inside a partial block."""
    pieces, covered = [], set()
    for start, stop in spans:
        units = [(start, j) for j in range(_last_run_start(acts[start]), len(acts[start]) + 1)]
        units += [(b, j) for b in range(start + 1, stop - 1) for j in range(len(acts[b]) + 1)]
        units += [(stop - 1, j) for j in range(_first_run_end(acts[stop - 1]))]
        pieces.append(units)
        covered.update(units)
    for b, a in enumerate(acts):
        runs, begin = [], 0
        for j in range(len(a) + 1):
            if j == len(a) or a[j]:
                runs.append(list(range(begin, j + 1)))
                begin = j + 1
        for run in runs:
            units = [(b, j) for j in run]
            if (len(run) >= 2 or not any(a)) and not covered.intersection(units):
                pieces.append(units)
    return pieces


class _Pad(nn.Module):
    def __init__(self, module, pad):
        super().__init__()
        self.module, self.pad = module, pad

    def forward(self, x):
        return self.module(F.pad(x, (self.pad,) * 4))


class _CropSkip(nn.Module):
    """A residual block with its padding in front: ``conv(x) + x`` cropped by its own padding."""

    def __init__(self, body, crop):
        super().__init__()
        self.body, self.crop = body, crop

    def forward(self, x):
        c = self.crop
        return self.body(x) + x[..., c:x.shape[-2] - c, c:x.shape[-1] - c]


def _reference(model, acts, spans):
    """The model the plan means, padding in front of each merged piece (module docstring)."""
    ref = copy.deepcopy(model)
    blocks = [ref.features[1 + b] for b in range(len(acts))]
    for block, a in zip(blocks, acts):  # removed activations: Identity
        for j, act in enumerate(_acts_of(block)):
            if act is not None and not a[j]:
                set_submodule(block, next(n for n, m in block.named_modules() if m is act), nn.Identity())
    wrap = {}  # block index: what goes around it (padding in front, a cropped skip, the free activation after)
    for units in _pieces(acts, spans):
        convs = [_convs(blocks[b])[j] for b, j in units]
        pad, step = 0, 1
        for conv in convs:
            pad += conv.padding[0] * step
            step *= conv.stride[0]
        whole = {b for b, _ in units if not any(acts[b])}
        for b in whole:
            if blocks[b].use_res_connect:
                wrap.setdefault(b, {})["crop"] = sum(c.padding[0] for c in _convs(blocks[b]))
        for conv in convs:
            conv.padding = (0, 0)
        first_block, last_block = units[0][0], units[-1][0]
        if units[0][1] == 0 and first_block in whole:
            wrap.setdefault(first_block, {})["pad"] = pad
        else:
            convs[0].padding = (pad, pad)
        if last_block in whole:
            wrap.setdefault(last_block, {})["act"] = True
    for b, how in wrap.items():
        module = blocks[b]
        if "crop" in how:
            module = _CropSkip(module.conv, how["crop"])
        if "pad" in how:
            module = _Pad(module, how["pad"])
        if how.get("act"):
            module = nn.Sequential(module, nn.ReLU6())
        ref.features[1 + b] = module
    return ref


def _check(model, plan, x):
    """Merged at once, linearised (the form fine-tuned) and linearised then merged: each equal to the reference."""
    merged = merge_model(model, plan)
    linear = linearize_model(model, plan).eval()
    again = merge_model(linear, plan)
    with torch.no_grad():
        expected = _reference(model, plan.acts, plan.spans or ())(x)
        assert _rel(merged(x), expected) <= TOL
        assert _rel(linear(x), expected) <= TOL
        assert _rel(again(x), expected) <= TOL
    return merged


def test_a_projection_with_the_next_expansion_and_depthwise_is_one_convolution():
    """Block 0 (depthwise 3x3 on 32 channels -> projection 1x1 to 16) keeps its ReLU6, block 1 (16 -> 96 -> 24, depthwise 3x3
    stride 2) removes its expansion's: the projection, expansion and depthwise are one dense 3x3 stride-2
    convolution 32 -> 96 (padding 1 in front of the projection), then block 1's ReLU6, then its projection."""
    model = _model()
    x = torch.randn(2, 3, RES, RES, dtype=torch.float64)
    plan = Plan.from_acts("mobilenet_v2", _acts(b0=(1,), b1=(0, 1)), spans=[(0, 2)])
    merged = _check(model, plan, x)
    first = merged.features[1]
    assert isinstance(first, PartialBlock) and isinstance(first.stages[-1], MergedConv)
    conv = first.stages[-1].conv
    assert (conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.groups) == (32, 96, (3, 3), (2, 2), 1)
    assert isinstance(first.stages[-1].act, nn.ReLU6)
    assert sum(isinstance(m, MergedConv) for m in merged.modules()) == 1
    decisions = merge_report(merged).decisions
    assert "span of blocks 0-1" in decisions[0].reason and "span starting at block 0" in decisions[1].reason


def test_the_last_block_of_a_crossing_span_says_what_merged_of_its_later_runs():
    """Block 1 keeps its expansion's ReLU6 and removes its depthwise's: its first run (the expansion) merges with
    block 0's projection (the span 0-2), its later run (depthwise 3x3 stride 2 on 96 channels, then the projection
    to 24, at 8x8 out) into one dense 3x3 stride-2 convolution 96 -> 24. Its decision carries that run as a field
    (issue #44: not read back from another decision's text), and its line says both. MACs by hand: depthwise
    96 * 9 * 64 + projection 96 * 24 * 64 = 202752 (0.20M); merged 96 * 24 * 9 * 64 = 1327104 (1.33M)."""
    model = _model()
    x = torch.randn(2, 3, RES, RES, dtype=torch.float64)
    merged = _check(model, Plan.from_acts("mobilenet_v2", _acts(b0=(1,), b1=(1, 0)), spans=[(0, 2)]), x)
    decision = merge_report(merged).decisions[1]
    (run,) = decision.merged_runs
    assert re.fullmatch(r"units 1\.\.2 merged \([\w-]+, MACs 0\.20M -> 1\.33M\)", run)
    assert decision.reason == f"activations [1, 0] kept; its first run merged into the span starting at block 0; {run}"
    assert (decision.keep, decision.merged) == (True, False)
    # block 0's projection 32 -> 16 and block 1's expansion 16 -> 96 at 16x16: 131072 + 393216 MACs, merged
    # 32 -> 96: 786432; block 0's decision carries it as its one merged run
    assert merge_report(merged).decisions[0].merged_runs == ("units 1..1 merged (span of blocks 0-1, MACs 0.52M -> "
                                                             "0.79M)",)


def test_a_span_through_a_linearised_residual_block():
    """Block 1 removes its depthwise's ReLU6 (depthwise 3x3 stride 2 + projection to 24), block 2 (24 -> 144 -> 24,
    identity skip) is linearised whole, block 3 removes its expansion's (expansion to 144, depthwise 3x3 stride 2):
    one convolution 96 -> 144, kernel 1 + 2 + 2*2 + 2*2 = 11, stride 4, padding 1 + 2 + 2 = 5."""
    model = _model()
    x = torch.randn(2, 3, RES, RES, dtype=torch.float64)
    plan = Plan.from_acts("mobilenet_v2", _acts(b1=(1, 0), b2=(0, 0), b3=(0, 1)), spans=[(1, 4)])
    merged = _check(model, plan, x)
    conv = merged.features[2].stages[-1].conv
    assert (conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding) == (96, 144, (11, 11), (4, 4), (5, 5))
    assert isinstance(merged.features[3], nn.Identity)
    assert merge_report(merged).plan.merge[2] and not merge_report(merged).plan.merge[3]


@pytest.mark.parametrize("acts, spans", [
    (dict(b0=(0,), b1=(0, 1)), [(0, 2)]),  # a linearised first block: the span starts at its first unit
    (dict(b0=(1,), b1=(1, 1)), [(0, 2)]),  # nothing removed: the projection and the next expansion (a layer merge)
    (dict(b3=(1, 0), b4=(0, 0), b5=(0, 0)), [(3, 6)]),  # ends in a linearised block: the free ReLU6 after it
    (dict(b0=(1,), b1=(0, 0), b2=(0, 0), b3=(0, 1), b6=(1, 0), b7=(0, 0), b8=(0, 0), b9=(0, 0), b10=(0, 1)),
     [(0, 4), (6, 11)]),  # two spans, one through three residual blocks
])
def test_crossing_spans_of_every_shape(acts, spans):
    model = _model(**NARROW)
    x = torch.randn(2, 3, RES, RES, dtype=torch.float64)
    plan = Plan.from_acts("mobilenet_v2", _acts(**acts), options=NARROW, spans=spans)
    linearised = [i for i, k in enumerate(plan.keep) if not k and not any(a <= i < b for a, b in spans)]
    if linearised:
        plan = Plan.from_acts("mobilenet_v2", plan.acts, options=NARROW, spans=spans,
                              merge=[i in linearised or (not plan.keep[i]) for i in range(len(plan.keep))])
    merged = _check(model, plan, x)
    assert sum(isinstance(m, MergedConv) for m in merged.modules()) >= len(spans)


@pytest.mark.parametrize("seed", range(4))
def test_random_plans_with_crossings(seed):
    """Random activation plans on MobileNetV2 with spans taken at random wherever the architecture allows one (a
    border is crossed where the block before is linearised or has no skip connection, and so is the block after;
    a block inside a span is linearised): merged and linearised equal the reference."""
    rng = random.Random(seed)
    model = _model(**NARROW)
    residual = [block.use_res_connect for block in list(model.features)[1:18]]
    acts = [tuple(int(rng.random() < 0.4) for _ in a) for a in KEPT]
    linear = [not any(a) for a in acts]
    spans: list[tuple[int, int]] = []
    for b in range(len(acts) - 1):
        if not ((linear[b] or not residual[b]) and (linear[b + 1] or not residual[b + 1])):
            continue
        if spans and spans[-1][1] == b + 1:
            if linear[b] and rng.random() < 0.7:
                spans[-1] = (spans[-1][0], b + 2)
        elif rng.random() < 0.6:
            spans.append((b, b + 2))
    assert spans
    keep = [int(not x) for x in linear]
    in_span = {i for a, b in spans for i in range(a, b)}
    merge = [not k and (i in in_span or rng.random() < 0.7) for i, k in enumerate(keep)]
    plan = Plan.from_acts("mobilenet_v2", acts, options=NARROW, merge=merge, spans=spans)
    _check(model, plan, torch.randn(2, 3, RES, RES, dtype=torch.float64))


@pytest.mark.parametrize("acts, spans, match", [
    # block 2 has a skip connection and keeps an activation: its input is read twice, nothing crosses into it
    (dict(b1=(1, 0), b2=(0, 1)), [(1, 3)], "not linear across its blocks"),
    (dict(b2=(1, 0), b3=(0, 1)), [(2, 4)], "not linear across its blocks"),  # ... nor out of it
    (dict(b1=(1, 0), b2=(1, 1), b3=(0, 1)), [(1, 4)], "only its first and last may keep some"),
])
def test_a_span_that_is_not_linear_is_refused(acts, spans, match):
    """A span across a skip connection of a block that is not linearised whole is refused, in one line; the same
    plan without the span still merges exactly, its cuts at the block borders as separate pieces."""
    model = _model(**NARROW)
    acts = _acts(**acts)
    with pytest.raises(PlanError, match=match):
        merge_model(model, Plan.from_acts("mobilenet_v2", acts, options=NARROW, spans=spans))
    _check(model, Plan.from_acts("mobilenet_v2", acts, options=NARROW),
           torch.randn(2, 3, RES, RES, dtype=torch.float64))


def test_a_crossing_span_needs_the_padding_in_front():
    """As a span of blocks: with the padding in place a depthwise would precede another padded convolution, which no
    single convolution computes exactly."""
    plan = Plan.from_acts("mobilenet_v2", _acts(b1=(1, 0), b2=(0, 0), b3=(0, 1)), spans=[(1, 4)], border="in_place")
    with pytest.raises(DsprofError, match="in_front"):
        merge_model(_model(), plan)


def test_a_block_plan_span_still_holds_linearised_blocks_only():
    with pytest.raises(PlanError, match="includes a block whose activations are kept"):
        Plan("mobilenet_v2", [1, 0, 1] + [1] * 14, spans=[(0, 3)])


def test_the_planner_decides_the_other_blocks_and_keeps_the_crossing():
    """A plan with a crossing span and a lone linearised block, without a merge list: the planner's search (on MACs
    here) decides the lone block and leaves the crossing span as the plan has it, its linearised block inside it
    marked merged and its ends (which keep activations) not; the decided plan merges exactly. At width 0.5 (the same
    layers and skip connections, half the channels)."""
    from dsprof.planning.decide import merge_rule

    model = _model(**NARROW)
    acts = _acts(b1=(1, 0), b2=(0, 0), b3=(0, 1), b5=(0, 0))
    plan = Plan.from_acts("mobilenet_v2", acts, options=NARROW, spans=[(1, 4)])
    decided = merge_rule(model, merge_by="macs").decide(plan).plan
    assert decided.spans == ((1, 4),)
    assert decided.merge[2] and not decided.merge[1] and not decided.merge[3]
    # block 5 (features.6; at width 0.5 its 32 channels are 16, its expansion 16 * 6 = 96: 16 -> 96 -> 16, 3x3
    # depthwise at stride 1): merged, one dense 3x3 16 -> 16, 9 * 16 * 16 MACs a pixel, against
    # 96 * (16 + 9 + 16) as built: it merges by MACs
    conv = _convs(model.features[6])
    assert [(c.in_channels, c.out_channels) for c in conv] == [(16, 96), (96, 96), (96, 16)]
    assert decided.merge[5] == (9 * 16 * 16 < 96 * (16 + 9 + 16))
    _check(model, decided, torch.randn(2, 3, RES, RES, dtype=torch.float64))


def test_every_plan_of_two_blocks_with_and_without_their_span():
    """Brute force on MobileNetV2 with one block per stage (no skip connection anywhere, so every border may be
    crossed): every activation state of blocks 1 and 2 (16) and of block 0 kept or linearised, with and without the
    span over blocks 1 and 2, and with the span over blocks 0 to 2 where block 1 is linearised; each merged against
    the reference. At width 0.35 (the same layers, a third of the channels): what is brute-forced is which units merge
    across the borders, not the channel counts."""
    import itertools

    torch.manual_seed(0)
    options = {"width": 0.35, "depths": [1] * 7}
    model = randomise_bn(get_model("mobilenet_v2", resolution=RES, num_classes=10, **options)).double().eval()
    assert not any(block.use_res_connect for block in list(model.features)[1:8])
    x = torch.randn(2, 3, RES, RES, dtype=torch.float64)
    n = 0
    for b0, b1, b2 in itertools.product([(1,), (0,)], [(1, 1), (1, 0), (0, 1), (0, 0)], [(1, 1), (1, 0), (0, 1), (0, 0)]):
        acts = [b0, b1, b2] + [(1, 1)] * 4
        keep = [int(any(a)) for a in acts]
        for spans in ([], [(1, 3)]) + (([(0, 3)],) if b1 == (0, 0) else ()):
            plan = Plan.from_acts("mobilenet_v2", acts, options=options, spans=spans or None,
                                  merge=[not k for k in keep])
            merged = merge_model(model, plan)
            with torch.no_grad():
                assert _rel(merged(x), _reference(model, plan.acts, plan.spans or ())(x)) <= TOL, (acts, spans)
            n += 1
    assert n == 2 * 16 * 2 + 2 * 4


def test_the_cost_table_of_a_crossing_plan_reads_what_reaches_the_last_blocks_place():
    # `dsprof merge` (its cost table) failed on every crossing span whose last block keeps a remainder: that
    # remainder was counted on the block's own input (24 channels) where it reads the span's output (144). Hand-worked,
    # MobileNetV2 with one block per stage at 32 px: block 2 (features.3, 24 -> 144 -> 32, depthwise stride 2) with
    # `acts` [0, 1] puts its expansion and depthwise into the span over blocks 1-2; what is left at its place is the
    # 1x1 projection 144 -> 32 on a 4x4 map: 144 x 32 x 16 = 73,728 MACs.
    from dsprof.merging import cost_table

    model = get_model("mobilenet_v2", depths=(1,) * 7, resolution=32)
    acts = ((1,), (1, 0), (0, 1)) + ((1, 1),) * 4
    plan = Plan("mobilenet_v2", (1,) * 7, {"depths": [1] * 7}, acts=acts, spans=((1, 3),))
    table = cost_table(model, merge_model(model, plan))
    row = table[table["block"] == "features.3"].iloc[0]
    assert row["macs_after"] == 144 * 32 * 4 * 4
    assert row["params_after"] == 144 * 32 + 32  # the projection, its BatchNorm folded into a bias


def _end_states(n_acts, residual):
    """From torchvision's architecture: the states in which a block ends a timed crossing span: linearised always;
    where it has no skip connection (its output read once), every state of its activations (one or two here, each
    state one the planner offers): its run at the border crosses, the rest of it deploys as in that state."""
    if residual:
        return [(0,) * n_acts]
    return list(itertools.product((0, 1), repeat=n_acts))


def test_the_crossings_timed_include_ends_in_every_state():
    """`crossing_candidates` on MobileNetV2 (17 blocks: block 0 depthwise-separable, one activation; skip connections
    where torchvision sets ``use_res_connect``, on 10 blocks): for each range of 2..N blocks, each end block in any
    state (a block with a skip connection only linearised), the blocks between linearised, not both ends linearised.

    By hand: the blocks without a skip connection are 0, 1, 3, 6, 10, 13, 16 (2, 4, 4, 4, 4, 4, 4 end states), the
    others have one. Two blocks: (0, 1) 2 * 4 - 1 = 7, and ten pairs of a 4-state block beside a 1-state one, 3 each:
    37. Three blocks, first and last: (0, 2) 2 * 1 - 1 = 1, (1, 3) 4 * 4 - 1 = 15, eight ranges of a 4-state block
    and a 1-state one (3, 4, 6, 8, 10, 11, 13, 14 start them) 3 each, 24; 37 + 40 = 77. Of these, 25 and 50 have no
    first block in fused-expand's state (0, 1) and no last block in fused-project's (1, 0) (the ends timed before)."""
    from dsprof.merging.partial import act_layouts
    from dsprof.records.activations import crossing_candidates

    model = _model()
    residual = [block.use_res_connect for block in list(model.features)[1:18]]
    assert [i for i, r in enumerate(residual) if not r] == [0, 1, 3, 6, 10, 13, 16]
    counts = [1] + [2] * 16
    layouts = act_layouts(find_blocks(model, (RES, RES)))
    for max_len, total, before in ((2, 37, 25), (3, 77, 50)):
        expected = set()
        for start in range(17):
            for stop in range(start + 2, min(17, start + max_len) + 1):
                for first in _end_states(counts[start], residual[start]):
                    for last in _end_states(counts[stop - 1], residual[stop - 1]):
                        if any(first) or any(last):
                            inside = tuple((0, 0) for _ in range(start + 1, stop - 1))
                            expected.add(((start, stop), (first, *inside, last)))
        got = crossing_candidates(layouts, max_len)
        assert len(got) == len(set(got)) == len(expected) == total
        assert set(got) == expected
        assert sum(a[0] != (0, 1) and a[-1] != (1, 0) for _, a in got) == before


@pytest.mark.parametrize("acts, span, deployed", [
    # block 0 keeps its ReLU6 (after its depthwise 3x3 on 32 channels at 16x16), block 1 both of its: block 0's
    # projection 32 -> 16 and block 1's expansion 16 -> 96, one 1x1, then block 1's depthwise (3x3 stride 2, to 8x8)
    # and projection 96 -> 24
    (dict(b0=(1,), b1=(1, 1)), (0, 2),
     [(32, 32, 3, 1, 32), (32, 96, 1, 1, 1), (96, 96, 3, 2, 96), (96, 24, 1, 1, 1)]),
    # block 1 keeps both (expansion 16 -> 96 at 16x16, depthwise stride 2), its projection, block 2 (24 -> 144 -> 24,
    # identity skip, linearised) and block 3's expansion one dense 3x3 96 -> 144 at 8x8, then block 3's depthwise
    # (stride 2, to 4x4) and projection 144 -> 32
    (dict(b1=(1, 1), b2=(0, 0), b3=(1, 1)), (1, 4),
     [(16, 96, 1, 1, 1), (96, 96, 3, 2, 96), (96, 144, 3, 1, 1), (144, 144, 3, 2, 144), (144, 32, 1, 1, 1)]),
    # ... and ending in the linearised residual block 2: block 1's projection with it, one dense 3x3 96 -> 24
    (dict(b1=(1, 1), b2=(0, 0)), (1, 3), [(16, 96, 1, 1, 1), (96, 96, 3, 2, 96), (96, 24, 3, 1, 1)]),
    # a first block in fused-expand's state: block 1 keeps its depthwise's ReLU6 only, its expansion and depthwise
    # one dense 3x3 stride-2 16 -> 96 (16x16 to 8x8), its projection alone crossing with block 2 (linearised): one
    # dense 3x3 96 -> 24
    (dict(b1=(0, 1), b2=(0, 0)), (1, 3), [(16, 96, 3, 2, 1), (96, 24, 3, 1, 1)]),
    # a last block in fused-project's state: block 0 keeps its ReLU6, block 1 its expansion's only: block 0's
    # projection and block 1's expansion one 1x1 32 -> 96 at 16x16, block 1's depthwise and projection one dense 3x3
    # stride-2 96 -> 24 (to 8x8)
    (dict(b0=(1,), b1=(1, 0)), (0, 2), [(32, 32, 3, 1, 32), (32, 96, 1, 1, 1), (96, 24, 3, 2, 1)]),
    # both at once, through the linearised residual block 2: block 1 fused-expand (dense 3x3 stride 2 16 -> 96), its
    # projection, block 2 and block 3's expansion one dense 3x3 96 -> 144 at 8x8, block 3's depthwise and projection
    # one dense 3x3 stride-2 144 -> 32 (to 4x4)
    (dict(b1=(0, 1), b2=(0, 0), b3=(1, 0)), (1, 4), [(16, 96, 3, 2, 1), (96, 144, 3, 1, 1), (144, 32, 3, 2, 1)]),
])
def test_a_crossing_with_an_end_in_any_state_is_timed_as_it_merges(acts, span, deployed):
    """What `measure` times for a crossing span whose end keeps all its activations, or whose first block is in
    fused-expand's state or last in fused-project's (`deployed_crossing`, variant ``crossing``): keyed by the
    convolutions it deploys (`crossing_spec`, hand-worked above, with their MACs at 32 px), and computing, in float64,
    what the reference computes for those blocks."""
    from dsprof.merging.partial import crossing_spec
    from dsprof.models.blockspec import ConvShape
    from dsprof.models import count_macs
    from dsprof.profiler.workloads import deployed_crossing

    model = _model()
    acts = _acts(**acts)
    blocks = find_blocks(model, (RES, RES))
    spec = crossing_spec(blocks, acts, span)
    assert spec.convs == tuple(ConvShape(cin, cout, k, s, g) for cin, cout, k, s, g in deployed)
    module = deployed_crossing(blocks, acts, span)
    h = RES // 2  # the stem's stride 2
    assert (spec.in_channels, spec.in_h, spec.in_w) == (deployed[0][0], h, h)
    macs = 0
    for cin, cout, k, s, g in deployed:
        h //= s
        macs += h * h * cout * k * k * cin // g
    assert count_macs(module, (spec.in_h, spec.in_w), spec.in_channels) == macs
    x = torch.randn(2, 3, RES, RES, dtype=torch.float64)
    ref = _reference(model, acts, [span])
    with torch.no_grad():
        inner = ref.features[:1 + span[0]](x)
        expected = ref.features[1 + span[0]:1 + span[1]](inner)
        assert _rel(module(inner), expected) <= TOL
