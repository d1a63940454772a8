"""The planner's flow as a new user meets it with their own flat-written network (issue #31, and #28 items 5 and 6).

One real measurement file of tests/models/flatnet.py (six inverted-residual blocks owned by no module, 32 px) with
span entries of two blocks, timed here with tiny budgets, and its LUT with medians from tests/rule_lut.py's fixed
rule (what the planner chooses is then known: `FRONT`). Each numbered item of issue #31 is a test named after it,
through `dsprof.cli.main` (exit status, one line that says what to do, no traceback) or the console script where a
fresh process matters. Expected numbers come from the measurement records (medians computed here), from the
model's reading in its docstring or from the rule worked by hand, never from the code under test. No timing bound.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from dsprof.cli import build_parser, main
from dsprof.errors import UsageError
from dsprof.lut import Pricing, build_lut
from dsprof.merging import load_merged, merge_report
from dsprof.records.plan import Plan
from dsprof.models import ModelRef, format_spans, parse_spans
from dsprof.models.user_model import register_model_file
from dsprof.planning import LatencyBudget, plan_front
from dsprof.workflows.plan import plan_to_file
from dsprof.profiler import Workloads, measure
from dsprof.records.measurement import read_measurements
from dsprof.reports import block_latency_figure, block_table
from dsprof.reports.plots import close
from rule_lut import rule_lut
from fast_timing import FAST

MODELS = Path(__file__).parent / "models"
FLATNET = f"{MODELS / 'flatnet.py'}:build"
MYNET = f"{MODELS / 'mynet.py'}:build"
LABEL = "file:flatnet:build"
BLOCKS = [f"e{i}..p{i}" for i in range(6)]  # flatnet.py's docstring: six chains, named first..last conv
ROOT = Path(__file__).resolve().parents[1]
TRAIN = ["--epochs", "1", "--max-batches", "2", "--max-eval-batches", "1", "--batch-size", "16", "--device", "cpu"]
assert register_model_file(FLATNET) == LABEL  # as --model-file does; a plan for it can then be read
#: keeps blocks 0 and 3; blocks 1-2 and 4-5 merge as one convolution each (two spans of two blocks: every
#: linearised block lies in a span, so its merge list has nothing left to decide)
TWO_SPANS = Plan(LABEL, (1, 0, 0, 1, 0, 0), spans=((1, 3), (4, 6)), name="two-spans").with_merge(
    [False, True, True, False, True, True])
#: The fastest plan for each k of the rule's LUT (tests/rule_lut.py: 200 us a call + 0.1 ns a MAC), worked by hand
#: from flatnet's MACs at 32 px (its docstring's table; expand 4x, the 3x3 depthwise at the block's stride):
#: originals 671744 397312 350208 399360 598016 729088; one dense 3x3 each 589824 221184 331776 442368 589824 884736,
#: so a block alone saves 8.19 17.61 1.84 0 0.82 0 us (3 and 5 stay unmerged: merging adds MACs); a span's 5x5 or
#: 7x7 conv (0-1 614400, 1-2 1204224, 2-3 and 3-4 1228800, 4-5 2457600) saves one call less its extra MACs:
#: 245.47, 154.33, 152.08, 176.86, 86.95 us. The best sums: k=0 three spans (484.49); k=1 0-1, 3-4 and block 2
#: (424.17); k=2 0-1 and 3-4 (422.32); k=3 0-1 and block 2 (247.31); k=4 0-1 (245.47); k=5 block 1 (17.61).
#: k -> (keep, spans as [start, stop)).
FRONT = {0: ((0, 0, 0, 0, 0, 0), ((0, 2), (2, 4), (4, 6))), 1: ((0, 0, 0, 0, 0, 1), ((0, 2), (3, 5))),
         2: ((0, 0, 1, 0, 0, 1), ((0, 2), (3, 5))), 3: ((0, 0, 0, 1, 1, 1), ((0, 2),)),
         4: ((0, 0, 1, 1, 1, 1), ((0, 2),)), 5: ((1, 0, 1, 1, 1, 1), ()), 6: ((1, 1, 1, 1, 1, 1), ())}
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def lut_files(tmp_path_factory):
    """The flat network's measurement file (originals, merged, linear, spans of 2, the whole model) at 32 px, timed
    for real, and its LUT with the medians of tests/rule_lut.py's rule (timing is not what these tests are about:
    what the planner chooses must not hang on a busy machine's clock). `FRONT` is what the rule makes the planner
    choose."""
    tmp = tmp_path_factory.mktemp("newuser")
    result = measure(ModelRef.of(LABEL, resolution=32),
                     workloads=Workloads(variants=("original", "merged", "linear"), model_variants=("original",), spans=2),
                     timing=FAST, out=tmp / "flatnet.jsonl", progress=False)
    lut_path = build_lut([result.path]).save(tmp / "lut.csv")
    rule_lut(lut_path, result.path)
    return result.path, lut_path


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(capsys, command: str, *argv: str) -> str:
    """Run ``dsprof COMMAND ARGV``: exit 2, one error line on stderr naming the command (besides any
    ``warning:`` lines about the model's blocks), no traceback; that line."""
    code, _, err = cli(capsys, command, *argv)
    lines = [line for line in err.strip().splitlines() if not line.startswith(("warning: ", "  "))]
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"dsprof {command}: error: ") and "Traceback" not in err, err
    return lines[0]


