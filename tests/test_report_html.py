"""report.html: one self-contained page, opened in headless Chromium (tests/chromium.py drives it over the
DevTools protocol): no console errors, no request but the file itself, every figure drawn, every table's numbers
equal to the medians of the records' raw samples (computed here, not read from dsprof's tables), sorting works.
And the planner's front in the report, from a front file written by hand here (the planner's format, version 1).
"""

from __future__ import annotations

import io
import json
import re
import statistics
from pathlib import Path

import pytest

from chromium import Browser, find_chromium
from dsprof.errors import BadFileError
from dsprof.lut import build_lut
from dsprof.profiler.records import read_measurements
from dsprof.reports import device_labels, front_tables, load_front, write_report

FIXTURES = Path(__file__).parent / "fixtures" / "reports"  # real profiler runs of MobileNetV2 (depths 1 x 7) at 32 px
MODEL = "mobilenet_v2 (depths=[1, 1, 1, 1, 1, 1, 1]) 32px"
TINY_KEEP = [1, 0, 1, 0, 0, 1, 1]  # tests/fixtures/reports/tiny-ds.json: k = 4


@pytest.fixture(scope="module")
def records():
    return [r for p in sorted(FIXTURES.glob("*.jsonl")) for r in read_measurements(p)]


def torch_context(records):
    return next(r.context for r in records if r.backend == "torch")


def front_json(records) -> dict:
    """A front as `dsprof plan --out` writes it (format version 1; hand-made numbers: 10 ms for k = 7 down to 3 ms
    for k = 0; `model` is the LUT's label of the model, `name` its registered name)."""
    latencies = [3.0, 3.5, 4.5, 5.5, 6.5, 8.0, 9.0, 10.0]  # ms, k = 0..7
    points = []
    for k, ms in enumerate(latencies):
        keep = [1] * k + [0] * (7 - k)
        points.append({"k": k, "keep": keep, "merge": [not flag for flag in keep], "spans": [[0, 1]] if k == 0 else [],
                       "latency_s": ms / 1e3, "low_s": 0.9 * ms / 1e3, "high_s": 1.1 * ms / 1e3,
                       "speedup": 10.0 / ms, "importance": None})
    context = torch_context(records)
    return {"format": "dsprof.front", "version": 1, "model": 'mobilenet_v2{"depths":[1,1,1,1,1,1,1],"resolution":32}',
            "name": "mobilenet_v2", "options": {"depths": [1] * 7}, "device": str(context), "context": context.as_dict(),
            "method": "isolated", "max_span": 2, "original_s": 0.010, "points": points, "least_loss": None, "pareto": None,
            "presets": [{"name": "tiny-ds", "k": 4, "latency_s": 0.0072, "low_s": 0.0065, "high_s": 0.0079,
                         "front_latency_s": 0.0065, "gap": 0.0072 / 0.0065 - 1, "gap_s": 0.0007, "importance": None}]}


@pytest.fixture(scope="module")
def report(records, tmp_path_factory):
    folder = tmp_path_factory.mktemp("html")
    measurements = folder / "measurements"
    measurements.mkdir()
    for f in FIXTURES.glob("*.jsonl"):
        (measurements / f.name).write_bytes(f.read_bytes())
    (measurements / "tiny.front.json").write_text(json.dumps(front_json(records)))  # found in the inputs
    # the fixtures' tiny-ds model was merged by MACs (tests/fixtures/make_report_fixtures.py): priced and drawn so
    return write_report([measurements], folder / "report", lut=build_lut([FIXTURES]), plans=[FIXTURES / "tiny-ds.json"],
                        accuracies=FIXTURES / "accuracies.csv", merge_by="macs")


