"""Blocks of more than two removable activations at the level of activations (issue #47, item 2): every partial
state of such a block named (``fused-`` and its kept activations), deployed exactly, timed by `measure`, priced,
counted right and planned; the DP checked against every plan of a two-block model (brute force).

The model is tests/models/three.py: a stem, then two blocks conv 1x1 8 -> 16, depthwise 3x3, conv 1x1 16 -> 16,
conv 1x1 16 -> 8 (BatchNorm after each, ReLU after the first three: three removable activations), an identity
skip, at 16x16 (32 px input). The MACs below are worked by hand from that reading. The LUT is real (measured,
built), its medians rewritten by tests/rule_lut.py's rule (200 us a call + 0.1 ns a MAC); a second one makes the
partial states cheap (x 0.3).
"""

from __future__ import annotations

import copy
import itertools
import math
from pathlib import Path

import pytest
import torch
from torch import nn

from conftest import randomise_bn
from dsprof.fields import check_token
from dsprof.lut import LUT, Pricing, build_lut
from dsprof.lut.predict import prices_of
from dsprof.merging import linearize_model, merge_model
from dsprof.merging.partial import act_layouts
from dsprof.models import ModelRef, block_module, find_blocks, get_model
from dsprof.models.user_model import register_model_file
from dsprof.planning.activations import act_choices, act_count, crossing_choices, plan_front_acts
from dsprof.profiler import BackendSettings, Workloads, measure
from dsprof.profiler.workloads import block_workloads, deployed_partial
from dsprof.records.activations import is_partial_variant, kept_activations, partial_states, partial_variant
from dsprof.records.plan import Plan
from rule_lut import OVERHEAD_S, S_PER_MAC, rule_lut
from fast_timing import FAST

pytestmark = pytest.mark.usefixtures("one_thread")

FILE = str(Path(__file__).parent / "models" / "three.py") + ":net"
PLAIN = FILE[:-len("net")] + "plain"  # the same blocks without their skips: crossing spans
RES = 32
# At 16x16 (256 positions): 1x1 8 -> 16: 32 768; depthwise 3x3 on 16: 36 864; 1x1 16 -> 16: 65 536; 1x1 16 -> 8:
# 32 768; a dense 3x3 8 -> 16 or 16 -> 8: 294 912; a dense 3x3 16 -> 16: 589 824.
ORIGINAL = 32_768 + 36_864 + 65_536 + 32_768  # 167 936
STATE_MACS = {  # state (1 = kept) -> the runs cut at kept activations, each merged into one convolution
    (0, 0, 1): 294_912 + 32_768,  # (1x1, dw, 1x1) -> dense 3x3 8 -> 16; the projection alone
    (0, 1, 0): 294_912 + 32_768,  # (1x1, dw) -> dense 3x3 8 -> 16; (1x1, 1x1) -> 1x1 16 -> 8
    (0, 1, 1): 294_912 + 65_536 + 32_768,  # (1x1, dw) -> dense 3x3; the two 1x1s alone
    (1, 0, 0): 32_768 + 294_912,  # the expansion alone; (dw, 1x1, 1x1) -> dense 3x3 16 -> 8
    (1, 0, 1): 32_768 + 589_824 + 32_768,  # (dw, 1x1) -> dense 3x3 16 -> 16
    (1, 1, 0): 32_768 + 36_864 + 32_768,  # (1x1, 1x1) -> 1x1 16 -> 8
}
ACTS = (2, 5, 8)  # the ReLUs' indices in a block's ``body``


@pytest.fixture(scope="module")
def name():
    return register_model_file(FILE)


@pytest.fixture(scope="module")
def plain():
    return register_model_file(PLAIN)


def _model(name):
    return get_model(name, resolution=RES)


def test_the_states_of_a_three_activation_block_are_named_and_counted(name):
    blocks = find_blocks(_model(name))
    layouts = act_layouts(blocks)
    assert [lay.n_acts for lay in layouts] == [3, 3]
    states = partial_states(layouts[0])
    assert states == {f"fused-{''.join(map(str, s))}": s for s in sorted(STATE_MACS)}  # 2^3 - 2, in counting order
    for variant, acts in states.items():
        assert partial_variant(layouts[0], acts) == variant and is_partial_variant(variant)
        assert check_token(variant, "variant") == variant  # a LUT file's variant may hold it
    assert partial_variant(layouts[0], (1, 1, 1)) is None and partial_variant(layouts[0], (0, 0, 0)) is None
    for word in ("fused-expand", "fused-project"):  # the two-activation names stay
        assert is_partial_variant(word)
    for word in ("fused-inner", "fused-01", "fused-012", "merged", "crossing", "fused-1111111"):
        assert not is_partial_variant(word)
    # measure's workloads: each partial state once per block (asked by either two-activation name), MACs by hand
    groups = block_workloads(_model(name), ("original", "fused-expand", "fused-project"), blocks=blocks)
    for group in groups:
        macs = {w.variant: w.macs for w in group}
        assert macs == {"original": ORIGINAL, **{partial_variant(layouts[0], s): m for s, m in STATE_MACS.items()}}


