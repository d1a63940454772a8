"""Every reproduction of issue #45 (Medium 1-4 and each Small item), run again through the command line: refused in
one line (exit 2, one line on stderr, no traceback) or written harmlessly (nothing outside the output folder, no
script link, no formula cell, no file-reading LaTeX, every printed command quoted). The checks are tests/hostile.py's.
Commands run in this process (tests/cli_run.py); the edge runner and one `dsprof` command run as real processes.
Inputs: mobilenet_v2 (one block a stage) measured once at 32 px with a tiny budget, its LUT with tests/rule_lut.py's
medians, the front `dsprof plan` writes from it, a bundle of one block timed by its runner (TorchScript, here).
"""

from __future__ import annotations

import csv
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dsprof.merging import merge_model, save_merged
from dsprof.models import get_model
from dsprof.records.measurement import record_checksum

from cli_run import dsprof_here as dsprof
from hostile import (MODEL, PLAN, changes_outside, command_problems, commands_in, csv_problems, importance_file,
                     latex_problems, lut_with, output_problems, page_problems, received_files, run_problems, snapshot)

pytestmark = pytest.mark.usefixtures("one_thread")

ROOT = Path(__file__).resolve().parents[1]
FAST_ARGS = ["--threads", "1", "--budget", "0.01", "--warmup", "0", "--max-warmup", "0.05", "--min-samples", "3", "--max-samples", "4",
             "--no-progress"]
JS_LINK = "[x](javascript:alert%28document.domain%29)"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    return received_files(tmp_path_factory)


@pytest.fixture()
def work(tmp_path) -> Path:
    """A work folder eight folders below the test's root (room for ../ to climb inside what `snapshot` sees)."""
    folder = tmp_path.joinpath(*[f"n{i}" for i in range(8)], "work")
    folder.mkdir(parents=True)
    return folder


def root_of(work: Path) -> Path:
    return work.parents[8]


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_records(path: Path, records: list[dict], checksum: bool = True) -> Path:
    """Records as JSON Lines, each with its checksum recomputed (an edit a checksum cannot tell from dsprof's own)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for r in records:
        body = {k: v for k, v in r.items() if k != "sha256"}
        if checksum:
            body["sha256"] = record_checksum(body)
        lines.append(json.dumps(body, sort_keys=True, separators=(",", ":")))
    path.write_text("\n".join(lines) + "\n")
    return path


def edited_records(inputs, path: Path, **fields) -> Path:
    records = _jsonl(inputs["records"])
    for r in records:
        r.update(fields)
    return write_records(path, records)


def edited_json(source: Path, target: Path, **fields) -> Path:
    data = json.loads(source.read_text())
    data.update(fields)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data, indent=1))
    return target


def run(work: Path, *argv: str, allowed: Path | None = None) -> tuple:
    """``dsprof ARGV`` in ``work``: its result and every problem tests/hostile.py finds (outside ``allowed``, the
    output folder: nothing written; its pages, CSV and LaTeX; the commands it printed; one line or exit 0)."""
    root = root_of(work)
    before = snapshot(root)
    result, problems = run_problems(lambda: dsprof(*argv, cwd=work), argv[0])
    problems += changes_outside(before, snapshot(root), allowed or work / "out")
    if result is not None:
        problems += command_problems(result.stdout, result.stderr)
    problems += output_problems(allowed or work / "out")
    return result, problems


def assert_one_line(result, command: str, *phrases: str) -> str:
    lines = result.stderr.splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"dsprof {command}: error: ") and "Traceback" not in result.stderr, result.stderr
    for phrase in phrases:
        assert phrase in lines[0], lines[0]
    return lines[0]


# -- Medium 1: a script link in report.html, raw markup in index.md -----------------------------------------------

@pytest.mark.parametrize("device_name", [JS_LINK, "<script>alert(1)</script>", "<img src=x onerror=alert(1)>"])
def test_m1_a_device_name_puts_no_script_link_or_markup_in_the_report(inputs, work, device_name):
    edited_records(inputs, work / "in" / "m.jsonl", device_name=device_name)
    result, problems = run(work, "report", "in", "-o", "out/report")
    assert not problems, "\n".join(problems)
    if result.returncode == 2:
        assert_one_line(result, "report", "device_name")


def test_m1_a_front_name_puts_no_script_link_in_the_report(inputs, work):
    write_records(work / "in" / "m.jsonl", _jsonl(inputs["records"]))
    edited_json(inputs["front"], work / "in" / "front.json", name=JS_LINK)
    result, problems = run(work, "report", "in/m.jsonl", "--front", "in/front.json", "-o", "out/report")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("value", [JS_LINK, "<script>alert(1)</script>", "<img src=x onerror=alert(1)>",
                                   "=cmd|' /C calc'!A0", "@SUM(1)", "\\input{/etc/hostname}", "$\\undefinedmacro$"],
                         ids=["js_link", "script", "img_onerror", "formula", "at_formula", "latex_input", "mathtext"])
@pytest.mark.parametrize("field", ["cpu", "host"])
def test_m1_m3_the_machine_a_record_names_reaches_no_page_csv_or_latex_as_code(inputs, work, field, value):
    """The devices table shows the environment's CPU model and host: text from the record, checksum recomputed."""
    records = _jsonl(inputs["records"])
    for r in records:
        if field == "cpu":
            r["environment"]["cpu"]["model"] = value
        else:
            r["environment"]["host"] = value
    write_records(work / "in" / "m.jsonl", records)
    for argv in (["build-lut", "in/m.jsonl", "-o", "out/lut.csv"], ["report", "in", "-o", "out/report"]):
        result, problems = run(work, *argv)
        assert not problems, "\n".join(problems)
        if result.returncode == 2:
            assert_one_line(result, argv[0])


