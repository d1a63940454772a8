"""A fuzz of hostile strings through every field of the files dsprof receives (issue #45, item 10): a measurement
record (its checksum recomputed, so that the edit is "valid"), a planner's front, a plan, a bundle manifest and an edge
device's results file; and the two other files that travel, a LUT (its checksum recomputed) and an importance file.
Each case puts one value of tests/hostile.py's fixed list into one field, runs the commands that read that file
through the command line (in this process: tests/cli_run.py) and checks what tests/hostile.py says: nothing written
outside the output folder, no script link or raw script in a page, no formula in a CSV cell, no file-reading LaTeX,
no unquoted command substitution in a printed command, no traceback (exit 0, or exit 2 with one line).

Which values go through which field (`cases`): every value through the field issue #45 names for a record
(`device_name`), a manifest (`dtype`) and an edge result (`device`); one value of each class through a front's `stem`
and `name` and a plan's `name` (their cases draw a plot each); through every other field, one string value taken in
turn from the list, and for records, manifests, edge results, LUTs and importance files one wrong-typed value too.
The inputs are built once per process (tests/hostile.py's `received_files`), for real: mobilenet_v2 (one block a
stage) measured at 32 px with a tiny budget, its LUT with tests/rule_lut.py's medians, the front `dsprof plan` writes
from it, a plan, an importance file, a bundle of one block exported and timed by its runner (TorchScript, here).
"""

from __future__ import annotations

import copy
import functools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from dsprof.records.measurement import record_checksum

from cli_run import dsprof_here
from hostile import (CLASSES, HOSTILE, HOSTILE_IDS, MODEL, changes_outside, command_problems, lut_with,
                     output_problems, received_files, resolve_hostile, run_problems, snapshot)

pytestmark = pytest.mark.usefixtures("one_thread")

NEST = 8  # folders between the case's root and its work folder: room for ../ to climb without leaving the snapshot

#: The fields of each file, as dotted paths into its JSON ("*": every item of a list): every field dsprof writes
#: (a record's checksum aside: each edit recomputes it), and the fields inside its objects down to their values.
FIELDS: dict[str, list[str]] = {
    "record": ["device_name", "backend", "batch", "budget_s", "channels", "compile", "device", "dtype", "env_id",
               "environment", "error", "group", "index", "input_shape", "iterations_per_sample", "layout", "macs",
               "model", "model_options", "name", "params", "runtime_info", "samples_s", "schema", "scope", "spec",
               "state_after", "state_before", "stop_reason", "target_precision", "threads", "time_utc", "variant",
               "warmup_iterations", "environment.allocator", "environment.cpu", "environment.cpu.model",
               "environment.cpu.machine", "environment.cpu.logical_cores", "environment.gpu", "environment.host",
               "environment.jetson", "environment.time_utc", "environment.versions", "environment.versions.torch",
               "model_options.depths", "model_options.resolution", "state_after.load_avg_1m"],
    "front": ["stem", "name", "format", "version", "model", "options", "options.depths", "device", "context",
              "context.env_id", "context.device", "context.backend", "context.dtype", "context.layout",
              "context.batch", "context.threads", "context.compile", "blocks", "spans_predicted", "method",
              "max_span", "original_s", "points", "points.*.k", "points.*.keep", "points.*.merge", "points.*.spans",
              "points.*.speedup", "points.*.speedup_low", "points.*.speedup_high", "points.*.latency_s",
              "points.*.low_s", "points.*.high_s", "points.*.importance", "least_loss", "pareto", "presets",
              "no_gain", "fastest_k", "notes", "uncounted"],
    "plan": ["name", "format", "version", "model", "keep", "options", "options.depths", "free_activation", "border",
             "merge", "source", "search", "spans", "acts", "options.pretrained", "options.num_classes", "options.width",
             "options.resolution"],
    "manifest": ["dtype", "batch", "bundle_id", "dsprof_version", "format", "formats", "groups", "model",
                 "model_options", "model_options.depths", "model_options.resolution", "onnx_opset", "results_format",
                 "timing", "timing.budget_s", "timing.min_samples", "workloads", "workloads.*.channels",
                 "workloads.*.files", "workloads.*.id", "workloads.*.index", "workloads.*.input_shape",
                 "workloads.*.label", "workloads.*.macs", "workloads.*.name", "workloads.*.params",
                 "workloads.*.scope", "workloads.*.sha256", "workloads.*.spec", "workloads.*.variant"],
    "results": ["device", "budget_s", "bundle_id", "environment", "environment.cpu", "environment.cpu.model",
                "environment.cpu.board", "environment.cpu.logical_cores", "environment.gpu", "environment.host",
                "environment.jetson", "environment.time_utc", "environment.versions",
                "environment.versions.python", "error", "format", "group", "iterations_per_sample", "layout",
                "runtime", "runtime_info", "samples_s", "state_after", "state_before", "stop_reason",
                "target_precision", "threads", "time_utc", "warmup_iterations", "workload"],
    # beyond the five files item 10 names, the other two that travel: a LUT (its columns; every row, the end line's
    # checksum recomputed) and an importance file
    "lut": ["schema", "env_id", "device_name", "device", "backend", "dtype", "layout", "batch", "threads", "compile",
            "scope", "workload", "variant", "median_s", "iqr_s", "n_samples", "noisy", "sources", "groups",
            "group_iqr_s", "ratio", "ratio_se", "time_utc"],
    "importance": ["format", "version", "model", "model.name", "model.options", "model.blocks", "model.num_classes",
                   "model.weights", "data", "data.name", "data.resolution", "proxy", "proxy.name", "proxy.unit",
                   "proxy.settings", "importance", "ranking"],
}
#: The field issue #45 names for each file whose cases are cheap (no plot): every hostile value goes through it.
PRIMARY = {"record": "device_name", "front": None, "plan": None, "manifest": "dtype", "results": "device",
           "lut": None, "importance": None}
