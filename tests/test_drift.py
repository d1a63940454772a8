"""Predictions on a machine that drifts (issues #21, #27): the drift probe, intervals from the spread of
medians and paired ratios that cover, and the method resolved before any lookup with its fallbacks said.

The probe records come from real `measure` runs of a tiny MobileNetV2; the interval statistics use those
records with constructed samples (a known drifting machine, noisy rounds; the expected values are the
distribution's or a hand computation, not the code's); the method tests use hand-written LUTs.
`test_probe_sees_a_real_slowdown` makes the machine slower for real, with a busy process pinned to the timed
process's core, and asserts directions only.
"""

import dataclasses
import functools
import json
import math
import os
import statistics
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

import dsprof
from dsprof.cli import main
from dsprof.errors import DeviceError, UsageError
from dsprof.lut.schema import GROUP_COLUMNS
from dsprof.lut import LUT, SCHEMA, MethodFallbackWarning, build_lut, model_label, predict_latency, with_probe
from dsprof.lut.interval import lut_probe, probe_ratio
from dsprof.lut.predict import resolve_method
from dsprof.models import ModelRef, find_blocks, get_model
from dsprof.records.plan import Plan
from dsprof.profiler import TimingConfig, Workloads, measure
from dsprof.profiler.probe import probe_now
from dsprof.workflows.check import measure_planned
from dsprof.profiler.probe import PROBE_NAME, probe_workload
from dsprof.records.measurement import IN_SITU_SCOPE, MeasurementWriter, read_measurements
from fast_timing import FAST

pytestmark = pytest.mark.usefixtures("one_thread")
OPTIONS = {"depths": [1] * 7}
MODEL = ModelRef.of("mobilenet_v2", options=OPTIONS, resolution=32)  # every test's model, as the engines take it
KEEP = (1, 0, 1, 0, 1, 1, 0)
LABEL = model_label("mobilenet_v2", {**OPTIONS, "resolution": 32})


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("drift") / "m.jsonl"
    return measure(MODEL,
                   workloads=Workloads(variants=("original", "merged"), model_variants=("original",)), timing=FAST,
                   out=out, progress=False)


# -- the probe in the records and the LUT -------------------------------------------------------------------


def test_every_group_is_followed_by_a_probe_record(run):
    groups = [g for g in dict.fromkeys(r.group for r in run.measurements if r.scope != "probe")]
    probes = [r for r in run.measurements if r.scope == "probe"]
    assert len(probes) == len(groups) == 7 + 1  # 7 blocks, then the whole-model group
    assert all(p.ok and p.name == PROBE_NAME and p.variant == "original" and p.group.endswith(f":probe{i}")
               for i, p in enumerate(probes))
    # the reference is the same everywhere: 32 -> 192 -> 32 channels at 56 x 56, MACs from its shape
    w = probe_workload()
    assert probes[0].input_shape == (1, 32, 56, 56)
    assert w.macs == 56 * 56 * (32 * 192 + 192 * 9 + 192 * 32)
    assert all(p.macs == w.macs for p in probes)


def test_build_lut_pools_the_probe_of_every_run_under_one_key(run, tmp_path):
    other = measure(ModelRef.of("mobilenet_v2", options={"depths": [1] * 7, "width": 0.5}, resolution=32),
                    workloads=Workloads(variants=(), model_variants=("original",)), timing=FAST,
                    out=tmp_path / "other.jsonl", progress=False)
    lut = build_lut([run.path, other.path])
    frame = lut.to_dataframe().query("scope == 'probe'")
    assert set(frame.workload) == {PROBE_NAME} and list(frame.variant) == ["original"]  # one probe, one row
    row = frame.iloc[0]
    probes = [r for r in run.measurements + other.measurements if r.scope == "probe"]
    samples = [s for r in probes for s in r.samples_s]
    assert int(row.n_samples) == len(samples)
    assert float(row.median_s) == pytest.approx(statistics.median(samples), rel=1e-12)
    # its groups: one per group of both runs (8 + 1), and the IQR of their medians
    medians = [float(np.median(r.samples_s)) for r in probes]
    assert int(row.groups) == len(medians) == 9
    q1, q3 = np.percentile(medians, [25, 75])
    assert float(row.group_iqr_s) == pytest.approx(q3 - q1, rel=1e-9)
    assert row.sources == f"{run.path.name};{other.path.name}"


