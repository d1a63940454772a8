"""The block view's k counts only the blocks that have a removable activation (issue #47).

timm's EfficientNet-B0 (the zoo's ``efficientnet_b0``) ends in a block without one: its last projection (no activation
after it) and the head's 1x1 convolution, whose activation stays. Linearised, that block loses nothing; it is merged,
left unmerged or kept as built by price alone, at no cost in k. So its fronts run k = 0..16, not 0..17, and a plan of k
keeps exactly k of the 16 blocks that have an activation.

The LUTs are real (measured at 32 px, built) with their medians from tests/rule_lut.py's rule (200 us a call + 0.1 ns
a MAC), priced ``isolated``, without spans: a plan's latency is then the original's less the savings of the blocks it
linearises, each on its own (docs/planning.md, "One cost of a plan"), so the fastest plan of each k is worked out here
by sorting those savings, independently of the planner's DP. On MobileNetV2 (every block has an activation) the plans
are the ones the architecture gives, as before the change.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from dsprof.errors import BadFileError, UsageError
from dsprof.lut import LUT, Pricing, build_lut
from dsprof.lut.predict import predict_plan, prices_of
from dsprof.merging.partial import act_layouts, with_acts
from dsprof.models import ModelRef, find_blocks
from dsprof.planning.minimax import joint_front
from dsprof.planning.planner import plan_front, top_plans
from dsprof.workflows.plan import plan_to_file
from dsprof.profiler import BackendSettings, Workloads, measure
from rule_lut import rule_lut
from fast_timing import FAST

pytestmark = pytest.mark.usefixtures("one_thread")

EFF = ModelRef.of("efficientnet_b0", resolution=32)
MBV2 = ModelRef.of("mobilenet_v2", options={"depths": [1] * 7}, resolution=32)
ISOLATED = Pricing(method="isolated", max_span=1)
LAST = 16  # EfficientNet-B0's block without a removable activation


def _measured(ref: ModelRef, d) -> tuple:
    result = measure(ref, settings=BackendSettings(threads=1),
                     workloads=Workloads(variants=("original", "merged", "linear"), model_variants=("original",)),
                     timing=FAST, out=d / "m.jsonl", progress=False)
    build_lut([result.path]).save(d / "lut.csv")
    return rule_lut(d / "lut.csv", [result.path]).to_dataframe(), d / "lut.csv"


@pytest.fixture(scope="module")
def eff_luts(tmp_path_factory):
    """The rule's LUT (the last block's merged convolution, 1152 -> 1280, has more MACs than its two 1x1s: 1 474 560
    against 778 240, and its ``linear`` entry the original's: linearising it saves nothing) and one where its merged
    entry is a tenth of its original's (merging it pays)."""
    d = tmp_path_factory.mktemp("actfree")
    frame, rule = _measured(EFF, d)
    last = prices_of(EFF, rule).blocks[LAST].spec.to_str()
    at = lambda variant: (frame["workload"] == last) & (frame["variant"] == variant)  # noqa: E731
    (original,) = frame.loc[at("original"), "median_s"]
    frame.loc[at("merged"), "median_s"] = original / 10
    LUT(frame, str(d / "cheap.csv")).save(d / "cheap.csv")
    return {"rule": rule, "cheap": d / "cheap.csv"}


def _by_hand(prices, k: int) -> tuple[set[int], float]:
    """The fastest plan with k kept blocks that have an activation, from the pieces' savings alone: the 16 - k such
    blocks whose linearising saves most, and the last block linearised iff that saves anything; (the blocks
    linearised, the predicted latency)."""
    saving = {i: prices.linearized(i).saving_s for i in range(len(prices.blocks))}
    bearing = sorted((i for i in saving if i != LAST), key=lambda i: -saving[i])
    gone = set(bearing[:16 - k]) | ({LAST} if saving[LAST] > 0 else set())
    return gone, predict_plan(prices, None).total_s - sum(saving[i] for i in gone)


def test_efficientnet_b0_has_one_block_without_activations():
    """Read from the architecture: 16 MBConv / depthwise-separable blocks with one removable activation each (what
    the block finder takes of each, the chain before its squeeze-excitation gate), then the last projection with the
    head's convolution, none."""
    found = find_blocks(EFF.build())
    assert [lay.n_acts for lay in act_layouts(found)] == [1] * 16 + [0]
    assert with_acts(found) == (True,) * 16 + (False,)


