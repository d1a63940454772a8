"""Blocks timed in situ, the in-situ prediction and the prediction interval (issues #14, #27).

Real timing on a tiny MobileNetV2 (one block per stage, 32 x 32); the asserts are structural (which
groups exist, what they hold, MACs from the architecture) or recompute the prediction from the raw
samples with NumPy, never a timing bound. The interval is checked on a hand-written LUT against
arithmetic done here.
"""

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from dsprof.cli import main
from dsprof.lut.schema import GROUP_COLUMNS
from dsprof.lut import LUT, LUTError, SCHEMA, build_lut, model_label, predict_latency
from dsprof.lut.predict import MethodFallbackWarning
from dsprof.records.plan import Plan
from dsprof.models import ModelRef, find_blocks, get_model
from dsprof.profiler import Workloads, measure
from dsprof.records.measurement import IN_SITU_SCOPE
from fast_timing import FAST
from posterior_by_hand import posterior_prices

pytestmark = pytest.mark.usefixtures("one_thread")
OPTIONS = {"depths": [1] * 7}
MODEL = ModelRef.of("mobilenet_v2", options=OPTIONS, resolution=32)  # every test's model, as the engines take it
KEEP = (1, 0, 1, 0, 1, 1, 0)  # blocks 1, 3 and 6 lose their activations


@pytest.fixture(scope="module")
def in_situ_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ctx") / "m.jsonl"
    return measure(MODEL,
                   workloads=Workloads(variants=("original", "merged", "linear"), model_variants=("original",), in_situ=("merged", "linear")),
                   timing=FAST, out=out, progress=False)


def test_in_situ_groups_hold_the_whole_model_and_one_swap(in_situ_run):
    model = get_model("mobilenet_v2", resolution=32, **OPTIONS)
    blocks = find_blocks(model)
    records = [r for r in in_situ_run.measurements if r.scope == IN_SITU_SCOPE]
    assert {(r.name, r.variant) for r in records} == {(b.name, v) for b in blocks for v in ("original", "merged", "linear")}
    whole = next(r for r in in_situ_run.measurements if r.scope == "model")
    by_block = {b.name: b for b in blocks}
    block_macs = {r.name: r.macs for r in in_situ_run.measurements if r.scope == "block" and r.variant == "original"}
    for name in by_block:
        group = [r for r in records if r.name == name]
        assert len({r.group for r in group}) == 1 and all(r.ok for r in group)
        assert len({len(r.samples_s) for r in group}) == 1  # interleaved rounds: one sample of each per round
        base, merged, linear = (next(r for r in group if r.variant == v) for v in ("original", "merged", "linear"))
        assert base.macs == whole.macs and linear.macs == whole.macs  # activations cost no MACs
        s = by_block[name].spec
        dense = s.kernel * s.kernel * s.in_channels * s.out_channels * s.out_h * s.out_w
        assert merged.macs == whole.macs - block_macs[name] + dense
        assert base.input_shape == (1, 3, 32, 32) and base.spec == s.to_str()