def test_predict_without_a_probe_in_the_lut_says_what_to_do(run, tmp_path):
    old = tmp_path / "old.jsonl"
    with MeasurementWriter(old) as writer:
        writer.write([r for r in run.measurements if r.scope != "probe"])
    lut = build_lut([old])
    with pytest.raises(KeyError, match="predate the probe. Measure again"):
        lut_probe(lut, lut.devices()[0])


# -- intervals from the spread of medians and paired ratios, never of raw samples ---------------------------

ROUNDS = 21
SPREAD = np.linspace(-0.3, 0.3, ROUNDS)  # a round's sample off the group's median by up to 30 %: median exactly 0


def _runs_of_the_whole_model(run, tmp_path, medians_s, noise):
    """A LUT of ``len(medians_s)`` runs of ``run``'s records: the whole model's samples in run i spread by
    ``noise`` (a fraction) around ``medians_s[i]`` (its exact median); blocks as measured."""
    path = tmp_path / f"runs-{len(list(tmp_path.iterdir()))}.jsonl"
    with MeasurementWriter(path) as writer:
        for median in medians_s:
            writer.write([dataclasses.replace(r, samples_s=tuple(median * (1 + noise * SPREAD)))
                          if r.scope == "model" else r for r in run.measurements if r.scope != "probe"])
    return build_lut([path])


def test_a_latency_interval_comes_from_the_spread_of_group_medians_not_of_raw_samples(run, tmp_path):
    kw = dict(method="isolated")  # the original model: the whole model's entry
    # noisy samples (up to +-30 % in every run), medians that agree (10 ms in all 6 runs): narrow
    agree = predict_latency(MODEL, _runs_of_the_whole_model(run, tmp_path, [0.010] * 6, 1.0), **kw)
    pooled = np.concatenate([0.010 * (1 + SPREAD)] * 6)
    q1, q3 = np.percentile(pooled, [25, 75])
    se = 1.2533 * (q3 - q1) / 1.349 / math.sqrt(len(pooled))  # the error of the pooled median, nothing more
    assert agree.drift == 0.0 and agree.drift_source == "the whole model's medians (6 groups)"
    assert agree.total_s == pytest.approx(0.010, rel=1e-9)
    assert (agree.low_s, agree.high_s) == (pytest.approx(0.010 * math.exp(-1.959964 * se / 0.010), rel=1e-9),
                                           pytest.approx(0.010 * math.exp(1.959964 * se / 0.010), rel=1e-9))
    assert (agree.high_s - agree.low_s) / 2 / agree.total_s < 0.05  # the raw samples' own spread is +-30 %
    # quiet samples (+-1 %), medians that move by up to 15 % from run to run: wide, as wide as they moved
    medians = [0.0095, 0.0100, 0.0110, 0.0085, 0.0105, 0.0115]
    moved = predict_latency(MODEL, _runs_of_the_whole_model(run, tmp_path, medians, 0.01), **kw)
    q1, q3 = np.percentile(medians, [25, 75])
    drift = (q3 - q1) / 1.349 / np.median(np.concatenate([m * (1 + 0.01 * SPREAD) for m in medians]))  # the entry's
    assert moved.drift == pytest.approx(1.959964 * drift, rel=1e-9)
    assert (moved.high_s - moved.low_s) / 2 / moved.total_s > 0.10 > 2 * (agree.high_s - agree.low_s) / 2 / agree.total_s


