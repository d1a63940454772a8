"""The searches that choose through the planner (issue #20, item 5): importance -> planner front plan."""

from __future__ import annotations

import re

import pytest

from dsprof.errors import InputFileError, LUTMissError, UsageError
from dsprof.lut import LUT, Pricing, build_lut, predict_latency
from dsprof.records.plan import Plan
from dsprof.planning import LatencyBudget, plan_front
from dsprof.profiler import Workloads, measure
from dsprof.models import ModelRef
from dsprof.search import TrainConfig, TrainRun, search
from rule_lut import rule_lut
from fast_timing import FAST

pytestmark = pytest.mark.usefixtures("one_thread")
TINY = {"width": 0.35, "depths": [1] * 7}  # 7 blocks, one run of spannable blocks
RES = 32
MAX_SPAN = 2
ONE_STEP = TrainConfig(epochs=1, batch_size=16, max_batches=1, max_eval_batches=2, seed=3)
TINY_REF = ModelRef.of("mobilenet_v2", options=TINY, resolution=RES)
CPU = TrainRun(device="cpu")


def _lut(tmp, spans: int):
    """A real LUT of the tiny model on this CPU (short timing): block variants and spans up to ``spans``, with the
    medians of tests/rule_lut.py's rule (the planner's front must not hang on a busy machine's clock)."""
    result = measure(ModelRef.of("mobilenet_v2", options=TINY, resolution=RES),
                     workloads=Workloads(variants=("original", "merged", "linear"), model_variants=("original",), spans=spans),
                     timing=FAST, out=tmp / f"tiny-{spans}.jsonl", progress=False)
    path = build_lut([result.path]).save(tmp / f"tiny-{spans}.csv")
    rule_lut(path, result.path)
    return path


@pytest.fixture(scope="module")
def lut(tmp_path_factory):
    return _lut(tmp_path_factory.mktemp("search-planner"), MAX_SPAN)


def _front(lut, importance=None):
    return plan_front(ModelRef.of("mobilenet_v2", options=TINY, resolution=RES), lut,
                      pricing=Pricing(max_span=MAX_SPAN), importance=importance)


def _same_plan(a: Plan, b: Plan) -> None:
    assert (a.keep, a.merge, a.spans) == (b.keep, b.merge, b.spans)


def test_importance_search_returns_the_planners_front_plan_for_its_importance(lut, tmp_path):
    out = tmp_path / "plan.json"
    found = search(TINY_REF, keep=3, data="digits", run=CPU, lut=lut, pricing=Pricing(max_span=MAX_SPAN),
                   config=ONE_STEP, out=out)  # the default method: importance
    drops = found.scores
    assert len(drops) == 7 and found.plan.search["method"] == "importance"
    # the planner's plan of least summed importance with 3 blocks keeping activations, for the measured importance
    expected = _front(lut, drops).choose(keep=3)
    _same_plan(found.plan, expected.plan)
    _same_plan(Plan.from_json(out.read_text()), expected.plan)
    # independently of the planner: the kept blocks are a top 3 of the importance (ties in any order)
    kept = [d for d, k in zip(drops, found.plan.keep) if k]
    linearised = [d for d, k in zip(drops, found.plan.keep) if not k]
    assert len(kept) == 3 and min(kept) >= max(linearised), (drops, found.plan.keep)
    # the latency it reports is `dsprof predict`'s for that plan
    planner = found.plan.search["planner"]
    assert planner["latency_s"] == pytest.approx(
        predict_latency(ModelRef.of("mobilenet_v2", options=TINY, resolution=RES), lut, found.plan).total_s, rel=1e-12)
    assert planner["max_span"] == MAX_SPAN and planner["front"]


def test_planner_method_takes_k_or_a_budget_without_training(lut):
    front = _front(lut)
    by_k = search(TINY_REF, keep=2, lut=lut, pricing=Pricing(max_span=MAX_SPAN), method="planner")
    _same_plan(by_k.plan, front.at_k(2).plan)
    # a budget between the fastest plans of k = 3 and k = 4: the plan of k = 3 is the most activations within it
    budget_s = (front.at_k(3).latency_s + front.at_k(4).latency_s) / 2
    assert front.at_k(3).latency_s < front.at_k(4).latency_s
    by_budget = search(TINY_REF, lut=lut, pricing=Pricing(max_span=MAX_SPAN), method="planner",
                       budget=LatencyBudget(budget_ms=budget_s * 1e3))
    _same_plan(by_budget.plan, front.choose(budget_s=budget_s).plan)
    assert by_budget.plan.search["planner"]["latency_s"] <= budget_s


def test_a_lut_lacking_a_block_or_a_budget_without_a_lut_fails_before_any_fine_tune(tmp_path):
    no_spans = _lut(tmp_path, 0)
    # a LUT without spans is planned without them (issue #44): the search goes on, to its data
    with pytest.raises(InputFileError, match="no-such-data-dir"):
        search(TINY_REF, keep=3, lut=no_spans, pricing=Pricing(max_span=MAX_SPAN), data="no-such-data-dir",
               config=ONE_STEP, run=CPU)
    frame = LUT.load(no_spans).to_dataframe()
    first = frame[(frame.scope == "block") & (frame.variant == "original")].workload.iloc[0]
    LUT(frame[~((frame.workload == first) & (frame.variant == "original"))]).save(tmp_path / "broken.csv")
    with pytest.raises(LUTMissError, match=f"lacks block {re.escape(first)}"):
        search(TINY_REF, keep=3, lut=tmp_path / "broken.csv", pricing=Pricing(max_span=MAX_SPAN),
               data="no-such-data-dir", config=ONE_STEP, run=CPU)  # data would fail later, if it got there
    with pytest.raises(UsageError, match="give `lut=`"):
        search(TINY_REF, budget=LatencyBudget(budget_ms=1.0), data="no-such-data-dir", run=CPU)
    with pytest.raises(UsageError, match="`method='differentiable'` takes `keep=`"):
        search(TINY_REF, keep=3, budget=LatencyBudget(budget_ms=1.0), method="differentiable")