# -- Medium 2: output paths built from file contents ----------------------------------------------------------------

@pytest.mark.parametrize("plots_folder", [True, False], ids=["front_x-exists", "no-front_x"])
def test_m2_a_front_stem_writes_nothing_outside_the_report(inputs, work, plots_folder):
    write_records(work / "in" / "m.jsonl", _jsonl(inputs["records"]))
    edited_json(inputs["front"], work / "in" / "front.json", stem="x/../../../../outside/FRONTESC")
    if plots_folder:  # as it can be inside a results folder someone sent
        (work / "out" / "report" / "plots" / "front_x").mkdir(parents=True)
        (work / "out" / "report" / "tables" / "front_x").mkdir(parents=True)
    result, problems = run(work, "report", "in/m.jsonl", "--front", "in/front.json", "-o", "out/report")
    assert not problems, "\n".join(problems)
    assert result.returncode == 0, result.stderr
    # the front's plot and tables, each one file name inside plots/ and tables/
    written = list(root_of(work).rglob("*FRONTESC*"))
    assert {p.parent for p in written} == {work / "out" / "report" / "plots", work / "out" / "report" / "tables"}


def test_m2_a_plan_name_writes_nothing_outside_the_report(inputs, work):
    write_records(work / "in" / "m.jsonl", _jsonl(inputs["records"]))
    plan = json.loads(PLAN.to_json())
    plan["name"] = "x/../../../../outside/PLANESC"
    (work / "in" / "plan.json").write_text(json.dumps(plan))
    (work / "out" / "report" / "plots" / "memory_x").mkdir(parents=True)
    (work / "out" / "report" / "tables" / "memory_x").mkdir(parents=True)
    result, problems = run(work, "report", "in/m.jsonl", "--plans", "in/plan.json", "-o", "out/report")
    assert not problems, "\n".join(problems)
    assert result.returncode == 0, result.stderr
    written = list(root_of(work).rglob("*PLANESC*"))  # the memory plot and table of the plan
    assert {p.parent for p in written} == {work / "out" / "report" / "plots", work / "out" / "report" / "tables"}


@pytest.mark.parametrize("field,value", [("dtype", "/../../../outside/ESCAPED"), ("batch", "1/../../../outside/B"),
                                         ("model_options", {"depths": [1] * 7, "resolution": "32/../../../outside/R"})],
                         ids=["dtype", "batch", "resolution"])
