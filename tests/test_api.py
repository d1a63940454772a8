"""The Python API as docs/api.md shows it (issue #38): every example there runs as written, in order, in an empty
folder, the way a notebook would run it, and what it returns is what the page says.

The LUT the examples build gets tests/rule_lut.py's medians before anything is planned from it (what the planner and
`predict` make of a LUT must not hang on a busy machine's clock), as tests/test_docs.py does for the quickstart."""

import json
import re
from pathlib import Path

import pytest

import dsprof
from dsprof.lut import LUT
from dsprof.workflows.predict import Predicted
from rule_lut import rule_lut

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: one thread (as under `make test`'s workers)

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"
FUNCTIONS = ("measure", "build_lut", "plan", "predict", "merge", "report", "importance")


def python_blocks() -> list[str]:
    """The ```python blocks of docs/api.md, in order."""
    return re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_each_function_of_the_api_has_an_example_and_is_what_dsprof_offers():
    code = "\n".join(python_blocks())
    for name in FUNCTIONS:
        assert f"dsprof.{name}(" in code, f"docs/api.md shows no example of dsprof.{name}"
        assert callable(getattr(dsprof, name)) and getattr(dsprof.api, name).__doc__
    assert "check=CheckSettings(" in code  # predict with its paired check

def test_the_verbs_are_plain_functions_whose_help_shows_their_parameters():
    import inspect
    import pydoc
    import types

    for name in FUNCTIONS:
        function = getattr(dsprof, name)
        assert isinstance(function, types.FunctionType), f"dsprof.{name} is a {type(function).__name__}"
        assert function is getattr(dsprof.api, name)
        text = pydoc.render_doc(function, renderer=pydoc.plaintext)
        for parameter in list(inspect.signature(function).parameters)[:3]:
            assert parameter in text, f"help(dsprof.{name}) does not show {parameter}"
    assert "resolution" in pydoc.render_doc(dsprof.plan, renderer=pydoc.plaintext)


@pytest.mark.parametrize("statement, new_home", [
    ("from dsprof.merge import Plan", "dsprof.records.plan"),      # Plan's home before plans left the merge package
    ("from dsprof.merge import merge_model", "dsprof.merging"),
    ("from dsprof.plan import Plan", "dsprof.planning"),
    ("from dsprof.plan import plan_front", "dsprof.planning"),
    ("from dsprof.profiler.records import Measurement", "dsprof.records.measurement"),
    ("from dsprof.profiler.stats import Estimate", "dsprof.records.stats"),
    ("from dsprof.search.importance_file import read_importance", "dsprof.records.importance"),
])
def test_a_moved_name_still_imports_from_its_old_home_and_warns(statement, new_home):
    import importlib

    name = statement.split()[-1]
    scope: dict = {}
    with pytest.warns(DeprecationWarning, match=rf"moved to {re.escape(new_home)}\.{name}"):
        exec(statement, scope)
    assert scope[name] is getattr(importlib.import_module(new_home), name)
    # the old package name did not replace the API function on dsprof
    assert callable(dsprof.plan) and callable(dsprof.merge) and not hasattr(dsprof.plan, "Plan")


@pytest.mark.slow
def test_the_examples_run_as_written(tmp_path, monkeypatch, capsys, one_thread):
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    for block in python_blocks():
        exec(compile(block, str(DOC), "exec"), scope)  # noqa: S102 - the page's own examples
        if "lut" in scope and not isinstance(scope.get("_ruled"), LUT):  # the fixed rule's medians, then on
            scope["lut"] = scope["_ruled"] = rule_lut("lut.csv", ["results"])
    out = capsys.readouterr().out
    measured, planned, found, merged = scope["measured"], scope["planned"], scope["found"], scope["merged"]
    assert measured.run.path.is_file() and measured.run.new > 0 and f"{measured.run.new} workloads" in out
    assert planned.chosen.k == 4 and Path("front.json").is_file() and Path("front.plan.json").is_file()
    assert planned.plan_path == Path("front.plan.json") and planned.plan_path in planned.paths
    assert isinstance(found, Predicted) and found.merges is not None and found.merges.by == "plan"
    assert found.check is not None and found.check.paired is not None and found.check.path.is_file()
    assert set(found.to_dict()) == {"prediction", "check"}
    assert json.loads(json.dumps(found.to_dict(), default=str))["check"]["pairs"] > 0
    assert merged.out == Path("merged.pt") and merged.out.is_file()
    assert list(merged.report.plan.merge) == json.loads(Path("front.plan.json").read_text())["merge"]  # as priced
    # a module of one's own through the same doors (issue #44): named as given, its plan for it, replayed on it.
    # Both blocks linearised (keep=0) by the rule (200 us a call, 0.1 ns a MAC, 16x16 maps): each merged block is a
    # 3x3 conv 16->16, 589 824 MACs (259 us, against 267 us linear: 671 744 MACs); the span of both one 5x5 conv,
    # 1 638 400 MACs (364 us against 2 x 259): the planner merges them as one span
    mine, mine_planned, mine_merged = scope["mine"], scope["mine_planned"], scope["mine_merged"]
    assert {r.model for r in mine.run.measurements if r.scope != "probe"} == {"mynet"}
    assert mine_planned.chosen.plan.model == "mynet" and mine_planned.chosen.plan.spans == ((0, 2),)
    assert mine_merged.report.plan.spans == ((0, 2),) and "mynet" in out
    assert scope["pages"].html.is_file() and scope["pages"].answer
    importance = json.loads(Path("importance.json").read_text())
    assert importance["format"] == "dsprof.importance" and len(importance["importance"]) == 7
    assert list(scope["scored"].scores.ranking) == importance["ranking"]


def test_a_planned_front_prints_as_dsprof_plan_prints_it(tmp_path, capsys):
    """`print(dsprof.plan(...))` in a notebook showed a dataclass's repr, hundreds of characters of fields. It prints
    the table `dsprof plan` prints now, and the chosen line, from one place: the same rows through both doors."""
    from dsprof.cli import main
    from dsprof.lut import build_lut

    lut = build_lut([Path(__file__).parent / "fixtures" / "reports" / "tiny_torch.jsonl"], tmp_path / "lut.csv")
    model = dsprof.ModelRef.of("mobilenet_v2", options={"depths": [1] * 7}, resolution=32)
    planned = dsprof.plan(model, lut, keep=3, out=tmp_path / "api.json")
    assert main(["plan", "--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution", "32", "--lut",
                 str(tmp_path / "lut.csv"), "--keep", "3", "--out", str(tmp_path / "cli.json")]) == 0
    cli = capsys.readouterr().out.splitlines()
    text = str(planned).splitlines()
    rows = [line for line in text if re.match(r"\d+ +\d+\.\d\dx ", line)]
    assert len(rows) == 8 and rows == [line for line in cli if re.match(r"\d+ +\d+\.\d\dx ", line)]  # k = 0..7
    chosen = [line for line in text if line.startswith("chosen: ")]
    assert chosen == [line for line in cli if line.startswith("chosen: ")] and len(chosen) == 1
    # its speed-up is the original's milliseconds over its own, as the first line and the k = 3 row print them
    original_ms = float(re.search(r"original ([\d.]+) ms", text[0]).group(1))
    speedup, low, high, ms, low_ms, high_ms = re.search(
        r"chosen: k = 3 of 7 blocks, ([\d.]+)x \(95 % ([\d.]+)-([\d.]+)x\), ([\d.]+) ms \(95 % ([\d.]+)-([\d.]+) ms\)",
        chosen[0]).groups()
    assert float(speedup) == pytest.approx(original_ms / float(ms), abs=0.006)
    # the row of k = 3: speed-up, ms, the speed-up's interval and the latency's, as the chosen line has them
    assert re.match(rf"3 +{speedup}x +{ms} +{low}-{high}x +{low_ms}-{high_ms} ", rows[3]), rows[3]
    assert str(planned.front) == planned.front.table() and "Front(" not in str(planned)


def test_a_measured_run_prints_as_dsprof_measure_prints_it_in_the_callers_words(tmp_path, capsys):
    """`print(dsprof.measure(...))` showed a dataclass holding every record. It prints what `dsprof measure` prints:
    the summary table and the count, its advice in parameters where the command line names flags (one text, two
    wordings)."""
    from dsprof.cli import main
    from dsprof.profiler import TimingConfig, Workloads
    from dsprof.records.measurement import read_measurements

    fast = TimingConfig(warmup_s=0.0, warmup_min_iters=1, warmup_max_s=0.01, first_warmup_s=0.0, min_samples=3,
                        max_samples=4, budget_s=0.01, min_sample_s=0.0)
    measured = dsprof.measure(dsprof.ModelRef.of("mobilenet_v2", options={"depths": [1] * 7}, resolution=32),
                              settings=dsprof.profiler.BackendSettings(threads=1), timing=fast,
                              workloads=Workloads(("original",), ("original",), blocks=("features.1", "features.2")),
                              out=tmp_path / "api.jsonl", progress=False)
    text = str(measured).splitlines()
    timed = [r for r in read_measurements(tmp_path / "api.jsonl") if r.scope != "probe"]
    assert len(timed) == 5  # two blocks, and the whole model with its stem and head (the parts no plan changes)
    assert text[-1] == f"5 workloads measured, 0 already in the file; records: {tmp_path / 'api.jsonl'}"
    assert text[0].startswith("CPU threads: 1 (`settings=BackendSettings(threads=)`)") and "Measured(" not in str(measured)
    row = re.compile(r"(\d+ features\.\d+|(stem|head|model): mobilenet_v2) ")
    rows = [row.match(line).group(1) for line in text if row.match(line)]
    assert rows == ["stem: mobilenet_v2", "0 features.1", "1 features.2", "head: mobilenet_v2", "model: mobilenet_v2"]
    assert main(["measure", "--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution", "32", "--threads",
                 "1", "--variants", "original", "--model-variants", "original", "--blocks", "features.1,features.2",
                 "--budget", "0.01", "--warmup",
                 "0", "--max-warmup", "0.05", "--min-samples", "3", "--max-samples", "4", "--out", str(tmp_path / "cli.jsonl"),
                 "--no-progress"]) == 0
    cli = capsys.readouterr().out.splitlines()
    assert cli[0].startswith("CPU threads: 1 (--threads)") and cli[-1].startswith("5 workloads measured, 0 already")
    assert [row.match(line).group(1) for line in cli if row.match(line)] == rows


def test_each_verbs_result_prints_what_its_command_prints(tmp_path, capsys, one_thread):
    """`print(dsprof.predict(...))`, `print(dsprof.merge(...))`, `print(dsprof.report(...))` and `print(lut)` showed
    dataclass reprs (thousands of characters of fields) or `<LUT object at 0x...>`, where `dsprof.plan` and
    `dsprof.measure` printed what their commands print. Each verb's result prints its command's text now, from one
    place: the command line prints the same text, in its options' words. Run through both doors on the same inputs."""
    import csv

    from dsprof.cli import main
    from dsprof.cli.flags import command_line_text

    records = Path(__file__).parent / "fixtures" / "reports" / "tiny_torch.jsonl"
    model = dsprof.ModelRef.of("mobilenet_v2", options={"depths": [1] * 7}, resolution=32)
    flags = ["--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution", "32"]

    def cli(*args: str) -> list[str]:
        assert main(list(args)) == 0
        return capsys.readouterr().out.splitlines()

    # build-lut: the file, its entries (as many as its data rows, read as CSV here), and each context
    lut = dsprof.build_lut([records], tmp_path / "api.csv")
    with open(tmp_path / "api.csv", newline="") as f:
        rows = [r for r in csv.reader(f) if r and not r[0].startswith("#")][1:]
    text = str(lut).splitlines()
    assert text[0].startswith(f"{tmp_path / 'api.csv'}: {len(rows)} entries, ") and len(rows) > 0
    assert len(text) == 1 + len(lut.devices()) and "object at 0x" not in str(lut)
    shown = cli("build-lut", str(records), "-o", str(tmp_path / "cli.csv"))
    assert shown == ["wrote " + line.replace("api.csv", "cli.csv") if i == 0 else line for i, line in enumerate(text)]

    planned = dsprof.plan(model, lut, keep=3, out=tmp_path / "front.json")
    plan_file = str(planned.plan_path)
    keep = json.loads(Path(plan_file).read_text())["keep"]

    # predict: the prediction (its speed-up the front's for that plan: one estimate through two doors), its merges
    found = dsprof.predict(model, lut, plan_file)
    text = str(found).splitlines()
    assert "Predicted(" not in str(found) and text[0].startswith("mobilenet_v2")
    chosen = re.search(r"chosen: k = 3 of 7 blocks, ([\d.]+)x \(95 % ([\d.]+)-([\d.]+)x\)", str(planned)).groups()
    speedup = re.search(r"speed-up ([\d.]+)x over the original \(95 % interval ([\d.]+)-([\d.]+)x", text[1]).groups()
    assert [round(float(v), 2) for v in speedup] == [float(v) for v in chosen]
    assert any(line.startswith(f"{planned.chosen.plan.name}: merged blocks ") for line in text)
    assert text[-1].startswith("drift probe: not timed; `probe=2` times it here")  # the API's words...
    assert cli("predict", *flags, "--lut", str(tmp_path / "api.csv"), "--plan", plan_file) == [
        line.replace("`probe=2`", "--probe 2") for line in text]  # ...and the command line's

    # merge: which blocks merged, the report, one row per block (7) and the total, the file
    merged = dsprof.merge(model, plan_file, out=tmp_path / "api.pt")
    text = str(merged).splitlines()
    states = [line.split()[1] for line in text if re.match(r"features\.\d ", line.strip())]
    assert states == ["kept" if k else "merged" for k in keep] and len(states) == 7
    assert text[-1] == f"wrote {tmp_path / 'api.pt'}" and "MergeOutcome(" not in str(merged)
    assert cli("merge", *flags, "--plan", plan_file, "--out", str(tmp_path / "cli.pt")) == [
        line.replace("api.pt", "cli.pt") for line in text]

    # export: the plan's merges, then the bundle written, its workloads as many as its manifest lists; the command
    # line prints the same, then its next steps. The result still unpacks as the pair it was.
    from dsprof.profiler import Workloads

    little = Workloads(("original",), ("original",), blocks="features.1")
    exported = dsprof.export(model, plans=[plan_file], workloads=little, out=tmp_path / "api-bundle")
    bundle, merges = exported
    manifest = json.loads((tmp_path / "api-bundle" / "manifest.json").read_text())
    text = str(exported).splitlines()
    assert len(merges) == 1 and text[0].startswith(f"{planned.chosen.plan.name}: merged blocks ")
    assert bundle.workloads == len(manifest["workloads"]) == 5  # the block, the model, its stem and head, the plan
    assert text[1:] == [f"wrote {tmp_path / 'api-bundle'}: 5 workloads (onnx), manifest.json and run_bundle.py"]
    shown = cli("export", *flags, "--plan", plan_file, "--variants", "original", "--model-variants", "original",
                "--blocks", "features.1", "--quiet", "--out", str(tmp_path / "cli-bundle"))
    assert shown[:-1] == [line.replace("api-bundle", "cli-bundle") for line in text] and shown[-1].startswith("next: ")

    # report: what it skipped, the files, then the answer (last)
    pages = dsprof.report([records], tmp_path / "api-report", lut=lut, fronts=[tmp_path / "front.json"])
    text = str(pages).splitlines()
    assert text[-len(pages.answer):] == pages.answer and "Report(" not in str(pages)
    assert f"wrote {len(pages.files)} files; open {pages.html} (one file, opens offline) or {pages.index}" in text
    shown = cli("report", str(records), "-o", str(tmp_path / "cli-report"), "--lut", str(tmp_path / "api.csv"),
                "--front", str(tmp_path / "front.json"))
    # the same lines, each in the command line's words (`dsprof.measure(plans=)` -> `dsprof measure --plan`)
    assert shown == [line.replace("api-report", "cli-report")
                     for line in pages.text(lambda t: command_line_text(t, "report")).splitlines()]
    assert any("`dsprof.measure(plans=)`" in line for line in text) and any("`dsprof measure --plan`" in line for line in shown)
