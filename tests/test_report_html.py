"""report.html: one self-contained page, opened in headless Chromium (tests/chromium.py drives it over the
DevTools protocol): no console errors, no request but the file itself, every figure drawn, every table's numbers
equal to the medians of the records' raw samples (computed here, not read from dsprof's tables), sorting works.
And the planner's front in the report, from a front file written by hand here (the planner's format, version 1).

The answer first: `make demo`'s loop on a tiny MobileNetV2 through the command line (measure, build-lut, plan,
merge, measure the plans beside the original, report); the page opens with the summary and the front's figure
before any table, nothing is wider than a 1280-pixel window, and the summary's numbers are front.json's and the
paired ratios recomputed here from the raw samples; `dsprof report` prints the same lines last.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import statistics
from pathlib import Path

import pytest

from chromium import Browser, find_chromium
import dsprof
from dsprof.cli import main
from dsprof.errors import BadFileError
from dsprof.lut import LUT, build_lut, predict_latency
from dsprof.records.plan import load_plan
from dsprof.records.measurement import read_measurements
from dsprof.reports import device_labels, front_tables, load_front
from dsprof.models import ModelRef
from rule_lut import rule_lut

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: one thread (as under `make test`'s workers)

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
        points.append({"k": k, "keep": keep, "merge": [not flag for flag in keep], "spans": [[0, 2]] if k == 0 else [],
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
    return dsprof.report([measurements], folder / "report", lut=build_lut([FIXTURES]), plans=[FIXTURES / "tiny-ds.json"],
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
    # The plan's speed-up is paired: the median of the per-round ratios over the original of its group
    ratios = sorted(round_ratios(records, context, "tiny-ds"))
    row = measured.set_index("name").loc["tiny-ds"]
    assert row["speedup"] == pytest.approx(statistics.median(ratios), rel=1e-12)
    assert (row["speedup_low"], row["speedup_high"]) == (ratios[0], ratios[-1])  # 3 rounds: the full range
    assert measured.set_index("name").loc["original", "speedup"] == 1.0
    # A front that names the model by its registered name only finds the same measurements
    bare = {k: v for k, v in front.items() if k not in ("name", "options", "context")} | {"model": "mobilenet_v2"}
    assert front_tables(bare, records, {"tiny-ds": FIXTURES / "tiny-ds.json"})[2].equals(measured)

    index = report.index.read_text()
    assert f"## Planner's front: mobilenet_v2 on {device_labels(records)[context]}" in index and "![planner's front](plots/front_tiny-front.png)" in index
    svg = (report.index.parent / "plots" / "front_tiny-front.svg").read_text()
    # k = 4: 10 / 6.5 ms predicted, its interval 10 / (6.5 ms +- 10 %)
    assert "<title>k=4: predicted 1.54x [1.40, 1.71], 6.5 ms; keep 1111000; spans none</title>" in svg
    assert (f"<title>tiny-ds (k=4), measured on {device_labels(records)[context]}: {statistics.median(ratios):.2f}x "
            f"[{ratios[0]:.2f}, {ratios[-1]:.2f}], {median_ms['tiny-ds']:.4g} ms</title>") in svg
    data = (report.index.parent / "plots" / "front_tiny-front.csv").read_text().splitlines()
    assert data[0].startswith("set,") and len(data) == 1 + 8 + 1 + 2  # the figure's data: points, preset, measured


def round_ratios(records, context, name: str) -> list[float]:
    """The original's time over plan ``name``'s, round by round, from the raw samples of their one group."""
    plan = next(r for r in records if r.context == context and r.scope == "model" and r.name == name)
    original = next(r for r in records if r.group == plan.group and r.scope == "model" and r.variant == "original")
    assert len(original.samples_s) == len(plan.samples_s)
    return [o / p for o, p in zip(original.samples_s, plan.samples_s)]


def test_a_bad_front_file_is_one_clear_error(tmp_path):
    path = tmp_path / "front.json"
    path.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(BadFileError, match=r"not a planner's front.*; write one with "
                                            r"`dsprof\.plan\(model=MODEL, lut=LUT, out='FRONT\.json'\)`$"):
        load_front(path)
    path.write_text(json.dumps({"format": "dsprof.front", "version": 1, "model": "m", "device": "d", "original_s": 1,
                                "points": [{"k": 0}]}))
    with pytest.raises(BadFileError, match="lacks high_s, keep, latency_s, low_s"):
        load_front(path)


def test_a_python_caller_is_told_calls_that_run_as_written(records, tmp_path, monkeypatch):
    """Issue #44: a report without a front names the calls that write one and read it, each runnable once its
    capitals are filled in (the plan's with the parameters `dsprof.plan` takes; the report's with its records and
    folder, and one front file as a plain path); a folder that is a file is refused in a Python caller's words, no
    short flag; one path may be given as a string, as `dsprof.build_lut` takes it."""
    import inspect

    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken").write_text("")
    with pytest.raises(dsprof.errors.OutputPathError) as caught:
        dsprof.report(str(FIXTURES), "taken")
    assert str(caught.value) == "cannot write the report in taken: taken is a file, not a folder; choose another `out=` folder"
    answer = dsprof.report(str(FIXTURES), "first").answer  # one folder as a string, not its letters
    assert answer[0] == ("No planner's front among the inputs: `dsprof.plan(model=MODEL, lut=LUT, out='FRONT.json')` "
                         "writes one, and `dsprof.report(FILES, out=OUT, fronts='FRONT.json')` opens with what it predicts.")
    inspect.signature(dsprof.plan).bind(model="MODEL", lut="LUT", out="FRONT.json")  # raises where it would not run
    (tmp_path / "FRONT.json").write_text(json.dumps(front_json(records)))
    call = re.search(r"`(dsprof\.report\(.*?\))`", answer[0])[1].replace("FILES", repr(str(FIXTURES))).replace("OUT", "'second'")
    again = eval(call, {"dsprof": dsprof})  # as written, its capitals filled in
    assert again.answer[0].startswith("On ") and "DepthShrinker's plans run up to 3.33x faster (k = 0" in again.answer[1]


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
    # preset and the measured plan; the 4 models predicted
    hover = {"figure-block_latency": 2 * 7 * 2 + 2 * 4, "figure-memory_tiny-ds": 7 * 2 * 2, "figure-accuracy_fps": 2 * 2,
             "figure-front_tiny-front": 8 + 1 + 1, "figure-lut_validation": 4}
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


# -- the answer first -------------------------------------------------------------------------------------------
TINY = ["--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution", "32"]
QUICK = ["--threads", "1", "--warmup", "0", "--max-warmup", "0.05", "--min-samples", "3", "--max-samples", "4", "--budget", "0.01",
         "--min-sample-time", "0", "--no-progress"]
CHECK = ["--threads", "1", "--warmup", "0.02", "--max-warmup", "0.05", "--min-samples", "6", "--max-samples", "6",
         "--budget", "1", "--no-progress"]  # 6 rounds: the interval of the median of 6 paired ratios is their full range;
# warm-up capped at 0.05 s (the first group's default 0.5 s floor, up to 2 s unsettled): no assertion reads how fast
# anything ran, only that the summary's numbers are the ratios of the raw samples, recomputed here
K = sum(TINY_KEEP)  # tiny-ds stands in for the paper's preset at this k (the paper has none for this model)


def cli(*args) -> list[str]:
    """`dsprof ARGS` in this process; its exit status must be 0; returns its stdout's lines."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([str(a) for a in args])
    assert code == 0, (args, out.getvalue())
    return out.getvalue().splitlines()


