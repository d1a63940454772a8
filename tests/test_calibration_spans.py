"""rho measured on the front's plan with spans (issue #46, item 2): where a `measure --calibrate` run measured spans, the
calibration group times the front's k = 0 plan with its spans, and its record names that plan
(`dsprof.records.measurement.calibration_name`), so that the pricing side prices that very plan when it computes
rho = measured saving / predicted saving. A record named after the model alone (every file before) keeps its plan:
every block linearised alone, merged where that is cheaper.

The run is real (a tiny MobileNetV2, PyTorch eager, 32 px, spans of 2). The plan and rho tests rewrite its records'
samples to fixed values (blocks 1 ms, merged 0.8 ms, linear 0.9 ms, the last block's linear 0.7 ms; the span of
blocks a, a+1 merged 1 + 0.01 a ms; stem and head 0.5 ms each; the whole model their sum, 8 ms), so that the front's
k = 0 plan and every saving are known by hand.
"""

import dataclasses
import itertools

import pytest

import dsprof
from dsprof.lut import LUT, build_lut, model_label
from dsprof.lut.inputs import interval_inputs
from dsprof.lut.interval import calibration_of
from dsprof.lut.predict import prices_of
from dsprof.models import ModelRef, get_model
from dsprof.profiler import Workloads
from dsprof.records.measurement import (CALIBRATION, IN_SITU_SCOPE, MeasurementWriter, calibration_name,
                                        calibration_plan, read_measurements)
from dsprof.workflows.calibrate import calibration_workloads
from fast_timing import FAST

pytestmark = pytest.mark.usefixtures("one_thread")
OPTIONS = {"depths": [1] * 7}
N = 7  # one block per stage
NAMES = [f"features.{i + 1}" for i in range(N)]
MS = 1e-3


def _measure(out, **kw):
    return dsprof.measure(ModelRef.of("mobilenet_v2", options=OPTIONS, resolution=32),
                          workloads=Workloads(("original", "merged", "linear"), ("original",), spans=2, calibrate=True),
                          timing=FAST, out=out, progress=False, **kw).run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return _measure(tmp_path_factory.mktemp("calibration-spans") / "m.jsonl")


def _span(r):
    """(start, stop) of a span record (named ``first+last``), else None."""
    if r.scope != "block" or "+" not in r.name:
        return None
    first, last = r.name.split("+")
    return NAMES.index(first), NAMES.index(last) + 1


def _rule_s(r):
    """The fixed value (seconds) of a record (the module docstring's rule)."""
    span = _span(r)
    if span is not None:
        return (1.0 + 0.01 * span[0]) * MS
    if r.scope == "block":
        i = NAMES.index(r.name)
        return {"original": 1.0, "merged": 0.8, "linear": 0.7 if i == N - 1 else 0.9}[r.variant] * MS
    return {"stem": 0.5, "head": 0.5, "model": 8.0}[r.scope] * MS


@pytest.fixture(scope="module")
def ruled(run):
    """The run's blocks, spans, stem, head and whole model (not its calibration groups) at the rule's values."""
    calibration = next(r.group for r in run.measurements if r.variant == CALIBRATION)
    return [dataclasses.replace(r, samples_s=(_rule_s(r),) * len(r.samples_s)) for r in run.measurements
            if r.ok and r.scope in ("block", "stem", "head", "model") and r.group != calibration]


def _best_k0():
    """The k = 0 plan of least latency under the rule, by brute force over every partition of the 7 blocks into
    lone blocks (each the cheaper of merged and linear) and spans of 2: (spans, unmerged lone blocks, saving ms)."""
    lone = [1.0 - min(0.8, 0.7 if i == N - 1 else 0.9) for i in range(N)]
    best = None
    for starts in itertools.product((False, True), repeat=N - 1):
        spans = [(a, a + 2) for a in range(N - 1) if starts[a]]
        inside = [i for a, b in spans for i in range(a, b)]
        if len(inside) != len(set(inside)):
            continue
        saving = sum(2.0 - (1.0 + 0.01 * a) for a, _ in spans) + sum(lone[i] for i in range(N) if i not in inside)
        unmerged = [i for i in range(N) if i not in inside and i == N - 1]  # the last block's linear is cheaper
        if best is None or saving > best[2] + 1e-12:
            best = (tuple(spans), tuple(unmerged), saving)
    return best


