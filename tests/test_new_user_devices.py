"""Several runtimes, one answer: the device-aware and importance flow as a new user meets it (issue #37).

The user's own network, tests/models/mynet.py (seven parts, one with squeeze-and-excitation that `measure` refuses:
six blocks), at 32 px, timed for real through PyTorch eager and ONNX Runtime into one LUT holding both contexts, with
span entries of two blocks. The LUT's medians are then rewritten by tests/rule_lut.py's rule, PyTorch by its default
rule and ONNX Runtime by another (a twentieth of the overhead per call, three times the time per MAC), so that what
the planner chooses does not hang on a busy machine's clock. Each numbered item of issue #37 is a test named after
it, through `dsprof.cli.main` or the console script, as a user types it. Expected values come from mynet's docstring
read by hand, from the importance values chosen here (whose least-loss plans are worked out below), from the raw
samples of the paired runs (recomputed here) and from the LUT's rows, never from the code under test. No timing
bound.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import io
import itertools
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest

from chromium import Browser, find_chromium
from dsprof.cli import build_parser, main
from dsprof.lut import LUT, build_lut
from dsprof.lut.predict import prices_of, predict_plan
from dsprof.lut.schema import PREDICTED
from dsprof.merging import load_merged, merge_report
from dsprof.records.plan import Plan
from dsprof.models import ModelRef, get_model
from dsprof.models.user_model import register_model_file
from dsprof.profiler import BackendSettings, Workloads, format_summary, measure, summary_table
from dsprof.records.measurement import read_measurements
from dsprof.reports import block_latency_figure, block_table, memory_figure, memory_table, prediction_figure
from dsprof.reports import validation_rows
from dsprof.reports.devices import cross_figure, cross_table
from dsprof.reports.plots import close
from rule_lut import rule_lut
from fast_timing import FEWER

ROOT = Path(__file__).resolve().parents[1]
MODELS = Path(__file__).parent / "models"
MYNET = f"{MODELS / 'mynet.py'}:build"
LABEL = "file:mynet:build"
#: mynet.py's docstring: seven parts in order, blocks.3 (squeeze-excitation) refused, so six blocks; the chain written
#: out in MyNet.forward is named by its first and last convolutions (each conv_bn's convolution is its child 0).
BLOCKS = ["blocks.0", "blocks.1", "blocks.2", "blocks.4", "flat_expand.0..flat_project.0", "blocks_tail"]
#: The refused block breaks the chain: spans run within blocks 0-2 and within blocks 3-5; of two blocks: four.
SPANS = ["0-1", "1-2", "3-4", "4-5"]
RULES = {"onnxruntime": (20e-6, 3e-10)}  # ONNX Runtime's rule: 20 us a call, 0.3 ns a MAC (PyTorch: 200 us, 0.1 ns)
BACKENDS = ("torch", "onnxruntime")
LABELS = {"torch": "torch/cpu t1", "onnxruntime": "onnxruntime/cpu t1"}
#: Importance chosen so that every k has one plan of least loss: linearise the 6 - k blocks of least importance, in
#: the order 1 (0.01), 3 (0.02), 4 (0.03), 2 (0.04), 0 (0.05), 5 (0.06). k -> (keep, summed loss).
IMPORTANCE = [0.05, 0.01, 0.04, 0.02, 0.03, 0.06]
LEAST_LOSS = {6: ("111111", 0.0), 5: ("101111", 0.01), 4: ("101011", 0.03), 3: ("101001", 0.06),
              2: ("100001", 0.10), 1: ("000001", 0.15), 0: ("000000", 0.21)}
K = 3
ARGS = ["--model-file", MYNET, "--resolution", "32", "--max-span", "2"]
QUICK = ["--threads", "1", "--warmup", "0", "--max-warmup", "0.05", "--min-samples", "3", "--max-samples", "4", "--budget", "0.02",
         "--min-sample-time", "0", "--no-progress"]
CHECK = ["--threads", "1", "--warmup", "0.02", "--max-warmup", "0.05", "--min-samples", "6", "--max-samples", "6",
         "--budget", "1", "--no-progress"]  # 6 rounds: the interval of the median of 6 paired ratios is their full range
TRAIN = ["--epochs", "1", "--max-batches", "2", "--max-eval-batches", "1", "--batch-size", "16", "--device", "cpu"]
CHROMIUM = find_chromium()
assert register_model_file(MYNET) == LABEL
pytestmark = pytest.mark.usefixtures("one_thread")


def run(*argv, cwd: Path | None = None) -> tuple[int, str, str]:
    """``dsprof ARGV`` in this process (in ``cwd``): its exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            (contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext()):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def ok(*argv, cwd: Path | None = None) -> str:
    code, out, err = run(*argv, cwd=cwd)
    assert code == 0, (argv, err[-3000:])
    return out


def error_line(command: str, *argv) -> str:
    """``dsprof COMMAND ARGV`` fails with exit 2 and one error line naming the command (besides warnings); that line."""
    code, _, err = run(command, *argv)
    lines = [line for line in err.strip().splitlines() if not line.startswith(("warning: ", "  "))]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err[-3000:]
    assert lines[0].startswith(f"dsprof {command}: error: "), lines[0]
    return lines[0]


def console(*argv, cwd: Path) -> subprocess.Popen:
    """The console script in a fresh process (this checkout first on the path), Ctrl-C delivered as in a terminal."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return subprocess.Popen([sys.executable, "-m", "dsprof", *map(str, argv)], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def bits(keep) -> str:
    return "".join(str(int(v)) for v in keep)


def pct(fraction: float) -> str:
    """A loss as the issue asks every place to write it: per cent with a sign, one decimal (written out here)."""
    return f"{'+' if fraction >= 0 else '-'}{abs(fraction) * 100:.1f} %"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """Both contexts measured for real (blocks original, merged, linear; spans of 2; the whole model, stem and head)
    into one folder, one LUT of both with the rules' medians, and the importance file (a plain list)."""
    d = tmp_path_factory.mktemp("devices")
    files = []
    for backend in BACKENDS:
        result = measure(ModelRef.of(LABEL, resolution=32), settings=BackendSettings(backend=backend, threads=1),
                         workloads=Workloads(variants=("original", "merged", "linear"), model_variants=("original",), spans=2),
                         timing=FEWER, out=d / "measurements", progress=False)
        files.append(result.path)
    lut = build_lut(files).save(d / "lut.csv")
    rule_lut(lut, files, RULES)
    (d / "importance.json").write_text(json.dumps(IMPORTANCE))
    contexts = {c.backend: c for c in LUT.load(lut).devices()}
    return {"dir": d, "files": files, "lut": lut, "contexts": contexts}


