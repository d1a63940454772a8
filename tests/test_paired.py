"""`paired_speedup` of two whole-model records: the median of the per-round ratios of one interleaved group
(recomputed here from the raw samples of a real profiler run, tests/fixtures/reports), refused across groups."""

from pathlib import Path

import pytest

from dsprof.errors import UsageError
from dsprof.profiler.paired import paired_speedup
from dsprof.profiler.records import read_measurements

FIXTURES = Path(__file__).parent / "fixtures" / "reports"


def _model(records, name):
    return next(r for r in records if r.scope == "model" and r.name == name)


def test_paired_speedup_is_the_median_of_the_rounds_ratios():
    records = read_measurements(FIXTURES / "tiny_onnxruntime.jsonl")
    original, plan = _model(records, "mobilenet_v2"), _model(records, "tiny-ds")
    ratios = sorted(o / p for o, p in zip(original.samples_s, plan.samples_s))
    up = paired_speedup(original, plan)
    assert up.rounds == len(ratios) == 6
    assert up.speedup == pytest.approx((ratios[2] + ratios[3]) / 2, rel=1e-12)
    assert (up.low, up.high) == (ratios[0], ratios[-1])  # under 6 rounds: the full range
    assert up.speedup != pytest.approx(original.median_s / plan.median_s, rel=1e-6)  # paired, not medians' ratio
    assert paired_speedup(original, original).speedup == 1.0


def test_records_of_two_groups_are_refused():
    torch = _model(read_measurements(FIXTURES / "tiny_torch.jsonl"), "mobilenet_v2")
    ort = _model(read_measurements(FIXTURES / "tiny_onnxruntime.jsonl"), "tiny-ds")
    with pytest.raises(UsageError, match="not timed in one group.*one `dsprof measure` run"):
        paired_speedup(torch, ort)