def test_in_situ_prediction_from_the_raw_samples(in_situ_run):
    lut = build_lut([in_situ_run.path])
    label = model_label("mobilenet_v2", {**OPTIONS, "resolution": 32})
    frame = lut.to_dataframe()
    assert (frame[frame.scope == IN_SITU_SCOPE].workload.str.startswith(label + "@features.")).all()

    model = get_model("mobilenet_v2", resolution=32, **OPTIONS)
    plan = Plan("mobilenet_v2", KEEP, OPTIONS, merge=tuple(not k for k in KEEP))
    med = {(r.scope, r.name, r.variant): float(np.median(r.samples_s)) for r in in_situ_run.measurements}
    blocks = find_blocks(model)
    reference = float(np.median([med[("model", "mobilenet_v2", "original")]]
                                + [med[(IN_SITU_SCOPE, b.name, "original")] for b in blocks]))
    saved = sum(reference * (1 - med[(IN_SITU_SCOPE, b.name, "merged")] / med[(IN_SITU_SCOPE, b.name, "original")])
                for b, k in zip(blocks, KEEP) if not k)
    if reference - saved <= 0:  # a run timed on a crowded machine can save more than the model takes: said, not nan
        with pytest.raises(LUTError, match="contradict each other .* add up to more than the whole model takes"):
            predict_latency(MODEL, lut, plan, strict=True, method="in-situ")
        return
    pred = predict_latency(MODEL, lut, plan, strict=True, method="in-situ")
    assert pred.method == "in-situ" and pred.rest_method == "whole-model"
    assert pred.total_s == pytest.approx(reference - saved, rel=1e-9)
    assert list(pred.blocks.variant) == ["original" if k else "merged" for k in KEEP]

    # the drift: the spread of the whole model's medians, its own group and the seven in-situ groups
    medians = [med[("model", "mobilenet_v2", "original")]] + [med[(IN_SITU_SCOPE, b.name, "original")] for b in blocks]
    q1, q3 = np.percentile(medians, [25, 75])
    assert pred.drift_source == "the whole model's medians (8 groups)"
    assert pred.drift == pytest.approx(1.959964 * (q3 - q1) / 1.349 / np.median(medians), rel=1e-9)
    assert pred.low_s < pred.total_s < pred.high_s and pred.speedup_low < pred.speedup < pred.speedup_high

    isolated = predict_latency(MODEL, lut, plan, strict=True, method="isolated")
    assert isolated.method == "isolated"
    alone = {b.name: med[("block", b.name, "original")] - med[("block", b.name, "merged")] for b in blocks}
    saved_alone = sum(alone[b.name] for b, k in zip(blocks, KEEP) if not k)
    # the whole model: the median of its medians, its own and every in-situ group's (the reference)
    assert isolated.total_s == pytest.approx(reference - saved_alone, rel=1e-9)

    # in-situ-scaled: one factor over all seven blocks
    groups = float(np.median([med[(IN_SITU_SCOPE, b.name, "original")] for b in blocks]))
    factor = groups * sum(1 - med[(IN_SITU_SCOPE, b.name, "merged")] / med[(IN_SITU_SCOPE, b.name, "original")]
                          for b in blocks) / sum(alone.values())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MethodFallbackWarning)  # on a loaded machine the two sums can disagree in sign
        if factor > 0 and reference - factor * saved_alone <= 0:  # a crowded run's scaled savings exceed the model
            with pytest.raises(LUTError, match="contradict each other .* add up to more than the whole model takes"):
                predict_latency(MODEL, lut, plan, strict=True, method="in-situ-scaled")
            return
        scaled = predict_latency(MODEL, lut, plan, strict=True,
                                 method="in-situ-scaled")
    if factor > 0:
        assert scaled.method == f"in-situ-scaled (x{factor:.3f})"
        assert scaled.total_s == pytest.approx(reference - factor * saved_alone, rel=1e-9)
    else:  # the timing made the in-situ and isolated savings disagree: isolated, saying so
        assert scaled.method.startswith("isolated (in-situ-scaled fell back") and scaled.total_s == isolated.total_s

    # auto: in-model. The LUT timed 14 pieces inside the model (each block merged and linear, --in-situ), all lone
    # blocks: their scale c is the least-squares line through the origin of what they saved there (the paired ratio:
    # the median per-round ratio of the group, times the reference) against what they saved alone, and every piece
    # is priced from c times its saving alone (dsprof.lut.inmodel; no calibration group here). Where at least 3 of the
    # 14 cost time alone (a linear block at 32 px can), those get a line of their own and the others theirs
    samples = {(r.scope, r.name, r.variant): np.array(r.samples_s) for r in in_situ_run.measurements}
    measured, alone_of = {}, {}
    for b in blocks:
        for v in ("merged", "linear"):
            ratio = float(np.median(samples[(IN_SITU_SCOPE, b.name, v)] / samples[(IN_SITU_SCOPE, b.name, "original")]))
            measured[(b.name, v)] = reference * (1 - ratio)
            alone_of[(b.name, v)] = med[("block", b.name, "original")] - med[("block", b.name, v)]
    # each piece's measurement error: its paired ratio's standard error (the LUT entry's) times the reference
    sigma = {(b.name, v): reference * lut.lookup(f"{label}@{b.name}", v, scope=IN_SITU_SCOPE, strict=True).ratio_se
             for b in blocks for v in ("merged", "linear")}

    def shrunk_line(pieces):
        """The line through the origin of ``pieces``, shrunk toward 1 by its own standard error (prior sd 0.5): each
        piece's variance max(r^2 n / (n - 1), sigma^2)."""
        square = sum(alone_of[p] ** 2 for p in pieces)
        fitted = sum(measured[p] * alone_of[p] for p in pieces) / square
        n = len(pieces)
        var = {p: max((measured[p] - fitted * alone_of[p]) ** 2 * n / (n - 1), sigma[p] ** 2) for p in pieces}
        w = square ** 2 / sum(alone_of[p] ** 2 * var[p] for p in pieces)
        return (w * fitted + 4) / (w + 4)

    c = shrunk_line(list(measured))
    costly = [p for p in measured if alone_of[p] < 0]
    saving = [p for p in measured if p not in costly]
    if len(costly) >= 3:
        scale_of = {p: shrunk_line(costly) if p in costly else shrunk_line(saving) if len(saving) >= 3 else c
                    for p in measured}
    else:
        scale_of = dict.fromkeys(measured, c)
    # each piece timed inside the model (here all 14) is priced at the posterior of c x alone and what it measured
    # (`posterior_by_hand.posterior_prices`), its spread read around its kind's unshrunk line; this run has no session
    # pairs, so a measurement's noise is its rounds' alone
    def unshrunk(pieces):
        return sum(measured[p] * alone_of[p] for p in pieces) / sum(alone_of[p] ** 2 for p in pieces)

    if len(costly) >= 3:
        line_of = {p: unshrunk(costly) if p in costly else unshrunk(saving) if len(saving) >= 3 else unshrunk(list(measured))
                   for p in measured}
    else:
        line_of = dict.fromkeys(measured, unshrunk(list(measured)))
    timed = posterior_prices({p: (alone_of[p], measured[p], sigma[p], line_of[p], scale_of[p]) for p in measured},
                             reference)
    priced = {b.name: timed[(b.name, "merged")] for b, k in zip(blocks, KEEP) if not k}
    with warnings.catch_warnings():
        warnings.simplefilter("error", MethodFallbackWarning)
        if c > 0 and reference - sum(priced.values()) <= 0:  # as above: said in one line, not a latency below 0
            with pytest.raises(LUTError, match="contradict each other .* add up to more than the whole model takes"):
                predict_latency(MODEL, lut, plan, strict=True)
            return
        auto = predict_latency(MODEL, lut, plan, strict=True)
    if c > 0:
        assert auto.method == f"in-model (x{c:.3f}, 14 pieces timed in the model)"
        table = auto.blocks.set_index("block")
        for name, saving in priced.items():
            assert table.loc[name, "saving_s"] == pytest.approx(saving, rel=1e-9)
        assert auto.total_s == pytest.approx(reference - sum(priced.values()), rel=1e-9)
    else:  # a loaded machine gave the pieces no positive scale: the in-model factor, as without them
        phi = ((reference - med[("stem", "mobilenet_v2", "original")]
                - med[("head", "mobilenet_v2", "original")]) / sum(med[("block", b.name, "original")] for b in blocks))
        assert auto.method in (f"in-model (x{(1 + phi) / 2:.3f})", "isolated")