@pytest.fixture(scope="module")
def planned(setup):
    """`dsprof plan --for torch,onnxruntime --importance ... --keep 3`, as the user typed it: (stdout, fronts.json)."""
    d = setup["dir"]
    out = ok("plan", *ARGS, "--lut", setup["lut"], "--for", "torch,onnxruntime", "--importance", d / "importance.json",
             "--keep", K, "--out", d / "plans" / "fronts.json")
    return out, json.loads((d / "plans" / "fronts.json").read_text())


@pytest.fixture(scope="module")
def checked(setup, planned):
    """The plan for both contexts timed beside the original in each (6 paired rounds), then `dsprof report` over the
    measurements, the checks and fronts.json: (the report's folder, what it printed, the check records)."""
    d = setup["dir"]
    for backend in BACKENDS:
        ok("measure", *ARGS[:4], "--backend", backend, *CHECK, "--blocks", "none", "--model-variants", "original",
           "--plan", d / "plans" / "fronts.plan.json", "--out", d / "checks")
    printed = ok("report", d / "measurements", d / "checks", "--model-file", MYNET, "--lut", setup["lut"], "--plans",
                 d / "plans" / "fronts.plan.json", "--front", d / "plans" / "fronts.json", "-o", d / "report")
    records = [r for p in sorted((d / "checks").glob("*.jsonl")) for r in read_measurements(p)]
    return d / "report", printed.splitlines(), records


def round_ratios(records, backend: str, name: str) -> list[float]:
    """The original's time over plan ``name``'s, round by round, from the raw samples of their one group (sorted)."""
    plan = next(r for r in records if r.backend == backend and r.scope == "model" and r.name == name)
    original = next(r for r in records if r.group == plan.group and r.scope == "model" and r.variant == "original")
    assert len(original.samples_s) == len(plan.samples_s) == 6
    return sorted(o / p for o, p in zip(original.samples_s, plan.samples_s))


def joint_point(data: dict, k: int, least_loss: bool = True) -> dict:
    return next(p for p in data["joint"]["least_loss" if least_loss else "points"] if p["k"] == k)


# -- 1. --importance with --for ----------------------------------------------------------------------------------------

def test_37_1_importance_with_for_plans_the_least_loss_and_shows_it(setup, planned):
    out, data = planned
    joint = data["joint"]
    assert joint["labels"] == [LABELS["torch"], LABELS["onnxruntime"]]
    least = {p["k"]: (bits(p["keep"]), p["importance"]) for p in joint["least_loss"]}
    assert {k: v[0] for k, v in least.items()} == {k: v[0] for k, v in LEAST_LOSS.items()}
    for k, (_, loss) in LEAST_LOSS.items():
        assert least[k][1] == pytest.approx(loss, abs=1e-12), k
    # the plan file written is the least-loss one (the fastest of k = 3 keeps other blocks: without the importance
    # the plan file, the table and the chosen line were the same as with it)
    chosen = Plan.coerce(str(setup["dir"] / "plans" / "fronts.plan.json"))
    assert bits(chosen.keep) == LEAST_LOSS[K][0] != bits(joint_point(data, K, least_loss=False)["keep"])
    lines = out.splitlines()
    title = next(i for i, line in enumerate(lines) if line.startswith("the same, least importance loss for each k"))
    header = lines[title + 1]
    end = header.index("importance") + len("importance")  # numbers right-aligned under their header
    row = next(line for line in lines[title + 2:title + 9] if line.split()[0] == str(K))
    assert row[:end].split()[-1] == "0.0600" and LEAST_LOSS[K][0] in row
    (line,) = [line for line in lines if line.startswith("chosen: ")]
    assert line.endswith("importance loss 0.0600")

    # among the plans of least loss, the least worst loss: brute force over what deploys keep 101001 (block 1 alone,
    # merged or not; blocks 3 and 4 as the span 3-4, or each alone, merged or not), priced in both contexts
    lut = LUT.load(setup["lut"])
    costs = {b: prices_of(ModelRef.of(LABEL, resolution=32), lut, device=setup["contexts"][b]) for b in BACKENDS}
    own = {f["device"]: next(p["latency_s"] for p in f["points"] if p["k"] == K) for f in data["fronts"]}
    keep = tuple(int(c) for c in LEAST_LOSS[K][0])
    worst = []
    for m1, m3, m4, span in itertools.product((False, True), (False, True), (False, True), (False, True)):
        if span and not (m3 and m4):
            continue  # a span merges its blocks: one plan, not four
        plan = Plan(LABEL, keep, spans=((3, 5),) if span else None).with_merge([False, m1, False, m3, m4, False])
        worst.append(max(predict_plan(costs[b], plan, strict=True).total_s / own[str(setup["contexts"][b])]
                         for b in BACKENDS))
    assert joint_point(data, K)["worst"] + 1 == pytest.approx(min(worst), rel=1e-9)


