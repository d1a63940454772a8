"""Files from someone else (issue #45): whatever a record, a front, a plan or a bundle's manifest holds, dsprof writes
nothing outside the output folder, no script link or raw HTML into a page, no formula into a CSV cell, no LaTeX
command into a table, and no traceback -- each crafted input through the real command line (`dsprof_here`), on the
32 px report fixtures (real profiler runs). The escapes themselves are checked against what was worked out by hand."""

from __future__ import annotations

import ast
import csv
import hashlib
import json
import os
import re
import subprocess
from html import unescape
from pathlib import Path

import pytest

from cli_run import dsprof_here
from dsprof.errors import OutputPathError
from dsprof.fields import shown
from dsprof.io import csv_cell, csv_frame, output_path, slug
from dsprof.records.measurement import MeasurementWriter, read_measurements, record_checksum
from dsprof.reports.escape import latex_escape, markdown_safe, safe_link
from dsprof.reports.front import FRONT_FORMAT

FIXTURES = Path(__file__).parent / "fixtures" / "reports"  # made by make_report_fixtures.py (real profiler runs)

#: One text that tries every class at once: a formula (at its start), mathtext, a script link, raw HTML, LaTeX.
HOSTILE = ("=cmd|' /C calc'!A0 $\\undefinedmacro$ [x](javascript:alert%28document.domain%29) "
           "<script>alert(1)</script><img src=x onerror=alert(1)> \\input{/etc/passwd} ~^&%#_{}")
ESCAPING_STEM = "x/../../../../outside/FRONTESC"


# -- what a written report must hold, checked independently of dsprof's own escapes ------------------------------

def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _assert_harmless(report: Path) -> None:
    """No script link or raw script in the pages, no formula cell in any CSV, no LaTeX command from the data."""
    html = (report / "report.html").read_text()
    hrefs = re.findall(r'href="([^"]*)"', html)
    assert hrefs, "the page links its CSV and LaTeX files"
    for href in hrefs:
        target = unescape(href).strip()
        assert re.match(r"(https?://|#[A-Za-z0-9_-]+$|(tables|plots)/[A-Za-z0-9._-]+$)", target), href  # #: SVG's own
    assert html.count("<script") == 1  # the page's own sorting script, and nothing from the data
    assert "<img" not in html and "onerror=" not in html.replace("onerror=alert(1)&gt;", "")
    index = (report / "index.md").read_text()
    assert "<script" not in index and "<img" not in index
    for target in re.findall(r"(?<!\\)\]\(\s*([^)\s]*)", index):  # every Markdown link left in index.md
        assert re.match(r"(tables|plots)/[A-Za-z0-9._-]+$", target), target
    assert "[x](javascript:" not in index.replace("[x\\](javascript:", "")
    cells = 0
    for table in [*(report / "tables").glob("*.csv"), *(report / "plots").glob("*.csv")]:
        for row in csv.reader(table.read_text().splitlines()):
            for cell in row:
                cells += 1
                assert not cell.startswith(("=", "+", "-", "@")) or _is_number(cell), (table.name, cell)
    assert cells > 100
    for tex in (report / "tables").glob("*.tex"):
        assert "\\input{" not in tex.read_text(), tex.name


def _front(path: Path) -> Path:
    """A front (`dsprof plan --out` format, written by hand) whose name, preset name and stem are hostile."""
    record = read_measurements(FIXTURES / "tiny_torch.jsonl")[0]
    original = 1e-3
    points = [{"k": k, "keep": [1] * k + [0] * (7 - k), "latency_s": original * (0.6 + 0.05 * k),
               "low_s": original * (0.55 + 0.05 * k), "high_s": original * (0.65 + 0.05 * k)} for k in range(8)]
    front = {"format": FRONT_FORMAT, "version": 1, "model": "mobilenet_v2", "device": str(record.context),
             "original_s": original, "points": points, "name": HOSTILE, "stem": ESCAPING_STEM,
             "presets": [{"name": HOSTILE, "k": 3, "latency_s": original * 0.8}]}
    path.write_text(json.dumps(front))
    return path