def test_m2_a_manifest_field_writes_nothing_outside_the_import_folder(inputs, work, field, value):
    (work / "in" / "bundle").mkdir(parents=True)
    edited_json(inputs["bundle"] / "manifest.json", work / "in" / "bundle" / "manifest.json", **{field: value})
    shutil.copy(inputs["results"], work / "in" / "results.jsonl")
    result, problems = run(work, "import", "in/bundle", "in/results.jsonl", "--out", "out/imported")
    assert not problems, "\n".join(problems)
    if result.returncode == 2:
        assert_one_line(result, "import")
    else:  # written: inside --out, under a name of its own
        (written,) = (work / "out" / "imported").rglob("*.jsonl")
        assert written.parent == work / "out" / "imported"


# -- Medium 3: spreadsheet formulas and LaTeX in exports -----------------------------------------------------------

def test_m3_a_formula_device_name_is_no_formula_in_any_csv(inputs, work):
    edited_records(inputs, work / "in" / "m.jsonl", device_name="=cmd|' /C calc'!A0")
    for argv in (["build-lut", "in/m.jsonl", "-o", "out/lut.csv"], ["report", "in", "-o", "out/report"]):
        result, problems = run(work, *argv)
        assert not problems, "\n".join(problems)
        if result.returncode == 2:
            assert_one_line(result, argv[0], "device_name")
    csvs = sorted((work / "out").rglob("*.csv"))
    if (work / "out" / "report").exists():  # what the issue saw: the LUT, tables/*.csv and plots/*.csv
        assert {p.parent.name for p in csvs} >= {"tables", "plots", "out"}
    assert not csv_problems(work / "out")


def test_m3_a_formula_file_name_is_no_formula_in_the_luts_sources(inputs, work):
    """The LUT's sources column names the measurement files: a file someone named like a formula."""
    shutil.copy(inputs["records"], work / "=cmd|' calc'!A0.jsonl")
    result, problems = run(work, "build-lut", "=cmd|' calc'!A0.jsonl", "-o", "out/lut.csv")
    assert not problems, "\n".join(problems)
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(line for line in (work / "out" / "lut.csv").read_text().splitlines()
                               if not line.startswith("#")))
    assert rows and all("=cmd|' calc'!A0.jsonl" in r["sources"] for r in rows)  # named, as text


def test_m3_latex_input_is_no_command_in_devices_tex(inputs, work):
    edited_records(inputs, work / "in" / "m.jsonl", device_name="\\input{/etc/hostname}")
    result, problems = run(work, "report", "in", "-o", "out/report")
    assert not problems, "\n".join(problems)
    if result.returncode == 0:
        tex = (work / "out" / "report" / "tables" / "devices.tex").read_text()
        assert "\\input{" not in tex and not latex_problems(work / "out")
        # the complete escape: \ { } ~ ^ & % $ # _ as text
    else:
        assert_one_line(result, "report", "device_name")


def test_m3_every_latex_special_is_escaped(inputs, work):
    name = "a\\b{c}d~e^f&g%h$i#j_k"
    edited_records(inputs, work / "in" / "m.jsonl", device_name=name)
    result, problems = run(work, "report", "in", "-o", "out/report")
    assert not problems, "\n".join(problems)
    if result.returncode == 0:
        tex = (work / "out" / "report" / "tables" / "devices.tex").read_text()
        assert name not in tex
        for raw in ("b{c}", "d~e", "e^f", "\\b"):
            assert raw not in tex, raw
    else:
        assert_one_line(result, "report", "device_name")


# -- Medium 4: unquoted values in the commands dsprof suggests ------------------------------------------------------

