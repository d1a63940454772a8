"""Span merge: consecutive linear blocks merged into one convolution, exactly (padding in front of the span)."""

import pytest
import torch
from torch import nn

from dsprof.merging import linearize_model, merge_model, merge_report
from dsprof.records.plan import Plan, PlanError
from dsprof.merging.spans import SpanLinearized
from dsprof.models.spans import span_ranges, span_runs, span_spec
from dsprof.models import find_blocks, get_model, spec_macs
from dsprof.planning.decide import merge_rule
from dsprof.models import ModelRef

# small float64 convolutions, as the other merge tests run them: on a busy machine OpenMP threads spin against other
# processes (under `make test` each worker runs on one thread already)
pytestmark = pytest.mark.usefixtures("one_thread")


def _random_bn(model: nn.Module, seed: int = 0) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():  # default statistics hide bias and border bugs
        if isinstance(m, nn.BatchNorm2d):
            for t, lo, hi in ((m.running_mean, -1, 1), (m.running_var, 0.5, 2), (m.weight.data, 0.5, 1.5), (m.bias.data, -0.5, 0.5)):
                t.copy_(torch.rand(t.shape, generator=g, dtype=t.dtype) * (hi - lo) + lo)
    return model


@pytest.mark.parametrize("spans", [((1, 3),), ((2, 4), (4, 7)), ((1, 5),)])
@pytest.mark.parametrize("size", [31, 32])
def test_span_merge_is_exact_at_odd_and_even_sizes_with_strides_1_and_2(spans, size):
    # MobileNetV2 at width 0.5: block 1 (features.2) has stride 2, blocks 2 and 4..6 identity skips at stride 1
    model = _random_bn(get_model("mobilenet_v2", width=0.5, resolution=size).double().eval())
    plan = Plan("mobilenet_v2", (1,) + (0,) * 16, {"width": 0.5}, free_activation=None, spans=spans)
    linear = linearize_model(model, plan).eval()
    assert sum(isinstance(m, SpanLinearized) for m in linear.modules()) == len(spans)
    merged = merge_model(linear, merge_rule(model, merge_by="macs").decide(plan).plan).eval()  # spans; lone blocks by MACs
    x = torch.randn(2, 3, size, size, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want, got = linear(x), merged(x)
    assert (got - want).abs().max() <= 1e-9 * want.abs().max()
    report = merge_report(merged)
    for start, stop in spans:
        convs = [m for m in merged.get_submodule(f"features.{start + 1}").modules() if isinstance(m, nn.Conv2d)]
        assert len(convs) == 1  # the whole span is one convolution
        specs = [b.spec for b in find_blocks(model)[start:stop]]
        # kernel 1 + sum((k_b - 1) * stride before b), stride the product, channels of the span's ends
        k, step = 1, 1
        for s in specs:
            k, step = k + (s.kernel - 1) * step, step * s.stride
        assert convs[0].kernel_size == (k, k) and convs[0].stride == (step, step)
        assert (convs[0].in_channels, convs[0].out_channels) == (specs[0].in_channels, specs[-1].out_channels)
        assert all(report.decisions[i].merged for i in range(start, stop))


def test_spans_are_refused_where_something_separates_the_blocks():
    model = get_model("mobilenet_v2", width=0.5, resolution=32)
    with pytest.raises(PlanError, match="kept"):
        Plan("mobilenet_v2", (1, 1) + (0,) * 15, {"width": 0.5}, spans=((1, 3),))
    with pytest.raises(PlanError, match="non-overlapping"):
        Plan("mobilenet_v2", (0,) * 17, {"width": 0.5}, spans=((1, 3), (2, 4)))
    # ResNet basic blocks end with a ReLU after the addition: nothing spans
    resnet = find_blocks(get_model("resnet18", width=0.5, resolution=32))
    assert span_runs(resnet, (0,) * len(resnet)) == []
    blocks = find_blocks(model)
    assert span_runs(blocks, (0,) * 17) == [list(range(17))]
    assert span_runs(blocks, (0, 0, 1) + (0,) * 14) == [[0, 1], list(range(3, 17))]


def test_span_ranges_lists_every_span_inside_the_runs_by_hand():
    blocks = find_blocks(get_model("mobilenet_v2", width=0.5, resolution=32))
    keep = (0, 0, 1, 0, 0, 0) + (1,) * 11  # runs [0, 1] and [3, 4, 5] (as span_runs finds them, above)
    assert span_ranges(blocks, keep, 1) == []  # one block is no span
    assert span_ranges(blocks, keep, 2) == [(0, 2), (3, 5), (4, 6)]
    assert span_ranges(blocks, keep, 3) == [(0, 2), (3, 5), (3, 6), (4, 6)]
    assert span_ranges(blocks, keep, 9) == span_ranges(blocks, keep, 3)  # no run is longer than 3 blocks
    # the whole MobileNetV2 is one run of 17: spans of 2 start at blocks 0..15, of 3 at 0..14
    assert len(span_ranges(blocks, (0,) * 17, 3)) == 16 + 15


def test_planning_spans_by_macs_picks_only_spans_that_lower_macs():
    """The planner on MACs (`merge --spans auto --merge-by macs`): its partition of blocks 1..16 is the one of fewest
    MACs among every partition into pieces of up to 3 blocks (enumerated here), each span lowering the MACs."""
    model = get_model("mobilenet_v2", resolution=64)
    merges = merge_rule(model, merge_by="macs").decide(Plan("mobilenet_v2", (1,) + (0,) * 16, free_activation=None),
                                                       spans="auto", max_span=3)
    plan, blocks = merges.plan, find_blocks(model)
    assert merges.by == "macs" and plan.spans
    for start, stop in plan.spans:
        specs = [b.spec for b in blocks[start:stop]]
        single = sum(s.merged_kernel**2 * s.in_channels * s.out_channels * s.out_h * s.out_w for s in specs)
        span = span_spec(specs)
        assert span.kernel**2 * span.in_channels * span.out_channels * span.out_h * span.out_w < single
        assert plan.merge[start:stop] == (True,) * (stop - start)

    def macs(a, b):  # blocks a..b-1 as one piece: a span's convolution, or a lone block merged where that is fewer
        if b - a > 1:
            return spec_macs(span_spec([x.spec for x in blocks[a:b]]))
        return min(spec_macs(blocks[a].spec), spec_macs(blocks[a].spec, merged=True))

    def partitions(a):
        if a == 17:
            yield ()
        for b in range(a + 1, min(a + 3, 17) + 1):
            for rest in partitions(b):
                yield ((a, b),) + rest

    fewest = min(sum(macs(a, b) for a, b in p) for p in partitions(1))
    starts = dict(plan.spans)
    chosen, i = 0, 1
    while i < 17:
        stop = starts.get(i, i + 1)
        chosen += macs(i, stop)
        i = stop
    assert chosen == fewest


def test_spans_from_a_lut_are_the_planners_and_take_the_longest_where_spans_cost_nothing():
    """A LUT in which every span's convolution costs (almost) nothing: the planner's partition for the keep list
    (what `merge --spans auto --lut` deploys) takes the fewest, so the longest, spans allowed."""
    import pandas as pd

    from dsprof.lut import LUT, model_label
    from dsprof.lut.schema import GROUP_COLUMNS, SCHEMA
    from dsprof.planning import best_plan

    blocks = find_blocks(get_model("mobilenet_v2", resolution=64))
    base = {**GROUP_COLUMNS, "schema": SCHEMA, "env_id": "hand", "device_name": "Hand CPU", "device": "cpu", "backend": "torch",
            "dtype": "fp32", "layout": "nchw", "batch": 1, "threads": 1, "compile": False, "iqr_s": 0.0,
            "n_samples": 10, "noisy": False, "sources": "hand"}
    rows = [dict(base, scope="block", workload=w, variant=v, median_s=t)  # blocks alike share their entries
            for w in sorted({b.spec.to_str() for b in blocks}) for v, t in (("original", 1e-3), ("linear", 1e-3),
                                                                            ("merged", 0.5e-3))]
    spans = {span_spec([b.spec for b in blocks[a:z]]).to_str() for a in range(1, 17) for z in range(a + 2, min(a + 4, 17) + 1)}
    rows += [dict(base, scope="block", workload=w, variant="merged", median_s=1e-9) for w in sorted(spans)]
    label = model_label("mobilenet_v2", {"resolution": 64})
    rows += [dict(base, scope=scope, workload=label, variant="original", median_s=1e-4) for scope in ("stem", "head")]
    plan = best_plan(ModelRef.of("mobilenet_v2", resolution=64), LUT(pd.DataFrame(rows)), (1,) + (0,) * 16, max_span=4,
                     method="isolated")
    assert plan.spans == ((1, 5), (5, 9), (9, 13), (13, 17)) and plan.merge == (False,) + (True,) * 16


# VGG-11-BN as torchvision builds its features (make_layers on its cfg "A", full width), under a small head: the same
# three blocks as the zoo's ``vgg11_bn`` (``features[8:14]``, ``features[15:21]``, ``features[22:28]``), each with its
# activation. VGG's own classifier (25088 -> 4096 -> 4096 -> 10: 120 M weights, Linear layers outside any block, no
# gate on them) was most of this test's time in float64, and is not what it tests. Registered below: a plan names a
# registered model.
VGG_FEATURES = "test_spans.vgg11_bn_features"


def _register_vgg_features() -> None:
    from dsprof.models import list_models, register_model
    from test_any_cnn_merge import VGGSmallHead

    if VGG_FEATURES not in list_models():
        def build(num_classes: int = 10, pretrained: bool = False) -> nn.Module:
            assert not pretrained, "nothing is downloaded in the tests"
            return VGGSmallHead("A", True, num_classes)

        register_model(VGG_FEATURES, default_resolution=40, family="test", description="VGG-11-BN features")(build)


GATE_MODELS = [
    ("mnasnet0_5", {}), ("mobilenet_v3_small", {}), ("shufflenet_v2_x1_0", {}), ("fbnetc_100", {}),
    ("resnet18", {"width": 0.25}), ("tf_efficientnet_lite0", {}), (VGG_FEATURES, {}),
]


@pytest.mark.parametrize("name, options", GATE_MODELS)
def test_gates_attach_to_the_discovered_activations_of_any_model(name, options):
    """All gates on: the gated model is the original; all off: it is every block with its activations removed
    (padding in place, no free activation) -- computed independently by linearize_model."""
    from dsprof.search import gate_model, ungate

    from dsprof.merging.partial import with_acts

    _register_vgg_features()
    model = _random_bn(get_model(name, resolution=40, num_classes=10, **options).double().eval())
    blocks = find_blocks(model)
    n, counted = len(blocks), sum(with_acts(blocks))  # k counts the blocks with a removable activation (issue #47)
    x = torch.randn(2, 3, 40, 40, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    plan = Plan(name, (0,) * n, options, free_activation=None, border="in_place")
    with torch.no_grad():
        want_on, want_off = model(x), linearize_model(model, plan).eval()(x)
        on, off = gate_model(model, counted).eval(), gate_model(model, 0).eval()
        assert (on(x) - want_on).abs().max() <= 1e-10 * want_on.abs().max()
        assert (off(x) - want_off).abs().max() <= 1e-10 * want_off.abs().max()
        assert (want_on - want_off).abs().max() > 0  # the gates matter (little, for MobileNetV3-Small's 2 blocks)
        back = ungate(on)
        if not any(b.site is not None for b in find_blocks(model)):
            # the original modules are back; a model with a chain no module owns (MobileNetV3-Small's stem -> first
            # depthwise, before its gate: issue #47) comes back as the rewritten graph, its modules under the chain's
            assert list(back.state_dict()) == list(model.state_dict())
        assert torch.equal(back(x), want_on)


class _SqueezeExcite(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, c // 4, 1), nn.Conv2d(c // 4, c, 1)

    def forward(self, x):
        return x * torch.sigmoid(self.fc2(torch.relu(self.fc1(x.mean((2, 3), keepdim=True)))))


class _Residual(nn.Module):
    """An inverted residual with an identity skip; with ``se``, a squeeze-excitation between its depthwise and its
    last convolution, so that only its first two convolutions form a block (a chain), whose input the addition
    also reads."""

    def __init__(self, c, se=False):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, 2 * c, 1, bias=False), nn.BatchNorm2d(2 * c)
        self.conv2, self.bn2 = nn.Conv2d(2 * c, 2 * c, 3, padding=1, groups=2 * c, bias=False), nn.BatchNorm2d(2 * c)
        self.se = _SqueezeExcite(2 * c) if se else nn.Identity()
        self.conv3, self.bn3 = nn.Conv2d(2 * c, c, 1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.se(torch.relu(self.bn2(self.conv2(y))))
        return x + self.bn3(self.conv3(y))


def test_a_block_whose_input_is_also_read_outside_it_ends_no_span():
    # found by a new user (2026-11-29): in a residual block with a squeeze-excitation, the block is the chain before
    # the SE; the addition after the SE also reads the chain's input. A span ending in that chain merged the block
    # before it away and the addition lost its input (a size mismatch in the merge, and in `measure --calibrate
    # --spans`). GhostNet's ghost modules beside their shortcut block, timm's SE blocks and RegNetY were hit the same way.
    model = _random_bn(nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), _Residual(8),
                                     _Residual(8, se=True), _Residual(8), _Residual(8)).double().eval())
    blocks = find_blocks(model, (16, 16))
    assert [b.name for b in blocks] == ["3", "4.conv1..4.conv2", "5", "6"]
    assert [b.input_shared for b in blocks] == [False, True, False, False]
    # blocks 0 and 1 follow each other, but the addition reads block 0's output too: no span 0-2 (block 1's output
    # goes into the SE, not block 2: no span 1-3 either); blocks 2 and 3 follow each other alone
    assert blocks[1].input_node == blocks[0].output_node and not blocks[1].follows(blocks[0])
    assert span_runs(blocks, (0,) * 4) == [[2, 3]]
    assert span_ranges(blocks, (0,) * 4, 4) == [(2, 4)]
    x = torch.randn(2, 3, 16, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for spans in (((2, 4),), None):
        plan = merge_rule(model, merge_by="macs").decide(Plan(model, (0,) * 4, free_activation=None, spans=spans)).plan
        linear, merged = linearize_model(model, plan).eval(), merge_model(model, plan).eval()
        with torch.no_grad():
            want, got = linear(x), merged(x)
        assert (got - want).abs().max() <= 1e-9 * want.abs().max(), spans


def test_a_span_of_ghost_blocks_keeps_their_map_and_merges_exactly():
    # GhostNet's blocks 6.0-6.2 (stride 1, 80 channels, a 4x4 map at 64 px): each Ghost module's cheap operation, a
    # 3x3 depthwise convolution inside its concatenation, must be padded for in front of the span like every other
    # convolution. Before, it was not: the span's front padding counted only the 1x1 convolutions, the span returned a
    # 2x2 map for its 4x4 input (at 128 px, 4x4 for 8x8, which the global pooling then hid) and a span of three blocks
    # failed at 64 and 96 px. Four Ghost modules of two 3x3 cheap operations each: pad 2 per block, 3 blocks: 6.
    model = _random_bn(get_model("ghostnet_100", resolution=64).double().eval())
    blocks = find_blocks(model)
    assert [b.name for b in blocks[9:12]] == ["blocks.6.0", "blocks.6.1", "blocks.6.2"]
    plan = Plan("ghostnet_100", (0,) * len(blocks), merge=(True,) * len(blocks), free_activation=None,
                spans=((9, 12),))
    linear = linearize_model(model, plan).eval()
    span = next(m for m in linear.modules() if isinstance(m, SpanLinearized))
    assert span.pad.padding == (6, 6, 6, 6)
    seen = []
    span.register_forward_hook(lambda _m, inputs, out: seen.append((inputs[0].shape[-2:], out.shape[-2:])))
    x = torch.randn(2, 3, 64, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want, got = linear(x), merge_model(model, plan).eval()(x)
    assert seen == [(torch.Size([4, 4]), torch.Size([4, 4]))]  # stride 1: the map it was given
    assert (got - want).abs().max() <= 1e-9 * want.abs().max()


def test_spans_asked_of_a_model_where_no_blocks_can_merge_as_one_are_said_to_be_none():
    # a new user's `measure --model timm:lcnet_035 --spans 2` timed no span and said nothing (every LCNet block ends
    # with its activation); ResNet's basic blocks end with the ReLU after their addition, the same way
    import warnings

    from dsprof.profiler.runner import workload_groups

    names = lambda groups: [w.name for g in groups for w in g if w.scope == "block" and "+" in w.name]  # noqa: E731
    resnet = get_model("resnet18", width=0.5, resolution=32)
    with pytest.warns(UserWarning, match="resnet18: no run of blocks merges as one span .*: no span is timed"):
        groups = workload_groups(resnet, "resnet18", ("original",), (), "*", None, (32, 32), spans=2)
    assert names(groups) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # MobileNetV2: spans, and no word about them
        groups = workload_groups(get_model("mobilenet_v2", width=0.5, resolution=32), "mobilenet_v2", ("original",),
                                 (), "*", None, (32, 32), spans=2)
    assert names(groups)[:2] == ["features.1+features.2", "features.2+features.3"]