def _reference(block: nn.Module, acts) -> nn.Module:
    """The block with the activations ``acts`` marks 0 replaced by nn.Identity; where the expansion's is removed, in
    the padding-in-front form that a plan's default border deploys (docs/merging.md): the expansion runs over the
    input padded by one, the depthwise without padding."""
    ref = copy.deepcopy(block)
    for keep, index in zip(acts, ACTS):
        if not keep:
            ref.body[index] = nn.Identity()
    if not acts[0]:
        ref.body[0] = nn.Sequential(nn.ZeroPad2d(1), ref.body[0])
        ref.body[3].padding = (0, 0)
    return ref


def test_each_state_deploys_exactly(name):
    """Each partial state as deployed (BatchNorm folded, runs merged: what `measure` times) equals the block with
    those activations replaced by nn.Identity (`_reference`), in float64; and so does merge_model of a plan keeping
    a different state in each block."""
    torch.manual_seed(0)
    model = randomise_bn(_model(name)).double().eval()
    blocks = find_blocks(model)
    x = torch.randn(2, 8, 16, 16, dtype=torch.float64)
    for acts in STATE_MACS:
        ref = _reference(block_module(model, blocks[0].name), acts)
        deployed = deployed_partial(blocks[0], acts).double()
        with torch.no_grad():
            want = ref(x)
            assert float((deployed(x) - want).abs().max() / want.abs().max()) <= 1e-9, acts
    for states in (((0, 1, 0), (1, 0, 1)), ((1, 1, 0), (0, 0, 1))):
        plan = Plan.from_acts(name, states, merge=(False, False))
        ref = copy.deepcopy(model)
        for b, acts in zip((3, 4), states):
            ref[b] = _reference(ref[b], acts)
        image = torch.randn(2, 3, RES, RES, dtype=torch.float64)
        with torch.no_grad():
            want = ref(image)
            assert float((merge_model(model, plan)(image) - want).abs().max() / want.abs().max()) <= 1e-9, states


@pytest.fixture(scope="module")
def luts(tmp_path_factory, name, plain):
    """{(model file, which): LUT path}: each model measured (its blocks, spans of two and crossing spans), its LUT
    rewritten by the rule ("rule") and with the partial states x 0.3 ("cheap")."""
    out = {}
    for file in (FILE, PLAIN):
        d = tmp_path_factory.mktemp("three")
        result = measure(ModelRef.of(file, resolution=RES), settings=BackendSettings(threads=1),
                         workloads=Workloads(variants=("original", "merged", "linear", "fused-expand",
                                                       "fused-project"), model_variants=("original",), spans=2),
                         timing=FAST, out=d / "m.jsonl", progress=False)
        build_lut([result.path]).save(d / "lut.csv")
        frame = rule_lut(d / "lut.csv", [result.path]).to_dataframe()
        frame.loc[frame["variant"].map(is_partial_variant), "median_s"] *= 0.3
        LUT(frame, str(d / "cheap.csv")).save(d / "cheap.csv")
        out[file, "rule"], out[file, "cheap"] = d / "lut.csv", d / "cheap.csv"
    return out


def _prices(path, method="isolated", file=FILE):
    return prices_of(ModelRef.of(file, resolution=RES), path, method=method)


def test_a_measured_lut_holds_every_state_and_prices_it(luts, name):
    frame = LUT.load(luts[FILE, "rule"]).to_dataframe()
    fused = frame[frame["variant"].map(is_partial_variant)]
    # each state once: the two blocks are alike, so share their keys
    assert sorted(fused["variant"]) == [f"fused-{''.join(map(str, s))}" for s in sorted(STATE_MACS)]
    prices = _prices(luts[FILE, "rule"])
    for acts, macs in STATE_MACS.items():
        plan = Plan.from_acts(name, [acts, (1, 1, 1)])
        piece, _ = prices.pieces(plan)
        assert piece.missing is None and piece.kept and piece.variant == partial_variant(act_layouts(prices.blocks)[0], acts)
        assert piece.latency_s == pytest.approx(OVERHEAD_S + S_PER_MAC * macs, rel=1e-12)
    counts = act_count(prices)
    _, partial = act_choices(prices, 1)
    assert sorted((p.start, counts(p)) for p in partial) == sorted((b, sum(s)) for b in (0, 1) for s in STATE_MACS)