def test_the_name_carries_the_plan_and_reads_back():
    name = calibration_name("mobilenet_v2", [(0, 2), (3, 5)], [6, 2])
    assert name == "mobilenet_v2 spans 0-1 3-4 unmerged 2 6"
    assert calibration_plan(name, "mobilenet_v2") == (((0, 2), (3, 5)), (2, 6))
    assert calibration_name("mobilenet_v2", [], [1]) == "mobilenet_v2"  # no spans: the name of every older file
    for old in ("mobilenet_v2", "mobilenet_v2 spans", "mobilenet_v2 spans 1-0", "mobilenet_v2 spans 0-1 unmerged x",
                "mobilenet_v2 spans 0-1 unmerged \u00b2", "mobilenet_v2 spans 0-1 unmerged 1  2", "resnet18 spans 0-1"):
        assert calibration_plan(old, "mobilenet_v2") is None, old


def test_the_calibration_group_times_the_fronts_k0_plan_with_its_spans(run, ruled):
    spans, unmerged, _ = _best_k0()
    assert spans == ((0, 2), (2, 4), (4, 6)) and unmerged == (6,)  # worked by hand: 2.94 + 0.3 ms saved
    net = get_model("mobilenet_v2", resolution=32, **OPTIONS)
    original, calibrated = calibration_workloads(net, "mobilenet_v2", (32, 32), ruled, ruled[0].context, max_span=2)
    assert (original.name, original.variant) == ("mobilenet_v2", "original")
    assert (calibrated.name, calibrated.variant) == ("mobilenet_v2 spans 0-1 2-3 4-5 unmerged 6", CALIBRATION)
    # what it deploys, by its MACs: the stem and head, the three spans' convolutions, the last block linear (each
    # counted on its own workload by the run)
    macs = {(r.scope, _span(r) or r.name, r.variant): r.macs for r in ruled}
    expected = (macs[("stem", "mobilenet_v2", "original")] + macs[("head", "mobilenet_v2", "original")]
                + sum(macs[("block", s, "merged")] for s in spans) + macs[("block", NAMES[6], "linear")])
    assert calibrated.macs == expected
    # without spans measured (max_span 1) the plan of before: every block alone, the cheaper way, under the model's name
    _, plain = calibration_workloads(net, "mobilenet_v2", (32, 32), ruled, ruled[0].context, max_span=1)
    lone = sum(macs[("block", n, "linear" if i == N - 1 else "merged")] for i, n in enumerate(NAMES))
    assert plain.name == "mobilenet_v2" and plain.macs == expected - sum(
        macs[("block", s, "merged")] for s in spans) - macs[("block", NAMES[6], "linear")] + lone


def _with_calibration(ruled, tmp_path, names, ratio=0.7):
    """``ruled`` and, for each of ``names``, a calibration group: the whole model (8 ms) and the calibration record
    so named at ``ratio`` times it, round by round."""
    whole = next(r for r in ruled if r.scope == "model")
    out = list(ruled)
    for i, name in enumerate(names):
        group = f"calibration-{i}"
        out += [dataclasses.replace(whole, group=group),
                dataclasses.replace(whole, group=group, name=name, variant=CALIBRATION,
                                    samples_s=tuple(ratio * s for s in whole.samples_s))]
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / f"lut-{len(names)}.jsonl"
    with MeasurementWriter(path) as writer:
        writer.write(out)
    build_lut([path], out=path.with_suffix(".csv"))
    return LUT.load(path.with_suffix(".csv"))  # the plan's name survives the LUT file


def _calibration(lut, ruled):
    prices = prices_of(ModelRef.of("mobilenet_v2", options=OPTIONS, resolution=32), lut, device=ruled[0].context,
                       method="in-model")
    assert prices.method == "in-model" and prices.factor == pytest.approx(1.0, abs=1e-12)  # phi = (8 - 1) / 7 = 1
    return calibration_of(interval_inputs(prices))