def console(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """The console script in a fresh process (this checkout first on the path)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return subprocess.run([sys.executable, "-m", "dsprof", *map(str, argv)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def plan_args(lut_path: Path, *more: str) -> list[str]:
    return ["--model-file", FLATNET, "--resolution", "32", "--lut", str(lut_path), "--max-span", "2", *more]


# -- 1. a budget of 0 ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [["plan", "--budget-ms", "0"], ["plan", "--speedup", "0"], ["plan", "--speedup", "-2"],
                                  ["search", "--budget-ms", "0"]])
def test_1_a_zero_budget_is_one_line_not_a_traceback(lut_files, tmp_path, capsys, argv):
    _, lut_path = lut_files
    command, *budget = argv
    extra = ["--out", tmp_path / "front.json"] if command == "plan" else ["--method", "planner", "--out", tmp_path / "p.json"]
    line = one_line_error(capsys, command, *plan_args(lut_path, *budget, *extra))
    assert "above 0" in line and budget[0] in line
    assert not (tmp_path / "front.json").exists() and not (tmp_path / "p.json").exists()


def test_1_the_api_refuses_budgets_of_zero_too(lut_files):
    _, lut_path = lut_files
    front = plan_front(ModelRef.of(LABEL, resolution=32), lut_path, pricing=Pricing(max_span=2))
    for budget in ({"budget_s": 0.0}, {"speedup": 0.0}, {"budget_s": float("nan")}):
        with pytest.raises(UsageError, match="above 0"):
            front.choose(**budget)
    with pytest.raises(UsageError, match="above 0"):
        plan_to_file(ModelRef.of(LABEL, resolution=32), lut_path, speedup=0.0, max_span=2)
    from dsprof.search import search

    with pytest.raises(UsageError, match="above 0"):  # refused before any training (importance fine-tunes first)
        search(ModelRef.of(LABEL, resolution=32), keep=None, budget=LatencyBudget(budget_ms=0.0), lut=lut_path)


# -- 2. the report draws each span on its own -------------------------------------------------------------------

def test_2_report_block_table_and_figure_put_each_span_at_its_blocks(lut_files, tmp_path, capsys):
    records_path, lut_path = lut_files
    plan_path = tmp_path / "two-spans.plan.json"
    plan_path.write_text(TWO_SPANS.to_json())
    code, _, err = cli(capsys, "report", records_path, "--plans", plan_path, "--resolution", "32", "-o", tmp_path / "rep")
    assert code == 0, err
    records = [r for r in read_measurements(records_path) if r.scope == "block" and r.ok]
    median_ms = {(r.name, r.variant): statistics.median(r.samples_s) * 1e3 for r in records}
    index = {r.name: r.index for r in records if r.index >= 0}
    assert [n for n, _ in sorted(index.items(), key=lambda kv: kv[1])] == BLOCKS
    spans = sorted({r.name for r in records if r.index < 0})
    # one per distinct merged convolution: 2-3 and 3-4 both become a 5x5 24->32 conv at 8x8, timed once as 2-3
    assert spans == ["e0..p0+e1..p1", "e1..p1+e2..p2", "e2..p2+e3..p3", "e4..p4+e5..p5"]

    table = pd.read_csv(tmp_path / "rep" / "tables" / "blocks.csv", keep_default_na=False)
    assert len(table) == len(BLOCKS) + len(spans)  # each span its own row
    for name in BLOCKS:
        (row,) = table[table.block == name].itertuples()
        assert row.index == index[name] and row.span == ""
        assert row.original_ms == pytest.approx(median_ms[(name, "original")], rel=1e-9)
        assert row.merged_ms == pytest.approx(median_ms[(name, "merged")], rel=1e-9)
    for name in spans:
        first, last = name.split("+")
        (row,) = table[table.block == name].itertuples()
        assert row.index == index[first] and row.span == f"{index[first]}-{index[last]}" and index[last] == index[first] + 1
        assert row.merged_ms == pytest.approx(median_ms[(name, "merged")], rel=1e-9)  # its own median
        originals = median_ms[(first, "original")] + median_ms[(last, "original")]
        assert row.original_ms == pytest.approx(originals, rel=1e-9)
    assert list(table.block[:len(BLOCKS)]) == BLOCKS  # blocks first, in order; then the spans by their first block
    assert list(table["index"][len(BLOCKS):]) == sorted(index[s.split("+")[0]] for s in spans)

    # the figure: the original line over the six blocks only, kept markers at blocks 0 and 3, each span a bar
    frame = block_table(records)
    fig = block_latency_figure(frame, {"two-spans": TWO_SPANS.keep})
    lines = [l for l in fig.axes[0].get_lines() if l.get_label() != "_hover"]
    (solid,) = [l for l in lines if l.get_label().startswith("original")]
    assert list(solid.get_xdata()) == list(range(6))
    assert list(solid.get_ydata()) == pytest.approx([median_ms[(n, "original")] for n in BLOCKS], rel=1e-9)
    (kept,) = [l for l in lines if l.get_label() == "two-spans: activations kept"]
    assert list(kept.get_xdata()) == [0, 3]
    assert list(kept.get_ydata()) == pytest.approx([median_ms[(BLOCKS[0], "original")], median_ms[(BLOCKS[3], "original")]])
    bars = [l for l in lines if l.get_label() in ("_span",) or l.get_label().startswith("span merged")]
    assert len(bars) == len(spans)
    drawn = sorted((tuple(b.get_xdata()), b.get_ydata()[0]) for b in bars)
    expected = sorted(((index[s.split("+")[0]], index[s.split("+")[1]]), median_ms[(s, "merged")]) for s in spans)
    for (xs, y), (want_xs, want_y) in zip(drawn, expected):
        assert xs == want_xs and y == pytest.approx(want_y, rel=1e-9)
    close([fig])


# -- 3. one spelling of a span ----------------------------------------------------------------------------------

def test_3_a_span_is_spelled_one_way_in_plan_report_and_merge(lut_files, tmp_path, capsys):
    records_path, lut_path = lut_files
    assert format_spans(((0, 2), (3, 5))) == "0-1 3-4" and parse_spans("0-1,3-4") == parse_spans("0-1 3-4") == ((0, 2), (3, 5))
    front_path = tmp_path / "front.json"
    code, _, err = cli(capsys, "plan", *plan_args(lut_path, "--out", front_path))
    assert code == 0, err
    points = json.loads(front_path.read_text())["points"]
    assert {p["k"]: (tuple(p["keep"]), tuple(map(tuple, p["spans"] or ()))) for p in points} == FRONT
    k, spans = 1, FRONT[1][1]  # spans 0-1 and 3-4: [start, stop) in the file
    text = "0-1 3-4"  # inclusive, by hand
    code, out, err = cli(capsys, "plan", *plan_args(lut_path, "--keep", str(k), "--out", front_path))
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.split()[:1] == [str(k)])
    assert row.endswith(f"  {text}")
    assert f"spans {text}" in out  # the chosen plan's line
    code, _, err = cli(capsys, "report", records_path, "--front", front_path, "-o", tmp_path / "rep")
    assert code == 0, err
    shown = pd.read_csv(tmp_path / "rep" / "tables" / "front_front.csv", keep_default_na=False)
    assert shown.loc[shown.k == k, "spans"].item() == text
    assert pd.read_csv(tmp_path / "front.csv", keep_default_na=False).query(f"set == 'front' and k == {k}").spans.item() == text
    # and merge takes the same text (the LUT decides the lone block 2: merged, by the rule's MACs)
    code, out, err = cli(capsys, "merge", "--model-file", FLATNET, "--resolution", "32", "--plan", tmp_path / "front.plan.json",
                         "--spans", text.replace(" ", ","), "--lut", lut_path, "--out", tmp_path / "m.pt")
    assert code == 0, err
    merged = merge_report(load_merged(tmp_path / "m.pt")).plan
    assert merged.spans == spans and merged.merge == (True,) * 5 + (False,)


# -- 4. merge names the blocks inside a span ---------------------------------------------------------------------

def test_4_merge_names_each_block_of_a_span(tmp_path, capsys):
    plan_path = tmp_path / "two-spans.plan.json"
    plan_path.write_text(TWO_SPANS.to_json())
    code, out, err = cli(capsys, "merge", "--model-file", FLATNET, "--resolution", "32", "--plan", plan_path,
                         "--out", tmp_path / "m.pt")
    assert code == 0, err
    decided, *lines = out.splitlines()  # first what decided the merges: the plan's own list
    assert decided.startswith("two-spans: merged blocks 1 2 4 5; linear, unmerged none (decided by the plan's"), decided
    rows = {int(line.split()[0]): line.split()[1] for line in lines[:6]}
    assert rows == dict(enumerate(BLOCKS))  # row 2 is e2..p2, inside the span 1-2, not its first block e1..p1
    decisions = merge_report(load_merged(tmp_path / "m.pt")).decisions
    assert [d.name for d in decisions] == BLOCKS and [d.merged for d in decisions] == [False, True, True, False, True, True]


# -- 5. messages that say what is wrong --------------------------------------------------------------------------

def test_5_a_plan_for_another_user_model_names_both_models(tmp_path):
    plan_path = tmp_path / "flat.plan.json"
    plan_path.write_text(TWO_SPANS.to_json())
    result = console("merge", "--model-file", MYNET, "--resolution", "32", "--plan", plan_path, cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "file:flatnet:build" in lines[0] and "file:mynet:build" in lines[0] and str(plan_path) in lines[0]


def test_5_b_a_lut_of_another_model_says_which_it_holds(lut_files, tmp_path, capsys):
    _, lut_path = lut_files
    line = one_line_error(capsys, "plan", "--model-file", MYNET, "--resolution", "32", "--lut", lut_path,
                          "--out", tmp_path / "f.json")
    assert "this LUT" in line and "holds another model" in line and f'{LABEL}{{"resolution":32}}' in line
    # what to do: name the model it holds (not "give that model's options": another model, not other options), or
    # time this one, one command
    assert "not file:mynet:build" in line and ": name the model it holds; or measure file:mynet:build" in line, line
    assert "give that model's options" not in line and line.count("`dsprof measure ") == 1, line


def test_5_c_a_forgotten_resolution_names_the_luts_and_the_flag(lut_files, tmp_path, capsys):
    _, lut_path = lut_files
    line = one_line_error(capsys, "plan", "--model-file", FLATNET, "--lut", lut_path, "--max-span", "2",
                          "--out", tmp_path / "f.json")
    resolved = f"{MODELS.resolve() / 'flatnet.py'}:build"  # the path it was registered from, as every hint names it
    assert f"at 32 px, not at 224 px: pass --model-file {shlex.quote(resolved)} --resolution 32" in line
    code, _, err = cli(capsys, "plan", "--model-file", FLATNET, "--lut", lut_path, "--max-span", "2",
                       "--out", tmp_path / "f.json", "--resolution", "32")
    assert code == 0, err  # the flag it names is the fix


def test_5_c_a_python_caller_is_told_the_model_argument_that_fixes_it(lut_files, tmp_path):
    # the hint is one `model=` argument, as every verb takes it: evaluated, the model at the LUT's resolution
    import dsprof
    from dsprof.errors import LUTMissError

    _, lut_path = lut_files
    with pytest.raises(LUTMissError, match="at 32 px, not at 224 px: pass `model=") as caught:
        dsprof.plan(ModelRef.of(LABEL), lut_path, pricing=Pricing(max_span=2), out=tmp_path / "f.json")
    argument = str(caught.value).split("pass `model=", 1)[1].split("`", 1)[0]
    ref = eval(argument, {"ModelRef": ModelRef})  # noqa: S307 - the message's own text, in scope as the docs show it
    assert isinstance(ref, ModelRef) and (ref.entry, ref.resolution, ref.options) == (LABEL, 32, {})
    assert ref.input_size == (32, 32)


def test_5_d_a_lut_of_spans_of_2_plans_with_them_and_says_so(lut_files, tmp_path, capsys):
    # issue #44: the planner follows the LUT (4 blocks by default, the LUT holds spans of 2 only)
    _, lut_path = lut_files
    args = ["--model-file", FLATNET, "--resolution", "32", "--lut", lut_path, "--out", tmp_path / "f.json"]
    code, out, err = cli(capsys, "plan", *args)
    assert code == 0, err
    front = json.loads((tmp_path / "f.json").read_text())
    assert front["max_span"] == 2 and any(p["spans"] for p in front["points"])
    assert sum(line.startswith("spans up to 2 blocks, not the default 4: the LUT holds every span of up to 2 blocks")
               for line in out.splitlines()) == 1, out
    code, _, err = cli(capsys, "plan", *args, "--max-span", "1")
    assert code == 0, err


def test_5_e_usage_errors_are_one_line_for_every_command(lut_files, tmp_path, capsys):
    _, lut_path = lut_files
    line = one_line_error(capsys, "plan", *plan_args(lut_path, "--keep", "3", "--speedup", "1.3"))
    assert "not allowed with argument --keep" in line and "dsprof plan --help" in line
    commands = sorted(next(a for a in build_parser()._actions if a.dest == "command").choices)
    assert len(commands) >= 13
    for command in commands:  # an unknown option, or a required one missing: one line naming the command
        line = one_line_error(capsys, command, "--no-such-option")
        assert f"`dsprof {command} --help`" in line
        assert "unrecognized arguments: --no-such-option" in line or "the following arguments are required" in line
    line = one_line_error(capsys, "report", "records.jsonl", "--no-such-option")  # not the top level's usage
    assert "unrecognized arguments: --no-such-option; see `dsprof report --help`" in line


# -- 6. options that mean the same everywhere ---------------------------------------------------------------------

def test_6_report_takes_resolution(lut_files, tmp_path, capsys):
    records_path, _ = lut_files
    code, _, err = cli(capsys, "report", records_path, "--resolution", "32", "-o", tmp_path / "rep")
    assert code == 0, err
    assert len(pd.read_csv(tmp_path / "rep" / "tables" / "blocks.csv")) == 6 + 4  # six blocks, four span workloads
    line = one_line_error(capsys, "report", records_path, "--resolution", "64", "-o", tmp_path / "rep2")
    assert "no record at 64 px" in line and "32 px" in line


def test_6_keep_is_a_count_or_a_fraction_in_plan_and_search_alike(lut_files, tmp_path, capsys):
    _, lut_path = lut_files
    for keep, k in (("0.5", 3), ("0.4", 2), ("2", 2)):  # 0.5 x 6 blocks = 3; 0.4 x 6 = 2.4 -> 2; a count
        code, _, err = cli(capsys, "plan", *plan_args(lut_path, "--keep", keep, "--out", tmp_path / "front.json"))
        assert code == 0, err
        planned = Plan.coerce(str(tmp_path / "front.plan.json"))
        code, _, err = cli(capsys, "search", *plan_args(lut_path, "--keep", keep, "--method", "planner",
                                                          "--out", tmp_path / "searched.json"))
        assert code == 0, err
        searched = Plan.coerce(str(tmp_path / "searched.json"))
        assert sum(planned.keep) == sum(searched.keep) == k and planned.keep == searched.keep == FRONT[k][0]
        assert planned.spans == searched.spans == (FRONT[k][1] or None)


# -- 7. training honours --threads ---------------------------------------------------------------------------------

THREADS_MODEL = '''
import os
import torch
from torch import nn


class Block(nn.Module):
    """1x1 expand, 3x3 depthwise, 1x1 project, plus the input: a module that owns its chain."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU6(),
                                  nn.Conv2d(16, 16, 3, 1, 1, groups=16, bias=False), nn.BatchNorm2d(16), nn.ReLU6(),
                                  nn.Conv2d(16, 8, 1, bias=False), nn.BatchNorm2d(8))

    def forward(self, x):
        return x + self.body(x)