@pytest.fixture(scope="module")
def answer(tmp_path_factory):
    """`make demo`'s loop, small: measure what the planner needs, build the LUT, plan every k (writing the plan of
    k = 4), merge the stand-in preset with the LUT's merges, time both merged models beside the original in one
    group, report. Returns the folder, the front as written and what `dsprof report` printed. The LUT's medians
    follow tests/rule_lut.py's rule (the planner refuses a table whose blocks a busy clock timed above the whole
    model); the check run's timings, which the summary's measured numbers come from, stay as timed."""
    d = tmp_path_factory.mktemp("answer")
    cli("measure", *TINY, *QUICK, "--variants", "original,merged,linear", "--spans", "2", "--model-variants",
        "original", "--out", d / "measurements")
    cli("build-lut", d / "measurements", "-o", d / "lut.csv")
    rule_lut(d / "lut.csv", d / "measurements")
    cli("plan", *TINY, "--lut", d / "lut.csv", "--max-span", 2, "--keep", K, "--out", d / "plans" / "front.json")
    # The front's presets are the paper's, none for this model: tiny-ds is added as the planner adds a preset,
    # priced by the same LUT (`predict_latency`), set against the front's plan of its k
    front = json.loads((d / "plans" / "front.json").read_text())
    preset = predict_latency(ModelRef.of("mobilenet_v2", options={"depths": [1] * 7}, resolution=32),
                             LUT.load(d / "lut.csv"), load_plan(FIXTURES / "tiny-ds.json"))
    at_k = next(p for p in front["points"] if p["k"] == K)
    front["presets"] = [{"name": "tiny-ds", "k": K, "latency_s": preset.total_s, "low_s": preset.low_s,
                         "high_s": preset.high_s, "front_latency_s": at_k["latency_s"],
                         "gap": preset.total_s / at_k["latency_s"] - 1, "importance": None}]
    (d / "plans" / "front.json").write_text(json.dumps(front))
    cli("merge", *TINY, "--plan", FIXTURES / "tiny-ds.json", "--lut", d / "lut.csv", "--out", d / "plans" / "tiny-ds.pt")
    cli("measure", *TINY, *CHECK, "--blocks", "none", "--model-variants", "original", "--plan",
        d / "plans" / "front.plan.json", "--merged-model", d / "plans" / "tiny-ds.pt", "--out", d / "checks")
    printed = cli("report", d / "measurements", d / "checks", "--lut", d / "lut.csv", "--plans",
                  d / "plans" / "front.plan.json", d / "plans" / "tiny-ds.pt", "--front", d / "plans" / "front.json",
                  "-o", d / "report")
    return d, front, printed