def _paired_block_lut(run, tmp_path, paired):
    """``run``'s records (no probe: no drift term) with the blocks' original and merged samples rebuilt: every
    round off by up to 30 %, the merged block 0.75 of the original's 0.1 ms; ``paired``: both moved by the same
    round factor (their per-round ratio exactly 0.75), else each by its own (shuffled) factors, same medians.
    The whole model: 2 ms, quiet."""
    rng = np.random.default_rng(3)
    records = []
    for r in run.measurements:
        if r.scope == "probe":
            continue
        if r.scope == "block":
            factors = 1 + (SPREAD if paired or r.variant == "original" else rng.permutation(SPREAD))
            scale = 1.0 if r.variant == "original" else 0.75
            r = dataclasses.replace(r, samples_s=tuple(1e-4 * scale * factors))
        elif r.scope == "model":
            r = dataclasses.replace(r, samples_s=tuple(2e-3 * (1 + 0.001 * SPREAD)))
        records.append(r)
    path = tmp_path / f"paired-{paired}.jsonl"
    with MeasurementWriter(path) as writer:
        writer.write(records)
    return build_lut([path])


def test_a_speedup_interval_comes_from_paired_ratios(run, tmp_path):
    plan = Plan("mobilenet_v2", KEEP, OPTIONS, merge=tuple(not k for k in KEEP))
    kw = dict(method="isolated")
    paired = predict_latency(MODEL, _paired_block_lut(run, tmp_path, True), plan, **kw)
    apart = predict_latency(MODEL, _paired_block_lut(run, tmp_path, False), plan, **kw)
    assert paired.speedup == pytest.approx(apart.speedup, rel=1e-12)  # the same medians
    lut = _paired_block_lut(run, tmp_path, True)
    spec = _tiny_blocks()[1].spec
    merged = lut.lookup(spec, "merged", strict=True)
    assert merged.ratio == pytest.approx(0.75, rel=1e-12) and merged.ratio_se == pytest.approx(0.0, abs=1e-15)
    # the savings' error: none where the rounds pair, the rounds' own spread where they do not
    assert paired.lut_spread < apart.lut_spread / 4


# -- intervals that include the drift (constructed samples from a known drifting machine) -------------------

SIGMA = 0.08  # the machine's speed: a factor exp(N(0, SIGMA)) per moment (a group, a later check)


def _drifting_records(run, rng, runs=3, with_probe_records=True):
    """The run's records with samples of a machine whose speed moves from group to group: ``runs`` runs of the
    same settings; each group's probe and each whole-model group at that moment's speed, 1 % noise."""
    out = []
    for _ in range(runs):
        for r in run.measurements:
            factor = math.exp(rng.normal(0, SIGMA))
            base = {"probe": 2e-3, "model": 10e-3}.get(r.scope)
            if base is None:  # blocks, stem, head: as measured (a prediction of the unmerged model does not use them)
                out.append(r)
            elif r.scope != "probe" or with_probe_records:
                out.append(dataclasses.replace(r, samples_s=tuple(base * factor * (1 + rng.normal(0, 0.01, 20)))))
    return out


def _coverage(run, tmp_path, rng, trials, **kwargs):
    """Share of later measurements (25 per LUT, each at a new moment of the machine) inside the interval of
    predictions from ``trials`` LUTs of drifting records; and the median relative half-width."""
    model = MODEL.built()  # the same model in every trial, built once (`ModelRef.built`): only the LUT changes
    covered, halves = [], []
    for trial in range(trials):
        path = tmp_path / f"t{len(list(tmp_path.iterdir()))}.jsonl"  # a new file: the writer appends
        with MeasurementWriter(path) as writer:
            writer.write(_drifting_records(run, rng, **kwargs))
        pred = predict_latency(model, build_lut([path]), method="isolated")
        later = 10e-3 * np.exp(rng.normal(0, SIGMA, 25))
        covered += [pred.contains(m) for m in later]
        halves.append((pred.high_s - pred.low_s) / 2 / pred.total_s)
    return float(np.mean(covered)), statistics.median(halves)