#: The fields issue #45 names for fronts and plans: one value of each class (each case draws a plot, ~0.4 s)
BY_CLASS = {"front": ["stem", "name"], "plan": ["name"]}
#: The classes whose device names a report also draws (plots: mathtext, the SVG's text), ~0.4 s a case
DRAWN = ("tex", "html", "control")
#: Files whose other fields take a second value, a wrong type, beside their string (their cases cost ~0.1 s each)
CHEAP = ("record", "manifest", "results", "lut", "importance")


def cases() -> list[tuple[str, str, str]]:
    """(file, field, hostile id): every value through each file's `PRIMARY` field; one value of each class through
    the `BY_CLASS` fields; through every other field, one string value taken in turn from the list (and for the
    `CHEAP` files one wrong-typed value too, taken in turn)."""
    strings = [h[0] for h in HOSTILE if h[2] != "type"]
    types = [h[0] for h in HOSTILE if h[2] == "type"]
    by_class = {c: [h[0] for h in HOSTILE if h[2] == c] for c in CLASSES}
    found, turn = [], 0
    for kind, fields in FIELDS.items():
        for i, field in enumerate(fields):
            if field == PRIMARY[kind]:
                found += [(kind, field, hid) for hid in HOSTILE_IDS]
            elif field in BY_CLASS.get(kind, ()):
                found += [(kind, field, ids[i % len(ids)]) for ids in by_class.values()]
            else:
                found.append((kind, field, strings[(turn * 7) % len(strings)]))
                if kind in CHEAP:
                    found.append((kind, field, types[turn % len(types)]))
                turn += 1
    return found


CASES = cases()
VALUES = {h[0]: h[1] for h in HOSTILE}
VALUES_CLASS = {h[0]: h[2] for h in HOSTILE}


def set_field(data: Any, path: str, value: Any) -> None:
    """Set the dotted ``path`` of ``data`` to ``value`` (a copy each time), creating missing objects on the way."""
    head, _, rest = path.partition(".")
    targets = data if head == "*" else [data]
    for target in targets:
        if head != "*" and not rest:
            target[head] = copy.deepcopy(value)
        elif head == "*":
            set_field(target, rest, value) if rest else None
        else:
            if not isinstance(target.get(head), (dict, list)):
                target[head] = {}
            set_field(target[head], rest, value)


# -- the inputs, once per module -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    return received_files(tmp_path_factory)


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _records_text(records: list[dict]) -> str:
    lines = []
    for r in records:
        body = {k: v for k, v in r.items() if k != "sha256"}
        try:
            body["sha256"] = record_checksum(body)
        except ValueError:  # NaN or infinity: no canonical JSON, so no checksum that could agree
            body["sha256"] = "0" * 64
        lines.append(json.dumps(body, sort_keys=True, separators=(",", ":")))
    return "\n".join(lines) + "\n"


def _write_records(path: Path, records: list[dict]) -> None:
    path.write_text(_records_text(records))


@functools.cache
def _whole_model_records(records: Path) -> str:
    """The unedited records of whole models (models.jsonl), checksums recomputed: the same text for every case whose
    edit is in another file, so written from this one string rather than re-read and re-summed for each case."""
    return _records_text([r for r in _jsonl(records) if r["scope"] != "block"])