def test_a_hostile_front_and_plan_write_inside_the_report_and_harmlessly(tmp_path):
    """The issue's front (stem ``x/../../../../outside/FRONTESC``, ``report/plots/front_x/`` already there as in a
    results folder someone sent) and a plan whose name holds every class: exit 0, every file inside the report
    folder under its slugged name, and nothing in it that a browser, a spreadsheet or LaTeX would run."""
    (tmp_path / "outside").mkdir()
    report = tmp_path / "deep" / "er" / "report"
    (report / "plots" / "front_x").mkdir(parents=True)
    plan = json.loads((FIXTURES / "tiny-ds.json").read_text())
    (tmp_path / "plan.json").write_text(json.dumps(dict(plan, name=HOSTILE)))
    front = _front(tmp_path / "f.json")
    inputs = _files(tmp_path)
    done = dsprof_here("report", FIXTURES / "tiny_torch.jsonl", "-o", report, "--front", front,
                       "--plans", tmp_path / "plan.json", "--merge-by", "macs")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert not any((tmp_path / "outside").iterdir()) and not (tmp_path / "deep" / "outside").exists()
    written = _files(tmp_path) - inputs
    assert written and all(report in p.parents for p in written)
    # the stem slugged by hand: separators and ".." runs to one "-", so "front_x-outside-FRONTESC"
    for ext in ("png", "svg", "csv"):
        assert (report / "plots" / f"front_x-outside-FRONTESC.{ext}").is_file()
    for ext in ("csv", "md", "tex", "txt"):
        assert (report / "tables" / f"front_x-outside-FRONTESC.{ext}").is_file()
    assert list((report / "plots" / "front_x").iterdir()) == []
    memory = [p.name for p in (report / "plots").glob("memory_*.png")]
    assert len(memory) == 1 and re.fullmatch(r"memory_[A-Za-z0-9._-]+\.png", memory[0])
    _assert_harmless(report)
    presets = (report / "tables" / "front_x-outside-FRONTESC_presets.csv").read_text()
    assert "'=cmd|' /C calc'!A0" in presets  # the formula shown as text (OWASP: a leading quote)
    tex = (report / "tables" / "front_x-outside-FRONTESC_presets.tex").read_text()
    assert ("\\textbackslash{}input\\{/etc/passwd\\} \\textasciitilde{}\\textasciicircum{}\\&\\%\\#\\_\\{\\}" in tex)
    assert "\\$\\textbackslash{}undefinedmacro\\$" in tex