def _tilings(n, pieces):
    """(blocks kept, summed loss, summed savings per context) of every sequence of pieces that covers blocks
    0..n-1: each tiling walked piece by piece, its sums carried along the walk (exact Fractions for the loss), so that
    the ~15,000 tilings of 8 blocks cost a tuple addition each rather than a NumPy sum over their pieces."""
    starting: dict[int, list] = {}
    for p in pieces:
        starting.setdefault(p.start, []).append(p)
    found = []

    def walk(start, kept, loss, savings):
        if start == n:
            found.append((kept, loss, savings))
            return
        for p in starting.get(start, ()):
            walk(p.stop, kept + p.kept, loss + p.loss, tuple(a + b for a, b in zip(savings, p.savings_s)))

    walk(0, 0, Fraction(0), (0.0,) * len(pieces[0].savings_s))
    return found


@pytest.mark.parametrize("contexts", [2, 3])
@pytest.mark.parametrize("seed", range(4))
def test_37_1_least_loss_for_several_contexts_equals_brute_force(contexts, seed, monkeypatch):
    """The solver alone (pure arithmetic) on random per-context savings that disagree a lot and losses with many ties
    (each block's importance one of 0, 0.01, 0.02): for each k, among every tiling of 8 blocks by its pieces, the
    least summed loss, then the least worst (or mean) relative latency; sets filtered a few rows at a time."""
    import numpy as np

    from dsprof.planning import minimax
    from dsprof.lut.piece import Piece
    from dsprof.planning.minimax import _mean, _worst

    monkeypatch.setattr(minimax, "_CHUNK", 3)
    rng = np.random.default_rng(100 + seed)
    n = 8
    loss = [Fraction(int(v), 100) for v in rng.integers(0, 3, n)]
    pieces = []
    for i in range(n):
        pieces.append(Piece(i, i + 1, "original", kept=True, savings_s=(0.0,) * contexts))
        pieces.append(Piece(i, i + 1, "merged", savings_s=tuple(rng.uniform(-0.5, 2, contexts)), loss=loss[i]))
        pieces.append(Piece(i, i + 1, "linear", savings_s=tuple(rng.uniform(0, 1, contexts)), loss=loss[i]))
        for size in (2, 3):
            if i + size <= n:
                pieces.append(Piece(i, i + size, "span", savings_s=tuple(rng.uniform(-1, 2.5 * size, contexts)),
                                    loss=sum(loss[i:i + size], Fraction(0))))
    every = _tilings(n, pieces)
    kept = np.array([kk for kk, _, _ in every])
    savings = np.array([v for _, _, v in every])  # one row per tiling, one column per context
    # each context's original less a term of k alone (its calibration plan's share, `minimax._beyond`), per context
    share = rng.uniform(-4, 4, contexts)
    base = {k: 40.0 - share * (n - k) / n for k in range(n + 1)}
    own = {k: base[k] - savings[kept == k].max(axis=0) for k in range(n + 1)}
    worst, _ = _worst(n, pieces, base, own, least_loss=True)
    mean = _mean(n, pieces, own, least_loss=True)
    for k in range(n + 1):
        least = min(l for kk, l, _ in every if kk == k)
        relative = (base[k] - savings[[kk == k and l == least for kk, l, _ in every]]) / own[k]
        for chosen, score in ((worst[k], np.max), (mean[k], np.mean)):
            assert sum((p.loss for p in chosen), Fraction(0)) == least, (k, score.__name__)
            got = (base[k] - np.sum([p.savings_s for p in chosen], axis=0)) / own[k]
            assert score(got) == pytest.approx(score(relative, axis=1).min(), rel=1e-12), (k, score.__name__)


# -- 2. --for gives answers -------------------------------------------------------------------------------------------

def test_37_2_for_prints_each_contexts_speedup_and_a_merge_that_runs(setup, planned, tmp_path):
    out, data = planned
    d = setup["dir"]
    (line,) = [line for line in out.splitlines() if line.startswith("chosen: ")]
    point = joint_point(data, K)
    for i, backend in enumerate(joint_order(data)):
        found = re.search(rf"{re.escape(LABELS[backend])} (\d+\.\d\d)x \(95 % (\d+\.\d\d)-(\d+\.\d\d)x\), "
                          r"([+-]\d+\.\d) % against its own plan", line)
        assert found, line
        # `dsprof predict` of the plan file in that context gives the same speed-up and interval
        ok("predict", *ARGS[:4], "--lut", setup["lut"], "--backend", backend, "--plan", d / "plans" / "fronts.plan.json",
           "--json", tmp_path / f"{backend}.json")
        pred = json.loads((tmp_path / f"{backend}.json").read_text())["prediction"]
        assert [f"{pred[f]:.2f}" for f in ("speedup", "speedup_low", "speedup_high")] == list(found.groups()[:3]), line
        assert f"{found[4]} %" == pct(point["loss"][i])
    (suggested,) = [line.removeprefix("next: ") for line in out.splitlines() if line.startswith("next: ")]
    argv = shlex.split(suggested)
    assert argv[:2] == ["dsprof", "merge"]
    ok(*argv[1:], cwd=tmp_path)  # runs as written (its paths are those plan was given: absolute here)
    merged = merge_report(load_merged(argv[argv.index("--out") + 1])).plan
    chosen = Plan.coerce(str(d / "plans" / "fronts.plan.json"))
    assert (merged.keep, merged.spans, merged.merge) == (chosen.keep, chosen.spans, chosen.merge)


def joint_order(data: dict) -> list[str]:
    """The backends in the order of the file's plan for several contexts."""
    return [next(b for b in BACKENDS if f"/{b}/" in key) for key in data["joint"]["contexts"]]


def test_37_2_the_report_draws_the_joint_plan_predicted_on_each_front(setup, planned, checked):
    _, data = planned
    report, _, _ = checked
    for i, front in enumerate(data["fronts"]):
        c = data["joint"]["contexts"].index(front["device"])
        figure = pd.read_csv(report / "plots" / f"front_fronts-{i}.csv")
        drawn = figure[figure["set"] == "joint"].sort_values("k")
        expected = sorted((p["k"], p["speedup"][c]) for p in data["joint"]["least_loss"])
        assert list(drawn["k"]) == [k for k, _ in expected]
        assert list(drawn["speedup"]) == pytest.approx([s for _, s in expected], rel=1e-12)
        svg = (report / "plots" / f"front_fronts-{i}.svg").read_text()
        assert f"<title>one plan for all contexts, k={K}: predicted {expected[K][1]:.2f}x here" in svg