class Net(nn.Module):
    """Two inverted-residual blocks between a stem and a classifier; each training step writes torch's threads
    (in the model's own forward, which training runs: the blocks are changed by module replacement)."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6())
        self.blocks = nn.Sequential(Block(), Block())
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        if self.training:
            with open(os.environ["DSPROF_TEST_THREADS_LOG"], "a") as log:
                log.write(f"{torch.get_num_threads()}\\n")
        return self.fc(self.blocks(self.stem(x)).mean((2, 3)))


def build(num_classes=10):
    return Net(num_classes)
'''


def test_7_finetune_and_search_train_on_the_threads_given(tmp_path, capsys, monkeypatch):
    model = tmp_path / "threads_net.py"
    model.write_text(THREADS_MODEL)
    log = tmp_path / "threads.log"
    monkeypatch.setenv("DSPROF_TEST_THREADS_LOG", str(log))
    torch.set_num_threads(2)  # the module's one_thread fixture puts it back
    runs = {
        "finetune": ["finetune", "--model-file", f"{model}:build", *TRAIN, "--out", tmp_path / "ft.pt"],
        "search": ["search", "--model-file", f"{model}:build", "--method", "differentiable", "--keep", "1", *TRAIN,
                   "--out", tmp_path / "plan.json"],
    }
    for name, argv in runs.items():
        for threads, given in ((1, []), (3, ["--threads", "3"])):  # the default is 1, whatever torch had
            log.write_text("")
            code, _, err = cli(capsys, *argv, *given)
            assert code == 0, f"{name}: {err}"
            seen = [int(v) for v in log.read_text().split()]
            assert len(seen) >= 2 and set(seen) == {threads}, (name, given, seen)
            assert torch.get_num_threads() == 2  # given back after the run


# -- issue #28, item 5: the plan's table and the merge command it suggests -----------------------------------------

def test_28_5_plan_rows_lead_with_the_speedup_in_aligned_columns_and_echo_a_merge_that_runs(lut_files, tmp_path, capsys,
                                                                                          monkeypatch):
    _, lut_path = lut_files
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, "plan", *plan_args(lut_path, "--keep", "2"))
    assert code == 0, err
    front = json.loads(Path("front.json").read_text())
    lines = out.splitlines()
    start = lines.index("fastest plan for each k (blocks keeping activations):") + 1
    header, rows = lines[start], lines[start + 1:start + 1 + len(front["points"])]
    assert header.split()[:3] == ["k", "speed-up", "ms"]
    keep_at = header.index("plan (1 = kept)")
    for row, point in zip(rows, front["points"]):
        k, speedup, ms = row.split()[:3]
        assert int(k) == point["k"]
        assert speedup == f"{front['original_s'] / point['latency_s']:.2f}x"  # the first number: the speed-up
        assert float(ms) == pytest.approx(point["latency_s"] * 1e3, abs=5e-4)
        bits = "".join(map(str, point["keep"]))
        assert row.index(bits, keep_at) == keep_at  # aligned, whatever the spans of the rows above
    # a row with many spans (as MobileNetV2's "2-3 4-6 7-8 10-13 14-15") pushes nothing to its right
    real = plan_front(ModelRef.of(LABEL, resolution=32), lut_path, pricing=Pricing(max_span=2))
    many = Plan(LABEL, (0,) * 6, spans=((0, 2), (2, 4), (4, 6)))
    table = replace(real, points=(replace(real.points[0], plan=many), *real.points[1:])).table().splitlines()
    start = table.index("fastest plan for each k (blocks keeping activations):") + 1
    header, rows = table[start], table[start + 1:start + 1 + len(real.points)]
    columns = [header.index(name) + len(name) for name in ("speed-up", "ms", "interval ms")]  # right-aligned ends
    for row, point in zip(rows, real.points):
        assert row.index("".join(map(str, point.plan.keep if point.k else many.keep)), header.index("plan")) == header.index("plan")
        for end in columns:
            assert row[end - 1] != " " and (len(row) == end or row[end] == " "), (row, end)
    assert rows[0].endswith("  0-1 2-3 4-5") and rows[-1].endswith("  -")
    (suggested,) = [line.removeprefix("next: ") for line in lines if line.startswith("next: dsprof merge ")]
    argv = shlex.split(suggested)
    assert argv[:2] == ["dsprof", "merge"]
    code, _, err = cli(capsys, *argv[1:])  # runs as written
    assert code == 0, err
    merged = merge_report(load_merged(tmp_path / "front.merged.pt")).plan
    chosen = Plan.coerce("front.plan.json")
    assert (merged.keep, merged.spans, merged.merge) == (chosen.keep, chosen.spans, chosen.merge)


# -- issue #28, item 6: defaults said once; a fine-tuned checkpoint says its classes and its plan -------------------

def test_28_6_every_help_line_shows_its_default_once():
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    checked = 0
    for name, sub in [("dsprof", parser), *commands.items()]:
        formatter = sub._get_formatter()
        for action in sub._actions:
            if not action.help:
                continue
            text = formatter._expand_help(action)
            assert text.lower().count("default") <= 1, f"{name} {action.option_strings}: {text}"
            assert "(default: None)" not in text and "(default: False)" not in text and "(default: [])" not in text, text
            checked += 1
        shown = " ".join(sub.format_help().split())
        assert "(default: None)" not in shown and "(default: False)" not in shown, name
    assert checked > 150
    # a default still shown where it helps; merge's span width follows the LUT below 4 (issue #44), said in words
    assert "default 4, no wider than the LUT holds" in " ".join(commands["merge"].format_help().split())


def test_28_6_merge_reads_the_class_count_and_plan_of_a_finetune_checkpoint(tmp_path, capsys):
    tiny = ["--model", "mobilenet_v2", "--width", "0.35", "--depths", "1,1,1,1,1,1,1"]
    # its merge list says how merges are decided (the span merges; block 5, linearised alone, too), so no --lut or
    # --merge-by need be given: the checkpoint carries the list with the plan
    plan = Plan("mobilenet_v2", (1, 0, 0, 1, 1, 0, 1), {"width": 0.35, "depths": [1] * 7}, spans=((1, 3),),
                name="tiny").with_merge([False, True, True, False, False, True, False])
    plan_path = tmp_path / "tiny.plan.json"
    plan_path.write_text(plan.to_json())
    code, _, err = cli(capsys, "finetune", *tiny, "--plan", plan_path, *TRAIN, "--no-merge-check", "--out", tmp_path / "ft.pt")
    assert code == 0, err
    # no --model, --plan or --num-classes: the checkpoint carries them (10 classes: scikit-learn's digits)
    code, out, err = cli(capsys, "merge", "--checkpoint", tmp_path / "ft.pt", "--resolution", "32", "--out", tmp_path / "m.pt")
    assert code == 0, err
    merged = load_merged(tmp_path / "m.pt").eval()
    with torch.no_grad():
        assert merged(torch.zeros(1, 3, 32, 32)).shape == (1, 10)
    merged_plan = merge_report(merged).plan
    assert (merged_plan.keep, merged_plan.spans, merged_plan.merge) == (plan.keep, plan.spans, plan.merge)
    # a plan that keeps other activations than the weights were fine-tuned with is refused in one line
    other = tmp_path / "other.plan.json"
    other.write_text(Plan("mobilenet_v2", (1, 1, 0, 1, 1, 0, 1), {"width": 0.35, "depths": [1] * 7}).to_json())
    line = one_line_error(capsys, "merge", "--checkpoint", tmp_path / "ft.pt", "--plan", other, "--resolution", "32")
    assert "1001101" in line and "1101101" in line and "drop --plan" in line