def _brute_force(prices, name, spans):
    """{kept activations: the lowest total of any plan with that many}: every state of each block (8 x 8), each
    linearised block deployed the cheaper way, and with ``spans``, both blocks as one span too (a span of linearised
    blocks, or a crossing span where the blocks have no skip; a plan with a piece the LUT lacks is no candidate)."""
    best: dict[int, float] = {}
    states = list(itertools.product((0, 1), repeat=3))
    for acts in itertools.product(states, states):
        plans = [Plan.from_acts(name, acts)] + ([Plan.from_acts(name, acts, spans=[(0, 2)])] if spans else [])
        for plan in plans:
            pieces = prices.pieces(plan)
            if any(p.missing for p in pieces):  # not timed (a span that cannot cross a skip): not a candidate
                continue
            total = prices.total_s(pieces)
            k = kept_activations(acts)
            best[k] = min(best.get(k, math.inf), total)
    return best


@pytest.mark.parametrize("file", [FILE, PLAIN], ids=["skip", "plain"])
@pytest.mark.parametrize("which", ["rule", "cheap"])
@pytest.mark.parametrize("max_span", [1, 2])
def test_the_activation_front_is_every_plans_best(luts, name, plain, file, which, max_span):
    """The DP's fastest plan at each number of kept activations is the cheapest of all 64 `acts` plans (and, with
    spans, each with the span of both blocks), and prices at what the DP says."""
    prices = _prices(luts[file, which], "auto", file)
    front = plan_front_acts(ModelRef.of(file, resolution=RES), luts[file, which], pricing=Pricing(max_span=max_span),
                            prices=prices)
    best = _brute_force(prices, name if file == FILE else plain, max_span > 1)
    assert [p.k for p in front.points] == list(range(0, 7))
    for point in front.points:
        assert kept_activations(point.plan.acts) == point.k
        assert prices.total_s(prices.pieces(point.plan)) == pytest.approx(best[point.k], rel=1e-12, abs=1e-15)
        assert point.latency_s == pytest.approx(best[point.k], rel=1e-9)
    partial = [p for p in front.points if any(any(a) and not all(a) for a in p.plan.acts)]
    assert partial  # fused-110 has fewer MACs than the original: chosen under the rule too
    assert not any("partial states" in limit for limit in front.limits)  # the LUT holds them all
    if file == PLAIN and max_span > 1:  # crossing spans chosen, some with an end block in a partial state
        crossing = [p.plan.acts for p in front.points if p.plan.spans and any(map(any, p.plan.acts))]
        assert any(any(a) and not all(a) for acts in crossing for a in acts)


def test_crossing_spans_of_three_activation_blocks(luts, plain):
    """Without skips, the two blocks cross in every pair of end states the planner offers (each block linearised, in
    one of its six partial states or keeping all: 8 x 8, less both linearised, which is a span of blocks): 63,
    all timed and priced by the measured LUT, and each merges exactly (float64, against the linearised model)."""
    prices = _prices(luts[PLAIN, "rule"], file=PLAIN)
    choices = crossing_choices(prices, 2)
    assert len(choices) == 63
    assert {acts for _, acts in choices.values()} == {
        (a, b) for a in itertools.product((0, 1), repeat=3) for b in itertools.product((0, 1), repeat=3)
        if any(a) or any(b)}
    torch.manual_seed(0)
    model = randomise_bn(get_model(plain, resolution=RES)).double().eval()
    image = torch.randn(2, 3, RES, RES, dtype=torch.float64)
    for _, acts in list(choices.values())[::4]:
        plan = Plan.from_acts(plain, acts, spans=[(0, 2)], merge=tuple(not any(a) for a in acts))
        (piece,) = prices.pieces(plan)
        assert (piece.variant, piece.missing) == ("crossing", None)
        with torch.no_grad():
            want = linearize_model(model, plan).eval()(image)
            assert float((merge_model(model, plan)(image) - want).abs().max() / want.abs().max()) <= 1e-9, acts
