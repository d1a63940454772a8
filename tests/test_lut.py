import dataclasses
import math
import re
import statistics
import threading

import numpy as np
import pandas as pd
import pytest

from dsprof.lut.schema import GROUP_COLUMNS
from dsprof.lut import COLUMNS, LUT, SCHEMA, DeviceContext, LUTError, LUTMissError, LUTMissWarning, build_lut, model_label
from dsprof.lut.predict import predict_latency
from dsprof.records.plan import Plan
from dsprof.models import ModelRef, find_blocks, get_model
from dsprof.records.measurement import MeasurementWriter, read_measurements
from dsprof.profiler.runner import measure
from dsprof.profiler.timing import TimingConfig

FAST = TimingConfig(warmup_s=0.002, warmup_min_iters=1, warmup_max_s=0.05, min_samples=5, max_samples=7,
                    budget_s=0.02, min_sample_s=0.0002)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A real measurement file: MobileNetV2 (one block per stage) at 32x32 on this CPU."""
    out = tmp_path_factory.mktemp("measure")
    result = measure(ModelRef.of("mobilenet_v2", options={"depths": [1] * 7}, resolution=32), out=out, timing=FAST,
                     progress=False)
    return result.path


def _rewrite(src, dst, **changes):
    """Copy a measurement file, changing fields of every record (another device, more samples...)."""
    with MeasurementWriter(dst) as w:
        for r in read_measurements(src):
            values = {k: (v(r) if callable(v) else v) for k, v in changes.items()}
            w.write([dataclasses.replace(r, **values)])
    return dst


def test_one_entry_per_key_with_the_median_of_the_samples(measured):
    records = [r for r in read_measurements(measured) if r.ok and r.scope != "probe"]
    lut = build_lut([measured])
    # the drift probe after every group pools into one entry (tests/test_drift.py)
    assert len(lut) == len(records) + 1
    frame = lut.to_dataframe()
    for r in records:
        workload = r.spec if r.scope == "block" else model_label(r.name, r.model_options)
        row = frame[(frame.workload == workload) & (frame.variant == r.variant) & (frame.scope == r.scope)]
        assert len(row) == 1
        assert row.median_s.iloc[0] == pytest.approx(statistics.median(r.samples_s), rel=1e-12)
        assert row.n_samples.iloc[0] == len(r.samples_s)
        assert row.groups.iloc[0] == 1 and row.group_iqr_s.iloc[0] == 0.0 and row.time_utc.iloc[0] == r.time_utc
        # the paired ratio over the group's original: the median of the per-round ratios, its standard error
        # 1.2533 sigma / sqrt(n) with sigma = IQR / 1.349 (numpy's percentiles)
        base = next(b for b in records if b.group == r.group and b.scope == r.scope and b.variant == "original")
        if r.variant == "original":
            assert math.isnan(row.ratio.iloc[0]) and math.isnan(row.ratio_se.iloc[0])
            continue
        ratios = np.array(r.samples_s) / np.array(base.samples_s)
        q1, q3 = np.percentile(ratios, [25, 75])
        assert row.ratio.iloc[0] == pytest.approx(float(np.median(ratios)), rel=1e-12)
        assert row.ratio_se.iloc[0] == pytest.approx(1.2533 * (q3 - q1) / 1.349 / math.sqrt(len(ratios)), rel=1e-9)


def test_two_devices_kept_apart_and_repeats_pooled(measured, tmp_path):
    other = _rewrite(measured, tmp_path / "other.jsonl", env_id="feedfacecafe", device_name="Other CPU",
                     samples_s=lambda r: tuple(2 * s for s in r.samples_s))
    repeat = _rewrite(measured, tmp_path / "repeat.jsonl", samples_s=lambda r: tuple(s + 1e-3 for s in r.samples_s))
    lut = build_lut([measured, other, repeat])
    here_env = read_measurements(measured)[0].env_id
    assert {d.env_id for d in lut.devices()} == {here_env, "feedfacecafe"}
    assert lut.device_name(lut.resolve(env_id="feedfacecafe")) == "Other CPU"
    here = lut.resolve(env_id=here_env)
    r = next(r for r in read_measurements(measured) if r.scope == "block" and r.variant == "original")
    pooled = lut.lookup(r.spec, "original", here, strict=True)
    assert pooled.median_s == pytest.approx(statistics.median(r.samples_s + tuple(s + 1e-3 for s in r.samples_s)), rel=1e-12)
    assert pooled.n_samples == 2 * len(r.samples_s)
    assert pooled.sources == f"{measured.name};repeat.jsonl"
    # two groups (one per run): numpy's IQR of two medians is half their distance, here 1 ms
    assert pooled.groups == 2 and pooled.group_iqr_s == pytest.approx(0.5e-3, rel=1e-9)
    far = lut.lookup(r.spec, "original", lut.resolve(env_id="feedfacecafe"), strict=True)
    assert far.median_s == pytest.approx(2 * statistics.median(r.samples_s), rel=1e-12)
    assert far.sources == "other.jsonl"


def test_other_thread_count_is_another_context_and_noise_is_marked(measured, tmp_path):
    one = _rewrite(measured, tmp_path / "t3.jsonl", threads=3,  # measured on 1 thread (the default)
                   samples_s=lambda r: (1.0, 1.0, 1.5, 2.0, 2.0))  # IQR/median = 1.0/1.5
    lut = build_lut([measured, one])
    key = lut.resolve(threads=3)
    assert len(lut.devices()) == 2
    frame = lut.to_dataframe()
    assert frame[frame.threads == 3].noisy.all()
    r = next(r for r in read_measurements(one) if r.scope == "block")
    assert lut.lookup(r.spec, r.variant, key, strict=True).median_s == 1.5


def test_a_table_of_the_previous_schema_loads_with_one_warning(measured, tmp_path):
    frame = build_lut([measured]).to_dataframe()
    old = frame.drop(columns=list(GROUP_COLUMNS)).assign(schema="dsprof.lut/1")
    path = tmp_path / "old.csv"
    text = old.to_csv(index=False, lineterminator="\n")
    from dsprof.lut.table import table_checksum

    path.write_text(f"{text}# end rows={len(old)} sha256={table_checksum(text)}\n")
    with pytest.warns(UserWarning, match="dsprof.lut/1 table, from before the group columns") as caught:
        lut = LUT.load(path)
    assert len([w for w in caught if "group columns" in str(w.message)]) == 1
    loaded = lut.to_dataframe()
    assert (loaded.schema == SCHEMA).all() and (loaded.groups == 1).all() and (loaded.group_iqr_s == 0).all()
    assert loaded.ratio.isna().all() and list(loaded.median_s) == list(frame.median_s)


def test_save_load_round_trip_and_pandas(measured, tmp_path):
    lut = build_lut([measured])
    path = lut.save(tmp_path / "lut.csv")
    again = LUT.load(path)
    pd.testing.assert_frame_equal(again.to_dataframe(), lut.to_dataframe())
    plain = pd.read_csv(path, comment="#")
    assert list(plain.columns) == list(COLUMNS) and len(plain) == len(lut)
    assert (plain.median_s > 0).all()


def _write_frame(frame, path):
    """Write a table as LUT.save does (CSV plus the end marker and its checksum), whatever its contents."""
    from dsprof.lut.table import table_checksum

    text = frame.to_csv(index=False, lineterminator="\n")
    path.write_text(text + f"# end rows={len(frame)} sha256={table_checksum(text)}\n")
    return path


def _with(frame, row, column, value):
    frame = frame.astype({column: object})
    frame.loc[row, column] = value
    return frame


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda f: _with(f, 0, "schema", "dsprof.lut/9"), "row 1 (line 2): unknown schema version 'dsprof.lut/9'"),
        (lambda f: f.drop(columns=["iqr_s"]), "missing column(s) iqr_s"),
        (lambda f: _with(f, 2, "median_s", "nan"), "row 3 (line 4): median_s must be a positive number"),
        (lambda f: _with(f, 1, "median_s", -0.001), "row 2 (line 3): median_s must be a positive number"),
        (lambda f: _with(f, 1, "iqr_s", "inf"), "row 2 (line 3): iqr_s must be a non-negative"),
        (lambda f: pd.concat([f, f.iloc[[4]]]), "duplicate key, same as row 5"),
        (lambda f: _with(f, 0, "workload", "inverted_residual(cin=1)"), "row 1 (line 2): not a BlockSpec string"),
    ],
)
def test_load_errors_name_the_file_and_row(measured, tmp_path, mutate, message):
    frame = build_lut([measured]).to_dataframe()
    frame = frame.sort_values("scope").reset_index(drop=True)  # block rows first
    path = _write_frame(mutate(frame), tmp_path / "bad.csv")
    with pytest.raises(LUTError) as info:
        LUT.load(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_truncated_file_is_detected(measured, tmp_path):
    text = build_lut([measured]).save(tmp_path / "lut.csv").read_text()
    for cut in (len(text) - 3, len(text) // 2, 40):
        path = tmp_path / f"cut{cut}.csv"
        path.write_text(text[:cut])
        with pytest.raises(LUTError, match="truncated"):
            LUT.load(path)


def test_interrupted_write_keeps_the_old_file(measured, tmp_path, monkeypatch):
    lut = build_lut([measured])
    path = lut.save(tmp_path / "lut.csv")
    before = path.read_text()
    import dsprof.io

    def crash(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(dsprof.io.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        LUT(lut.to_dataframe().iloc[:3]).save(path)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["lut.csv"]


def test_concurrent_writers_never_leave_a_corrupt_file(measured, tmp_path):
    full = build_lut([measured])
    small = LUT(full.to_dataframe().iloc[:5])
    path = full.save(tmp_path / "lut.csv")
    errors = []

    def writer(lut):
        for _ in range(15):
            lut.save(path)

    def reader():
        for _ in range(30):
            try:
                assert len(LUT.load(path)) in (5, len(full))
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)

    threads = [threading.Thread(target=writer, args=(x,)) for x in (full, small)] + [threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_miss_names_the_key_and_the_nearest(measured):
    lut = build_lut([measured])
    present = next(r for r in read_measurements(measured) if r.scope == "block").spec
    wanted = present.replace("in=", "in=9")
    with pytest.warns(LUTMissWarning, match="Nearest keys present") as record:
        assert lut.lookup(wanted, "merged") is None
    text = str(record[0].message)
    assert wanted in text and "in=" in text.split("Nearest keys present:")[1]
    with pytest.raises(LUTMissError, match="LUT miss"):
        lut.lookup(wanted, "merged", strict=True)


def test_device_key_round_trip_and_resolve_errors(measured, tmp_path):
    lut = build_lut([measured])
    key = lut.devices()[0]
    assert DeviceContext.from_str(key.to_str()) == key
    assert lut.resolve(key.to_str()) == key
    assert DeviceContext.from_str("abc/cuda:0/torch/fp16/channels_last/b128/t0/compiled").compile
    with pytest.raises(LUTError) as caught:
        lut.resolve(backend="tflite", batch=None)
    # what was asked in words, the parameter that names a context (a field of `Pricing` and `MergeChoice`), the list
    assert str(caught.value) == (f"<built>: no context matches backend tflite; give one of these, by its key or its "
                                 f"label, as `device_key=`:\n  {key}  (torch/cpu t1; {lut.device_name(key)})")
    # named as `dsprof plan` labels it (backend/device tTHREADS) or by its backend, as `joint=` names contexts
    assert lut.resolve("torch/cpu t1") == lut.resolve("torch") == lut.resolve(f" {key} ") == key
    with pytest.raises(LUTError, match=r"no context matches onnxruntime/cpu t1; give one of these"):
        lut.resolve("onnxruntime/cpu t1")
    written = build_lut([measured], tmp_path / "x.csv")  # one written names its file, as one loaded from it does
    with pytest.raises(LUTError, match=rf"^{re.escape(str(tmp_path / 'x.csv'))}: no context matches backend tflite;"):
        written.resolve(backend="tflite")
    with pytest.raises(ValueError, match="not a device key"):
        DeviceContext.from_str("cpu/torch")


def _hand_lut(blocks, label, *, stem_head=True, whole=None):
    base = {"schema": SCHEMA, "env_id": "hand", "device_name": "Hand CPU", "device": "cpu", "backend": "torch",
            "dtype": "fp32", "layout": "nchw", "batch": 1, "threads": 1, "compile": False,
            "iqr_s": 0.0, "n_samples": 10, "noisy": False, "sources": "hand", **GROUP_COLUMNS}
    rows = []
    for i, b in enumerate(blocks):
        rows.append(dict(base, scope="block", workload=b.spec.to_str(), variant="original", median_s=(i + 1) * 1e-3))
        rows.append(dict(base, scope="block", workload=b.spec.to_str(), variant="merged", median_s=(i + 1) * 0.25e-3))
    if stem_head:
        rows.append(dict(base, scope="stem", workload=label, variant="original", median_s=0.3e-3))
        rows.append(dict(base, scope="head", workload=label, variant="original", median_s=0.2e-3))
    if whole is not None:
        rows.append(dict(base, scope="model", workload=label, variant="original", median_s=whole))
    return LUT(pd.DataFrame(rows))


def test_prediction_equals_the_hand_sum():
    options = {"depths": [1] * 7}
    model = get_model("mobilenet_v2", resolution=32, **options)
    blocks = find_blocks(model)
    label = model_label("mobilenet_v2", {"depths": [1] * 7, "resolution": 32})
    lut = _hand_lut(blocks, label)
    keep = (1, 0, 1, 0, 0, 1, 1)
    pred = predict_latency(ModelRef.of("mobilenet_v2", options=options, resolution=32),
                           lut, Plan("mobilenet_v2", keep, options), strict=True)
    expected = 0.5e-3 + sum((i + 1) * (1e-3 if k else 0.25e-3) for i, k in enumerate(keep))
    assert pred.total_s == pytest.approx(expected, rel=1e-12)
    assert pred.rest_method == "stem+head" and pred.coverage == 1.0
    assert list(pred.blocks.variant) == ["original" if k else "merged" for k in keep]
    assert pred.fps == pytest.approx(1 / expected)

    # Without stem/head entries: the whole model minus its blocks, both measured (isolated: the savings as timed).
    whole = 40e-3
    lut = _hand_lut(blocks, label, stem_head=False, whole=whole)
    plan = Plan("mobilenet_v2", keep, options)
    pred = predict_latency(ModelRef.of("mobilenet_v2", options=options, resolution=32), lut, plan, method="isolated")
    saved = sum((i + 1) * 0.75e-3 for i, k in enumerate(keep) if not k)
    assert pred.total_s == pytest.approx(whole - saved, rel=1e-12)
    assert pred.rest_method == "model-minus-blocks"
    assert pred.speedup == pytest.approx(whole / (whole - saved), rel=1e-12)  # over the original: the whole model

    # in-model (auto): the savings times the middle of 1 and the blocks' in-model factor, here 40 ms over the 28 ms
    # the blocks take alone (no stem and head: counted as 0)
    phi = whole / sum((i + 1) * 1e-3 for i in range(7))
    pred = predict_latency(ModelRef.of("mobilenet_v2", options=options, resolution=32), lut, plan)
    assert pred.method == f"in-model (x{(1 + phi) / 2:.3f})"
    assert pred.total_s == pytest.approx(whole - (1 + phi) / 2 * saved, rel=1e-12)
    assert pred.speedup == pytest.approx(whole / pred.total_s, rel=1e-12)
    # with stem and head (0.5 ms): phi = (40 - 0.5) / 28
    phi = (whole - 0.5e-3) / sum((i + 1) * 1e-3 for i in range(7))
    pred = predict_latency(ModelRef.of("mobilenet_v2", options=options, resolution=32),
                           _hand_lut(blocks, label, whole=whole), plan)
    assert pred.total_s == pytest.approx(whole - (1 + phi) / 2 * saved, rel=1e-12)


def test_prediction_rest_can_be_chosen():
    options = {"depths": [1] * 7}
    blocks = find_blocks(get_model("mobilenet_v2", resolution=32, **options))
    label = model_label("mobilenet_v2", {"depths": [1] * 7, "resolution": 32})
    both = _hand_lut(blocks, label, stem_head=True, whole=40e-3)
    blocks_s = sum((i + 1) * 1e-3 for i in range(7))
    model, kw = ModelRef.of("mobilenet_v2", options=options, resolution=32), dict(strict=True)
    parts = predict_latency(model, both, rest="stem+head", **kw)
    assert parts.rest_method == "stem+head" and parts.total_s == pytest.approx(0.5e-3 + blocks_s, rel=1e-12)
    auto = predict_latency(model, both, **kw)  # the measured whole model first
    assert auto.rest_method == "model-minus-blocks" and auto.total_s == pytest.approx(40e-3, rel=1e-12)
    assert auto.speedup == 1.0 and auto.original_s == auto.total_s
    assert predict_latency(model, _hand_lut(blocks, label), **kw).rest_method == "stem+head"
    with pytest.raises(LUTMissError, match="stem/head entries"):
        predict_latency(model, _hand_lut(blocks, label, stem_head=False, whole=40e-3), rest="stem+head", **kw)
    with pytest.raises(ValueError, match="rest is"):
        predict_latency(model, both, rest="sum", **kw)


def test_prediction_of_every_block_as_one_variant():
    # Tab. 1's dense counterpart: every block replaced by its FLOPs-matched conv
    options = {"depths": [1] * 7}
    blocks = find_blocks(get_model("mobilenet_v2", resolution=32, **options))
    label = model_label("mobilenet_v2", {"depths": [1] * 7, "resolution": 32})
    frame = _hand_lut(blocks, label).to_dataframe()
    dense = frame[(frame.scope == "block") & (frame.variant == "original")].assign(variant="flops_matched")
    dense["median_s"] /= 8
    lut = LUT(pd.concat([frame, dense], ignore_index=True))
    pred = predict_latency(ModelRef.of("mobilenet_v2", options=options, resolution=32),
                           lut, variant="flops_matched", strict=True)
    assert pred.total_s == pytest.approx(0.5e-3 + sum((i + 1) * 1e-3 / 8 for i in range(7)), rel=1e-12)
    assert set(pred.blocks.variant) == {"flops_matched"}
    with pytest.raises(LUTMissError, match="linear"):  # no such variant in the LUT: a loud miss
        predict_latency(ModelRef.of("mobilenet_v2", options=options, resolution=32),
                        _hand_lut(blocks, label, stem_head=True), variant="linear", strict=True)
    with pytest.raises(ValueError, match="not both"):
        predict_latency(ModelRef.of("mobilenet_v2", options=options, resolution=32),
                        lut, Plan("mobilenet_v2", (1,) * 7, options), variant="flops_matched")


def test_prediction_misses_are_loud():
    model = get_model("mobilenet_v2", resolution=32, depths=[1] * 7)
    lut = _hand_lut(find_blocks(model)[:5], "nothing")
    with pytest.warns(LUTMissWarning, match="lacks 3 key"):
        pred = predict_latency(ModelRef.of("mobilenet_v2", options={"depths": [1] * 7}, resolution=32), lut)
    assert pred.coverage == pytest.approx(5 / 7)
    with pytest.raises(LUTMissError, match="stem/head"):
        predict_latency(ModelRef.of("mobilenet_v2", options={"depths": [1] * 7}, resolution=32), lut, strict=True)


def test_each_blocks_saving_is_priced_by_the_one_rule():
    """What linearising each block saves (the search's latency weights read it): its original entry minus its
    merged one, where merging pays (merged below the unmerged block: here original, no linear entry)."""
    from dsprof.lut.prices import Prices

    blocks = find_blocks(get_model("mobilenet_v2", resolution=32, depths=[1] * 7))
    lut = _hand_lut(blocks, "x")
    costs = Prices.read(lut, lut.resolve(), "x", blocks, method="isolated")
    pieces = [costs.linearized(i) for i in range(7)]
    assert [p.variant for p in pieces] == ["merged"] * 7 and all(p.merges for p in pieces)
    assert [p.saving_s for p in pieces] == pytest.approx([(i + 1) * 0.75e-3 for i in range(7)], rel=1e-12)


def test_cli_build_lut_and_predict(measured, tmp_path, capsys):
    from dsprof.cli import main

    out = tmp_path / "lut.csv"
    assert main(["build-lut", str(measured.parent), "-o", str(out)]) == 0
    assert "entries" in capsys.readouterr().out
    assert len(LUT.load(out)) == len(build_lut([measured]))
    args = ["predict", "--lut", str(out), "--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution", "32"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "coverage 100%" in printed and "0 of 7 blocks merged" in printed and "rest (model-minus-blocks)" in printed
    assert main(args + ["--rest", "stem+head"]) == 0  # measure timed the stem and head too
    assert "rest (stem+head)" in capsys.readouterr().out
    assert main(args + ["--plan", "mbv2-ds-a"]) == 2  # a preset for the 17-block model, on a 7-block one
    assert "mbv2-ds-a is for mobilenet_v2 with options {}, not {'depths': [1, 1, 1, 1, 1, 1, 1]}" in capsys.readouterr().err
    assert main(["build-lut", str(tmp_path / "nothing"), "-o", str(out)]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_build_lut_takes_one_path_as_a_path_not_as_its_letters(measured):
    # dsprof.build_lut("results") iterated over the string's letters ("r does not exist"); one path is one path
    import dsprof

    entries = len(build_lut([measured.parent]))
    assert entries > 7  # seven blocks, each in several variants, and the whole model
    for one in (measured.parent, str(measured.parent), measured, str(measured)):
        assert len(dsprof.build_lut(one)) == entries


def test_prediction_accuracy_metrics():
    from dsprof.lut import prediction_accuracy

    measured = [1.0, 2.0, 3.0, 4.0]
    predicted = [1.04, 2.16, 2.7, 4.0]  # errors 4 %, 8 %, -10 %, 0 %
    acc = prediction_accuracy(predicted, measured)
    assert acc.within_10pct == 1.0 and acc.within_5pct == 0.5
    assert acc.median_abs_error == pytest.approx(0.06)
    assert acc.max_abs_error == pytest.approx(0.10)
    assert acc.kendall_tau == pytest.approx(1.0)
    assert prediction_accuracy([3, 2, 1], [1, 2, 3]).kendall_tau == pytest.approx(-1.0)
    with pytest.raises(ValueError):
        prediction_accuracy([1.0], [0.0])


def test_a_row_deleted_by_hand_is_refused_naming_both_counts_and_accept_modified_takes_the_rest(measured, tmp_path):
    # a new user deleted one row: the message asked for an end line of the count it now has (which the file could not
    # have) and accept_modified did not help
    path = build_lut([measured]).save(tmp_path / "lut.csv")
    lines = path.read_text().splitlines(keepends=True)
    n = sum(1 for line in lines[1:] if not line.startswith("#"))
    path.write_text("".join(lines[:1] + lines[2:]))  # the first row gone
    with pytest.raises(LUTError) as info:
        LUT.load(path)
    assert str(info.value) == (f"{path}: truncated or altered: its end line counts {n} rows, it holds {n - 1}; rebuild "
                               "it with `dsprof.build_lut()`, or pass `accept_modified=True` to use the rows it holds")
    assert len(LUT.load(path, accept_modified=True)) == n - 1