def test_the_interval_covers_a_drifting_machine_with_the_probe(run, tmp_path):
    rng = np.random.default_rng(21)
    true_half = math.exp(1.959964 * SIGMA) - 1  # 17 %: the 95 % half-width of the machine's speed
    # A later measurement is off the prediction (the median of 3 runs) by sigma * sqrt(1 + 0.449); the interval
    # takes sigma (from the IQR of the probe's 24 group medians) * sqrt(1 + pi / 6): with that estimate's own
    # scatter, about 93 % of later measurements fall inside.
    coverage, half = _coverage(run, tmp_path, rng, 40)
    assert coverage >= 0.90
    assert 0.5 * true_half < half < 2 * true_half  # covering, not by useless width
    # one run without the probe: the whole model's one group sees 1 % of noise and none of the drift
    coverage, half = _coverage(run, tmp_path, rng, 3, runs=1, with_probe_records=False)
    assert coverage < 0.5 and half < 0.05


# -- the method: resolved before any lookup, its fallback said ----------------------------------------------


@functools.cache
def _tiny_blocks():
    """The tiny MobileNetV2's seven blocks, found once: every hand LUT keys the same ones (read, never changed)."""
    return tuple(find_blocks(get_model("mobilenet_v2", resolution=32, **OPTIONS)))


def _hand_lut(factor_in_situ=2.0, backend="torch", in_situ=True):
    """A hand LUT of the tiny MobileNetV2: whole model 20 ms; every block 2 ms, merged 1.5 ms; in situ each
    swap saves ``factor_in_situ`` x 0.5 ms of the 20 ms; a probe of 2 ms."""
    blocks = _tiny_blocks()
    base = {"schema": SCHEMA, "env_id": "hand", "device_name": "Hand CPU", "device": "cpu", "backend": backend,
            "dtype": "fp32", "layout": "nchw", "batch": 1, "threads": 1, "compile": False, "noisy": False,
            "sources": "hand", **GROUP_COLUMNS}
    rows = [dict(base, scope="model", workload=LABEL, variant="original", median_s=0.020, iqr_s=0.0, n_samples=25),
            dict(base, scope="probe", workload=PROBE_NAME, variant="original", median_s=0.002, iqr_s=0.0001, n_samples=100)]
    for b in blocks:
        if in_situ:
            rows.append(dict(base, scope=IN_SITU_SCOPE, workload=f"{LABEL}@{b.name}", variant="original", median_s=0.020,
                             iqr_s=0.0, n_samples=25))
            rows.append(dict(base, scope=IN_SITU_SCOPE, workload=f"{LABEL}@{b.name}", variant="merged",
                             median_s=0.020 - factor_in_situ * 0.0005, iqr_s=0.0, n_samples=25))
        for variant, ms in (("original", 2.0), ("merged", 1.5)):
            rows.append(dict(base, scope="block", workload=b.spec.to_str(), variant=variant, median_s=ms * 1e-3,
                             iqr_s=0.0, n_samples=25))
    return LUT(pd.DataFrame(rows))


PLAN = Plan("mobilenet_v2", KEEP, OPTIONS, merge=tuple(not k for k in KEEP))


def _predict(lut, **kwargs):
    return predict_latency(MODEL, lut, PLAN, strict=True, **kwargs)


def test_explicit_in_situ_scaled_without_its_entries_says_it_fell_back_and_strict_does_not_raise():
    with pytest.warns(MethodFallbackWarning, match="in-situ-scaled fell back: the LUT lacks in-situ"):
        pred = _predict(_hand_lut(in_situ=False), method="in-situ-scaled")
    assert pred.method.startswith("isolated (in-situ-scaled fell back: the LUT lacks in-situ entries")
    assert pred.missing == () and pred.coverage == 1.0  # a method's fallback is no LUT miss
    assert pred.total_s == pytest.approx(0.020 - 3 * 0.0005, rel=1e-12)  # isolated: three blocks save 0.5 ms