def _commands(kind: str, field: str, hostile_id: str) -> list[list[str]]:
    """The commands that read the edited file (in ``in/``), writing under ``out/``. A report draws its plots from the
    block records (m.jsonl: a third of a second each), so only the `DRAWN` device names take them; the others read
    the whole-model records alone (models.jsonl: tables and pages, and the plot of a front or a plan)."""
    if kind == "record":
        drawn = field == PRIMARY[kind] and VALUES_CLASS[hostile_id] in DRAWN
        records = "in/m.jsonl" if drawn else "in/models.jsonl"
        return [["build-lut", "in/m.jsonl", "-o", "out/lut.csv"], ["report", records, "-o", "out/report"],
                # spans of 2 the LUT lacks: the message names the `dsprof measure` that times them, in its context
                ["plan", "--lut", "out/lut.csv", *MODEL, "--max-span", "2", "--out", "out/front.json"]]
    if kind == "front":
        return [["report", "in/models.jsonl", "--front", "in/front.json", "-o", "out/report"]]
    if kind == "plan":
        return [["report", "in/models.jsonl", "--plans", "in/plan.json", "-o", "out/report"],
                ["predict", "--lut", "in/lut.csv", *MODEL, "--plan", "in/plan.json"]]
    if kind == "lut":
        return [["plan", "--lut", "in/lut.csv", *MODEL, "--max-span", "1", "--out", "out/front.json"],
                ["predict", "--lut", "in/lut.csv", *MODEL, "--plan", "in/plan.json"]]
    if kind == "importance":  # scored at 64 px: the plan at 32 px names the `dsprof importance` that scores it there
        return [["plan", "--lut", "in/lut.csv", *MODEL, "--max-span", "1", "--importance", "in/importance.json",
                 "--out", "out/front.json"]]
    # the edge LUT holds one block: planning the model names the `dsprof measure` that times the rest, on the device
    return [["import", "in/bundle", "in/results.jsonl", "--out", "out/imported"],
            ["build-lut", "out/imported", "-o", "out/lut.csv"],
            ["plan", "--lut", "out/lut.csv", *MODEL, "--max-span", "1", "--out", "out/front.json"]]