# -- 3. the report says what it measured --------------------------------------------------------------------------------

def test_37_3_the_answer_reads_every_paired_run_and_opens_with_each_context_and_the_joint_plan(planned, checked):
    _, data = planned
    report, printed, records = checked
    name = f"joint-least-loss-worst-k{K}"
    assert not any("no plan of this front was measured" in line for line in printed)
    point = joint_point(data, K)
    order = joint_order(data)
    for backend in BACKENDS:
        ratios = round_ratios(records, backend, name)
        predicted = point["speedup"][order.index(backend)]
        measured = f"{statistics.median(ratios):.2f}x (95 % {ratios[0]:.2f}-{ratios[-1]:.2f}x)"
        on = next(i for i, line in enumerate(printed) if line.startswith("On ") and LABEL in line
                  and ("PyTorch eager" if backend == "torch" else "ONNX Runtime") in line)
        assert printed[on + 2] == f"measured beside the original: {name} (k = {K}) {measured}, predicted {predicted:.2f}x."
    title = next(i for i, line in enumerate(printed) if line.startswith("One plan for "))
    assert printed[title] == (f"One plan for {LABELS['torch']} and {LABELS['onnxruntime']} (least "
                              f"importance loss, then least worst loss; k = {K}, {name}):")
    for backend in BACKENDS:
        i = order.index(backend)
        ratios = round_ratios(records, backend, name)
        assert (f"on {LABELS[backend]} {point['speedup'][i]:.2f}x predicted (95 % {point['speedup_low'][i]:.2f}-"
                f"{point['speedup_high'][i]:.2f}x), measured {statistics.median(ratios):.2f}x (95 % {ratios[0]:.2f}-"
                f"{ratios[-1]:.2f}x)") in printed[title + 1]
    # every answer paragraph (each context's, then the joint plan's) before the first figure of the page
    index = (report / "index.md").read_text()
    first_figure = index.index("![")
    for paragraph in (" ".join(printed[title:title + 2]), *(line for line in printed if line.startswith("On "))):
        assert 0 <= index.index(paragraph.split(":")[0]) < first_figure


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here and none could be installed (make test runs "
                    "`apt-get install -y chromium` where it is root and has apt)")
def test_37_3_the_first_screen_holds_both_answers_and_the_joint_plan(checked):
    report, printed, _ = checked
    leads = """(function () {
        return Array.from(document.querySelectorAll("p.lead")).map(function (p) {
            return [p.id, p.textContent, p.getBoundingClientRect().bottom]; }); })()"""
    with Browser(CHROMIUM) as browser:
        browser.open((report / "report.html").resolve().as_uri(), 1280, 900)
        found = browser.evaluate(leads)
        errors = browser.errors()
    assert errors == []
    assert [i for i, _, _ in found] == ["summary", "summary-2", "summary-3"]  # one id each
    assert found[2][1].startswith("One plan for ")
    assert all(bottom < 900 for _, _, bottom in found), found  # all three on the first screen


