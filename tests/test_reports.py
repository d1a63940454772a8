import statistics
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dsprof
from dsprof.lut import build_lut
from dsprof.planning.decide import merge_rule
from dsprof.records.plan import Plan
from dsprof.models import find_blocks, get_model
from dsprof.records.measurement import read_measurements
from dsprof.reports import (
    accuracy_fps_figure,
    block_latency_figure,
    block_table,
    device_labels,
    memory_figure,
    memory_table,
    prediction_figure,
    profiling_table,
    render,
    variant_table,
)
from dsprof.reports.plots import close
from dsprof.models import ModelRef

FIXTURES = Path(__file__).parent / "fixtures" / "reports"  # made by make_report_fixtures.py (real profiler runs)


@pytest.fixture(scope="module")
def records():
    return [r for p in sorted(FIXTURES.glob("*.jsonl")) for r in read_measurements(p)]


def _record(records, backend, scope, variant, name=None):
    return next(r for r in records if r.backend == backend and r.scope == scope and r.variant == variant
                and (name is None or r.name == name))


def test_profiling_table_numbers(records):
    table = profiling_table(records)
    assert len(table) == 1 and table.loc[0, "model"] == "mobilenet_v2 (depths=[1, 1, 1, 1, 1, 1, 1]) 32px"
    for backend in ("torch", "onnxruntime"):
        orig, dense = _record(records, backend, "model", "original"), _record(records, backend, "model", "flops_matched")
        d = device_labels(records)[orig.context]
        assert table.loc[0, "GMACs"] == pytest.approx(orig.macs / 1e9, rel=1e-12)
        assert table.loc[0, f"{d}: original FPS"] == pytest.approx(orig.batch / orig.median_s, rel=1e-12)
        assert table.loc[0, f"{d}: dense FPS"] == pytest.approx(dense.batch / dense.median_s, rel=1e-12)
        assert table.loc[0, f"{d}: ratio"] == pytest.approx(orig.median_s / dense.median_s, rel=1e-12)


def test_variant_table_numbers(records):
    table = variant_table(records, {"tiny-ds": 71.2})
    assert list(table["model"]) == ["mobilenet_v2", "mobilenet_v2 (all blocks merged)", "tiny-ds"]
    orig, plan = _record(records, "onnxruntime", "model", "original"), _record(records, "onnxruntime", "model", "custom", "tiny-ds")
    row = table.set_index("model").loc["tiny-ds"]
    d = device_labels(records)[orig.context]
    assert row["accuracy"] == 71.2 and pd.isna(table.loc[0, "accuracy"])
    assert row["MMACs"] == pytest.approx(plan.macs / 1e6)
    assert row[f"{d}: FPS"] == pytest.approx(1 / plan.median_s, rel=1e-12)
    assert row[f"{d}: speed-up"] == pytest.approx(orig.median_s / plan.median_s, rel=1e-12)


def test_block_table_numbers(records):
    table = block_table(records)
    assert len(table) == 2 * 7  # two device contexts, seven blocks
    for r in records:
        if r.scope != "block":
            continue
        row = table[(table.device == device_labels(records)[r.context]) & (table["index"] == r.index)].iloc[0]
        assert row[f"{r.variant}_ms"] == pytest.approx(r.median_s * 1e3, rel=1e-12)
        assert row["spec"] == r.spec
    # Saving and speed-up of every block, from the raw samples of its two records (not from the table's columns)
    labels = device_labels(records)
    median_ms = {(labels[r.context], r.index, r.variant): statistics.median(r.samples_s) * 1e3
                 for r in records if r.scope == "block"}
    for row in table.itertuples():
        original, merged = median_ms[(row.device, row.index, "original")], median_ms[(row.device, row.index, "merged")]
        assert row.saving_ms == pytest.approx(original - merged, rel=1e-9, abs=1e-12)
        assert row.merged_speedup == pytest.approx(original / merged, rel=1e-9)