def _prepare(inputs: dict[str, Path], work: Path, kind: str, field: str, value: Any) -> None:
    src = work / "in"
    src.mkdir(parents=True)
    shutil.copy(inputs["records"], src / "m.jsonl")
    (src / "models.jsonl").write_text(_whole_model_records(inputs["records"]))
    shutil.copy(inputs["lut"], src / "lut.csv")
    (src / "bundle").mkdir()
    shutil.copy(inputs["manifest"], src / "bundle" / "manifest.json")
    shutil.copy(inputs["results"], src / "results.jsonl")
    shutil.copy(inputs["plan"], src / "plan.json")
    shutil.copy(inputs["importance"], src / "importance.json")
    if kind == "lut":
        lut_with(inputs["lut"], src / "lut.csv", **{field: value})
    if kind == "record":
        records = _jsonl(inputs["records"])
        for r in records:
            set_field(r, field, value)
        _write_records(src / "m.jsonl", records)
        _write_records(src / "models.jsonl", [r for r in records if r.get("scope") != "block"])
    elif kind in ("front", "plan", "manifest", "importance"):
        data = json.loads(inputs[kind].read_text())
        set_field(data, field, value)
        target = {"front": src / "front.json", "plan": src / "plan.json", "manifest": src / "bundle" / "manifest.json",
                  "importance": src / "importance.json"}
        target[kind].write_text(json.dumps(data, indent=1))
    elif kind == "results":
        lines = _jsonl(inputs["results"])
        for line in lines:
            set_field(line, field, value)
        (src / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def run_case(inputs: dict[str, Path], root: Path, kind: str, field: str, hostile_id: str) -> list[str]:
    """Run one case under ``root``; its problems (empty: every check passed)."""
    work = root.joinpath(*[f"n{i}" for i in range(NEST)], "work")
    value = resolve_hostile(VALUES[hostile_id], root / "a" / "b" / "c")
    _prepare(inputs, work, kind, field, value)
    out = work / "out"
    out.mkdir()
    home = Path("~").expanduser()
    home_before = sorted(p.name for p in home.glob("PWN*"))
    problems = []
    after = snapshot(root)
    for argv in _commands(kind, field, hostile_id):
        before = after  # what the last command left: nothing runs between two commands
        result, said = run_problems(lambda: dsprof_here(*argv, cwd=work), argv[0])
        problems += said
        after = snapshot(root)
        problems += changes_outside(before, after, out)
        if result is not None:
            problems += command_problems(result.stdout, result.stderr)
            if result.returncode != 0 and argv[0] in ("import", "build-lut"):
                break  # what follows reads what this would have written
    problems += output_problems(out)
    if sorted(p.name for p in home.glob("PWN*")) != home_before:
        problems.append("wrote in the home folder (~ expanded)")
    return problems


@pytest.mark.parametrize("kind,field,hostile_id", CASES, ids=[f"{k}-{f}-{h}" for k, f, h in CASES])
def test_hostile_value_in_a_received_file(inputs, tmp_path, kind, field, hostile_id):
    problems = run_case(inputs, tmp_path, kind, field, hostile_id)
    assert not problems, "\n".join(problems)


def test_the_fuzz_covers_every_value_field_and_file():
    """At least 200 cases; every hostile value through each file's primary field; every field of every file."""
    assert len(CASES) >= 200
    for kind, field in PRIMARY.items():
        if field is not None:
            assert {h for k, f, h in CASES if (k, f) == (kind, field)} == set(HOSTILE_IDS)
    for kind, fields in BY_CLASS.items():
        for field in fields:
            assert {VALUES_CLASS[h] for k, f, h in CASES if (k, f) == (kind, field)} == set(CLASSES)
    assert {(k, f) for k, f, _ in CASES} == {(k, f) for k, fields in FIELDS.items() for f in fields}
    assert len(set(CASES)) == len(CASES)



def test_the_checks_find_what_they_look_for(tmp_path):
    """Each check of tests/hostile.py on outputs made by hand: what issue #45 found is caught, dsprof's own safe
    forms pass (so that a green fuzz means the outputs are safe, not that the checks are blind)."""
    from hostile import commands_in, csv_problems, html_problems, latex_problems, markdown_problems

    own = '<a href="plots/x.csv">CSV</a><img src="data:image/png;base64,AAAA"><script>\n' \
          'document.querySelectorAll("table.sortable th").forEach(function () {});</script>'
    assert html_problems(own, "p") == []
    for bad in ('<a href="javascript:alert%28document.domain%29">x</a>', '<a href="java\nscript:alert(1)">x</a>',
                '<a href="JaVaScRiPt&#58;alert(1)">x</a>', '<a href="data:text/html;base64,PHNjcmlwdD4=">x</a>',
                "<img src=x onerror=alert(1)>", "<script>alert(1)</script>", '<iframe src="x"></iframe>'):
        assert html_problems(own + bad, "p"), bad
    assert markdown_problems("![front](plots/front.png) [CSV](tables/a.csv) [x\\](javascript:1) &lt;script>", "p") == []
    for bad in ("[x](javascript:alert%28document.domain%29)", "<script>alert(1)</script>", "<img src=x onerror=1>",
                "<javascript:alert(1)>", "[x]: javascript:alert(1)", "[x](data:text/html,1)"):
        assert markdown_problems(bad, "p"), bad

    (tmp_path / "ok.csv").write_text("device,median_s\n'=cmd|' /C calc'!A0,-0.5\n+1,-1e-3\n'@SUM(1),-inf\n")
    assert csv_problems(tmp_path) == []
    for cell in ("=cmd|' /C calc'!A0", "-1+2", "@SUM(1)", "+A1", "\t=1"):
        (tmp_path / "bad.csv").write_text(f"device,median_s\n\"{cell}\",1\n")
        assert csv_problems(tmp_path), cell
    (tmp_path / "bad.csv").unlink()
    (tmp_path / "ok.tex").write_text("\\begin{tabular}{ll}\\textbackslash{}input\\{/etc/passwd\\} & a\\_b\\\\\n")
    assert latex_problems(tmp_path) == []
    (tmp_path / "bad.tex").write_text("a & \\input{/etc/passwd} \\\\\n")
    assert latex_problems(tmp_path) == ["bad.tex: LaTeX command \\input"]

    quoted = "dsprof plan: error: lacks spans; run `dsprof measure --model m --device 'cpu$(touch PWN)' --spans 2` and"
    assert [p for _, p in commands_in(quoted)] == [""]
    assert commands_in("next: dsprof merge --plan 'my plan.json' --out 'a b.pt'") == [
        ("dsprof merge --plan 'my plan.json' --out 'a b.pt'", "")]
    for bad in ("run `dsprof measure --device cpu$(touch PWN) --batch 1` and",
                "next: dsprof measure --device cpu; rm -rf x",
                "run `dsprof measure --device cpu`touch PWN` --batch 1`", "next: dsprof plan --lut it's.csv",
                'next: dsprof plan --lut "$(touch PWN).csv"', "next: dsprof measure --device cpu | touch PWN"):
        assert [p for _, p in commands_in(bad) if p], bad