def test_a_link_in_a_results_folder_cannot_lead_the_report_outside(tmp_path):
    """``report/plots`` a link to a folder elsewhere (as a folder someone sent may hold): refused in one line naming
    the link, and nothing written through it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    report = tmp_path / "report"
    report.mkdir()
    (report / "plots").symlink_to(outside, target_is_directory=True)
    done = dsprof_here("report", FIXTURES / "tiny_torch.jsonl", "-o", report)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert f"{report / 'plots'} is a link to {outside}" in done.stderr and "outside the output folder" in done.stderr
    assert list(outside.iterdir()) == []


def test_a_hostile_device_name_is_refused_in_one_line_or_written_harmlessly(tmp_path):
    """The issue's records: device names with a script link, raw HTML, a formula, mathtext and LaTeX, checksums
    recomputed. Either refused in one line naming the field (validation on load) or reported with nothing harmful:
    no traceback either way (mathtext raised one before)."""
    lines = []
    for line in (FIXTURES / "tiny_torch.jsonl").read_text().splitlines():
        record = dict(json.loads(line), device_name=HOSTILE)
        record["sha256"] = record_checksum(record)
        lines.append(json.dumps(record))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "hostile.jsonl").write_text("\n".join(lines) + "\n")
    done = dsprof_here("report", tmp_path / "in", "-o", tmp_path / "report")
    assert "Traceback" not in done.stderr
    if done.returncode == 2:
        assert len(done.stderr.strip().splitlines()) == 1 and "device" in done.stderr
        return
    assert done.returncode == 0, done.stderr
    _assert_harmless(tmp_path / "report")
    html = (tmp_path / "report" / "report.html").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown as text
    devices = (tmp_path / "report" / "tables" / "devices.csv").read_text()
    assert "\n'=cmd|' /C calc'!A0" in devices


# -- the one output path -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("mobilenet_v2_224px_onnxruntime_cpu_fp32_b1", "mobilenet_v2_224px_onnxruntime_cpu_fp32_b1"),  # dsprof's own
    ("MBV2-1.4-DS-A", "MBV2-1.4-DS-A"),
    ("/../../../outside/ESCAPED", "outside-ESCAPED"),
    ("x/../../../../outside/FRONTESC", "x-outside-FRONTESC"),
    ("..", "unnamed"), ("", "unnamed"), (".hidden", "hidden"), ("a\\b", "a-b"),
    ("cpu$(touch PWN)", "cpu-touch-PWN"), ("café ☕", "caf"), ("a\x00b\nc", "a-b-c"),
])
def test_slug_keeps_safe_names_and_flattens_the_rest(text, expected):
    assert slug(text) == expected


def test_slug_bounds_the_length_and_keeps_long_names_apart():
    a, b = slug("a" * 300), slug("a" * 299 + "b")
    assert len(a) == len(b) == 120 and a != b and a.startswith("a" * 100)


def test_output_path_refuses_a_path_through_a_link_that_leads_out(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    assert output_path(out, "plots", "front_x/../../a", suffix=".png") == out / "plots" / "front_x-a.png"
    (out / "plots").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(OutputPathError, match="is a link to .*outside the output folder"):
        output_path(out, "plots", "a", suffix=".png")
    (out / "inside").symlink_to(out / "tables")  # a link that stays inside is fine
    assert output_path(out, "inside", "t.csv") == out / "inside" / "t.csv"


def test_the_measurement_writer_does_not_write_through_a_link(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (tmp_path / "run.jsonl").symlink_to(victim)
    with pytest.raises(OutputPathError, match="it is a link"):
        MeasurementWriter(tmp_path / "run.jsonl")
    assert victim.read_text() == "keep me\n"


# -- the escapes -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cell, expected", [
    ("=cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0"), ("+x", "'+x"), ("-x", "'-x"), ("@SUM(A1)", "'@SUM(A1)"),
    ("\tx", "'\tx"), ("-0.5", "-0.5"), ("+1e3", "+1e3"), ("-inf", "-inf"), ("a=b", "a=b"), (-2.5, -2.5), (None, None),
])
def test_csv_cell_neutralises_formulas_only(cell, expected):
    assert csv_cell(cell) == expected


def test_csv_frame_keeps_numbers_and_quotes_formulas_in_cells_and_headers():
    import pandas as pd

    frame = pd.DataFrame({"=h": ["=1+1", "ok"], "ms": [-0.25, 1.5]})
    text = csv_frame(frame).to_csv(index=False)
    assert text == "'=h,ms\n'=1+1,-0.25\nok,1.5\n"
    assert list(frame.columns) == ["=h", "ms"] and frame.iloc[0, 0] == "=1+1"  # the input is not changed


@pytest.mark.parametrize("target, ok", [
    ("plots/front.png", True), ("tables/a:b.csv", True), ("https://pytorch.org", True), ("HTTP://x", True),
    ("javascript:alert%28document.domain%29", False), ("JaVaScRiPt:x", False), (" java\tscript:x", False),
    ("java&#115;cript:x", False), ("data:text/html,<b>", False), ("vbscript:x", False), ("file:///etc/passwd", False),
    ("/etc/passwd", False), ("//evil.example", False), ("\\\\host\\share", False), ("", False),
])
def test_safe_link(target, ok):
    assert safe_link(target) is ok


def test_markdown_safe_defuses_links_and_raw_html_and_keeps_its_own():
    text = ("![block latency](plots/block_latency.png) (data as [CSV](plots/block_latency.csv)) "
            "[x](javascript:alert(1)) ![y](data:image/png;base64,AA) [r]: javascript:x <script>alert(1)</script> "
            "already \\[z\\](javascript:y)")
    assert markdown_safe(text) == (
        "![block latency](plots/block_latency.png) (data as [CSV](plots/block_latency.csv)) "
        "[x\\](javascript:alert(1)) ![y\\](data:image/png;base64,AA) [r\\]: javascript:x &lt;script>alert(1)&lt;/script> "
        "already \\[z\\](javascript:y)")


def test_latex_escape_escapes_every_special_character():
    assert latex_escape(r"\input{/etc/passwd} ~^&%$#_ 5 µs") == (
        r"\textbackslash{}input\{/etc/passwd\} \textasciitilde{}\textasciicircum{}\&\%\$\#\_ 5 \textmu{}s")


def test_figures_show_dollar_signs_as_text():
    """mathtext is never parsed: a name with ``$\\undefinedmacro$`` draws (it raised ParseFatalException)."""
    import io

    import pandas as pd

    from dsprof.reports.plots import close, prediction_figure

    table = pd.DataFrame({"model": ["$\\undefinedmacro$"], "measured_ms": [1.0], "predicted_ms": [1.1],
                          "device": ["$\\frac{a}{$"]})
    fig = prediction_figure(table)
    fig.savefig(io.BytesIO(), format="png")
    texts = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_parse_math"))]
    assert "$\\frac{a}{$" in texts
    assert not any(t.get_parse_math() for t in fig.findobj(lambda a: hasattr(a, "get_parse_math")))
    close([fig])


def test_no_predictable_temporary_file_is_followed(tmp_path):
    """What `dsprof import` writes goes through a fresh temporary file (mkstemp), not ``.NAME.tmp``: a link planted
    at that name is left alone, and so is the file it points to."""
    from dsprof.io import atomic_output

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    target = tmp_path / "out" / "m.jsonl"
    target.parent.mkdir()
    (target.parent / ".m.jsonl.tmp").symlink_to(victim)
    with atomic_output(target) as tmp, MeasurementWriter(tmp) as writer:
        assert not Path(tmp).is_symlink()
        writer.write([])
    assert victim.read_text() == "keep me\n" and target.is_file()
    assert os.path.islink(target.parent / ".m.jsonl.tmp")


def test_the_lut_file_holds_no_formula_cell(tmp_path):
    """A LUT whose device name would be a formula is refused where it is made (dsprof.fields); a source file name that
    would be one in a spreadsheet is written as text (a leading
    quote), the numbers as they were, and the end line's checksum over the text as written (docs/lut.md)."""
    from dsprof.lut import LUT, build_lut

    from dsprof.errors import LUTError

    lut = build_lut([FIXTURES / "tiny_torch.jsonl"])
    with pytest.raises(LUTError, match="device_name"):  # a device name is checked where a LUT is made (dsprof.fields)
        LUT(lut.to_dataframe().assign(device_name="=cmd|' /C calc'!A0"), "crafted")
    frame = lut.to_dataframe().assign(sources="@SUM(A1).jsonl")  # free text: written as text, not as a formula
    path = LUT(frame, "crafted").save(tmp_path / "lut.csv")
    rows = list(csv.DictReader(line for line in path.read_text().splitlines() if not line.startswith("#")))
    assert len(rows) == len(frame) > 10
    assert {r["sources"] for r in rows} == {"'@SUM(A1).jsonl"}
    assert [float(r["median_s"]) for r in rows] == list(frame["median_s"])
    for row in rows:
        for cell in row.values():
            assert not cell.startswith(("=", "+", "-", "@")) or _is_number(cell)
    text = path.read_text()
    body, end = text[: text.rindex("# end")], text[text.rindex("# end"):]
    assert end == f"# end rows={len(frame)} sha256={hashlib.sha256(body.encode()).hexdigest()}\n"  # docs/lut.md