def test_37_3_a_loss_is_per_cent_with_a_sign_in_the_cli_the_tables_and_the_heat_map(planned, checked):
    out, data = planned
    report, _, _ = checked
    # the CLI: the cross table's worst and median, the plan for both contexts
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("chosen for"))
    for line in lines[start + 1:start + 3]:
        assert len(re.findall(r"[+-]\d+\.\d %", line)) == 4, line  # worst, its interval's two ends, median
    # the report's cross table (Markdown and text, as the HTML page: `shown`) and heat map: the file's fraction as per cent
    cross = [r for r in data["cross"] if r["chosen_for"] != r["runs_on"]]
    table = pd.read_csv(report / "tables" / "devices_fronts_cross.csv")
    assert list(table["loss"]) == pytest.approx([r["loss"] for r in cross], rel=1e-12)  # the data: fractions
    markdown = (report / "tables" / "devices_fronts_cross.md").read_text().splitlines()
    header = [c.strip() for c in markdown[0].strip("|").split("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in markdown[2:]]
    assert [row[header.index("loss")] for row in rows] == [pct(r["loss"]) for r in cross]
    assert [row[header.index("loss_high")] for row in rows] == [pct(r["loss_high"]) for r in cross]
    fig = cross_figure(cross_table(data), "cross")
    ks = sorted({r["k"] for r in cross})
    cells = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in fig.axes[0].texts}
    pairs = list(dict.fromkeys((r["chosen_for_label"], r["runs_on_label"]) for r in cross))
    assert cells == {(pairs.index((r["chosen_for_label"], r["runs_on_label"])), ks.index(r["k"])): pct(r["loss"])
                     for r in cross}
    close([fig])
    # the plan for several contexts, least loss first (losses other than 0 here): the CLI's table and the report's
    table = pd.read_csv(report / "tables" / "devices_fronts_joint.csv")
    markdown = (report / "tables" / "devices_fronts_joint.md").read_text().splitlines()
    header = [c.strip() for c in markdown[0].strip("|").split("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in markdown[2:]]
    assert len(rows) == len(table) == 7
    for point, row in zip(data["joint"]["least_loss"], rows):
        assert row[header.index("worst loss")] == pct(point["worst"])
        assert row[header.index(f"{data['joint']['labels'][0]}: loss")] == pct(point["loss"][0])
    assert any(abs(p["worst"]) > 0.01 for p in data["joint"]["least_loss"])
    title = next(i for i, line in enumerate(lines) if line.startswith("the same, least importance loss"))
    for point, line in zip(data["joint"]["least_loss"], lines[title + 2:title + 9]):
        assert [pct(v) for v in (*point["loss"], point["worst"], point["mean"])] == re.findall(r"[+-]\d+\.\d %", line)


def test_37_3_block_latency_figure_keeps_the_blocks_readable_beside_tall_spans(setup):
    records = [r for r in read_measurements(setup["files"][0]) if r.ok]
    frame = block_table(records)
    spans = frame["span"] != ""
    assert sorted(frame.loc[spans, "span"]) == SPANS
    top = max(frame.loc[~spans, "original_ms"].max(), frame.loc[~spans, "merged_ms"].max())
    for factor, scale in ((1.5, "linear"), (5.0, "log")):  # 5x the blocks' highest: a linear axis squashes them
        tall = frame.copy()
        tall.loc[spans, "merged_ms"] = factor * top
        fig = block_latency_figure(tall)
        ax = fig.axes[0]
        assert ax.get_yscale() == scale
        assert ("log scale" in ax.get_ylabel()) == (scale == "log")
        (solid,) = [l for l in ax.get_lines() if l.get_label().startswith("original")]
        assert list(solid.get_ydata()) == pytest.approx(list(frame.loc[~spans].sort_values("index")["original_ms"]))
        low, high = ax.get_ylim()
        assert low <= min(solid.get_ydata()) and high >= factor * top
        close([fig])


def test_37_3_memory_figure_says_which_blocks_a_span_holds():
    model = get_model(LABEL, resolution=32)
    plan = Plan(LABEL, (0,) * 6, spans=((0, 2), (3, 5))).with_merge([True] * 6)
    mem = memory_table(model, plan, (32, 32))
    assert list(mem["span"]) == ["0-1", "0-1", "", "3-4", "3-4", ""]
    # mynet's docstring: blocks.0 (16 -> 16, stride 1) and blocks.1 (16 -> 32, stride 2) merge into one 5x5 conv of
    # stride 2 with a bias, 16 -> 32; blocks.4 (32 -> 32) and the flat chain (32 -> 32, stride 2) into a 5x5 32 -> 32.
    # 16 bits a value; counted at the span's first block, nothing at the others
    assert list(mem["weight_bytes_after"]) [:2] == [2 * (5 * 5 * 16 * 32 + 32), 0]
    assert list(mem["weight_bytes_after"])[3:5] == [2 * (5 * 5 * 32 * 32 + 32), 0]
    assert mem.loc[1, "peak_activation_bytes_after"] == 0 and mem.loc[4, "peak_activation_bytes_after"] == 0
    fig = memory_figure(mem)
    for ax in fig.axes:
        notes = sorted((t.get_text(), round(t.xy[0], 3)) for t in ax.texts)
        assert notes == [("in span 0-1", 1.2), ("in span 3-4", 4.2)]  # where the "after" bar would be
    close([fig])


def test_37_3_prediction_figure_has_a_colour_and_legend_entry_per_context(setup, planned, checked):
    report, _, records = checked
    d = setup["dir"]
    validation = validation_rows(records, LUT.load(setup["lut"]), {f"joint-least-loss-worst-k{K}":
                                                                   Plan.coerce(str(d / "plans" / "fronts.plan.json"))})
    labels = sorted(set(validation["device"]))
    assert len(validation) == 2 and [b for l in labels for b in BACKENDS if f"/ {b} /" in l] == ["onnxruntime", "torch"]
    fig = prediction_figure(validation)
    ax = fig.axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert all(label in legend for label in labels)
    points = {l.get_label(): l.get_color() for l in ax.get_lines() if l.get_label() in labels}
    assert len(set(points.values())) == 2
    close([fig])
    assert "device" in pd.read_csv(report / "plots" / "lut_validation.csv").columns


# -- 4. advice that runs -------------------------------------------------------------------------------------------------

def changed_lut(setup, tmp_path) -> Path:
    """The LUT with one median changed by hand after build-lut wrote it (its checksum no longer matches)."""
    import csv

    lines = Path(setup["lut"]).read_text().splitlines(keepends=True)
    header, row = list(csv.reader([lines[0], lines[1]]))
    column = header.index("median_s")
    row[column] = repr(float(row[column]) * 1.01)
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(row)
    lines[1] = out.getvalue()
    path = tmp_path / "changed.csv"
    path.write_text("".join(lines))
    return path


def test_37_4_plan_takes_the_flag_its_message_names_and_picks_a_context_by_backend(setup, tmp_path):
    changed = changed_lut(setup, tmp_path)
    line = error_line("plan", *ARGS, "--lut", changed, "--out", tmp_path / "f.json")
    assert "pass --accept-modified" in line and str(changed) in line
    ok("plan", *ARGS, "--lut", changed, "--accept-modified", "--out", tmp_path / "f.json")  # the flag it names runs
    for backend in BACKENDS:  # plan picks one context of a LUT holding several, as predict --backend does
        ok("plan", *ARGS, "--lut", setup["lut"], "--backend", backend, "--out", tmp_path / f"{backend}.json")
        front = json.loads((tmp_path / f"{backend}.json").read_text())
        assert front["format"] == "dsprof.front" and front["context"]["backend"] == backend
    line = error_line("plan", *ARGS, "--lut", setup["lut"], "--backend", "tflite", "--out", tmp_path / "t.json")
    assert "no context matches" in line and "torch" in line and "onnxruntime" in line
    line = error_line("plan", *ARGS, "--lut", setup["lut"], "--backend", "torch", "--for", "torch,onnxruntime",
                      "--out", tmp_path / "t.json")
    assert "--for" in line and "--backend" in line
    # --device-key names a context as --for does: by the label plan prints, its key, or its backend; each the same
    for backend in BACKENDS:
        fronts = {}
        for name in (LABELS[backend], str(setup["contexts"][backend]), backend):
            ok("plan", *ARGS, "--lut", setup["lut"], "--device-key", name, "--out", tmp_path / "k.json")
            fronts[name] = json.loads((tmp_path / "k.json").read_text())
            assert fronts[name]["context"]["backend"] == backend, name
        assert len({json.dumps(f["points"], sort_keys=True) for f in fronts.values()}) == 1
    line = error_line("plan", *ARGS, "--lut", setup["lut"], "--device-key", "openvino/cpu t1", "--out", tmp_path / "o.json")
    assert "no context matches openvino/cpu t1" in line and LABELS["torch"] in line and LABELS["onnxruntime"] in line


def flags_of(line: str, command: str) -> list[tuple[str, str]]:
    """(command, flag) of every flag ``line`` suggests: after ``dsprof CMD`` up to the end of that command (a
    backtick, a semicolon, the line's end), the named command's; elsewhere, ``command``'s (the one that printed it)."""
    commands = set(subcommands())
    out, rest = [], line
    for found in re.finditer(r"(?:`|\bnext: |^)?dsprof ([a-z][a-z-]*)((?:[^`;\n])*)", line):
        if found[1] in commands:
            out += [(found[1], f) for f in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", found[2])]
            rest = rest.replace(found[0], " ")
    out += [(command, f) for f in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest)]
    return out


@functools.cache
def subcommands() -> dict:
    """The command line's subcommands (name -> its parser), from one `build_parser` (read here, never changed): built
    once, not for each of the several hundred lines and flags checked (each build takes ~10 ms)."""
    return next(a for a in build_parser()._actions if a.dest == "command").choices


def accepts(command: str, flag: str) -> bool:
    sub = subcommands()[command]
    return flag in sub._option_string_actions


def package_strings() -> list[str]:
    """Every string literal of the package (an f-string with its fields as ``X``), docstrings and help included."""
    texts = []
    for path in sorted((ROOT / "dsprof").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.JoinedStr):
                texts.append("".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                texts.append(node.value)
    return texts


def test_37_4_every_flag_a_message_or_next_line_suggests_is_one_the_command_takes(setup, planned, tmp_path):
    # 1. every `dsprof COMMAND --flag ...` the package can print (messages, next: lines, help and docstrings)
    from dsprof.cli.commands import importance_command, measure_command, merge_command, model_flags, plan_command
    from dsprof.device_context import DeviceContext
    from dsprof.errors import ImportanceHint

    context = DeviceContext("91602364b5d0", "cpu", "onnxruntime", "fp32", "channels_last", 1, 1, "")
    built = [measure_command(context, model_flags("mobilenet_v2", {"width": 1.4}), max_span=2, in_situ=True),
             importance_command(ImportanceHint("model='mobilenet_v2'", "digits", "snip", "w.pt", 32)),
             merge_command("mobilenet_v2", {"width": 1.4}, "p.plan.json", 32),
             plan_command("lut.csv", "mobilenet_v2", {}, 32, like="other.csv", accept_modified=True)]
    # the commands the command line writes word by word (dsprof/cli/commands.py) and those written out in the package
    named = {(c, f) for text in [*package_strings(), *built] if "dsprof " in text for c, f in flags_of(text, "")
             if c}
    assert len(named) > 20 and ("merge", "--lut") in named and ("measure", "--spans") in named
    assert ("importance", "--proxy") in named
    assert [pair for pair in sorted(named) if not accepts(*pair)] == []
    # 2. what the commands print when a user trips: a LUT changed by hand, to every command that reads one (each must
    # take --accept-modified, and the ones quick to run again do, as suggested); spans missing; the resolution
    # forgotten; and the next: lines of plan and plan --for
    d, changed = setup["dir"], changed_lut(setup, tmp_path)
    plan_file = d / "plans" / "fronts.plan.json"
    seen: list[tuple[str, str]] = []
    runs = {
        "plan": (["plan", *ARGS, "--lut", changed, "--out", tmp_path / "f.json"], True),
        "predict": (["predict", *ARGS[:4], "--lut", changed, "--backend", "torch", "--plan", plan_file], True),
        "merge": (["merge", *ARGS[:4], "--lut", changed, "--device-key", str(setup["contexts"]["torch"]), "--plan",
                   plan_file, "--out", tmp_path / "m.pt"], True),
        "report": (["report", setup["files"][0], "--lut", changed, "-o", tmp_path / "rep"], True),
        "measure": (["measure", *ARGS[:4], "--lut", changed, "--plan", plan_file, "--blocks", "none", *QUICK,
                     "--out", tmp_path / "meas"], False),
        "search": (["search", *ARGS, "--lut", changed, "--method", "planner", "--keep", "3", "--out",
                    tmp_path / "s.json"], False),
        "finetune": (["finetune", "--model-file", MYNET, "--plan", plan_file, "--lut", changed, *TRAIN, "--out",
                      tmp_path / "ft.pt"], False),
    }
    for command, (argv, again) in runs.items():
        line = error_line(*argv)
        assert "--accept-modified" in line, line
        seen += flags_of(line, command)
        if again:  # as suggested: the checksum is no longer what stops it
            code, _, err = run(*argv, "--accept-modified")
            assert "changed after" not in err and code == 0, err[-2000:]
    line = error_line("measure", *ARGS[:4], "--backend", "onnxruntime", "--few", "6", "--like", changed, *QUICK,
                      "--out", tmp_path / "few")
    seen += flags_of(line, "measure")
    three = tmp_path / "three.json"  # blocks 0-2 linearised: a span of three blocks is a candidate
    three.write_text(Plan(LABEL, (0, 0, 0, 1, 1, 1), name="three").to_json())
    seen += flags_of(error_line("merge", *ARGS[:4], "--lut", setup["lut"], "--device-key",
                                str(setup["contexts"]["torch"]), "--plan", three, "--spans", "auto",
                                "--max-span", "4", "--out", tmp_path / "m.pt"), "merge")  # spans of 2 only: 4 asked
    seen += flags_of(error_line("plan", "--model-file", MYNET, "--lut", setup["lut"], "--backend", "torch",
                                "--max-span", "2", "--out", tmp_path / "f.json"), "plan")  # 224 px by default
    out = ok("plan", *ARGS, "--lut", setup["lut"], "--backend", "torch", "--keep", "2", "--out", tmp_path / "f.json")
    nexts = [line for line in out.splitlines() + planned[0].splitlines() if line.startswith("next: ")]
    assert len(nexts) == 2
    for line in nexts:
        seen += flags_of(line, "plan")
    flags = {f for _, f in seen}
    assert {"--accept-modified", "--max-span", "--spans", "--resolution", "--plan", "--out"} <= flags, flags
    assert [pair for pair in seen if not accepts(*pair)] == []


# -- 5. counts and names ---------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_37_5_ctrl_c_counts_every_workload_of_the_run_the_calibration_group_too(tmp_path):
    out = tmp_path / "run.jsonl"
    args = ["measure", *ARGS[:4], "--variants", "original,merged,linear", "--model-variants", "original", "--calibrate",
            *QUICK, "--out", out]
    proc = console(*args, cwd=tmp_path)
    deadline = time.monotonic() + 240
    while not (out.exists() and out.read_bytes().count(b"\n") >= 3):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-2000:]
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130 and "Traceback" not in err, err[-2000:]
    said = re.fullmatch(r"dsprof measure: interrupted: (\d+) of (\d+) workloads saved in (.*) \(then the groups "
                        r"--calibrate plans from them\); --resume continues", err.strip().splitlines()[-1])
    assert said and Path(said[3]) == out, err
    resumed = ok(*args, "--resume")
    workloads = [r for r in read_measurements(out) if r.scope != "probe"]
    assert all(r.ok for r in workloads)
    # what the run plans ahead: each block's three variants and the whole model (no stem and head: blocks.3 sits
    # between blocks 2 and 4, so the blocks do not run one after the other and the model has no split) -- the
    # count the interrupt named --; then the groups --calibrate plans from them, which the closing line counts apart
    assert int(said[2]) == 6 * 3 + 1
    calibrated = len(workloads) - int(said[2])
    assert calibrated >= 2 and [r.variant for r in workloads].count("calibration") == 1
    assert (f"{len(workloads) - int(said[1])} workloads measured ({calibrated} of them in the groups --calibrate "
            f"planned from the others), {int(said[1])} already in the file") in resumed


def test_37_5_measure_names_blocks_by_index_and_spans_by_range(setup):
    records = read_measurements(setup["files"][0])
    lines = format_summary(summary_table(records)).splitlines()
    rows = [line.split("  ")[0].strip() for line in lines[1:1 + len(BLOCKS) + len(SPANS)]]
    assert rows == [f"{i} {name}" for i, name in enumerate(BLOCKS)] + [f"span {s}" for s in SPANS]
    assert not any("+" in line for line in lines)


def test_37_5_the_summary_shows_the_linear_variant_it_timed(setup):
    """The run timed each block linear too (activations removed, not merged): its column holds each block's median
    as the records give it, and its speed-up column the paired ratio's median; a run without it shows no such column."""
    records = read_measurements(setup["files"][0])
    lines = format_summary(summary_table(records)).splitlines()
    head = [c.strip() for c in re.split(r"\s{2,}", lines[0])]
    assert head[:7] == ["block", "original ms", "merged ms", "flops-matched ms", "linear ms", "merged speed-up",
                        "flops-matched speed-up"] and head[7] == "linear speed-up"
    assert lines[-1].endswith("; linear: activations removed, not merged")
    linear = {r.name: r for r in records if r.scope == "block" and r.variant == "linear" and r.ok}
    for i, name in enumerate(BLOCKS):
        line = next(line for line in lines if line.startswith(f"{i} {name} "))
        times = re.findall(r"(?<![\d.\[])(\d+\.\d{3})(?![\dx\]])", line)  # original, merged, linear ms
        assert float(times[2]) == pytest.approx(statistics.median(linear[name].samples_s) * 1e3, abs=6e-4), line
    without = [r for r in records if r.variant != "linear"]
    assert "linear" not in format_summary(summary_table(without))


def test_37_5_measure_few_names_the_entries_it_timed(setup, tmp_path):
    out = ok("measure", *ARGS[:4], "--backend", "onnxruntime", "--few", "6", "--like", setup["lut"], "--like-key",
             str(setup["contexts"]["torch"]), "--spans", "2", *QUICK, "--out", tmp_path / "few")
    (line,) = [line for line in out.splitlines() if line.startswith("timed 6 of the model's")]
    names = line.split(": ", 1)[1].split("; ")
    expected = {"the whole model", "stem", "head"} | {f"span {s} merged" for s in SPANS} | {
        f"block {i} ({name}) {variant}" for i, name in enumerate(BLOCKS) for variant in ("original", "merged", "linear")}
    assert len(names) == 6 and set(names) <= expected, names
    assert names[0] == "the whole model" and "(cin=" not in line


def test_37_5_plan_tables_name_the_blocks(setup, planned):
    out, data = planned
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("blocks (digit i of a plan is block i):"))
    text = " ".join([lines[start].split(":", 1)[1]] + [l for l in lines[start + 1:start + 3] if l.startswith("  ")])
    assert re.findall(r"(\d+) (\S+)", text) == [(str(i), name) for i, name in enumerate(BLOCKS)]
    assert all(front["blocks"] == BLOCKS for front in data["fronts"])
    single = ok("plan", *ARGS, "--lut", setup["lut"], "--backend", "torch", "--out", setup["dir"] / "single.json")
    assert "blocks (digit i of a plan is block i): 0 blocks.0  1 blocks.1  2 blocks.2  3 blocks.4" in single


# -- 6. an importance file of another input size ---------------------------------------------------------------------------

def test_37_6_importance_scored_at_another_size_says_what_differs_and_how_to_match_it(setup, tmp_path):
    ok("importance", "--model-file", MYNET, "--resolution", "48", "--batches", "1", "--eval-batches", "1",
       "--batch-size", "16", "--out", tmp_path / "imp48.json")
    code, out, err = run("plan", *ARGS, "--lut", setup["lut"], "--backend", "torch", "--importance",
                         tmp_path / "imp48.json", "--keep", "3", "--out", tmp_path / "f.json")
    assert code == 0, err  # accepted, and said
    (line,) = [line for line in err.splitlines() if "was scored at" in line]
    assert "scored at 48 px" in line and "prices this plan at 32 px" in line and "used as given" in line
    suggested = shlex.split(line.split("`")[1])
    assert suggested[:2] == ["dsprof", "importance"]
    parsed = build_parser().parse_args(suggested[1:])
    assert parsed.resolution == 32 and parsed.model_file == MYNET
    # the same file at the plan's size is taken without a word
    ok("importance", "--model-file", MYNET, "--resolution", "32", "--batches", "1", "--eval-batches", "1",
       "--batch-size", "16", "--out", tmp_path / "imp32.json")
    code, _, err = run("plan", *ARGS, "--lut", setup["lut"], "--backend", "torch", "--importance",
                       tmp_path / "imp32.json", "--out", tmp_path / "f.json")
    assert code == 0 and "was scored at" not in err


# -- 7. what predict's factors multiply ------------------------------------------------------------------------------------

def test_37_7_predict_says_in_one_line_what_each_factor_multiplies(setup, planned):
    out = ok("predict", *ARGS[:4], "--lut", setup["lut"], "--backend", "torch", "--plan",
             setup["dir"] / "plans" / "fronts.plan.json")
    (line,) = [line for line in out.splitlines() if line.strip().startswith("method ")]
    found = re.search(r"method in-model: each saving of a block timed alone counts x(\d\.\d{3}), the middle of x1 and "
                      r"the in-model factor (\d\.\d{3}) \(the blocks' time inside the whole model over their time alone",
                      line)
    assert found, line
    # the in-model factor from the LUT's rows: the whole model less its stem and head, over the blocks' originals
    frame = LUT.load(setup["lut"]).to_dataframe()
    mine = frame[frame["backend"] == "torch"]

    def median(scope: str, variant: str = "original") -> pd.Series:
        return mine[(mine["scope"] == scope) & (mine["variant"] == variant)]["median_s"].astype(float)

    model = get_model(LABEL, resolution=32)
    from dsprof.models import find_blocks

    specs = [b.spec.to_str() for b in find_blocks(model)]
    blocks = sum(float(mine[(mine["scope"] == "block") & (mine["workload"] == s) & (mine["variant"] == "original")]
                       ["median_s"].iloc[0]) for s in specs)
    # no stem and head entries (blocks.3 between blocks 2 and 4: the model has no split): counted as 0, as predict says
    assert median("stem").empty and median("head").empty and "no stem and head entries: counted as 0" in out
    phi = median("model").iloc[0] / blocks
    assert found[2] == f"{phi:.3f}" and found[1] == f"{(1 + phi) / 2:.3f}"
    assert f"in-model factor {phi:.3f}" in out  # the systematic line names the same number


# -- 8. threads --------------------------------------------------------------------------------------------------------

def test_37_8_training_says_how_many_threads_it_ran_and_how_busy_they_were(tmp_path):
    # at 32 px (the model's default is 224): the line's subject is the threads, not the images' size
    out = ok("finetune", "--model-file", MYNET, *TRAIN, "--resolution", "32", "--no-merge-check", "--threads", "2",
             "--out", tmp_path / "ft.pt")
    (line,) = [line for line in out.splitlines() if line.startswith("CPU threads: ")]
    found = re.fullmatch(r"CPU threads: 2 \(--threads, torch.set_num_threads while it ran\): (\d+\.\d) s of CPU time "
                         r"in (\d+\.\d) s, (\d+\.\d\d) threads busy on average \(loading data and building the model "
                         r"run on one\); load average (\d+\.\d) on (\d+) logical cores", line)
    assert found, line
    cpu, wall, busy = float(found[1]), float(found[2]), float(found[3])
    # the busy threads are the CPU time over the wall time: within what the figures' rounding (0.05 s) allows
    assert wall > 0.05 and (cpu - 0.05) / (wall + 0.05) - 0.005 <= busy <= (cpu + 0.05) / (wall - 0.05) + 0.005
    assert int(found[5]) == os.cpu_count()


# -- 9. the few-measurement front and spans ------------------------------------------------------------------------------

def test_37_9_a_front_on_predicted_span_entries_says_so(setup, tmp_path):
    frame = LUT.load(setup["lut"]).to_dataframe()
    frame = frame[frame["backend"] == "torch"].copy()
    spans = frame["workload"].str.startswith("conv(")
    assert spans.sum() == len(SPANS)  # one entry per distinct span convolution (mynet's four differ)
    frame.loc[spans, "sources"] = f"{PREDICTED} from another context (this test)"
    LUT(frame, "few.csv").save(tmp_path / "few.csv")
    out = ok("plan", *ARGS, "--lut", tmp_path / "few.csv", "--out", tmp_path / "front-few.json")
    front = json.loads((tmp_path / "front-few.json").read_text())
    used = [p["k"] for p in front["points"] if p["spans"]]
    assert used and front["spans_predicted"] == [4, 4]
    assert (f"spans: all 4 span entries are predicted from another context (`dsprof measure --few`), not measured; "
            f"the plans at k = {', '.join(map(str, used))} use spans") in out
    frame.loc[spans, "median_s"] = frame.loc[spans, "median_s"].astype(float) * 20  # predicted far too slow
    LUT(frame, "few.csv").save(tmp_path / "slow.csv")
    out = ok("plan", *ARGS, "--lut", tmp_path / "slow.csv", "--out", tmp_path / "front-slow.json")
    assert not any(p["spans"] for p in json.loads((tmp_path / "front-slow.json").read_text())["points"])
    assert "no plan of this front uses a span: it plans without spans" in out
    # a LUT measured in full says nothing of the kind
    assert "spans:" not in ok("plan", *ARGS, "--lut", setup["lut"], "--backend", "torch", "--out", tmp_path / "m.json")