def test_contexts_differing_only_in_threads_or_layout_get_their_own_columns(records):
    # The same real records, relabelled as if measured again with --threads 1 (they ran on 2) and with --channels-last:
    # three device contexts with the same device name, backend, dtype and batch.
    torch_recs = [r for r in records if r.backend == "torch"]
    one_thread = [replace(r, threads=1, samples_s=tuple(s * 2 for s in r.samples_s)) for r in torch_recs]
    nhwc = [replace(r, layout="channels_last", samples_s=tuple(s * 3 for s in r.samples_s)) for r in torch_recs]
    labels = device_labels(torch_recs + one_thread + nhwc)
    assert len(set(labels.values())) == 3
    one = labels[torch_recs[0].context]
    assert "/ t2" in one and "nchw" in one and labels[one_thread[0].context].endswith("/ t1")
    assert "channels_last" in labels[nhwc[0].context]
    table = profiling_table(torch_recs + one_thread + nhwc)
    orig = _record(torch_recs, "torch", "model", "original")
    fps = 1 / statistics.median(orig.samples_s)
    for recs, factor in ((torch_recs, 1), (one_thread, 2), (nhwc, 3)):
        column = f"{labels[recs[0].context]}: original FPS"
        assert table.loc[0, column] == pytest.approx(fps / factor, rel=1e-9)
    blocks = block_table(torch_recs + one_thread + nhwc)
    assert blocks["device"].nunique() == 3 and len(blocks) == 3 * 7


def test_render_formats(records):
    table = profiling_table(records)
    latex = render(table, "latex")
    assert "\\toprule" in latex and "\\midrule" in latex and "\\bottomrule" in latex and "mobilenet\\_v2" in latex
    md = render(table, "markdown")
    assert md.splitlines()[1].startswith("|:") and "mobilenet_v2" in md
    back = pd.read_csv(__import__("io").StringIO(render(table, "csv")))
    assert back.iloc[0, 1] == pytest.approx(table.iloc[0, 1], rel=1e-12)
    with pytest.raises(ValueError, match="unknown table format"):
        render(table, "html")


def test_latex_groups_device_columns_under_one_header(records):
    latex = render(profiling_table(records), "latex")
    labels = sorted(set(device_labels(records).values()))
    header = latex.split("\\midrule")[0]
    for label in labels:  # each device once, spanning its four columns; the metrics below it
        assert header.count(f"\\multicolumn{{4}}{{c}}{{{label}}}") == 1
    assert header.count("original FPS") == 2 and ": original FPS" not in header
    assert "env" not in header  # the backends tell the contexts apart; no environment hash


def test_latency_units_per_table(records):
    blocks = block_table(records)
    # The ONNX Runtime blocks of this 32 px model take tens of µs: in ms with two decimals they would read 0.02-0.11
    # and a saving 0.00. The whole table is shown in µs; the CSV keeps ms at full precision.
    onnx = next(r for r in records if r.backend == "onnxruntime" and r.scope == "block" and r.variant == "original")
    want_us = statistics.median(onnx.samples_s) * 1e6
    assert want_us < 500
    text = render(blocks, "text")
    assert "original_µs" in text and "original_ms" not in text and f"{want_us:.2f}" in text
    assert "saving_µs" in render(blocks, "markdown") and "original\\_\\textmu{}s" in render(blocks, "latex")
    assert "original_ms" in render(blocks, "csv")
    # A table of latencies well above 0.1 ms stays in ms
    from dsprof.reports import display_units

    slow = pd.DataFrame({"model": ["a", "b"], "original_ms": [12.5, 3.0], "saving_ms": [0.004, 1.5]})
    assert list(display_units(slow).columns) == ["model", "original_ms", "saving_ms"]
    shown = display_units(pd.DataFrame({"model": ["a", "b"], "saving_ms": [0.004, 0.3], "original_ms": [0.05, 3.0]}))
    assert list(shown.columns) == ["model", "saving_µs", "original_µs"]
    assert list(shown["saving_µs"]) == pytest.approx([4.0, 300.0]) and list(shown["original_µs"]) == pytest.approx([50.0, 3000.0])