# -- data never prints as a command ------------------------------------------------------------------------------

#: A name that, were it read as dsprof's own words, would print as a suggested command holding a shell substitution.
COMMAND_NAME = "x `dsprof.measure(model='evil', out='$(touch PWNED)')` y"


def _refused_without_a_command(done: subprocess.CompletedProcess, field: str) -> None:
    """One line on stderr, exit 2, naming ``field``; the name shown with each backquote as Python's ``\\x60``, and no
    ``dsprof measure`` command anywhere."""
    assert done.returncode == 2 and "Traceback" not in done.stderr
    line, = done.stderr.strip().splitlines()
    assert f"field '{field}'" in line and "backquote" in line
    assert "`dsprof.measure" not in line and "\\x60dsprof.measure(model=" in line
    assert "dsprof measure" not in done.stdout + done.stderr and "PWNED" not in done.stdout


def test_a_name_from_a_file_never_prints_as_a_command(tmp_path):
    """A plan's name (`merge`, `predict`) and a front's name (`report`) holding a backquoted dsprof call: dsprof's
    messages keep backquotes for what the command line shows as its own options and commands, so a name from a file
    that holds one is refused in one line (it printed as "`dsprof measure --model evil --out '$(touch PWNED)'`"
    before), at `dsprof search --name`'s door too, before any search; nothing is written."""
    plan = json.loads((FIXTURES / "tiny-ds.json").read_text())
    (tmp_path / "plan.json").write_text(json.dumps(dict(plan, name=COMMAND_NAME)))
    model = ["--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution", "32"]
    _refused_without_a_command(dsprof_here("merge", *model, "--plan", tmp_path / "plan.json", "--merge-by", "macs",
                                           "--out", tmp_path / "m.pt"), "name")
    lut = tmp_path / "lut.csv"
    assert dsprof_here("build-lut", FIXTURES / "tiny_torch.jsonl", "-o", lut).returncode == 0
    _refused_without_a_command(dsprof_here("predict", *model, "--lut", lut, "--plan", tmp_path / "plan.json"), "name")
    front = json.loads(_front(tmp_path / "f.json").read_text())
    (tmp_path / "f.json").write_text(json.dumps(dict(front, name=COMMAND_NAME, stem="f",
                                                     presets=[{"name": "p", "k": 3, "latency_s": 1e-3}])))
    _refused_without_a_command(dsprof_here("report", FIXTURES / "tiny_torch.jsonl", "-o", tmp_path / "report",
                                           "--front", tmp_path / "f.json"), "name")
    done = dsprof_here("search", *model, "--method", "random", "--keep", "2", "--name", COMMAND_NAME,
                       "--out", tmp_path / "s.json")
    assert done.returncode == 2 and "--name" in done.stderr and "backquote" in done.stderr
    assert "dsprof measure" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.json", "lut.csv", "plan.json"]