@pytest.mark.parametrize("which", ["rule", "cheap"])
def test_a_keep_k_plan_keeps_exactly_k_blocks_with_activations(eff_luts, which):
    """k = 0..16; each front plan keeps exactly k of the blocks 0..15; the last block is linearised (and merged) iff
    the LUT prices that faster; each plan is the one the savings give by hand, at the latency `predict` shows."""
    prices = prices_of(EFF, eff_luts[which], method="isolated")
    front = plan_front(EFF, eff_luts[which], pricing=ISOLATED, prices=prices)
    assert [p.k for p in front.points] == list(range(17))
    assert front.uncounted == (LAST,) and front.to_dict()["uncounted"] == [LAST]
    assert any("block 16 has no removable activation" in line for line in front.notes())
    with pytest.raises(UsageError) as asked:  # k past the blocks it counts: the refusal says why there are 16
        front.at_k(17)
    assert str(asked.value) == ("k is 0..16 (blocks that keep their activations), got 17; 1 of the 17 blocks has no "
                                "removable activation (linear already), and k does not count it")
    cheap = which == "cheap"
    for point in front.points:
        plan = point.plan
        assert sum(plan.keep[:LAST]) == point.k
        # merged iff that is priced faster; else kept or left unmerged (the same price: its ``linear`` entry is its
        # original's)
        assert plan.merge[LAST] == cheap and (plan.keep[LAST] == 0 or not cheap)
        gone, latency_s = _by_hand(prices, point.k)
        assert point.latency_s == pytest.approx(latency_s, rel=1e-9)
        assert predict_plan(prices, plan).total_s == pytest.approx(latency_s, rel=1e-9)
        assert {i for i, v in enumerate(plan.keep) if not v} == gone  # the rule's savings differ block to block
    # a `keep=` of the 16 counted blocks: a count or a fraction of them; 17 is refused in their count
    assert sum(front.choose(keep=16).plan.keep[:LAST]) == 16
    assert front.choose(keep=0.5).k == 8
    with pytest.raises(UsageError, match=r"`keep=17` blocks, but a plan keeps 0 to 16 of them"):
        front.choose(keep=17)
    # the original keeps every block: as priced (the rule) it is the front's k = 16 plan; with the cheap merge, not
    top = front.at_k(16)
    assert (top.plan.keep == (1,) * 17) == (not cheap)


@pytest.mark.parametrize("which", ["rule", "cheap"])
def test_the_k_best_plans_count_the_same_blocks(eff_luts, which):
    """`top_plans` (the tie-break's candidates) at k = 10: each keeps 10 of the counted blocks; the first is priced
    as the front's plan of that k, worked by hand."""
    prices = prices_of(EFF, eff_luts[which], method="isolated")
    plans = top_plans(prices, 10, 3, max_span=1, model=EFF)
    assert len(plans) == 3 and all(p.k == 10 and sum(p.plan.keep[:LAST]) == 10 for p in plans)
    _, latency_s = _by_hand(prices, 10)
    assert plans[0].latency_s == pytest.approx(latency_s, rel=1e-9)
    assert [p.latency_s for p in plans] == sorted(p.latency_s for p in plans)


def test_one_plan_for_two_contexts_counts_the_same_blocks(eff_luts, tmp_path):
    """The plan for several contexts: the rule's LUT and the same entries under a second context (2 threads), where
    the last block's merged entry is cheap. Its k runs 0..16 like the fronts', and each plan keeps k counted blocks."""
    one = LUT.load(eff_luts["rule"]).to_dataframe()
    two = LUT.load(eff_luts["cheap"]).to_dataframe()
    two["threads"] = 2
    frame = pd.concat([one, two], ignore_index=True)
    LUT(frame, str(tmp_path / "both.csv")).save(tmp_path / "both.csv")
    lut = LUT.load(tmp_path / "both.csv")
    keys = sorted(lut.devices(), key=lambda c: c.threads)
    prices = [prices_of(EFF, lut, device=key, method="isolated") for key in keys]
    fronts = [plan_front(EFF, lut, pricing=ISOLATED, prices=p) for p in prices]
    joint = joint_front(prices, fronts, objective="worst", max_span=1)
    assert [p.k for p in joint.points] == list(range(17))
    for point in joint.points:
        assert sum(point.plan.keep[:LAST]) == point.k
        assert point.worst >= -1e-12  # no plan beats a context's own front plan of its k


def test_mobilenet_v2_plans_are_unchanged(tmp_path):
    """Every block of MobileNetV2 has an activation, so nothing changes: k = 0..7 and the plans the architecture
    gives. At 32 px (one block per stage), what linearising and merging each block alone saves, in MACs (original
    less merged, ``isolated``): block 1 (16 -> 96 -> 24, stride 2 at 16x16) 374 784; block 2 205 056; block 5
    180 288; block 3 80 640; block 4 38 400; block 6 8 640; block 0 (depthwise-separable) nothing (its merged 3x3
    32 -> 16 has more MACs than its depthwise and 1x1). So the front linearises them in that order as k falls."""
    _, path = _measured(MBV2, tmp_path)
    front = plan_front(MBV2, path, pricing=ISOLATED)
    assert front.uncounted == () and not any("no removable activation" in line for line in front.notes())
    expected = {7: "1111111", 6: "1011111", 5: "1001111", 4: "1001101", 3: "1000101", 2: "1000001", 1: "1000000",
                0: "0000000"}
    assert {p.k: "".join(map(str, p.plan.keep)) for p in front.points} == expected
    for point in front.points:  # every block linearised is merged, but block 0 (merging it costs MACs)
        assert point.plan.merge == tuple(not v and i != 0 for i, v in enumerate(point.plan.keep))