def test_block_latency_figure_series(records):
    table = block_table(records)
    keep = (1, 0, 1, 0, 0, 1, 1)
    fig = block_latency_figure(table, {"tiny-ds": keep})
    ax = fig.axes[0]
    lines = [l for l in ax.get_lines() if l.get_label() != "_hover"]
    assert len(lines) == 2 * 3  # per device: original, merged, plan markers
    for device, rows in table.groupby("device"):
        solid = next(l for l in lines if l.get_label() == f"original ({device})")  # one model: named in the title
        dashed = next(l for l in lines if l.get_label() == f"merged ({device})")
        assert solid.get_linestyle() == "-" and dashed.get_linestyle() == "--"
        assert list(solid.get_xdata()) == list(range(7))  # block indices, as in the tables
        assert list(solid.get_ydata()) == pytest.approx(list(rows.sort_values("index").original_ms))
        assert list(dashed.get_ydata()) == pytest.approx(list(rows.sort_values("index").merged_ms))
    # The axis names the blocks (MobileNetV2's blocks are features.1..7), not 1..n
    assert [t.get_text() for t in ax.get_xticklabels()] == [f"{i - 1} features.{i}" for i in range(1, 8)]
    assert list(ax.get_xticks()) == list(range(7))
    assert "mobilenet_v2 (depths=[1, 1, 1, 1, 1, 1, 1]) 32px" in ax.get_title()
    markers = [l for l in lines if l.get_marker() == "o" and l.get_linestyle() == "None"]
    assert len(markers) == 2 and list(markers[0].get_xdata()) == [0, 2, 5, 6]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend.count("tiny-ds: activations kept") == 1  # one entry, not one per curve
    assert not any("env " in t for t in legend)  # the backends tell the two contexts apart: no hash
    close([fig])

    # Paper Fig. 1: the dashed line is the FLOPs-matched dense conv instead
    fig = block_latency_figure(table, counterpart="flops_matched")
    for device, rows in table.groupby("device"):
        dashed = next(l for l in fig.axes[0].get_lines() if l.get_label() == f"FLOPs-matched ({device})")
        assert list(dashed.get_ydata()) == pytest.approx(list(rows.sort_values("index").flops_matched_ms))
    close([fig])
    with pytest.raises(ValueError, match="counterpart"):
        block_latency_figure(table, counterpart="linear")


def test_memory_table_and_figure():
    model = get_model("mobilenet_v2", resolution=32, depths=[1] * 7)
    plan = Plan("mobilenet_v2", (1, 0, 1, 0, 0, 1, 1), {"depths": [1] * 7})
    plan = merge_rule(ModelRef.of(model, name="mobilenet_v2"),
                      merge_by="macs").decide(plan).plan  # its merge list, by MACs
    mem = memory_table(model, plan)
    blocks = find_blocks(model)
    # Block 1 (16->96->24, stride 2 at 16x16) merges into one 3x3 conv: 16*24*9 weights + 24 biases;
    # live maps: its input 16x16x16 and output 24x8x8.
    row = mem.iloc[1]
    assert blocks[1].spec.in_channels == 16 and row.merged
    assert row.weight_bytes_after == 2 * (16 * 24 * 9 + 24)
    assert row.peak_activation_bytes_after == 2 * (16 * 16 * 16 + 24 * 8 * 8)
    kept = mem.iloc[0]
    assert kept.weight_bytes_after == kept.weight_bytes_before
    fig = memory_figure(mem)
    top, bottom = fig.axes
    assert [p.get_height() for p in top.patches[:7]] == pytest.approx(list(mem.weight_bytes_before / 1024))
    assert [p.get_height() for p in bottom.patches[7:]] == pytest.approx(list(mem.peak_activation_bytes_after / 1024))
    assert [t.get_text() for t in bottom.get_xticklabels()] == [f"{i} {b.name}" for i, b in enumerate(blocks)]
    close([fig])