def test_a_value_shown_in_a_message_reads_back_as_itself():
    """`dsprof.fields.shown`: Python's repr with each backquote as ``\\x60``, the escape Python reads back."""
    for value in ("a`b", "`dsprof.blocks()`", ["`x`", 1]):
        text = shown(value)
        assert "`" not in text and ast.literal_eval(text) == value
    assert shown("plain") == "'plain'"


@pytest.mark.parametrize("field, value", [("keep", ["`dsprof.blocks(model='x')`"]),
                                          ("spans", [["`dsprof.blocks(model='x')`", 3]])])
def test_a_plan_value_in_an_error_never_prints_as_a_command(tmp_path, field, value):
    """A plan's `keep` or `spans` holding a backquoted call: the one line that refuses it shows the value with
    `\\x60` (it printed "`dsprof blocks --model x`" before, a command dsprof seemed to suggest)."""
    plan = json.loads((FIXTURES / "tiny-ds.json").read_text())
    (tmp_path / "plan.json").write_text(json.dumps(dict(plan, **{field: value})))
    done = dsprof_here("merge", "--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution", "32",
                       "--plan", tmp_path / "plan.json", "--merge-by", "macs", "--out", tmp_path / "m.pt")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    line, = done.stderr.strip().splitlines()
    assert "\\x60dsprof.blocks(model='x')\\x60" in line and "dsprof blocks" not in line
    assert not (tmp_path / "m.pt").exists()


def test_a_file_name_in_a_folder_someone_sent_never_prints_as_a_command(tmp_path):
    """A damaged record and a damaged front, in a results folder, each named with a backquoted dsprof call: the
    reader's error named the file, and the command line showed the name as "`dsprof measure --model evil ...`", a
    command dsprof seemed to suggest. `build-lut` and `report` now refuse the folder in one line that shows the name
    with ``\\x60``, and write nothing."""
    results = tmp_path / "results"
    (results / "sub").mkdir(parents=True)
    (results / "sub" / f"{COMMAND_NAME}.jsonl").write_text("{not a record\n")
    done = dsprof_here("build-lut", results, "-o", tmp_path / "lut.csv")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    line, = done.stderr.strip().splitlines()
    assert "\\x60dsprof.measure(model=" in line and "backquote" in line and "rename it" in line
    assert "dsprof measure" not in done.stdout + done.stderr
    (results / "sub" / f"{COMMAND_NAME}.jsonl").rename(results / "sub" / f"{COMMAND_NAME}.front.json")
    (results / "r.jsonl").write_bytes((FIXTURES / "tiny_torch.jsonl").read_bytes())
    done = dsprof_here("report", results, "-o", tmp_path / "report")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    line, = done.stderr.strip().splitlines()
    assert "\\x60dsprof.measure(model=" in line and "dsprof measure" not in done.stdout + done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


def test_an_image_name_in_an_image_folder_never_prints_as_a_command(tmp_path):
    """An image folder (someone's data set) holding a file that is no image, named with a backquoted call: the one
    line that names it shows each backquote as ``\\x60``, as it does a class folder's name."""
    from dsprof.errors import InputFileError
    from dsprof.search.data import image_folder

    for split in ("train", "val"):
        for label in ("a", "b"):
            (tmp_path / split / label).mkdir(parents=True)
            (tmp_path / split / label / "x `dsprof.blocks(model='evil')` y.png").write_bytes(b"not an image")
    data = image_folder(tmp_path, 32)
    with pytest.raises(InputFileError) as caught:
        data.train[0]
    text = str(caught.value)
    assert "\\x60dsprof.blocks(model='evil')\\x60" in text and "`" not in text