def test_rho_is_priced_on_the_plan_the_record_names(ruled, tmp_path):
    """measured 1 - 0.7 = 30 % of the model; the named plan (spans 0-1 2-3 4-5, block 6 linear) is predicted to save
    (1.00 + 0.98 + 0.96 + 0.3) / 8 ms = 40.5 %: rho 0.30 / 0.405 (its ratio has no spread: not shrunk)."""
    named = calibration_name("mobilenet_v2", [(0, 2), (2, 4), (4, 6)], [6])
    calibration = _calibration(_with_calibration(ruled, tmp_path, [named]), ruled)
    predicted = (1.00 + 0.98 + 0.96 + 0.3) / 8.0
    assert calibration.fitted == pytest.approx(0.3 / predicted, rel=1e-9)
    assert calibration.gap == pytest.approx(0.3 - predicted, abs=1e-9)
    assert calibration.source.startswith("calibration (spans 0-1 2-3 4-5 unmerged 6) saved 30.0% where 40.5% was "
                                         "predicted"), calibration.source
    # another plan named: its own prediction (spans 1-2 3-4 5-6, block 0 merged alone: 0.99 + 0.97 + 0.95 + 0.2)
    other = calibration_name("mobilenet_v2", [(1, 3), (3, 5), (5, 7)])
    calibration = _calibration(_with_calibration(ruled, tmp_path / "other", [other]), ruled)
    assert calibration.fitted == pytest.approx(0.3 / ((0.99 + 0.97 + 0.95 + 0.2) / 8.0), rel=1e-9)


def test_an_old_calibration_record_is_priced_as_before(ruled, tmp_path):
    """Named after the model alone: every block linearised alone, the cheaper way (six merged saving 0.2 ms, the last
    linear 0.3 ms): predicted 1.5 / 8 = 18.75 %, rho 0.30 / 0.1875 = 1.6, shrunk by nothing. Beside a record with
    spans, the one with spans is the plan rho is read on; a name that is no plan of this model is not read."""
    old = _calibration(_with_calibration(ruled, tmp_path, ["mobilenet_v2"]), ruled)
    assert old.fitted == pytest.approx(0.3 / (1.5 / 8.0), rel=1e-9)
    assert old.rho == pytest.approx(1.6, rel=1e-9)
    assert old.source.startswith("calibration saved 30.0% where 18.8% was predicted"), old.source  # as before
    named = calibration_name("mobilenet_v2", [(0, 2), (2, 4), (4, 6)], [6])
    both = _calibration(_with_calibration(ruled, tmp_path / "both", ["mobilenet_v2", named]), ruled)
    assert both.fitted == pytest.approx(0.3 / ((1.00 + 0.98 + 0.96 + 0.3) / 8.0), rel=1e-9)
    for i, bad in enumerate([calibration_name("mobilenet_v2", [(6, 8)]),  # past the model's 7 blocks
                             calibration_name("mobilenet_v2", [(0, 2), (1, 3)]),  # overlapping
                             calibration_name("mobilenet_v2", [(0, 2)], [1]),  # a span's block alone too
                             calibration_name("mobilenet_v2", [(0, 10 ** 15)])]):  # a hostile file's
        ignored = _calibration(_with_calibration(ruled, tmp_path / f"bad{i}", ["mobilenet_v2", bad]), ruled)
        assert ignored.fitted == pytest.approx(1.6, rel=1e-9), bad


def test_a_real_run_names_what_it_timed_and_resume_does_not_time_it_again(run):
    """The real run (its timings whatever this machine gave): the last group is the calibration group; its record
    names a plan of this model (spans, or the model alone), and its MACs are that plan's, counted on each piece's own
    workload; resumed, the file's calibration group is not timed again."""
    timed = [r for r in run.measurements if r.scope != "probe"]
    last = [r for r in timed if r.group == timed[-1].group]
    assert [(r.scope, r.variant) for r in last] == [("model", "original"), ("model", CALIBRATION)]
    name = last[1].name
    plan = calibration_plan(name, "mobilenet_v2")
    assert name == "mobilenet_v2" or plan is not None, name
    spans, unmerged = plan or ((), None)
    records = {(r.scope, _span(r) or r.name, r.variant): r for r in timed if r.scope != IN_SITU_SCOPE}
    inside = [i for a, b in spans for i in range(a, b)]
    macs = records[("stem", "mobilenet_v2", "original")].macs + records[("head", "mobilenet_v2", "original")].macs
    macs += sum(records[("block", s, "merged")].macs for s in spans)
    for i, n in enumerate(NAMES):
        if i in inside:
            continue
        if unmerged is None:  # the model alone: the cheaper of merged and linear in this run
            merged, linear = records[("block", n, "merged")], records[("block", n, "linear")]
            macs += (merged if merged.median_s < linear.median_s else linear).macs
        else:
            macs += records[("block", n, "linear" if i in unmerged else "merged")].macs
    assert last[1].macs == macs
    _measure(run.path, resume=True)
    assert [r.variant for r in read_measurements(run.path)].count(CALIBRATION) == 1
    assert build_lut([run.path]).find(model_label(name, {**OPTIONS, "resolution": 32}), CALIBRATION,
                                      run.measurements[0].context, scope="model") is not None