def test_front_tables_and_section(records, report):
    front = load_front(report.index.parent.parent / "measurements" / "tiny.front.json")
    points, presets, measured = front_tables(front, records, {"tiny-ds": FIXTURES / "tiny-ds.json"})
    assert list(points["k"]) == list(range(8))
    assert list(points["latency_ms"]) == pytest.approx([3.0, 3.5, 4.5, 5.5, 6.5, 8.0, 9.0, 10.0])
    assert points.loc[0, "spans"] == "0-1" and points.loc[7, "keep"] == "1111111"
    assert list(presets["name"]) == ["tiny-ds"] and presets.loc[0, "latency_ms"] == pytest.approx(7.2)
    # Measured in the front's context only (the torch records): the plan at its k, the original at k = n
    context = torch_context(records)
    median_ms = {r.name: statistics.median(r.samples_s) * 1e3 for r in records
                 if r.context == context and r.scope == "model" and r.variant in ("original", "custom")}
    got = {row.name: (row.k, row.measured_ms) for row in measured.itertuples()}
    assert set(got) == {"tiny-ds", "original"}
    assert got["tiny-ds"][0] == sum(TINY_KEEP) == 4 and got["tiny-ds"][1] == pytest.approx(median_ms["tiny-ds"], rel=1e-12)
    assert got["original"] == (7, pytest.approx(median_ms["mobilenet_v2"], rel=1e-12))
    assert set(measured["device"]) == {device_labels(records)[context]}
    # A front that names the model by its registered name only finds the same measurements
    bare = {k: v for k, v in front.items() if k not in ("name", "options", "context")} | {"model": "mobilenet_v2"}
    assert front_tables(bare, records, {"tiny-ds": FIXTURES / "tiny-ds.json"})[2].equals(measured)

    index = report.index.read_text()
    assert f"## Planner's front: mobilenet_v2 on {device_labels(records)[context]}" in index and "![planner's front](plots/front_tiny-front.png)" in index
    svg = (report.index.parent / "plots" / "front_tiny-front.svg").read_text()
    assert "<title>k=4: predicted 6.5 ms [5.85, 7.15], speed-up 1.54x; keep 1111000; spans none</title>" in svg
    assert f"<title>tiny-ds (k=4), measured on {device_labels(records)[context]}: {median_ms['tiny-ds']:.4g} ms</title>" in svg


def test_a_bad_front_file_is_one_clear_error(tmp_path):
    path = tmp_path / "front.json"
    path.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(BadFileError, match="not a planner's front.*dsprof plan --out"):
        load_front(path)
    path.write_text(json.dumps({"format": "dsprof.front", "version": 1, "model": "m", "device": "d", "original_s": 1,
                                "points": [{"k": 0}]}))
    with pytest.raises(BadFileError, match="lacks high_s, keep, latency_s, low_s"):
        load_front(path)


def test_the_page_needs_nothing_from_outside(report):
    page = report.html.read_text()
    assert report.html.name == "report.html" and report.index.is_file()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and not re.search(r"url\(\s*['\"]?https?:", page)
    assert "<script src" not in page and "<link" not in page
    assert page.count("<figure") == 5  # block latency, memory, accuracy vs FPS, front, prediction
    assert page.count("<svg") == 5 and "<title>" in page


CHROMIUM = find_chromium()


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here and none could be installed (make test runs "
                    "`apt-get install -y chromium` where it is root and has apt)")