def test_m4_an_edge_device_with_command_substitution_is_refused_or_quoted(inputs, work):
    shutil.copytree(inputs["bundle"], work / "in" / "bundle")
    lines = _jsonl(inputs["results"])
    for line in lines:
        line["device"] = "cpu$(touch PWN)"
    (work / "in" / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    steps = [["import", "in/bundle", "in/results.jsonl", "--out", "out/imported"],
             ["build-lut", "out/imported", "-o", "out/lut.csv"],
             ["plan", "--lut", "out/lut.csv", *MODEL, "--max-span", "1", "--out", "out/front.json"]]
    for argv in steps:
        result, problems = run(work, *argv)
        assert not problems, "\n".join(problems)
        if result.returncode == 2:
            assert_one_line(result, argv[0])
            assert argv[0] != "plan" or "dsprof measure" in result.stderr
            if argv[0] != "plan":
                break
    assert not list(root_of(work).rglob("PWN"))


def test_m4_a_lut_device_column_with_command_substitution_is_refused_or_quoted(inputs, work):
    """The LUT's device column, edited, its checksum recomputed: `plan` names `dsprof measure` for what it lacks."""
    lut_with(inputs["lut"], work / "in" / "lut.csv", device="cpu$(touch PWN)")
    result, problems = run(work, "plan", "--lut", "in/lut.csv", *MODEL, "--max-span", "2", "--out", "out/front.json")
    assert not problems, "\n".join(problems)
    assert_one_line(result, "plan")
    if "dsprof measure" in result.stderr:  # the command to copy names the device, quoted
        ((command, problem),) = [c for c in commands_in(result.stderr) if c[0].startswith("dsprof measure")]
        words = shlex.split(command)
        assert words[words.index("--device") + 1] == "cpu$(touch PWN)", command
    else:
        assert "'device'" in result.stderr or "device" in result.stderr


def test_m4_merge_command_after_plan_is_quoted(inputs, work):
    """`dsprof plan --plan-out` prints the `dsprof merge` that builds the plan: a plan path with a space and a
    dollar is one word."""
    (work / "in").mkdir()
    shutil.copy(inputs["lut"], work / "in" / "lut.csv")
    plan_out = "out/my plan $(touch PWN).json"
    result, problems = run(work, "plan", "--lut", "in/lut.csv", *MODEL, "--max-span", "1", "--keep", "2",
                           "--plan-out", plan_out, "--out", "out/front.json")
    assert not problems, "\n".join(problems)
    assert result.returncode == 0, result.stderr
    (command,) = [c for c, _ in commands_in(result.stdout) if c.startswith("dsprof merge")]
    words = shlex.split(command)
    assert words[words.index("--plan") + 1] == plan_out


@pytest.mark.parametrize("case", ["proxy", "data", "weights"])
def test_m4_the_importance_hint_is_quoted(inputs, work, case):
    """The `dsprof importance` a plan suggests (scored at another size: a warning; for another model: an error)
    carries the file's proxy, data and weights: one word each, or the file is refused."""
    hostile = "x $(touch PWN)"
    fields = {"data": {"name": "digits", "resolution": 64}}
    if case == "proxy":
        fields["proxy"] = {"name": hostile, "unit": "loss", "settings": {}}
    elif case == "data":
        fields["data"] = {"name": hostile, "resolution": 64}
    else:
        fields["model"] = {"name": "mobilenet_v2", "options": {"depths": [1] * 7}, "weights": hostile,
                           "blocks": [f"features.{i}" for i in range(1, 8)], "num_classes": 1000}
    importance_file(work / "in" / "importance.json", **fields)
    shutil.copy(inputs["lut"], work / "in" / "lut.csv")
    result, problems = run(work, "plan", "--lut", "in/lut.csv", *MODEL, "--max-span", "1", "--importance",
                           "in/importance.json", "--out", "out/front.json")
    assert not problems, "\n".join(problems)
    commands = [c for c, _ in commands_in(result.stderr) if c.startswith("dsprof importance")]
    if result.returncode == 0:  # used, with a warning that names the command scoring it at 32 px
        (command,) = commands
        words = shlex.split(command)
        assert words[words.index("--resolution") + 1] == "32", command
        if case == "data":
            assert words[words.index("--data") + 1] == hostile, command
        if case == "proxy":
            assert words[words.index("--proxy") + 1] == hostile, command
        if case == "weights":
            assert words[words.index("--weights") + 1] == hostile, command
    else:
        assert_one_line(result, "plan")


def test_m4_model_file_paths_in_hints_and_next_lines_are_quoted(inputs, work):
    """A model file in a folder whose name holds a space and a $( ): the `dsprof measure` a LUT miss suggests, and
    the `next: dsprof plan` after a measure, name it as one word."""
    folder = work / "in" / "my models $(touch PWN)"
    folder.mkdir(parents=True)
    # a file name of its own: the registry names a model file's model after its stem, and another test file in this
    # process may have registered tests/models/flatnet.py already
    shutil.copy(ROOT / "tests" / "models" / "flatnet.py", folder / "hostile_flatnet.py")
    model_file = f"{folder}/hostile_flatnet.py:build"
    shutil.copy(inputs["lut"], work / "in" / "lut.csv")
    result, problems = run(work, "predict", "--lut", "in/lut.csv", "--model-file", model_file, "--resolution", "32")
    assert not problems, "\n".join(problems)
    assert_one_line(result, "predict")
    (command,) = [c for c, _ in commands_in(result.stderr) if c.startswith("dsprof measure")]
    words = shlex.split(command)
    assert words[words.index("--model-file") + 1] == model_file, command
    assert not list(root_of(work).rglob("PWN"))


# -- Small: checksums that can be dropped ---------------------------------------------------------------------------

def test_s_a_record_without_its_checksum_needs_accept_modified(inputs, work):
    records = _jsonl(inputs["records"])
    for r in records:
        r["device_name"] = "Edited CPU"
    write_records(work / "in" / "m.jsonl", records, checksum=False)
    result, problems = run(work, "build-lut", "in/m.jsonl", "-o", "out/lut.csv")
    assert not problems, "\n".join(problems)
    # left out, as a changed record is, with a warning that names the way to use them: nothing left to tabulate
    warning, error = result.stderr.splitlines()
    assert warning.startswith("warning: in/m.jsonl: 32 record(s) carry no checksum") and "--accept-modified" in warning
    assert result.returncode == 2 and error.startswith("dsprof build-lut: error: ")
    assert not (work / "out" / "lut.csv").exists()
    result, problems = run(work, "build-lut", "in/m.jsonl", "-o", "out/lut.csv", "--accept-modified")
    assert result.returncode == 0 and not problems, result.stderr + "\n".join(problems)


def test_s_a_lut_without_its_checksum_line_needs_accept_modified(inputs, work):
    lut_with(inputs["lut"], work / "in" / "lut.csv", end="bare")
    assert "sha256=" not in (work / "in" / "lut.csv").read_text()
    argv = ["plan", "--lut", "in/lut.csv", *MODEL, "--max-span", "1", "--out", "out/front.json"]
    result, problems = run(work, *argv)
    assert not problems, "\n".join(problems)
    assert_one_line(result, "plan", "--accept-modified")
    result, problems = run(work, *argv, "--accept-modified")
    assert result.returncode == 0 and not problems, result.stderr + "\n".join(problems)


# -- Small: options that name weights or paths; sizes ---------------------------------------------------------------

@pytest.fixture()
def victim(work) -> Path:
    path = root_of(work) / "victim.txt"
    path.write_text("a local text file someone names as weights\n")
    return path


def test_s_a_records_pretrained_option_is_refused(inputs, work, victim):
    records = _jsonl(inputs["records"])
    for r in records:
        r["model_options"] = dict(r["model_options"], pretrained=str(victim))
    write_records(work / "in" / "m.jsonl", records)
    for argv in (["report", "in", "-o", "out/report"], ["build-lut", "in/m.jsonl", "-o", "out/lut.csv"]):
        result, problems = run(work, *argv)
        assert not problems, "\n".join(problems)
        line = assert_one_line(result, argv[0], "pretrained")
        assert "checkpoint" not in line  # refused, not opened


def test_s_a_plans_pretrained_option_is_refused(inputs, work, victim):
    write_records(work / "in" / "m.jsonl", _jsonl(inputs["records"]))
    plan = json.loads(PLAN.to_json())
    plan["options"]["pretrained"] = str(victim)
    (work / "in" / "plan.json").write_text(json.dumps(plan))
    for argv in (["report", "in/m.jsonl", "--plans", "in/plan.json", "-o", "out/report"],
                 ["merge", *MODEL, "--plan", "in/plan.json", "--out", "out/m.pt"]):
        result, problems = run(work, *argv)
        assert not problems, "\n".join(problems)
        line = assert_one_line(result, argv[0], "pretrained")
        assert "checkpoint" not in line


@pytest.fixture(scope="module")
def merged_pt(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("merged") / "good.pt"
    return save_merged(merge_model(get_model("mobilenet_v2", resolution=32, depths=[1] * 7), PLAN), path)


@pytest.mark.parametrize("field,value", [("options", "pretrained"), ("dtype", "manual_seed"), ("dtype", "load")])
def test_s_a_merged_models_options_and_dtype_are_checked(merged_pt, work, victim, field, value):
    payload = torch.load(merged_pt, weights_only=True)
    if field == "options":
        payload["options"] = dict(payload["options"], pretrained=str(victim))
    else:
        payload[field] = value
    (work / "in").mkdir()
    torch.save(payload, work / "in" / "evil.pt")  # plain data (tensors, strings), as a received file would be
    result, problems = run(work, "measure", *MODEL, *FAST_ARGS, "--blocks", "none", "--model-variants", "none",
                           "--merged-model", "in/evil.pt", "--out", "out/r.jsonl")
    assert not problems, "\n".join(problems)
    line = assert_one_line(result, "measure")
    assert "checkpoint" not in line and (field != "options" or "pretrained" in line), line


@pytest.mark.parametrize("option,value", [("num_classes", 10 ** 9), ("width", 1e4), ("depths", [1000] * 7),
                                          ("resolution", 10 ** 6)])
def test_s_sizes_from_a_received_file_are_bounded_before_a_model_is_built(inputs, work, option, value):
    records = _jsonl(inputs["records"])
    for r in records:
        r["model_options"] = dict(r["model_options"], **{option: value})
    write_records(work / "in" / "m.jsonl", records)
    plan = json.loads(PLAN.to_json())
    plan["options"] = dict(plan["options"], **{option: value})
    (work / "in" / "plan.json").write_text(json.dumps(plan))
    for argv in (["report", "in/m.jsonl", "-o", "out/report"],
                 ["report", "in/m.jsonl", "--plans", "in/plan.json", "-o", "out/report2"]):
        result, problems = run(work, *argv)
        assert not problems, "\n".join(problems)
        if argv[-1] == "out/report2":  # the plan's model is built (its memory plot): the size is checked first
            assert_one_line(result, "report", option)


# -- Small: one line, not a traceback -------------------------------------------------------------------------------

def test_s_samples_of_1e308_are_one_line_or_harmless(inputs, work):
    records = _jsonl(inputs["records"])
    for r in records:
        r["samples_s"] = [1e308] * len(r["samples_s"])
    write_records(work / "in" / "m.jsonl", records)
    for argv in (["build-lut", "in/m.jsonl", "-o", "out/lut.csv"], ["report", "in", "-o", "out/report"]):
        result, problems = run(work, *argv)
        assert not problems, "\n".join(problems)


def test_s_a_mathtext_device_name_is_one_line_or_plain_text(inputs, work):
    edited_records(inputs, work / "in" / "m.jsonl", device_name="$\\undefinedmacro$")
    result, problems = run(work, "report", "in", "-o", "out/report")
    assert not problems, "\n".join(problems)
    if result.returncode == 0:  # drawn as the text it is
        svg = (work / "out" / "report" / "plots" / "block_latency.svg").read_text()
        assert "undefinedmacro" in svg or "$\\undefinedmacro$" in (work / "out" / "report" / "index.md").read_text()


@pytest.mark.parametrize("where", ["block name", "front name"])
def test_s_mathtext_in_text_a_plot_draws_is_drawn_as_text(inputs, work, where):
    """Free text that reaches a figure (a block's name on the block plot's axis, a front's name in its title)."""
    records = _jsonl(inputs["records"])
    if where == "block name":
        for r in records:
            if r["scope"] == "block" and r["index"] == 0:
                r["name"] = "$\\undefinedmacro{$"
    write_records(work / "in" / "m.jsonl", records)
    edited_json(inputs["front"], work / "in" / "front.json",
                **({"name": "$\\undefinedmacro{$"} if where == "front name" else {}))
    result, problems = run(work, "report", "in/m.jsonl", "--front", "in/front.json", "-o", "out/report")
    assert not problems, "\n".join(problems)
    assert result.returncode == 0, result.stderr  # free text: shown, never parsed
    plot = "block_latency" if where == "block name" else "front_front"
    assert (work / "out" / "report" / "plots" / f"{plot}.png").stat().st_size > 1000
    assert "undefinedmacro" in (work / "out" / "report" / "index.md").read_text()


def test_s_nan_in_a_bare_importance_list_is_one_line(inputs, work):
    (work / "in").mkdir()
    shutil.copy(inputs["lut"], work / "in" / "lut.csv")
    (work / "in" / "importance.json").write_text("[0.1, NaN, 0.3, 0.2, 0.5, 0.1, 0.4]")
    result, problems = run(work, "plan", "--lut", "in/lut.csv", *MODEL, "--max-span", "1", "--importance",
                           "in/importance.json", "--out", "out/front.json")
    assert not problems, "\n".join(problems)
    assert_one_line(result, "plan", "importance.json")


def test_s_negative_samples_are_refused_by_import(inputs, work):
    shutil.copytree(inputs["bundle"], work / "in" / "bundle")
    lines = _jsonl(inputs["results"])
    lines[0]["samples_s"] = [-abs(v) for v in lines[0]["samples_s"]]
    (work / "in" / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    result, problems = run(work, "import", "in/bundle", "in/results.jsonl", "--out", "out/imported")
    assert not problems, "\n".join(problems)
    assert_one_line(result, "import", "samples_s")
    assert not list((work / "out").rglob("*.jsonl"))


# -- Small: the edge runner checks --out before it opens it ---------------------------------------------------------

def test_s_the_runner_leaves_a_file_it_refuses_as_it_was(inputs, work):
    """A real process: the bundle's runner, given a notes file as --out."""
    notes = work / "notes.txt"
    notes.write_text("first line\nsecond line\nlast line\n")
    before = snapshot(root_of(work))
    done = subprocess.run([sys.executable, str(inputs["bundle"] / "run_bundle.py"), "--runtime", "torchscript",
                           "--threads", "1", "--out", str(notes), "--quiet"], capture_output=True, text=True,
                          timeout=300, cwd=work)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert notes.read_text() == "first line\nsecond line\nlast line\n"
    assert snapshot(root_of(work)) == before


# -- Small: temporary files ------------------------------------------------------------------------------------------

def test_s_import_does_not_follow_a_planted_temporary_file(inputs, work):
    args = ["import", str(inputs["bundle"]), str(inputs["results"]), "--out", "out/imported"]
    first = dsprof(*args, cwd=work)
    assert first.returncode == 0, first.stderr
    (written,) = (work / "out" / "imported").glob("*.jsonl")
    kept = written.read_bytes()
    victim = root_of(work) / "victim.jsonl"
    victim.write_text("mine\n")
    (written.with_name(f".{written.name}.tmp")).symlink_to(victim)  # the name import used to write through
    result, problems = run(work, *args, "--overwrite")
    assert not problems, "\n".join(problems)
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "mine\n"
    assert not written.is_symlink() and written.read_bytes() == kept


def test_s_measure_does_not_write_through_a_planted_link(inputs, work):
    (work / "out").mkdir()
    target = root_of(work) / "victim-new.jsonl"
    (work / "out" / "r.jsonl").symlink_to(target)  # dangling: an open with O_CREAT would create the target
    result, problems = run(work, "measure", *MODEL, *FAST_ARGS, "--blocks", "none", "--out", "out/r.jsonl",
                           "--overwrite")
    assert not problems, "\n".join(problems)
    assert not target.exists()


# -- Small: export --overwrite ---------------------------------------------------------------------------------------

EXPORT = ["export", *MODEL, "--blocks", "features.1", "--model-variants", "none", "--format", "torchscript", "--quiet"]


def test_s_export_overwrite_replaces_a_bundle_and_nothing_else(work):
    first = dsprof(*EXPORT, "--out", "out/bundle", cwd=work)
    assert first.returncode == 0, first.stderr
    first_id = json.loads((work / "out" / "bundle" / "manifest.json").read_text())["bundle_id"]
    result, problems = run(work, *EXPORT, "--out", "out/bundle", "--overwrite", "--budget", "0.02")
    assert not problems, "\n".join(problems)
    assert result.returncode == 0, result.stderr
    assert json.loads((work / "out" / "bundle" / "manifest.json").read_text())["bundle_id"] != first_id
    # a bundle with a file of someone's own in it: kept, one line
    (work / "out" / "bundle" / "notes.txt").write_text("mine\n")
    before = snapshot(work / "out" / "bundle")
    result, problems = run(work, *EXPORT, "--out", "out/bundle", "--overwrite")
    assert not problems, "\n".join(problems)
    assert_one_line(result, "export", "notes.txt")
    assert snapshot(work / "out" / "bundle") == before
    # a folder with some manifest.json that dsprof did not write: kept, one line
    mine = work / "out" / "mine"
    mine.mkdir()
    (mine / "manifest.json").write_text('{"format": "something else"}\n')
    (mine / "thesis.tex").write_text("years of work\n")
    before = snapshot(mine)
    result, problems = run(work, *EXPORT, "--out", "out/mine", "--overwrite")
    assert not problems, "\n".join(problems)
    assert_one_line(result, "export")
    assert snapshot(mine) == before


# -- Small: measure --remote -----------------------------------------------------------------------------------------

SSH_STANDIN = """import os, subprocess, sys
args = sys.argv[1:]
with open(sys.argv[0] + ".log", "a") as log:
    log.write(repr(args) + "\\n")
if args[0] == "--":
    args = args[1:]
if args[0].startswith("-"):
    sys.exit(255)  # ssh would have read the host as an option
home = os.path.dirname(os.path.abspath(sys.argv[0]))  # `cd` goes here, not to the tester's home
sys.exit(subprocess.run(["sh", "-c", args[1]], env=dict(os.environ, HOME=home)).returncode)
"""


@pytest.mark.parametrize("host,remote_dir", [("lab@board", "board $(touch PWN)"),
                                             ("-oProxyCommand=touch PWN", "board")], ids=["dir", "host"])
def test_s_remote_folder_and_host_are_quoted(work, host, remote_dir):
    standin = work / "out" / "ssh" / "ssh_standin.py"  # its log, and the `cd` of the commands it runs, in out/
    standin.parent.mkdir(parents=True)
    standin.write_text(SSH_STANDIN)
    ssh = f"{shlex.quote(sys.executable)} {shlex.quote(str(standin))}"
    result, problems = run(work, "measure", *MODEL, *FAST_ARGS, "--blocks", "features.1", "--model-variants", "none",
                           "--backend", "onnxruntime", "--remote", host, "--ssh", ssh, "--remote-dir",
                           str(work / "out" / remote_dir), "--remote-python", "/nonexistent/python3",
                           "--out", "out/m")
    assert not problems, "\n".join(problems)
    assert_one_line(result, "measure")
    assert not list(root_of(work).rglob("PWN"))
    calls = [eval(line) for line in standin.with_name(standin.name + ".log").read_text().splitlines()] \
        if standin.with_name(standin.name + ".log").exists() else []
    for call in calls:  # the host, wherever ssh was called, came after `--`
        assert call[0] == "--" or not call[0].startswith("-"), call


# -- the console script itself, once ---------------------------------------------------------------------------------

def test_a_hostile_record_through_the_console_script(inputs, work):
    """The one real `dsprof` process: a device name with a script link; exit 0 with a harmless page, or exit 2 with
    one line."""
    edited_records(inputs, work / "in" / "m.jsonl", device_name=JS_LINK)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    before = snapshot(root_of(work))
    done = subprocess.run([sys.executable, "-m", "dsprof", "report", "in", "-o", "out/report"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr and done.returncode in (0, 2), done.stderr
    if done.returncode == 2:
        assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("dsprof report: error: "), done.stderr
    assert not changes_outside(before, snapshot(root_of(work)), work / "out")
    assert not page_problems(work / "out") if (work / "out").exists() else True