def test_in_situ_savings_that_add_up_to_more_than_the_model_are_refused_in_one_line(in_situ_run):
    """The same run's LUT with every block merged inside the model timed a thousand times faster than the model
    around it: the three linearised blocks then save about 3x the model, a latency below 0. The isolated method's
    contradiction was refused in one line; the in-situ method returned nan without a word (seen on a crowded CI run)."""
    frame = build_lut([in_situ_run.path]).to_dataframe()
    swapped = (frame.scope == IN_SITU_SCOPE) & (frame.variant == "merged")
    assert swapped.sum() == len(KEEP)
    frame.loc[swapped, "median_s"] = frame.loc[swapped, "median_s"] / 1000
    plan = Plan("mobilenet_v2", KEEP, OPTIONS, merge=tuple(not k for k in KEEP))
    with pytest.raises(LUTError) as err:
        predict_latency(MODEL, LUT(frame, "crowded.csv"), plan, strict=True, method="in-situ")
    said = str(err.value)
    assert "\n" not in said and "contradict each other" in said and "add up to more than the whole model takes" in said


def test_in_situ_method_without_in_situ_entries_is_a_loud_miss(tmp_path):
    result = measure(MODEL,
                     workloads=Workloads(variants=("original", "merged"), model_variants=("original",)), timing=FAST,
                     out=tmp_path / "m.jsonl", progress=False)
    lut = build_lut([result.path])
    plan = Plan("mobilenet_v2", KEEP, OPTIONS)
    # stem + head + blocks: positive whatever the timing noise (model-minus-blocks can contradict itself under load)
    assert predict_latency(MODEL, lut, plan, rest="stem+head").method == "isolated"
    with pytest.raises(KeyError, match="in situ mobilenet_v2"):
        predict_latency(MODEL, lut, plan, strict=True, method="in-situ")