def test_report_html_in_headless_chromium(records, report):
    from PIL import Image

    with Browser(CHROMIUM) as browser:
        browser.open(report.html.resolve().as_uri())
        figures = browser.evaluate("""Array.from(document.querySelectorAll("figure.plot")).map(function (f) {
            var r = f.querySelector("svg").getBoundingClientRect();
            return {id: f.id, x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height,
                    titles: f.querySelectorAll("title").length}; })""")
        shots = {f["id"]: browser.screenshot(f["x"], f["y"], f["width"], f["height"]) for f in figures}
        tables = browser.evaluate("""Array.from(document.querySelectorAll("table.sortable")).map(function (t) {
            return {id: t.id, head: Array.from(t.tHead.rows[0].cells).map(function (c) { return c.textContent; }),
                    rows: Array.from(t.tBodies[0].rows).map(function (r) { return Array.from(r.cells).map(function (c) {
                        return c.dataset.value !== undefined ? Number(c.dataset.value) : c.textContent; }); })}; })""")
        # Sorting: a click on the blocks table's original latency header sorts its rows by it, a second reverses them
        sorted_once = browser.evaluate("""(function () {
            var t = document.getElementById("table-blocks"), th = Array.from(t.tHead.rows[0].cells).find(function (c) {
                return c.textContent.indexOf("original_") === 0; });
            function column() { return Array.from(t.tBodies[0].rows).map(function (r) {
                return Number(r.cells[th.cellIndex].dataset.value); }); }
            th.click(); var up = column(); th.click(); return [up, column()]; })()""")
        errors, requests = browser.errors(), browser.requests()

    assert errors == []
    assert requests and all(url == report.html.resolve().as_uri() or url.startswith("data:") for url in requests), requests
    assert sorted(f["id"] for f in figures) == sorted(["figure-block_latency", "figure-memory_tiny-ds", "figure-accuracy_fps",
                                                       "figure-front_tiny-front", "figure-lut_validation"])
    # Hover texts: every point of each curve (2 devices x 7 blocks x 2 curves, and the plan's 4 kept blocks per
    # device); 7 blocks x 2 memory kinds x before/after; 2 models with an accuracy x 2 devices; 8 front points, a
    # preset and 2 measured models; the 4 models predicted
    hover = {"figure-block_latency": 2 * 7 * 2 + 2 * 4, "figure-memory_tiny-ds": 7 * 2 * 2, "figure-accuracy_fps": 2 * 2,
             "figure-front_tiny-front": 8 + 1 + 2, "figure-lut_validation": 4}
    assert {f["id"]: f["titles"] for f in figures} == hover
    for f in figures:
        assert f["width"] > 300 and f["height"] > 250, f
        image = Image.open(io.BytesIO(shots[f["id"]])).convert("L")
        dark = sum(1 for v in image.tobytes() if v < 200) / (image.width * image.height)
        assert 0.01 < dark < 0.6, (f["id"], dark)  # drawn: axes, lines and labels, not a blank or black box
    up, down = sorted_once
    assert up == sorted(up) and down == sorted(up, reverse=True) and len(up) == 14

    # Every number in the tables against the records' raw samples, recomputed here
    by_id = {t["id"]: t for t in tables}
    labels = device_labels(records)
    blocks = by_id["table-blocks"]
    unit = next(h for h in blocks["head"] if h.startswith("original_")).split("_")[1]
    scale = {"ms": 1e3, "µs": 1e6}[unit]
    column = {h: i for i, h in enumerate(blocks["head"])}
    seen = 0
    for r in records:
        if r.scope != "block":
            continue
        row = next(x for x in blocks["rows"] if x[column["device"]] == labels[r.context] and x[column["block"]] == r.name)
        assert row[column[f"{r.variant}_{unit}"]] == pytest.approx(statistics.median(r.samples_s) * scale, rel=1e-9)
        seen += 1
    assert seen == 2 * 7 * 3
    profiling = by_id["table-profiling"]
    column = {h: i for i, h in enumerate(profiling["head"])}
    for r in records:
        if r.scope == "model" and r.variant in ("original", "flops_matched"):
            name = "original FPS" if r.variant == "original" else "dense FPS"
            fps = r.batch / statistics.median(r.samples_s)
            assert profiling["rows"][0][column[f"{labels[r.context]}: {name}"]] == pytest.approx(fps, rel=1e-9)
    validation = by_id["table-lut_validation"]
    column = {h: i for i, h in enumerate(validation["head"])}
    measured = {f"{r.name} [{r.variant}] {labels[r.context]}": statistics.median(r.samples_s) * 1e3
                for r in records if r.scope == "model" and r.variant in ("custom", "merged")}
    assert len(validation["rows"]) == 4
    for row in validation["rows"]:
        assert row[column["measured_ms"]] == pytest.approx(measured[row[column["model"]]], rel=1e-9)
    devices = by_id["table-devices"]
    assert sorted(row[0] for row in devices["rows"]) == sorted(set(labels.values()))
