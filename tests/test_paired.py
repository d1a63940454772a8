"""`paired_with_original`: a whole model's speed-up over the original timed in its interleaved group, the median of
the per-round ratios (recomputed here from the raw samples of a real profiler run, tests/fixtures/reports); none
for records of two runs."""

from pathlib import Path

import pytest

from dsprof.records.measurement import paired_with_original, read_measurements

FIXTURES = Path(__file__).parent / "fixtures" / "reports"


def _model(records, name):
    return next(r for r in records if r.scope == "model" and r.name == name)


def test_paired_speedup_is_the_median_of_the_rounds_ratios():
    records = read_measurements(FIXTURES / "tiny_onnxruntime.jsonl")
    original, plan = _model(records, "mobilenet_v2"), _model(records, "tiny-ds")
    ratios = sorted(o / p for o, p in zip(original.samples_s, plan.samples_s))
    up = paired_with_original(plan, records)
    assert up.pairs == len(ratios) == 6
    assert up.ratio == pytest.approx((ratios[2] + ratios[3]) / 2, rel=1e-12)
    assert (up.low, up.high) == (ratios[0], ratios[-1])  # under 6 rounds: the full range
    assert up.ratio != pytest.approx(original.median_s / plan.median_s, rel=1e-6)  # paired, not medians' ratio


def test_records_of_two_runs_are_not_paired():
    torch_records = read_measurements(FIXTURES / "tiny_torch.jsonl")
    ort_plan = _model(read_measurements(FIXTURES / "tiny_onnxruntime.jsonl"), "tiny-ds")
    assert paired_with_original(ort_plan, torch_records) is None  # no original timed in its group there