def test_prediction_and_accuracy_figures():
    validation = pd.DataFrame({"model": ["a", "b"], "predicted_ms": [1.0, 2.2], "measured_ms": [1.1, 2.0]})
    fig = prediction_figure(validation)
    ax = fig.axes[0]
    points = next(l for l in ax.get_lines() if l.get_label() == "models")
    assert list(points.get_xdata()) == [1.1, 2.0] and list(points.get_ydata()) == [1.0, 2.2]
    band = ax.collections[0].get_paths()[0].vertices
    assert band[:, 1].max() == pytest.approx(1.1 * ax.get_xlim()[1])
    # Every device is a series of its own; the axis says the accuracies' scale
    variants = pd.DataFrame({"model": ["x", "y"], "accuracy": [70.0, None], "dev: FPS": [100.0, 200.0],
                             "other: FPS": [300.0, 50.0]})
    fig2 = accuracy_fps_figure(variants)
    series = {l.get_label(): list(l.get_xdata()) for l in fig2.axes[0].get_lines() if l.get_label() != "_hover"}
    assert series == {"dev": [100.0], "other": [300.0]}
    assert fig2.axes[0].get_ylabel() == "accuracy (%)"
    fig3 = accuracy_fps_figure(variants.assign(accuracy=[0.7, None]), "dev: FPS")
    assert fig3.axes[0].get_ylabel() == "accuracy (fraction)"
    close([fig, fig2, fig3])


def test_write_report_and_cli(tmp_path, records, capsys):
    lut = build_lut([FIXTURES])
    lut_path = lut.save(tmp_path / "lut.csv")
    # the fixtures' tiny-ds model was merged by MACs (tests/fixtures/make_report_fixtures.py): priced and drawn so
    report = dsprof.report([FIXTURES], tmp_path / "report", lut=lut, plans=[FIXTURES / "tiny-ds.json"],
                          accuracies=FIXTURES / "accuracies.csv", merge_by="macs")
    index = report.index.read_text()
    for heading in ("## Devices", "Paper Tab. 1".lower(), "Block-wise latency", "Memory footprint", "Accuracy vs FPS",
                    "LUT prediction vs measurement", "## Noisy entries"):
        assert heading.lower() in index.lower()
    assert "BatchNorm is folded" in index
    assert (tmp_path / "report" / "plots" / "block_latency.png").stat().st_size > 10_000
    for ext in ("md", "csv", "tex", "txt"):
        assert (tmp_path / "report" / "tables" / f"profiling.{ext}").exists()
    validation = pd.read_csv(tmp_path / "report" / "tables" / "lut_validation.csv")
    assert len(validation) == 4  # tiny-ds and all-merged, on two devices
    # the speed-up first: measured against the original timed in the same group (the median per-round ratio)
    assert list(validation.columns[:5]) == ["model", "measured_speedup", "measured_low", "measured_high",
                                            "predicted_speedup"]
    for row in validation.itertuples():
        name, variant = row.model.split(" ")[0], row.model.split(" ")[1].strip("[]")
        timed = [r for r in records if r.scope == "model" and r.name == name and r.variant == variant]
        expected = []
        for r in timed:
            base = next(b for b in records if b.group == r.group and b.scope == "model" and b.variant == "original")
            expected.append(float(np.median(np.array(base.samples_s) / np.array(r.samples_s))))
        assert any(row.measured_speedup == pytest.approx(e, rel=1e-12) for e in expected)
        assert row.predicted_low < row.predicted_speedup < row.predicted_high
    assert report.skipped == []
    # without --merge-by: a LUT of two contexts cannot say which merges to draw; said, not guessed
    plain = dsprof.report([FIXTURES], tmp_path / "plain", lut=lut, plans=[FIXTURES / "tiny-ds.json"])
    assert [s for s in plain.skipped if s.startswith("memory plot")] == [
        "memory plot of tiny-ds: it has no merge list, so a LUT of one context (`lut=`) or `merge_by='macs'` decides its "
        "merges"]  # parameters, as a Python caller gives them; `dsprof report` prints them as its options

    from dsprof.cli import main

    assert main(["report", str(FIXTURES), "-o", str(tmp_path / "r2")]) == 0
    out = capsys.readouterr().out
    assert "skipped: memory plot" in out and "index.md" in out
    assert main(["report", str(tmp_path / "missing"), "-o", str(tmp_path / "r3")]) == 2