def _hand_in_situ_lut(label, blocks):
    base = {"schema": SCHEMA, "env_id": "hand", "device_name": "Hand CPU", "device": "cpu", "backend": "torch",
            "dtype": "fp32", "layout": "nchw", "batch": 1, "threads": 1, "compile": False, "noisy": False,
            "sources": "hand", **GROUP_COLUMNS}
    rows = [dict(base, scope="model", workload=label, variant="original", median_s=0.020, iqr_s=0.0027, n_samples=25)]
    # the whole model in the 7 in-situ groups: 20 ms and some drift; each swap saves 0.75 ms of 20 (3.75 %)
    in_groups = [0.020, 0.021, 0.019, 0.022, 0.020, 0.018, 0.020]
    for b, m in zip(blocks, in_groups):
        rows.append(dict(base, scope=IN_SITU_SCOPE, workload=f"{label}@{b.name}", variant="original", median_s=m,
                         iqr_s=0.0027, n_samples=25))
        rows.append(dict(base, scope=IN_SITU_SCOPE, workload=f"{label}@{b.name}", variant="merged", median_s=m * 0.9625,
                         iqr_s=0.0027, n_samples=25))
        for variant, ms in (("original", 2.0), ("merged", 1.5)):
            rows.append(dict(base, scope="block", workload=b.spec.to_str(), variant=variant, median_s=ms * 1e-3,
                             iqr_s=0.0, n_samples=25))
    return LUT(pd.DataFrame(rows))


def test_auto_is_in_model_in_every_context_where_the_lut_has_the_whole_model():
    blocks = find_blocks(get_model("mobilenet_v2", resolution=32, **OPTIONS))
    label = model_label("mobilenet_v2", {**OPTIONS, "resolution": 32})
    plan = Plan("mobilenet_v2", KEEP, OPTIONS, merge=tuple(not k for k in KEEP))
    frame = _hand_in_situ_lut(label, blocks).to_dataframe()

    def auto(rows):
        with warnings.catch_warnings():
            warnings.simplefilter("error", MethodFallbackWarning)  # auto never falls back loudly
            return predict_latency(MODEL, LUT(rows), plan, strict=True)

    # with the 7 blocks timed inside the model (merged): each saved 3.75 % of the 20 ms reference there, 0.75 ms,
    # against 0.5 ms alone: the line is 1.5, every piece lies on it (spread 0). Each piece's saving is known to sigma,
    # from its group's two medians (IQR 2.7 ms of 25 samples each: 1.2533 x IQR / 1.349 / 5, sqrt 2 of it for the
    # two) scaled from its group's model to the 20 ms reference; the line's standard error sqrt(sum a^2 sigma^2) /
    # sum a^2 (a = 0.5 ms each) then shrinks it toward 1 (prior sd 0.5, dsprof.lut.inmodel): noisy pieces, a scale
    # well under 1.5
    one = 1.2533 * 0.0027 / 1.349 / 5
    sigmas = [math.sqrt(2) * one * 0.020 / m for m in (0.020, 0.021, 0.019, 0.022, 0.020, 0.018, 0.020)]
    w = (7 * 0.0005 ** 2) ** 2 / sum(0.0005 ** 2 * s * s for s in sigmas)
    c = (w * 1.5 + 4) / (w + 4)
    assert 1.2 < c < 1.25
    for rows in (frame, frame.assign(backend="onnxruntime")):
        pred = auto(rows)
        assert pred.method == f"in-model (x{c:.3f}, 7 pieces timed in the model)"
        assert pred.total_s == pytest.approx(0.020 - c * 3 * 0.0005, rel=1e-9)
    # pieces pinned exactly (their groups without noise) keep their line
    pinned = frame.copy()
    pinned.loc[pinned.scope == IN_SITU_SCOPE, "iqr_s"] = 0.0
    pred = auto(pinned)
    assert pred.method == "in-model (x1.500, 7 pieces timed in the model)"
    assert pred.total_s == pytest.approx(0.020 - 3 * 0.00075, rel=1e-12)
    # without them: the whole model 20 ms, its 7 blocks 2 ms each alone, no stem and head: phi = 20 / 14; the three
    # merged blocks save 0.5 ms each alone, times (1 + phi) / 2; from the reference, the median of the model's medians
    factor = (1 + 20 / 14) / 2
    pred = auto(frame[frame.scope != IN_SITU_SCOPE])
    assert pred.method == f"in-model (x{factor:.3f})"
    assert pred.total_s == pytest.approx(0.020 - factor * 3 * 0.0005, rel=1e-12)
    # without the whole model: isolated, nothing fell back (the blocks alone, no rest: a miss said as such)
    alone = frame[frame.scope == "block"]
    with pytest.warns(UserWarning, match="stem/head entries or a whole-model entry"):
        pred = predict_latency(MODEL, LUT(alone), plan)
    assert pred.method == "isolated"