def test_a_front_file_with_a_bad_uncounted_list_is_refused(eff_luts, tmp_path):
    """The report reads ``uncounted`` from a front file: a value that is not a list of block indices is refused."""
    from dsprof.reports.front import load_front
    front = plan_front(EFF, eff_luts["rule"], pricing=ISOLATED)
    path = tmp_path / "front.json"
    front.write(path)
    assert load_front(path)["uncounted"] == [LAST]
    for bad in ("16", [-1], [True], [1.5]):
        data = json.loads(path.read_text())
        data["uncounted"] = bad
        path.write_text(json.dumps(data))
        with pytest.raises(BadFileError, match="uncounted"):
            load_front(path)


def test_the_report_places_a_measured_plan_at_the_k_the_front_counts(tmp_path):
    """tests/fixtures/reports: real runs of the 7-block MobileNetV2 at 32 px, the original and the plan tiny-ds (keep
    1010011, timed beside it). In a front whose ``uncounted`` names block 6 (hand-made, as if it had no activation),
    the report places tiny-ds at k = 3 (blocks 0, 2 and 5; block 6 not counted), and the original at k = 6, the
    front's largest k, not at the sums of their keep lists (4 and 7)."""
    from dsprof.records.measurement import read_measurements
    from dsprof.reports import front_tables, load_front

    fixtures = Path(__file__).parent / "fixtures" / "reports"
    records = [r for p in sorted(fixtures.glob("*.jsonl")) for r in read_measurements(p)]
    context = next(r.context for r in records if r.backend == "torch")
    points = [{"k": k, "keep": [1] * k + [0] * (6 - k) + [1], "merge": [0] * 7, "spans": [], "latency_s": 0.003 + k / 1e3,
               "low_s": 0.002, "high_s": 0.012, "speedup": 0.010 / (0.003 + k / 1e3), "importance": None}
              for k in range(7)]
    front = {"format": "dsprof.front", "version": 1, "model": 'mobilenet_v2{"depths":[1,1,1,1,1,1,1],"resolution":32}',
             "name": "mobilenet_v2", "options": {"depths": [1] * 7}, "device": str(context),
             "context": context.as_dict(), "method": "isolated", "max_span": 1, "original_s": 0.010, "points": points,
             "least_loss": None, "pareto": None, "presets": [], "uncounted": [6]}
    path = tmp_path / "front.json"
    path.write_text(json.dumps(front))
    _, _, measured = front_tables(load_front(path), records, {"tiny-ds": fixtures / "tiny-ds.json"})
    assert {row.name: row.k for row in measured.itertuples()} == {"tiny-ds": 3, "original": 6}


@pytest.mark.parametrize("which", ["rule", "cheap"])
def test_a_planner_search_counts_k_as_the_front(eff_luts, which, tmp_path, capsys):
    """`dsprof search --method planner --keep 0.5` on EfficientNet-B0 is the front's k = 8 plan (8 of the 16 counted
    blocks, a fraction of 16), and its line counts as `dsprof plan` does: 8 of 16, block 16 named, whether the plan
    keeps block 16 as built (the rule: its sum of keep is 9) or merges it (the cheap LUT: 8)."""
    from dsprof.cli import main
    from dsprof.records.plan import Plan

    front = plan_front(EFF, eff_luts[which], pricing=Pricing(max_span=1))
    out = tmp_path / "p.json"
    assert main(["search", "--method", "planner", "--model", "efficientnet_b0", "--resolution", "32", "--lut",
                 str(eff_luts[which]), "--max-span", "1", "--keep", "0.5", "--out", str(out)]) == 0
    plan = Plan.from_json(out.read_text())
    assert plan.keep == front.at_k(8).plan.keep and sum(plan.keep[:LAST]) == 8 and plan.search["k"] == 8
    assert plan.keep[LAST] == (0 if which == "cheap" else 1)
    keep = "".join(map(str, plan.keep))
    assert (f"keep {keep} (8 of 16 blocks keep their activations; block 16 has no removable activation: not counted)"
            in capsys.readouterr().out)


def test_a_model_without_a_removable_activation_has_one_plan_and_says_so(tmp_path):
    """timm's VoVNet-19-slim-DW: each of its 14 blocks (read from the architecture: a depthwise and a pointwise
    convolution with no activation between them, the one after them ending the block) is linear already, so its front
    is one plan, k = 0 (which blocks merge), and the chosen line says that, not "k = 0 of 0 blocks"."""
    ref = ModelRef.of("timm:ese_vovnet19b_slim_dw", resolution=32)
    assert [lay.n_acts for lay in act_layouts(find_blocks(ref.build()))] == [0] * 14
    _, lut = _measured(ref, tmp_path)
    planned = plan_to_file(ref, rule_lut(lut, [tmp_path / "m.jsonl"]), keep=0, method="isolated", max_span=1,
                           out=tmp_path / "front")
    assert [p.k for p in planned.front.points] == [0]
    assert planned.chosen_line().startswith("chosen: the one plan (no activation to remove), ")