def _explanation():
    import pandas as pd

    from dsprof.profiler.explain import OPERATOR_COLUMNS, BlockExplanation

    ops = pd.DataFrame([
        {"operator": "aten::mkldnn_convolution", "shape": "1x16x16x16", "calls": 2.0, "profiled_s": 0.004, "alone_s": None},
        {"operator": "Conv2d conv.0.0", "shape": "1x16x16x16", "calls": 1.0, "profiled_s": None, "alone_s": 0.0005},
        {"operator": "ReLU6 conv.0.2", "shape": "1x96x16x16", "calls": 1.0, "profiled_s": None, "alone_s": 0.0002},
    ], columns=list(OPERATOR_COLUMNS))
    return BlockExplanation("mobilenet_v2", "features.2", "spec", "torch", 2, 1, block_s=0.012, profiled_sum_s=0.004,
                            alone_sum_s=0.0007, single_thread_s=0.001, cpu_share=0.2, switches_per_s=300.0,
                            load_avg_1m=4.0, operators=ops, finding="threads wait for each other")


def test_explain_table_and_annotation(records, tmp_path):
    from dsprof.reports import explain_table

    table = explain_table(_explanation())
    sums = table.set_index("operator")
    assert sums.loc["**sum of the operators**", "profiled_ms"] == pytest.approx(4.0)
    assert sums.loc["**sum of the operators**", "alone_ms"] == pytest.approx(0.7)
    assert sums.loc["**the block timed as a unit**", "profiled_ms"] == pytest.approx(12.0)
    assert sums.loc["**the block on 1 thread**", "profiled_ms"] == pytest.approx(1.0)
    assert sums.loc["Conv2d conv.0.0", "alone_ms"] == pytest.approx(0.5)

    blocks = block_table(records)
    torch_block = next(r for r in records if r.backend == "torch" and r.name == "features.2" and r.variant == "original")
    device = device_labels(records)[torch_block.context]
    model = "mobilenet_v2 (depths=[1, 1, 1, 1, 1, 1, 1]) 32px"
    fig = block_latency_figure(blocks, annotations={(device, model, "features.2"): "features.2: slow"})
    texts = [t for t in fig.axes[0].texts if t.get_text() == "features.2: slow"]
    assert len(texts) == 1  # on the curve it explains only
    assert texts[0].xy[0] == 1 and texts[0].xy[1] == pytest.approx(statistics.median(torch_block.samples_s) * 1e3)
    close([fig])

    folder = tmp_path / "m"
    folder.mkdir()
    for f in FIXTURES.glob("*.jsonl"):
        (folder / f.name).write_bytes(f.read_bytes())
    _explanation().save(folder / "f2.explain.json")
    report = dsprof.report([folder], tmp_path / "report")
    page = report.index.read_text()
    assert "## Why is features.2 slow? (mobilenet_v2, torch, 2 thread(s), batch 1)" in page
    assert "**Finding:** threads wait for each other" in page
    assert (tmp_path / "report" / "tables" / "explain_features-2_torch_t2.csv").is_file()
    svg = (tmp_path / "report" / "plots" / "block_latency.svg").read_text()
    assert svg.count("<title>features.2, original (") == 2  # hover texts on both devices' curves