def test_interval_by_hand():
    blocks = find_blocks(get_model("mobilenet_v2", resolution=32, **OPTIONS))
    label = model_label("mobilenet_v2", {**OPTIONS, "resolution": 32})
    lut = _hand_in_situ_lut(label, blocks)
    plan = Plan("mobilenet_v2", KEEP, OPTIONS, merge=tuple(not k for k in KEEP))
    pred = predict_latency(MODEL, lut, plan, strict=True,
                           method="in-situ-scaled")
    # in situ each block saves 3.75 % of 20 ms = 0.75 ms, alone 0.5 ms: factor 1.5, three blocks save 2.25 ms
    assert pred.method == "in-situ-scaled (x1.500)" and pred.total_s == pytest.approx(0.01775, rel=1e-12)
    R, T, F = 0.020, 0.01775, 1.5
    S, u = R / T, 1 - T / R
    # drift: the model's 8 medians (20 ms and the groups' 20, 21, 19, 22, 20, 18, 20): sigma from their IQR
    medians = [0.020, 0.020, 0.021, 0.019, 0.022, 0.020, 0.018, 0.020]
    q1, q3 = np.percentile(medians, [25, 75])
    drift = (q3 - q1) / 1.349 / 0.020
    # the reference's error: the whole model's median (IQR 2.7 ms, 25 samples): 1.2533 * 2.7 / 1.349 / 5 ms; and
    # the drift its median over 8 groups keeps: 1.2533 * drift / sqrt(8) of it
    reference = math.hypot(1.2533 * 0.0027 / 1.349 / 5, R * 1.2533 * drift / math.sqrt(8))
    # each saving (0.75 ms with the factor; the block entries have no spread) moves with the drift
    entries = math.sqrt(3 * (0.00075 * drift) ** 2 + (u * reference) ** 2) / R
    # systematic: phi = 20 / 14 (no stem and head), the truth uniform on [1, phi], the method counts 1.5
    phi = 20 / 14
    systematic = u * math.sqrt((phi - 1) ** 2 / 12 + (F - (1 + phi) / 2) ** 2) / F
    # and each of the three merged blocks meets its neighbours: 0.4 % of the model each (1 sd, independent)
    systematic = math.hypot(systematic, 0.004 * math.sqrt(3))
    # a check's noise: every in-situ saving (3.75 %) equals the scaled isolated one (1.5 x 0.5 / 20): no spread
    ln_s = S * math.hypot(entries, systematic)
    ln_t = math.sqrt((S * math.hypot(entries, systematic)) ** 2 + (reference / R) ** 2 + drift ** 2)
    z = 1.959964
    assert pred.speedup == pytest.approx(S, rel=1e-12) and pred.check == pytest.approx(0.0, abs=1e-12)
    assert (pred.speedup_low, pred.speedup_high) == (pytest.approx(S * math.exp(-z * ln_s), rel=1e-9),
                                                     pytest.approx(S * math.exp(z * ln_s), rel=1e-9))
    assert (pred.low_s, pred.high_s) == (pytest.approx(T * math.exp(-z * ln_t), rel=1e-9),
                                         pytest.approx(T * math.exp(z * ln_t), rel=1e-9))
    assert pred.systematic == pytest.approx(z * S * systematic, rel=1e-9)
    assert pred.drift == pytest.approx(z * drift, rel=1e-9)
    assert pred.contains_speedup(S * math.exp(0.9 * z * ln_s)) and not pred.contains_speedup(S * math.exp(1.1 * z * ln_s))
    assert pred.contains(T * math.exp(0.9 * z * ln_t)) and not pred.contains(T * math.exp(1.1 * z * ln_t))
    assert "95 % interval" in str(pred) and "method in-situ-scaled" in str(pred)


def test_cli_predict_measure_says_inside_or_outside(in_situ_run, tmp_path, capsys):
    lut_path = tmp_path / "lut.csv"
    build_lut([in_situ_run.path]).save(lut_path)
    plan = tmp_path / "plan.json"
    plan.write_text(Plan("mobilenet_v2", KEEP, OPTIONS, name="p").to_json())
    args = ["predict", "--lut", str(lut_path), "--plan", str(plan), "--resolution", "32", "--depths", "1,1,1,1,1,1,1",
            "--measure", "--measure-out", str(tmp_path / "check.jsonl"), "--no-progress"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "method in-model" in out  # auto
    assert ("inside the predicted interval" in out) != ("OUTSIDE the predicted interval" in out)