def expected_answer(folder: Path, front: dict) -> dict[str, str]:
    """The summary's numbers, from front.json and from the raw samples of the check run (recomputed here)."""
    records = [r for p in sorted((folder / "checks").glob("*.jsonl")) for r in read_measurements(p)]
    context = records[0].context
    best = max(front["points"], key=lambda p: p["speedup"])  # the first of equals: the lowest k
    planner = next(p for p in front["points"] if p["k"] == K)
    numbers = {"best": f"up to {best['speedup']:.2f}x faster (k = {best['k']},"}
    for label, name, predicted in (("the planner's plan is", f"front-k{K}-torch", planner["speedup"]),
                                   ("the paper's preset TINY-DS", "tiny-ds", front["original_s"] / front["presets"][0]["latency_s"])):
        ratios = sorted(round_ratios(records, context, name))
        assert len(ratios) == 6
        numbers[name] = (f"{label} {predicted:.2f}x (measured {statistics.median(ratios):.2f}x, "
                         f"95 % {ratios[0]:.2f}-{ratios[-1]:.2f}x)")
    return numbers


@pytest.mark.slow  # the fixture runs the whole loop: 20-45 s on a shared 2-core CPU
def test_report_prints_the_answer_last(answer):
    folder, front, printed = answer
    lines = printed[-3:]
    assert lines[0].startswith("On ") and "mobilenet_v2" in lines[0] and "1 thread" in lines[0]
    numbers = expected_answer(folder, front)
    assert numbers["best"] in lines[1]
    assert lines[2].startswith(f"at k = {K} ") and numbers[f"front-k{K}-torch"] in lines[2] and numbers["tiny-ds"] in lines[2]
    index = (folder / "report" / "index.md").read_text()
    assert index.index(" ".join(lines)) < index.index("![planner's front]") < index.index("|")  # before any table