def test_auto_is_in_model_and_in_situ_scaled_uses_any_positive_factor():
    # without blocks timed inside the model: the whole model 20 ms, seven blocks of 2 ms alone, no stem and head:
    # phi = 20 / 14, and each of the three merged blocks saves 0.5 ms alone times (1 + phi) / 2
    factor = (1 + 20 / 14) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", MethodFallbackWarning)
        pred = _predict(_hand_lut(in_situ=False))
        assert pred.method == f"in-model (x{factor:.3f})"
        assert pred.total_s == pytest.approx(0.020 - factor * 3 * 0.0005, rel=1e-12)
        # with the seven blocks timed inside the model, each saving 1.5 x 0.5 ms there: those savings (scale 1.5,
        # every piece on it), whatever the backend
        for lut in (_hand_lut(1.5), _hand_lut(1.5, backend="onnxruntime")):
            pred = _predict(lut)
            assert pred.method == "in-model (x1.500, 7 pieces timed in the model)"
            assert pred.total_s == pytest.approx(0.020 - 1.5 * 3 * 0.0005, rel=1e-12)
    for asked in (0.4, 4.0):  # asked for by name, in-situ-scaled uses its factor whatever it is
        assert _predict(_hand_lut(asked), method="in-situ-scaled").method == f"in-situ-scaled (x{asked:.3f})"
    # its older name, read for one release: the same prediction, and a warning that names the new one
    with pytest.warns(FutureWarning, match="'context-scaled' is now called 'in-situ-scaled'"):
        assert _predict(_hand_lut(4.0), method="context-scaled").method == "in-situ-scaled (x4.000)"


def test_the_method_is_resolved_and_checked_before_any_lookup(monkeypatch):
    lut = _hand_lut()
    key = lut.devices()[0]
    assert resolve_method("auto", key) == "in-model"
    assert resolve_method("auto", dataclasses.replace(key, backend="onnxruntime")) == "in-model"
    assert resolve_method("auto", key, rest="stem+head") == "isolated"
    assert resolve_method("auto", key, variant="merged") == "isolated"

    def no_lookup(*args, **kwargs):
        raise AssertionError("looked up before the method was checked")

    monkeypatch.setattr(LUT, "find", no_lookup)
    for kwargs, message in [({"method": "fast"}, "method is one of"),
                            ({"method": "in-model", "rest": "stem+head"}, "starts from the whole model"),
                            ({"method": "in-situ-scaled", "rest": "stem+head"}, "starts from the whole model"),
                            ({"method": "in-situ", "rest": "stem+head"}, "starts from the whole model")]:
        with pytest.raises(UsageError, match=message):
            _predict(lut, **kwargs)
    with pytest.raises(UsageError, match="predicts plans"):
        predict_latency(MODEL, lut, variant="merged", method="in-situ")


# -- scaling by the probe -----------------------------------------------------------------------------------


def test_with_probe_scales_the_milliseconds_not_the_speedup():
    pred = _predict(_hand_lut(in_situ=False), method="isolated")
    scaled = with_probe(pred, 1.25)
    assert scaled.total_s == pytest.approx(pred.total_s * 1.25, rel=1e-12)
    assert scaled.original_s == pytest.approx(pred.original_s * 1.25, rel=1e-12)
    assert (scaled.low_s, scaled.high_s) == (pytest.approx(pred.low_s * 1.25), pytest.approx(pred.high_s * 1.25))
    assert (scaled.speedup, scaled.speedup_low, scaled.speedup_high) == (pred.speedup, pred.speedup_low, pred.speedup_high)
    assert "scaled to now by the drift probe (1.250x the LUT's time" in str(scaled)
    lut = _hand_lut(in_situ=False)
    assert probe_ratio([0.0024, 0.0025, 0.0026], lut_probe(lut, lut.devices()[0])) == pytest.approx(1.25)
    with pytest.raises(UsageError):
        with_probe(pred, 0.0)


def test_the_probe_refuses_a_context_of_another_environment(run):
    key = build_lut([run.path]).devices()[0]
    with pytest.raises(DeviceError, match="another|environment") as caught:
        probe_now(dataclasses.replace(key, env_id="0123456789ab"), 0.1)
    assert "Predict without `probe=`" in str(caught.value)


