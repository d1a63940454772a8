"""The LUT and the planner at the level of single activations (issue #47, item 2): the ``fused-expand`` and
``fused-project`` block variants timed and priced, and the planner's DP counting kept activations, checked against
every plan of a small MobileNetV2 (brute force), against the block-level front, and by merging its plans.

The LUT is real (measured, built) with its medians from tests/rule_lut.py's rule (200 us a call + 0.1 ns a MAC), so
that the numbers below are worked by hand from the architecture; a second LUT makes the partial states cheap
(their medians x 0.3) so that the planner chooses them.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import replace

import pytest
import torch

from conftest import randomise_bn
from dsprof.errors import UsageError
from dsprof.lut import LUT, Pricing, build_lut
from dsprof.lut.predict import predict_plan, prices_of
from dsprof.merging import linearize_model, merge_model
from dsprof.merging.partial import act_layouts
from dsprof.models import ModelRef, get_model
from dsprof.planning.activations import plan_front_acts
from dsprof.planning.planner import plan_front
from dsprof.profiler import BackendSettings, Workloads, measure
from dsprof.records.activations import kept_activations
from dsprof.records.plan import Plan
from rule_lut import OVERHEAD_S, S_PER_MAC, rule_lut
from fast_timing import FEWER

pytestmark = pytest.mark.usefixtures("one_thread")

#: Two samples a workload (the timing loop's least): every median these tests read is rewritten by the rule
#: (tests/rule_lut.py), so what the clock said is never asserted; only that each workload was timed and recorded.
TWO = replace(FEWER, min_samples=2, max_samples=2)

NAME, OPTIONS, RES = "mobilenet_v2", {"depths": [1] * 7}, 32
REF = ModelRef.of(NAME, options=OPTIONS, resolution=RES)
# MobileNetV2 with one block per stage (7 blocks): block 0 depthwise-separable (one activation), blocks 1..6
# inverted residuals (two); block 1 is 16 -> 96 -> 24, 3x3 depthwise stride 2, on the stem's 16x16 output.
COUNTS = [1] + [2] * 6
B1_ORIGINAL = 256 * 16 * 96 + 64 * 96 * 9 + 64 * 96 * 24  # 1x1 at 16x16, depthwise and 1x1 at 8x8: 595 968
B1_FUSED_EXPAND = 64 * 96 * 16 * 9 + 64 * 96 * 24  # dense 3x3 stride 2 16 -> 96 at 8x8, then the 1x1: 1 032 192
B1_FUSED_PROJECT = 256 * 16 * 96 + 64 * 24 * 96 * 9  # the 1x1, then dense 3x3 stride 2 96 -> 24: 1 720 320
FUSED = ("fused-expand", "fused-project")


@pytest.fixture(scope="module")
def luts(tmp_path_factory):
    d = tmp_path_factory.mktemp("actplan")
    result = measure(REF, settings=BackendSettings(threads=1),
                     workloads=Workloads(variants=("original", "merged", "linear", *FUSED),
                                         model_variants=("original",), spans=2),
                     timing=TWO, out=d / "m.jsonl", progress=False)
    build_lut([result.path]).save(d / "lut.csv")
    ruled = rule_lut(d / "lut.csv", [result.path])
    frame = ruled.to_dataframe()
    frame.loc[frame["variant"].isin(FUSED), "median_s"] *= 0.3
    LUT(frame, str(d / "cheap.csv")).save(d / "cheap.csv")
    frame.loc[frame["variant"] == "crossing", "median_s"] *= 0.05  # crossing spans cheaper still: chosen
    LUT(frame, str(d / "crossing.csv")).save(d / "crossing.csv")
    return {"rule": d / "lut.csv", "cheap": d / "cheap.csv", "crossing": d / "crossing.csv"}


def _prices(path, method="auto"):
    return prices_of(ModelRef.of(NAME, options=OPTIONS, resolution=RES), path, method=method)


def test_partial_variants_are_timed_and_priced(luts):
    lut = LUT.load(luts["rule"])
    frame = lut.to_dataframe()
    fused = frame[frame["variant"].isin(FUSED)]
    assert len(fused) == 2 * 6  # both partial states of each inverted residual; block 0 has one activation
    prices = _prices(luts["rule"], "isolated")  # the rest plus the pieces' entries, unscaled
    spec = prices.blocks[1].spec.to_str()
    for variant, macs in (("fused-expand", B1_FUSED_EXPAND), ("fused-project", B1_FUSED_PROJECT)):
        (median,) = fused[(fused["workload"] == spec) & (fused["variant"] == variant)]["median_s"]
        assert median == pytest.approx(OVERHEAD_S + S_PER_MAC * macs, rel=1e-12)
    # a plan keeping block 1's depthwise activation only: the model's price, less block 1's original, plus its fused
    everything = predict_plan(prices, Plan(NAME, (1,) * 7, OPTIONS)).total_s
    acts = [(1,), (0, 1)] + [(1, 1)] * 5
    plan = Plan.from_acts(NAME, acts, options=OPTIONS)
    assert predict_plan(prices, plan).total_s - everything == pytest.approx(
        S_PER_MAC * (B1_FUSED_EXPAND - B1_ORIGINAL), rel=1e-9)
    # the fast pricer (the planner's tests, benchmarks) prices the partial block as predict does
    from dsprof.lut.pricer import Pricer
    fast, full = Pricer(prices).price(plan), predict_plan(prices, plan)
    assert fast.latency_s == pytest.approx(full.total_s, rel=1e-12)
    assert fast.latency_s - Pricer(prices).price(Plan(NAME, (1,) * 7, OPTIONS)).latency_s == pytest.approx(
        S_PER_MAC * (B1_FUSED_EXPAND - B1_ORIGINAL), rel=1e-9)


def _brute_force(prices):
    """{kept activations: the lowest predicted total of any plan with that many}: every state of every block (kept,
    each partial state, linearised alone and deployed the cheaper way), no spans."""
    best: dict[int, float] = {}
    states = [[(1,), (0,)]] + [[(1, 1), (0, 1), (1, 0), (0, 0)]] * 6
    for acts in itertools.product(*states):
        plan = Plan.from_acts(NAME, acts, options=OPTIONS)
        total = prices.total_s(prices.pieces(plan))
        k = kept_activations(acts)
        best[k] = min(best.get(k, math.inf), total)
    return best


@pytest.mark.parametrize("which", ["rule", "cheap"])
def test_the_activation_front_is_every_plans_best(luts, which):
    """Brute force over all 2 * 4^6 = 8192 activation plans (no spans): the DP's fastest plan at each number of kept
    activations is the cheapest of them all, and its plan prices at what the DP says."""
    prices = _prices(luts[which])
    front = plan_front_acts(REF, luts[which], pricing=Pricing(max_span=1), prices=prices)
    best = _brute_force(prices)
    assert [p.k for p in front.points] == list(range(0, 14))
    for point in front.points:
        assert kept_activations(point.plan.acts) == point.k
        assert prices.total_s(prices.pieces(point.plan)) == pytest.approx(best[point.k], rel=1e-12, abs=1e-15)
    partial = [p for p in front.points if any(any(a) and not all(a) for a in point_acts(p))]
    if which == "cheap":
        assert partial  # cheap partial states are chosen
    else:
        assert not partial  # under the rule a fused form is one call with more MACs: never chosen


def point_acts(point):
    return [a for a in point.plan.acts if len(a) == 2]


def test_never_slower_than_the_block_front(luts):
    """Issue #47's check: at the same number of kept activations, the activation front is never slower than the
    block front; and with no partial state offered, it is the block front (at k kept blocks, the faster of the
    activation front's plans with 2k and 2k - 1 activations: block 0 keeps one, the others two)."""
    for which in ("rule", "cheap", "crossing"):
        prices = _prices(luts[which])
        pricing = Pricing(max_span=2)
        blocks = plan_front(REF, luts[which], pricing=pricing, prices=prices)
        acts = {p.k: p.latency_s for p in plan_front_acts(REF, luts[which], pricing=pricing, prices=prices).points}
        whole = {p.k: p.latency_s for p in plan_front_acts(REF, luts[which], pricing=pricing, prices=prices,
                                                           partial=False).points}
        for point in blocks.points:
            k_acts = sum(n for n, keep in zip(COUNTS, point.plan.keep) if keep)
            assert acts[k_acts] <= point.latency_s * (1 + 1e-12)
            same = [whole[a] for a in (2 * point.k, 2 * point.k - 1) if a in whole]
            assert min(same) == pytest.approx(point.latency_s, rel=1e-12)


def test_both_planners_read_one_request_and_the_keywords_of_before_warn(luts):
    """`plan_front` and `plan_front_acts` take the model as one `ModelRef` and how the LUT prices it (its context,
    method, spans) as one `Pricing` (issue #44): the context named or picked by backend and batch plans the same
    front, and the keywords of before plan it too, with one DeprecationWarning naming the new parameters."""
    lut = LUT.load(luts["rule"])
    (context,) = lut.devices()

    def summary(front):
        return front.name, dict(front.options), front.max_span, front.method, [(p.k, p.plan, p.latency_s)
                                                                               for p in front.points]

    for planner in (plan_front, plan_front_acts):
        named = planner(REF, lut, pricing=Pricing(device_key=context, method="isolated", max_span=2))
        picked = planner(REF, lut, pricing=Pricing(backend=context.backend, batch=context.batch, method="isolated",
                                                   max_span=2))
        with pytest.warns(DeprecationWarning, match=r"\(options=, resolution=, device=, method=, max_span=\) is now "
                          r"dsprof\.planning\.[a-z.]*plan_front[a-z_]*\(model=ModelRef\.of\(options=, resolution=\), "
                          r"pricing=Pricing\(device_key=, method=, max_span=\)\)"):
            before = planner(NAME, lut, options=OPTIONS, resolution=RES, device=context, method="isolated", max_span=2)
        assert summary(named) == summary(picked) == summary(before)
        assert (named.name, dict(named.options), named.max_span) == (NAME, OPTIONS, 2)
        assert named.method.startswith("isolated") and len(named.blocks) == 7
        with pytest.raises(UsageError, match=r"`pricing=Pricing\(max_span=\)` is at least 1 \(1: no spans\), got 0"):
            planner(REF, lut, pricing=Pricing(max_span=0))


@pytest.mark.parametrize("which", ["cheap", "crossing"])
def test_front_plans_merge_exactly(luts, which):
    """The cheap LUTs' front plans (partial blocks, spans, crossing spans, lone merged blocks), merged: equal to their
    linearised models in float64."""
    front = plan_front_acts(REF, luts[which], pricing=Pricing(max_span=2))
    torch.manual_seed(0)
    model = randomise_bn(get_model(NAME, resolution=RES, num_classes=10, **OPTIONS)).double().eval()
    x = torch.randn(2, 3, RES, RES, dtype=torch.float64)
    chosen = [p for p in front.points if any(any(a) and not all(a) for a in p.plan.acts)]
    assert chosen
    crossing = [p for p in front.points if any(any(map(any, p.plan.acts[a:b])) for a, b in p.plan.spans or ())]
    if which == "crossing":
        assert crossing  # and these are the plans merged below, some with an end that keeps all its activations,
        # some with a first block in fused-expand's state or a last in fused-project's
        assert any(all(p.plan.acts[i]) for p in crossing[::2] for a, b in p.plan.spans or () for i in (a, b - 1))
        assert any(p.plan.acts[a] == (0, 1) or p.plan.acts[b - 1] == (1, 0)
                   for p in crossing[::2] for a, b in p.plan.spans or ())
    for point in (crossing[::2] if which == "crossing" else chosen[::3]):
        merged = merge_model(model, point.plan)
        linear = linearize_model(model, point.plan).eval()
        with torch.no_grad():
            ref = linear(x)
            assert float((merged(x) - ref).abs().max() / ref.abs().max()) <= 1e-9


def test_plan_unit_activation_from_the_command_line(luts, tmp_path):
    """`dsprof plan --unit activation`: the front by kept activations, the chosen plan a plan file with ``acts``;
    `dsprof merge` builds it. The block view stays the default (no ``acts`` in its plan file)."""
    from cli_run import dsprof_here

    model = ["--model", NAME, "--depths", "1,1,1,1,1,1,1", "--resolution", str(RES)]
    done = dsprof_here("plan", "--lut", str(luts["cheap"]), *model, "--unit", "activation", "--max-span", "1",
                       "--keep", "7", "--out", str(tmp_path / "front.json"))
    assert done.returncode == 0, done.stderr
    plan = Plan.from_json((tmp_path / "front.plan.json").read_text())
    assert kept_activations(plan.acts) == 7
    shown = " ".join("".join(map(str, a)) for a in plan.acts)  # the table shows each block's activations
    assert "activations kept" in done.stdout and any(line.startswith(" 7 ") and shown in line
                                                     for line in done.stdout.splitlines())
    front = json.loads((tmp_path / "front.json").read_text())
    assert [p["k"] for p in front["points"]] == list(range(14)) and all("acts" in p for p in front["points"])
    done = dsprof_here("merge", *model, "--plan", str(tmp_path / "front.plan.json"), "--out", str(tmp_path / "m.pt"))
    assert done.returncode == 0, done.stderr
    done = dsprof_here("plan", "--lut", str(luts["cheap"]), *model, "--max-span", "1", "--keep", "3",
                       "--out", str(tmp_path / "blocks.json"))
    assert done.returncode == 0, done.stderr
    assert "acts" not in json.loads((tmp_path / "blocks.plan.json").read_text())


@pytest.fixture(scope="module")
def full_lut(tmp_path_factory):
    """MobileNetV2 as built (17 blocks, 33 removable activations) at 32 px: originals, merged, linear and the partial
    states, the whole model; medians from the rule."""
    d = tmp_path_factory.mktemp("actplan-full")
    result = measure(ModelRef.of(NAME, resolution=RES), settings=BackendSettings(threads=1),
                     workloads=Workloads(variants=("original", "merged", "linear", *FUSED),
                                         model_variants=("original",)),
                     timing=TWO, out=d / "m.jsonl", progress=False)
    build_lut([result.path]).save(d / "lut.csv")
    ruled = rule_lut(d / "lut.csv", [result.path])
    frame = ruled.to_dataframe()
    frame.loc[frame["variant"].isin(FUSED), "median_s"] *= 0.3  # partial states cheap enough to be chosen
    LUT(frame, str(d / "cheap.csv")).save(d / "cheap.csv")
    frame.loc[frame["variant"] == "crossing", "median_s"] *= 0.05  # crossing spans cheaper still: chosen
    LUT(frame, str(d / "crossing.csv")).save(d / "crossing.csv")
    return {"rule": d / "lut.csv", "cheap": d / "cheap.csv", "crossing": d / "crossing.csv"}


@pytest.mark.parametrize("which", ["rule", "cheap"])
def test_the_check_on_mobilenet_v2(full_lut, which):
    """Issue #47's check on MobileNetV2 itself: at every number of kept activations that a block-front plan keeps,
    the activation front is never slower (predicted), and where it keeps no partial block it is that same front."""
    prices = prices_of(ModelRef.of(NAME, resolution=RES), full_lut[which])
    counts = [1] + [2] * 16
    full, pricing = ModelRef.of(NAME, resolution=RES), Pricing(max_span=1)
    blocks = plan_front(full, full_lut[which], pricing=pricing, prices=prices)
    acts = plan_front_acts(full, full_lut[which], pricing=pricing, prices=prices)
    whole = {p.k: p.latency_s for p in plan_front_acts(full, full_lut[which], pricing=pricing, prices=prices,
                                                       partial=False).points}
    by_k = {p.k: p for p in acts.points}
    assert sorted(by_k) == list(range(34))
    partial = 0
    for point in blocks.points:
        k_acts = sum(n for n, keep in zip(counts, point.plan.keep) if keep)
        assert by_k[k_acts].latency_s <= point.latency_s * (1 + 1e-12)
        assert min(whole[a] for a in (2 * point.k, 2 * point.k - 1) if a in whole) == pytest.approx(point.latency_s,
                                                                                                   rel=1e-12)
        if any(any(a) and not all(a) for a in by_k[k_acts].plan.acts):
            partial += 1
            assert by_k[k_acts].latency_s < point.latency_s
        else:
            assert by_k[k_acts].latency_s == pytest.approx(whole[k_acts], rel=1e-12)
    assert (partial > 0) == (which == "cheap")


def test_unit_refusals(luts):
    import dsprof
    from dsprof.errors import UsageError

    with pytest.raises(UsageError, match="counts one of block, activation"):
        dsprof.plan(dsprof.ModelRef.of(NAME, options=OPTIONS, resolution=RES), luts["rule"], unit="act")
    with pytest.raises(UsageError, match="without importance"):
        dsprof.plan(dsprof.ModelRef.of(NAME, options=OPTIONS, resolution=RES), luts["rule"], unit="activation",
                    importance=[0.1] * 7)


def test_a_block_without_activations_is_deployed_as_the_planner_priced_it(tmp_path):
    """timm's EfficientNet-B0 ends in a block with no removable activation: its last projection (no activation after
    it) and the head's 1x1 convolution, whose activation stays (a tail). Its ``acts`` are [] kept or linearised, so the
    plan must say which in ``keep``. With that block's linearised and merged entries made 3x dearer, the DP keeps it at
    every k; each front plan, as written, must be priced what the front quotes for it."""
    ref = ModelRef.of("efficientnet_b0", resolution=32)
    result = measure(ref, settings=BackendSettings(threads=1),
                     workloads=Workloads(variants=("original", "merged", "linear"), model_variants=("original",)),
                     timing=TWO, out=tmp_path / "m.jsonl", progress=False)
    build_lut([result.path]).save(tmp_path / "lut.csv")
    frame = rule_lut(tmp_path / "lut.csv", [result.path]).to_dataframe()
    prices = prices_of(ref, tmp_path / "lut.csv")
    counts = [layout.n_acts for layout in act_layouts(prices.blocks)]
    assert len(counts) == 17 and counts[-1] == 0 and all(c == 1 for c in counts[:-1])  # 16 MBConv chains, then it
    last = prices.blocks[-1].spec.to_str()
    frame.loc[(frame["workload"] == last) & frame["variant"].isin(("merged", "linear")), "median_s"] *= 3
    LUT(frame, str(tmp_path / "dear.csv")).save(tmp_path / "dear.csv")
    prices = prices_of(ref, tmp_path / "dear.csv", method="isolated")
    front = plan_front_acts(ref, tmp_path / "dear.csv", pricing=Pricing(method="isolated"), prices=prices)
    assert [p.k for p in front.points] == list(range(17))  # 0..16 activations
    for point in front.points:
        assert point.plan.acts[-1] == () and point.plan.keep[-1] == 1  # kept, as priced
        assert predict_plan(prices, point.plan).total_s == pytest.approx(point.latency_s, rel=1e-9)


def test_a_keep_beyond_the_activations_says_activations(luts):
    """On a front of single activations k counts activations (the tiny MobileNetV2: 1 + 6 x 2 = 13), and a refusal
    says so, not "blocks"."""
    front = plan_front_acts(REF, luts["rule"], pricing=Pricing(max_span=2), prices=_prices(luts["rule"]))
    assert front.choose(keep=13).k == 13 and front.choose(keep=0.5).k == 7  # floor(6.5 + 0.5)
    with pytest.raises(UsageError) as caught:
        front.choose(keep=14)
    assert str(caught.value) == ("`keep=14` activations, but a plan keeps 0 to 13 of them; give `keep=` in 0..13, or a fraction "
                                 "in [0, 1]")


# Blocks 1 and 2 of the 7-block model as a crossing span: block 1 (16 -> 96 -> 24, depthwise stride 2, at 16x16) keeps
# its expansion's ReLU6, block 2 (24 -> 144 -> 32, depthwise stride 2, at 8x8) its depthwise's. It deploys block 1's
# expansion, one dense convolution 96 -> 144 (kernel 1 + 2 + 2 * 2 = 7, stride 4, to 4x4) and block 2's projection.
B2_ORIGINAL = 64 * 24 * 144 + 16 * 144 * 9 + 16 * 144 * 32  # 315 648
CROSSING_1_2 = 256 * 16 * 96 + 16 * 96 * 144 * 49 + 16 * 144 * 32  # 11 304 960
# Block 1 keeping both its activations, block 2 its depthwise's: block 1's expansion and depthwise as built, its
# projection with block 2's expansion and depthwise one dense 3x3 stride-2 convolution 96 -> 144 (to 4x4), block 2's
# projection.
KEPT_1_2 = 256 * 16 * 96 + 64 * 96 * 9 + 16 * 96 * 144 * 9 + 16 * 144 * 32  # 2 512 896
# Both keeping all: block 1's projection and block 2's expansion one 1x1 96 -> 144 at 8x8 (a layer merge).
KEPT_1_2_ALL = 256 * 16 * 96 + 64 * 96 * 9 + 64 * 96 * 144 + 16 * 144 * 9 + 16 * 144 * 32  # 1 427 712
# Block 1 in fused-expand's state (its depthwise's ReLU6 kept), block 2 in fused-project's (its expansion's): block 1's
# expansion and depthwise one dense 3x3 stride-2 16 -> 96 (to 8x8), its projection with block 2's expansion one 1x1
# 96 -> 144 at 8x8, block 2's depthwise and projection one dense 3x3 stride-2 144 -> 32 (to 4x4).
ENDS_1_2 = 64 * 96 * 16 * 9 + 64 * 96 * 144 + 16 * 32 * 144 * 9  # 2 433 024


def test_crossing_spans_are_timed_and_priced(luts):
    """``measure --spans 2`` with the partial variants also times the crossing spans of two blocks as they deploy
    (variant ``crossing``): for each pair of blocks, each in any of its states (no block of this model has a skip
    connection), not both linearised; block 0 has one activation (linearised or kept), the others two (four states):
    2 * 4 - 1 + 5 * (4 * 4 - 1) = 82. Priced from its entry as a span is, whatever its ends keep (one rule: the entry
    covers its blocks whole): the model's price less blocks 1 and 2's originals, plus its entry (one call fewer)."""
    frame = LUT.load(luts["rule"]).to_dataframe()
    crossing = frame[frame["variant"] == "crossing"]
    assert len(crossing) == 82
    prices = _prices(luts["rule"], "isolated")
    everything = predict_plan(prices, Plan(NAME, (1,) * 7, OPTIONS)).total_s
    from dsprof.lut.pricer import Pricer
    # partial ends; an end that keeps all its activations, a first block in fused-expand's state, a last in
    # fused-project's: timed and priced by the same rule
    for ends, macs in (([(1, 0), (0, 1)], CROSSING_1_2), ([(1, 1), (0, 1)], KEPT_1_2), ([(1, 1), (1, 1)], KEPT_1_2_ALL),
                       ([(0, 1), (1, 0)], ENDS_1_2)):
        plan = Plan.from_acts(NAME, [(1,), *ends] + [(1, 1)] * 4, options=OPTIONS, spans=[(1, 3)])
        (piece,) = [p for p in prices.pieces(plan) if p.stop - p.start > 1]
        assert (piece.start, piece.stop, piece.variant, piece.kept, piece.missing) == (1, 3, "crossing", True, None)
        assert piece.latency_s == pytest.approx(OVERHEAD_S + S_PER_MAC * macs, rel=1e-12)
        assert predict_plan(prices, plan).total_s - everything == pytest.approx(
            S_PER_MAC * (macs - B1_ORIGINAL - B2_ORIGINAL) - OVERHEAD_S, rel=1e-9)
        assert Pricer(prices).price(plan).latency_s == pytest.approx(predict_plan(prices, plan).total_s, rel=1e-12)


def test_a_crossing_span_the_lut_lacks_is_named(luts):
    """A crossing span that is not timed (three blocks, in a LUT measured with spans of two: block 1's projection,
    block 2 linearised, block 3's expansion) is named as a missing entry, never priced as the span of whole blocks."""
    prices = _prices(luts["rule"], "isolated")
    plan = Plan.from_acts(NAME, [(1,), (1, 1), (0, 0), (1, 1)] + [(1, 1)] * 3, options=OPTIONS, spans=[(1, 4)])
    (crossing,) = [p for p in prices.pieces(plan) if p.missing]
    assert (crossing.start, crossing.stop, crossing.kept) == (1, 4, True)
    assert "crossing span of blocks" in crossing.missing and "[1, 1] [0, 0] [1, 1]" in crossing.missing
    with pytest.warns(UserWarning, match="crossing span"):
        prediction = predict_plan(prices, plan)
    assert prediction.missing and "crossing span" in prediction.missing[0]


def test_an_end_state_the_lut_lacks_is_named_and_not_planned(luts, tmp_path):
    """A LUT that lacks a crossing span's entry in one end state (here: timed before such ends were, block 1 in
    fused-expand's state and block 2 in fused-project's dropped): a plan using it names that one entry, in one line,
    and the planner does not offer it (its other crossings of blocks 1-2 stay)."""
    from dsprof.planning.activations import crossing_choices

    ends = [(1,), (0, 1), (1, 0)] + [(1, 1)] * 4
    path = _without_crossings(luts["rule"], tmp_path / "lacking.csv",
                              lambda span, acts: (span, acts) == ((1, 3), tuple(ends[1:3])))
    prices = _prices(path, "isolated")
    plan = Plan.from_acts(NAME, ends, options=OPTIONS, spans=[(1, 3)])
    (crossing,) = [p for p in prices.pieces(plan) if p.missing]
    assert (crossing.start, crossing.stop, crossing.kept) == (1, 3, True)
    assert "\n" not in crossing.missing
    assert re.fullmatch(r"crossing span of blocks 1-2 \(activations \[0, 1\] \[1, 0\]\) \S+ \[crossing\]",
                        crossing.missing)
    offered = {(piece.start, acts) for piece, acts in crossing_choices(prices, 2).values()}
    assert (1, ((0, 1), (1, 0))) not in offered and len(offered) == 82 - 1


#: The two-block spans the brute force below may cross (`test_the_front_with_crossings_is_every_plans_best`).
CROSSING_PAIRS = ((0, 2), (2, 4))


def _without_crossings(path, out, drop):
    """The LUT at ``path`` without the crossing entries of the candidates ``(span, acts of its blocks)`` that ``drop``
    picks, saved at ``out``; the entries dropped are those the crossing's key names (one per candidate here)."""
    from dsprof.merging.partial import crossing_spec
    from dsprof.records.activations import crossing_candidates

    blocks = _prices(path).blocks
    kept = [(1,) * n for n in COUNTS]
    keys = {crossing_spec(blocks, kept[:a] + list(acts) + kept[b:], (a, b)).to_str()
            for (a, b), acts in crossing_candidates(act_layouts(blocks), 2) if drop((a, b), acts)}
    frame = LUT.load(path).to_dataframe()
    gone = (frame["variant"] == "crossing") & frame["workload"].isin(keys)
    assert gone.sum() == len(keys)
    LUT(frame[~gone], str(out)).save(out)
    return out


def _span_sets(acts, i=0):
    """Every set of two-block spans a plan with ``acts`` may hold when crossing spans are offered over
    `CROSSING_PAIRS` only: a span of two linearised blocks anywhere, and over those pairs blocks in any state (no block
    of the model has a skip connection: each is the first of its stage)."""
    if i >= len(acts) - 1:
        yield []
        return
    yield from _span_sets(acts, i + 1)
    if (i, i + 2) in CROSSING_PAIRS or not (any(acts[i]) or any(acts[i + 1])):
        for rest in _span_sets(acts, i + 2):
            yield [(i, i + 2)] + rest


def test_the_front_with_crossings_is_every_plans_best(luts, tmp_path):
    """Brute force over all 38,562 plans of the seven-block model with spans of two blocks whose crossing spans lie
    over blocks 0-1 and 2-3 (every activation state of every block, and every set of spans its states allow), each
    priced by predict's pieces on both LUTs (the plans built once), the LUTs without the other crossing entries (so the
    DP is offered exactly these): the DP's fastest plan at each number of kept activations is the cheapest of them all.
    On the LUT whose crossing spans are cheap, the front uses them, ends that keep all among them, and ends in the
    partial state on the other side (a first block in fused-expand's, a last in fused-project's).

    Why those two pairs: every pair may cross now (each block's four states may end a span on either side), which
    makes 2 * 4^6 states times 21 span sets (the ways to place disjoint pairs on a path of seven) = 172,032 plans,
    too slow for the suite. Blocks 0-1 and 2-3 still hold every end state: block 0 linearised or kept as a first, block
    2 in each of its four states as a first, blocks 1 and 3 in each of theirs as a last (and two crossings that meet).

    The count, by hand: walking the blocks, let a_s be the plans of blocks 0..i with block i in state s and not yet in
    a span, b_s those with block i ending a span, T their sum. Block 0: a = 1 for each of its 2 states, T = 2. Block
    1 (a crossing pair: any states): a = 2 and b = 2 for each of 4 states, T = 16. Block 2 (only a span of two
    linearised blocks): a = 16 each, b = 2 for (0, 0) (block 1's a), T = 66. Block 3 (a crossing pair): a = 66 and
    b = 4 * 16 = 64 each, T = 520. Blocks 4, 5, 6: T = 4 T + a_(0, 0) of the block before: 4 * 520 + 66 = 2146,
    4 * 2146 + 520 = 9104, 4 * 9104 + 2146 = 38,562."""
    which = ("rule", "crossing")
    paths = {w: _without_crossings(luts[w], tmp_path / f"{w}.csv", lambda span, acts: span not in CROSSING_PAIRS)
             for w in which}
    prices = {w: _prices(paths[w]) for w in which}
    best: dict[str, dict[int, float]] = {w: {} for w in which}
    states = [[(1,), (0,)]] + [[(1, 1), (0, 1), (1, 0), (0, 0)]] * 6
    n = 0
    for acts in itertools.product(*states):
        k = kept_activations(acts)
        for spans in _span_sets(acts):
            plan = Plan.from_acts(NAME, acts, options=OPTIONS, spans=spans or None)
            for w in which:
                total = prices[w].total_s(prices[w].pieces(plan))
                best[w][k] = min(best[w].get(k, math.inf), total)
            n += 1
    assert n == 38_562
    for w in which:
        front = plan_front_acts(REF, paths[w], pricing=Pricing(max_span=2), prices=prices[w])
        assert [p.k for p in front.points] == list(range(0, 14))
        crossing, kept_end, partial_end = 0, 0, 0
        for point in front.points:
            assert kept_activations(point.plan.acts) == point.k
            assert prices[w].total_s(prices[w].pieces(point.plan)) == pytest.approx(best[w][point.k], rel=1e-12,
                                                                                    abs=1e-15)
            assert predict_plan(prices[w], point.plan).total_s == pytest.approx(point.latency_s, rel=1e-9)
            spans = [s for s in point.plan.spans or () if any(map(any, point.plan.acts[s[0]:s[1]]))]
            crossing += len(spans)
            kept_end += sum(1 for s in spans for i in (s[0], s[1] - 1) if all(point.plan.acts[i]))
            partial_end += sum(1 for a, b in spans if point.plan.acts[a] == (0, 1) or point.plan.acts[b - 1] == (1, 0))
        if w == "crossing":
            assert crossing > 0 and kept_end > 0 and partial_end > 0