@pytest.mark.slow
def test_the_fronts_own_plan_file_counts_its_run_as_measured_without_being_given_again(answer):
    # found by a new user: `dsprof plan --out front.json` writes front.plan.json beside it, `dsprof measure --plan
    # front.plan.json` times it; `dsprof report` given the front, not the plan again, said "no plan of this front
    # was measured beside the original yet". It reads the front's own plan file now.
    folder, front, _ = answer
    printed = cli("report", folder / "measurements", folder / "checks", "--front", folder / "plans" / "front.json",
                  "-o", folder / "report-front-only")
    numbers = expected_answer(folder, front)
    assert printed[-1].startswith(f"at k = {K} ") and numbers[f"front-k{K}-torch"] in printed[-1]
    assert "no plan of this front was measured" not in " ".join(printed)


# Every element's box inside the window, and no box with content that overflows it sideways (a scrolled table)
FITS = """(function () {
    var wide = [];
    document.querySelectorAll("body *").forEach(function (e) {
        var r = e.getBoundingClientRect();
        if (r.right > window.innerWidth + 0.5 || r.left < -0.5 || e.scrollWidth > e.clientWidth + 1)
            wide.push(e.tagName + (e.id ? "#" + e.id : "") + " " + Math.round(r.left) + "-" + Math.round(r.right)
                      + " scroll " + e.scrollWidth + "/" + e.clientWidth);
    });
    return {page: document.documentElement.scrollWidth, window: window.innerWidth, wide: wide};
})()"""

# Document order of the summary, the first figure and the first table; where the first two sit
ORDER = """(function () {
    var all = Array.from(document.querySelectorAll("body *")), summary = document.getElementById("summary");
    var figure = document.querySelector("figure.plot"), table = document.querySelector("table");
    return {summary: all.indexOf(summary), figure: all.indexOf(figure), table: all.indexOf(table), id: figure.id,
            text: summary.textContent, summaryTop: summary.getBoundingClientRect().top,
            figureTop: figure.getBoundingClientRect().top, tables: document.querySelectorAll("table").length,
            blockTitles: Array.from(document.querySelectorAll("#table-blocks td[title]")).map(function (c) {
                return [c.textContent, c.title]; })};
})()"""


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here and none could be installed (make test runs "
                    "`apt-get install -y chromium` where it is root and has apt)")
def test_the_page_opens_with_the_answer_and_fits_the_window(answer, report, records):
    folder, front, printed = answer
    with Browser(CHROMIUM) as browser:
        browser.open((folder / "report" / "report.html").resolve().as_uri(), 1280, 900)
        order, fits = browser.evaluate(ORDER), browser.evaluate(FITS)
        errors = browser.errors()
        browser.events.clear()  # the other report, in the same browser: its own load event waited for, not this one's
        browser.open(report.html.resolve().as_uri(), 1280, 900)  # two devices, every table and figure
        fits_all, order_all = browser.evaluate(FITS), browser.evaluate(ORDER)

    assert errors == []
    # The summary, then the front's figure, then the tables; the first two on the first screen
    assert 0 <= order["summary"] < order["figure"] < order["table"] and order["tables"] >= 5
    assert order["id"] == "figure-front_front" and order["summaryTop"] < order["figureTop"] < 900
    assert order["text"] == " ".join(printed[-3:])  # the page's paragraph is what `dsprof report` printed
    for number in expected_answer(folder, front).values():
        assert number in order["text"], (number, order["text"])
    # Nothing wider than the window, on either page
    for fit in (fits, fits_all):
        assert fit["wide"] == [] and fit["page"] <= fit["window"] == 1280, fit
    assert order_all["summary"] < order_all["figure"] < order_all["table"]
    # A block's short name in the table, its full spec on hover
    specs = {r.name: r.spec for r in records if r.scope == "block"}
    assert len(order_all["blockTitles"]) == 2 * 7
    assert all(specs[name] == spec for name, spec in order_all["blockTitles"])