def test_cli_predict_prints_the_speedup_first_and_a_paired_check(run, tmp_path, capsys):
    lut_path = tmp_path / "lut.csv"
    build_lut([run.path]).save(lut_path)
    plan = tmp_path / "plan.json"
    plan.write_text(Plan("mobilenet_v2", KEEP, OPTIONS, name="tiny-plan").to_json())
    common = ["predict", "--lut", str(lut_path), "--resolution", "32", "--depths", "1,1,1,1,1,1,1", "--plan", str(plan)]
    assert main(common) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[1].lstrip().startswith("speed-up ") and "x over the original (95 % interval" in lines[1]
    assert lines[2].lstrip().startswith("latency ") and "as measured" in lines[2]  # the milliseconds, and when
    assert "drift probe: not timed; --probe 2 times it here for 2 s" in out  # the option, as the command line names it
    assert main(common + ["--budget", "0.02"]) == 2  # a timing option without the check it times: said, not ignored
    err = capsys.readouterr().err
    assert err == ("dsprof predict: error: the timing options (--budget, --min-samples...) time --measure's check: add "
                   "--measure, or leave them out\n")
    quick = ["--warmup", "0", "--max-warmup", "0.01", "--min-samples", "5", "--max-samples", "6", "--budget", "0.02",
             "--min-sample-time", "0"]  # the check's timing, as `measure` takes it
    assert main(common + ["--probe", "0.2", "--measure", "--measure-out", str(tmp_path / "check"), "--no-progress",
                          "--json", str(tmp_path / "p.json"), *quick]) == 0
    out = capsys.readouterr().out
    assert "scaled to now by the drift probe" in out
    # the paired line: measured speed-up with its interval, predicted with its interval, inside or not
    line = next(x for x in out.splitlines() if x.startswith("check: "))
    assert "measured speed-up" in line and "paired rounds" in line and "predicted" in line
    assert ("inside the predicted interval" in line) != ("OUTSIDE the predicted interval" in line)
    assert "drift probe: during this measurement the machine ran the reference at" in out
    check = [r for p in (tmp_path / "check").glob("*.jsonl") for r in read_measurements(p)]
    models = [r for r in check if r.scope == "model"]
    assert {(r.variant, r.name) for r in models} == {("original", "mobilenet_v2"), ("custom", "tiny-plan")}
    assert len({r.group for r in models}) == 1 and len({len(r.samples_s) for r in models}) == 1  # one group, paired
    assert {(r.budget_s, len(r.samples_s) <= 6) for r in models} == {(0.02, True)}  # timed as the options said
    assert any(r.scope == "probe" for r in check)  # a check run records its probe too
    # the JSON: the speed-up first, the check's numbers from the records
    data = json.loads((tmp_path / "p.json").read_text())
    assert list(data["prediction"])[2:5] == ["speedup", "speedup_low", "speedup_high"]
    original, merged = (next(r for r in models if r.variant == v) for v in ("original", "custom"))
    ratios = np.array(original.samples_s) / np.array(merged.samples_s)
    assert data["check"]["speedup"] == pytest.approx(float(np.median(ratios)), rel=1e-12)
    assert data["check"]["pairs"] == len(ratios)


def test_measure_plan_prints_the_paired_speedup(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text(Plan("mobilenet_v2", KEEP, OPTIONS, name="tiny-plan").to_json())
    assert main(["measure", "--resolution", "32", "--depths", "1,1,1,1,1,1,1", "--blocks", "none", "--plan", str(plan),
                 "--model-variants", "original", "--merge-by", "macs", "--budget", "0.02", "--min-samples", "3",
                 "--warmup", "0", "--max-warmup", "0.01", "--min-sample-time", "0", "--out", str(tmp_path / "m"),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "tiny-plan: measured speed-up" in out and "paired rounds" in out


# -- a real slowdown ----------------------------------------------------------------------------------------

SPINNERS = 1
PROBE_S = 0.5  # seconds of the probe each time: a median of its calls, against a slowdown of about 2x
_BUSY = "import os, sys, time\nos.sched_setaffinity(0, {int(sys.argv[1])})\nend = time.time() + float(sys.argv[2])\n" \
        "while time.time() < end:\n    pass\n"


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs os.sched_setaffinity (Linux)")
def test_probe_sees_a_real_slowdown_and_the_scaled_prediction_follows(tmp_path):
    """A LUT measured on one core; then a busy process spins on that same core (bounded, killed at the end):
    the timed process gets a share of it. Directions only (the size of an error is a benchmark figure): the
    model runs slower, the probe sees the machine slower, and the prediction scaled by it moves towards the
    model measured then."""
    saved = os.sched_getaffinity(0)
    core = min(saved)
    timing = TimingConfig(budget_s=0.6, first_warmup_s=0.2)
    os.sched_setaffinity(0, {core})
    busy = None
    try:
        lut_run = measure(ModelRef.of("mobilenet_v2", options=OPTIONS, resolution=96),
                          workloads=Workloads(variants=("original",), model_variants=("original",)), timing=timing,
                          out=tmp_path / "lut.jsonl", progress=False)
        lut = build_lut([lut_run.path])
        key = lut.devices()[0]
        pred = predict_latency(ModelRef.of("mobilenet_v2", options=OPTIONS, resolution=96), lut, method="isolated")
        # the probe just after the LUT run: the LUT's own probe (a median over the whole run) and its one
        # whole-model group come from different moments; the ratio is taken in the test
        quiet = probe_now(key, PROBE_S)
        busy = [subprocess.Popen([sys.executable, "-c", _BUSY, str(core), "60"]) for _ in range(SPINNERS)]
        before = probe_now(key, PROBE_S)
        net = ModelRef.of(get_model("mobilenet_v2", resolution=96, **OPTIONS), name="mobilenet_v2")
        measured_s = measure_planned(net, key, out=tmp_path / "check", progress=False, timing=timing).median_s
        after = probe_now(key, PROBE_S)  # the probe on both sides of the check: what --probe gives, at its moment
        ratio = statistics.median(before + after) / statistics.median(quiet)
    finally:
        for process in busy or []:
            process.kill()
            process.wait()
        os.sched_setaffinity(0, saved)
    slowdown = measured_s / pred.total_s
    unscaled = pred.total_s / measured_s - 1
    scaled = with_probe(pred, ratio).total_s / measured_s - 1
    print(f"model {slowdown:.2f}x slower, probe {ratio:.2f}x; unscaled error {unscaled:+.1%}, scaled {scaled:+.1%}")
    assert slowdown > 1 and ratio > 1  # the busy process took the core, and the probe sees it
    # so the scaling moves the prediction towards the measurement. Whether it lands closer is a size, not a
    # direction: with a second test worker on the other core a fresh-clone `make test` saw the probe 3.78x slower
    # and the model 1.50x (scaled +151 %, unscaled -34 %); how well the probe tracks a machine is
    # benchmarks/probe_choice.py's figure.


def test_report_shows_the_probe_against_the_lut(run, tmp_path):

    report = dsprof.report([run.path], tmp_path / "report", lut=build_lut([run.path]))
    page = report.index.read_text()
    assert "## Drift probe" in page and "over 8 groups" in page
    # the records are the LUT's own: the same samples, a ratio of exactly 1
    assert "1.000x its time in the LUT's runs" in page


def test_the_measure_call_a_fallback_suggests_names_the_model_and_the_command_line_runs_it_for_that_model():
    """The fallback's suggestion named `dsprof.measure(workloads=...)` without the model: the command line showed
    `dsprof measure --in-situ merged`, which timed the default MobileNetV2 at 224 px."""
    from dsprof.cli.flags import command_line_text
    from dsprof.cli import build_parser

    with pytest.warns(MethodFallbackWarning) as caught:
        _predict(_hand_lut(in_situ=False), method="in-situ-scaled")
    said = str(caught[0].message)
    assert "(`dsprof.measure(model=ModelRef.of('mobilenet_v2', options=" in said
    command = command_line_text(said, "predict").split("`")[1]
    assert command.startswith("dsprof measure --model mobilenet_v2 --depths") and command.endswith("--in-situ merged")
    build_parser().parse_args(command.split()[1:])  # a command that runs as written
