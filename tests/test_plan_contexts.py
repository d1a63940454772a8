"""`dsprof plan` over several device contexts (issue #29): the cross table and the plan for several contexts (`--for`)
against brute force.

Two real LUTs of different contexts: a tiny MobileNetV2 (one block per stage, 7 blocks, 32 x 32) timed here through
PyTorch eager and ONNX Runtime (few samples). Expected values come from brute force: every plan -- keep list, span
partition and, for each block linearised alone, merged or not -- priced in each context by `predict_plan`; never
from the planner. No timing asserts.
"""

import itertools
import json
from pathlib import Path

import pandas as pd
import pytest

import dsprof
from dsprof.cli import build_parser, main
from dsprof.lut import LUT, Pricing, build_lut
from dsprof.lut.predict import prices_of, predict_plan
from dsprof.records.plan import Plan
from dsprof.models.spans import span_runs
from dsprof.planning import plan_contexts, plan_front
from dsprof.planning.minimax import joint_front
from dsprof.profiler import BackendSettings, Workloads, measure
from dsprof.models import ModelRef
from fast_timing import FEWER


pytestmark = pytest.mark.usefixtures("one_thread")
NAME, OPTIONS, RESOLUTION, MAX_SPAN = "mobilenet_v2", {"depths": [1] * 7}, 32, 3
BACKENDS = ("torch", "onnxruntime")


@pytest.fixture(scope="module")
def luts(tmp_path_factory):
    """{backend: the LUT file of that context}: blocks original, merged, linear, spans of 2..3, the whole model."""
    tmp = tmp_path_factory.mktemp("contexts")
    out = {}
    for backend in BACKENDS:
        result = measure(ModelRef.of(NAME, options=OPTIONS, resolution=RESOLUTION),
                         settings=BackendSettings(backend=backend, threads=1),
                         workloads=Workloads(variants=("original", "merged", "linear"), model_variants=("original",), spans=MAX_SPAN),
                         timing=FEWER, out=tmp / f"{backend}.jsonl", progress=False)
        out[backend] = build_lut([result.path]).save(tmp / f"lut_{backend}.csv")
    return out


def _partitions(run, max_span):
    """Every split of a run of block indices into consecutive pieces of 1..max_span blocks, as [start, stop)."""
    if not run:
        yield ()
        return
    for size in range(1, min(max_span, len(run)) + 1):
        for rest in _partitions(run[size:], max_span):
            yield ((run[0], run[size - 1] + 1),) + rest


def _every_plan(blocks, max_span):
    """Every plan: keep list x span partition of each run of linearised blocks x merged or not for each block
    linearised alone (its ``merge`` entry), as a plan with its ``merge`` list spelled out."""
    n = len(blocks)
    for keep in itertools.product((0, 1), repeat=n):
        runs = span_runs(blocks, keep)
        in_runs = {i for run in runs for i in run}
        alone = [i for i in range(n) if not keep[i] and i not in in_runs]
        for choice in itertools.product(*[list(_partitions(run, max_span)) for run in runs]):
            pieces = [p for part in choice for p in part]
            spans = tuple(sorted(p for p in pieces if p[1] - p[0] > 1))
            singles = sorted(alone + [a for a, b in pieces if b - a == 1])
            for bits in itertools.product((False, True), repeat=len(singles)):
                merge = [False] * n
                for a, b in spans:
                    merge[a:b] = [True] * (b - a)
                for i, bit in zip(singles, bits):
                    merge[i] = bit
                yield Plan(NAME, keep, OPTIONS, merge=tuple(merge), spans=spans or None)


@pytest.fixture(scope="module")
def brute(luts):
    """(plans, {backend: Prices}, {backend: [predicted latency of each plan]}): every plan priced in each context."""
    costs = {b: prices_of(ModelRef.of(NAME, options=OPTIONS, resolution=RESOLUTION), luts[b]) for b in BACKENDS}
    plans = list(_every_plan(costs["torch"].blocks, MAX_SPAN))
    latency = {b: [predict_plan(costs[b], p, strict=True).total_s for p in plans] for b in BACKENDS}
    return plans, costs, latency


def _best(plans, latency, k):
    """min latency over every plan with k kept blocks (nothing held back: issue #36), and the indices of the plans
    that reach it."""
    mine = [i for i, p in enumerate(plans) if sum(p.keep) == k]
    low = min(latency[i] for i in mine)
    return low, [i for i in mine if latency[i] <= low * (1 + 1e-12)]


@pytest.mark.slow  # brute force: every plan priced in two contexts by predict_plan (~9000 predictions)
def test_cross_equals_brute_force(luts, brute):
    plans, costs, latency = brute
    assert len(plans) > 4000  # keep lists x span partitions x merge choices were enumerated
    result = plan_contexts(ModelRef.of(NAME, options=OPTIONS, resolution=RESOLUTION),
                           [luts[b] for b in BACKENDS], max_span=MAX_SPAN)
    assert not result.unplanned and len(result.fronts) == 2
    backend_of = {f.device: f.device.backend for f in result.fronts}
    n = len(plans[0].keep)
    original = next(i for i, p in enumerate(plans) if p.keep == (1,) * n)
    assert len(result.cross) == 4 * (n + 1)  # every ordered pair, the diagonal too, every k
    for point in result.cross:
        a, b = backend_of[point.chosen_for], backend_of[point.runs_on]
        # the plan brute force finds fastest for A (ties: any of them), priced on B, against B's fastest of that k
        _, chosen = _best(plans, latency[a], point.k)
        own, _ = _best(plans, latency[b], point.k)
        on_b = [latency[b][i] for i in chosen]
        assert any(point.latency_s == pytest.approx(v, rel=1e-12, abs=0) for v in on_b), (a, b, point.k)
        assert point.own_latency_s == pytest.approx(own, rel=1e-12, abs=0)
        assert any(point.loss == pytest.approx(v / own - 1, rel=1e-9, abs=1e-12) for v in on_b)
        assert point.loss >= -1e-12  # B's own plan is the fastest there
        assert point.loss_low <= point.loss <= point.loss_high
        assert point.speedup == pytest.approx(latency[b][original] / point.latency_s, rel=1e-12)
        if a == b:  # a plan's loss on its own context is 0, exactly, and so is its interval's width
            assert point.loss == 0.0 and point.loss_low == 0.0 and point.loss_high == 0.0
    # the two contexts disagree somewhere (else this test would not tell a cross table from a copy of the diagonal)
    assert any(p.loss > 1e-6 for p in result.cross)


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["worst", "mean"])
def test_joint_plan_equals_brute_force(luts, brute, objective):
    plans, costs, latency = brute
    ref = ModelRef.of(NAME, options=OPTIONS, resolution=RESOLUTION)
    fronts = [plan_front(ref, luts[b], pricing=Pricing(max_span=MAX_SPAN), prices=costs[b])
              for b in BACKENDS]
    joint = joint_front([costs[b] for b in BACKENDS], fronts, objective=objective, max_span=MAX_SPAN)
    n = len(plans[0].keep)
    assert [p.k for p in joint.points] == list(range(n + 1))
    for point in joint.points:
        own = {b: _best(plans, latency[b], point.k)[0] for b in BACKENDS}
        relative = [[latency[b][i] / own[b] for b in BACKENDS] for i, p in enumerate(plans) if sum(p.keep) == point.k]
        score = max if objective == "worst" else (lambda r: sum(r) / len(r))
        expected = min(score(r) for r in relative)
        got = point.worst if objective == "worst" else point.mean
        assert got + 1 == pytest.approx(expected, rel=1e-9), (objective, point.k)
        # and the plan returned is priced by predict_plan in each context as its losses say
        for i, b in enumerate(BACKENDS):
            assert point.latency_s[i] == pytest.approx(predict_plan(costs[b], point.plan, strict=True).total_s, rel=1e-12)
            assert point.loss[i] == pytest.approx(point.latency_s[i] / own[b] - 1, rel=1e-9, abs=1e-12)
    if objective == "worst":  # somewhere one plan for both costs something in one of them
        assert any(p.worst > 1e-6 for p in joint.points)


@pytest.mark.slow
def test_joint_plan_chooses_each_merge_where_contexts_disagree(luts, brute):
    """Where merging a block alone pays in one context and not in the other, the plan for both chooses each merge:
    the merged entries of blocks 1, 3 and 5 set to half their linear ones in the PyTorch LUT and to 1.5 times in the
    ONNX Runtime one (every other entry as measured); there, block 3's linear entry is also set 20 % above its
    original, so that its front holds it back (it neither merges nor runs faster linear) while the joint plan may
    still take it linear."""
    plans, costs, _ = brute
    blocks = costs["torch"].blocks
    changed = {}
    for backend, scale in (("torch", 0.5), ("onnxruntime", 1.5)):
        frame = LUT.load(luts[backend]).to_dataframe()
        for i in (1, 3, 5):
            rows = (frame.scope == "block") & (frame.workload == blocks[i].spec.to_str())
            if backend == "onnxruntime" and i == 3:
                original = float(frame.loc[rows & (frame.variant == "original"), "median_s"].iloc[0])
                frame.loc[rows & (frame.variant == "linear"), "median_s"] = 1.2 * original
            linear = float(frame.loc[rows & (frame.variant == "linear"), "median_s"].iloc[0])
            frame.loc[rows & (frame.variant == "merged"), "median_s"] = scale * linear
        changed[backend] = prices_of(ModelRef.of(NAME, options=OPTIONS, resolution=RESOLUTION),
                                     LUT(frame, f"{backend}, merges changed"))
    for i in (1, 3, 5):  # the two contexts disagree on whether merging the block alone pays
        assert changed["torch"].linearized(i).variant == "merged" and changed["onnxruntime"].linearized(i).variant == "linear"
    latency = {b: [predict_plan(changed[b], p, strict=True).total_s for p in plans] for b in BACKENDS}
    ref, pricing = ModelRef.of(NAME, options=OPTIONS), Pricing(max_span=MAX_SPAN)
    fronts = [plan_front(ref, None, pricing=pricing, prices=changed[b]) for b in BACKENDS]
    joint = joint_front([changed[b] for b in BACKENDS], fronts, objective="worst", max_span=MAX_SPAN)
    fronts_by = dict(zip(BACKENDS, fronts))
    assert 3 in fronts_by["onnxruntime"].no_gain and 3 not in fronts_by["torch"].no_gain
    for point in joint.points:
        own = {b: _best(plans, latency[b], point.k)[0] for b in BACKENDS}
        expected = min(max(latency[b][i] / own[b] for b in BACKENDS) for i, p in enumerate(plans)
                       if sum(p.keep) == point.k)
        assert point.worst + 1 == pytest.approx(expected, rel=1e-9), point.k
    # the joint planner asks each context's merge rule (issue #38): a lone linearised block is offered merged and
    # unmerged where the rules disagree (blocks 1, 3, 5, and any other the two LUTs measured so), and only as both
    # rules decide it where they agree
    from dsprof.planning.minimax import _pieces

    alone = {}
    for piece in _pieces([changed[b] for b in BACKENDS], MAX_SPAN):
        if piece.stop - piece.start == 1 and not piece.kept:
            alone.setdefault(piece.start, set()).add(piece.merges)
    for i in range(len(blocks)):
        rules = {changed[b].linearized(i).merges for b in BACKENDS}
        assert alone[i] == rules, i  # one option where the rules agree, both where they do not
        assert i not in (1, 3, 5) or rules == {True, False}, i


def _tilings(n, pieces, start=0):
    """Every sequence of pieces that covers blocks start..n-1."""
    if start == n:
        yield ()
        return
    for p in pieces:
        if p.start == start:
            for rest in _tilings(n, pieces, p.stop):
                yield (p,) + rest


@pytest.mark.parametrize("contexts", [2, 3])
@pytest.mark.parametrize("seed", range(4))
def test_minimax_solver_equals_brute_force_on_random_savings(contexts, seed, monkeypatch):
    """The solver alone (pure arithmetic) on random per-context savings that disagree a lot -- harder than real
    contexts, and with three contexts -- against every tiling of 8 blocks by its pieces. Sets are filtered a few rows
    at a time here, so that both of the filter's checks (against the rows kept, within a chunk) run."""
    import numpy as np

    from dsprof.planning import minimax
    from dsprof.lut.piece import Piece
    from dsprof.planning.minimax import _mean, _worst

    monkeypatch.setattr(minimax, "_CHUNK", 3)

    rng = np.random.default_rng(seed)
    n, pieces = 8, []
    for i in range(n):
        pieces.append(Piece(i, i + 1, "original", kept=True, savings_s=(0.0,) * contexts))
        pieces.append(Piece(i, i + 1, "merged", savings_s=tuple(rng.uniform(-0.5, 2, contexts))))
        pieces.append(Piece(i, i + 1, "linear", savings_s=tuple(rng.uniform(0, 1, contexts))))
        for size in (2, 3):
            if i + size <= n:
                pieces.append(Piece(i, i + size, "span", savings_s=tuple(rng.uniform(-1, 2.5 * size, contexts))))
    every = [(sum(p.kept for p in t), np.sum([p.savings_s for p in t], axis=0)) for t in _tilings(n, pieces)]
    # each context's original, less a term of k alone that differs by context (a calibration plan's gap or excess
    # shared by the n - k linearised blocks): it moves which context binds at a k, so the solver must read it per k
    share = rng.uniform(-4, 4, contexts)
    base = {k: 40.0 - share * (n - k) / n for k in range(n + 1)}
    own = {k: base[k] - np.max([v for kk, v in every if kk == k], axis=0) for k in range(n + 1)}
    worst, _ = _worst(n, pieces, base, own)
    mean = _mean(n, pieces, own)
    for k in range(n + 1):
        relative = [(base[k] - v) / own[k] for kk, v in every if kk == k]
        got = (base[k] - np.sum([p.savings_s for p in worst[k]], axis=0)) / own[k]
        assert got.max() == pytest.approx(min(r.max() for r in relative), rel=1e-12), (k, "worst")
        got = (base[k] - np.sum([p.savings_s for p in mean[k]], axis=0)) / own[k]
        assert got.mean() == pytest.approx(min(r.mean() for r in relative), rel=1e-12), (k, "mean")


def _without_a_block(frame: pd.DataFrame) -> pd.DataFrame:
    """A LUT's rows without the first block's original entry (a LUT the planner cannot plan with)."""
    first = frame[(frame.scope == "block") & (frame.variant == "original")].workload.iloc[0]
    return frame[~((frame.workload == first) & (frame.variant == "original"))]


def test_cli_plans_every_context_names_the_one_it_cannot(luts, tmp_path, capsys):
    # a third context holding the same model without one block's original: the planner needs it, and says how to
    # measure it (a context without spans is planned without them: tests/test_plan_seams.py)
    frame = _without_a_block(LUT.load(luts["torch"]).to_dataframe())
    frame["env_id"] = "feedbeef0000"
    LUT(frame).save(tmp_path / "lut_nospans.csv")
    out = tmp_path / "front.json"
    argv = ["plan", "--model", NAME, "--depths", "1,1,1,1,1,1,1", "--resolution", str(RESOLUTION),
            "--max-span", str(MAX_SPAN), "--out", str(out), "--for", "torch,onnxruntime", "--keep", "2"]
    for path in (luts["torch"], luts["onnxruntime"], tmp_path / "lut_nospans.csv"):
        argv += ["--lut", str(path)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["format"] == "dsprof.fronts" and len(data["fronts"]) == 2
    assert len(data["cross"]) == 4 * 8 and {r["k"] for r in data["cross"]} == set(range(8))
    (missing,) = data["unplanned"]
    assert missing["key"].startswith("feedbeef0000/")
    # the JSON: what to time as data, and the reason in words; the printed table: the command that times it
    args = "model=ModelRef.of('mobilenet_v2', options={'depths': [1, 1, 1, 1, 1, 1, 1]}, resolution=32)"
    flags = "--model mobilenet_v2 --depths 1,1,1,1,1,1,1 --resolution 32"  # the same, as the command line spells it
    assert missing["measure"] == {"key": missing["key"], "model": args, "max_span": 3, "in_situ": False}
    assert (f"`dsprof measure` (or dsprof.measure) in context {missing['key']} with the model's options ({args}), "
            "timing blocks original, merged and linear, spans of up to 3 blocks") in missing["reason"]
    (shown,) = [line for line in text.splitlines() if line.startswith("not planned: torch/cpu t1 env feedbeef0000")]
    command = shown.split("`")[1]
    assert command == (f"dsprof measure {flags} --device cpu --backend torch --dtype fp32 --batch 1 --threads 1 "
                       "--variants original,merged,linear --spans 3 --resume")
    build_parser().parse_args(command.split()[1:])  # a command that runs as written
    assert "torch/cpu t1" in text and "onnxruntime/cpu t1" in text and "worst loss" in text
    plan = json.loads((tmp_path / "front.plan.json").read_text())
    assert sum(plan["keep"]) == 2 and plan["model"] == NAME
    joint = data["joint"]
    assert joint["objective"] == "worst" and [p["k"] for p in joint["points"]] == list(range(8))
    for suffix in (".csv", ".cross.csv", ".joint.csv"):
        assert out.with_suffix(suffix).read_text().count("\n") > 8


def test_when_no_context_can_be_planned_the_line_names_the_first_ones_command(luts, tmp_path, capsys):
    # both contexts without one block's original: one error line, the first context's `dsprof measure` as a command
    # that runs, the other's in words
    for backend in ("torch", "onnxruntime"):
        LUT(_without_a_block(LUT.load(luts[backend]).to_dataframe())).save(tmp_path / f"{backend}_nospans.csv")
    flags = "--model mobilenet_v2 --depths 1,1,1,1,1,1,1 --resolution 32"
    argv = ["plan", *flags.split()[2:], "--model", NAME, "--max-span", str(MAX_SPAN), "--out", str(tmp_path / "f.json"),
            "--lut", str(tmp_path / "torch_nospans.csv"), "--lut", str(tmp_path / "onnxruntime_nospans.csv")]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("dsprof plan: error: no context of the LUT has what the planner needs for this model: ")
    commands = line.split("`")[1::2]
    first = next(c for c in commands if c.startswith("dsprof measure --model"))
    assert first.startswith(f"dsprof measure {flags} --device cpu --backend ") and first.endswith(" --spans 3 --resume"), line
    build_parser().parse_args(first.split()[1:])  # a command that runs as written
    assert "(or dsprof.measure) in context " in line  # the second context: in words
    assert not (tmp_path / "f.json").exists()


def test_a_single_context_still_writes_one_front(luts, tmp_path, capsys):
    out = tmp_path / "front.json"
    assert main(["plan", "--model", NAME, "--depths", "1,1,1,1,1,1,1", "--resolution", str(RESOLUTION),
                 "--lut", str(luts["onnxruntime"]), "--max-span", str(MAX_SPAN), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["format"] == "dsprof.front"
    capsys.readouterr()
    # --for needs several contexts: one line, exit 2
    assert main(["plan", "--model", NAME, "--depths", "1,1,1,1,1,1,1", "--resolution", str(RESOLUTION),
                 "--lut", str(luts["onnxruntime"]), "--for", "torch,onnxruntime", "--out", str(out)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_report_overlays_the_fronts_and_draws_the_cross_table(luts, tmp_path):
    from dsprof.workflows.plan import plan_contexts_to_file, plan_to_file

    records = [Path(luts[b]).parent / f"{b}.jsonl" for b in BACKENDS]
    several = tmp_path / "several" / "front.json"
    several.parent.mkdir()
    outcome = plan_contexts_to_file(ModelRef.of(NAME, options=OPTIONS, resolution=RESOLUTION),
                                    [luts[b] for b in BACKENDS], out=several, max_span=MAX_SPAN)
    report = dsprof.report(records, tmp_path / "report", fronts=[several])
    plots = tmp_path / "report" / "plots"
    cross = pd.read_csv(plots / "devices_front_cross.csv")
    expected = {(c.chosen_for.backend, c.runs_on.backend, c.k): c.loss for c in outcome.fronts.cross
                if c.chosen_for != c.runs_on}
    assert len(cross) == len(expected) == 2 * 8
    for row in cross.itertuples(index=False):
        key = (row[0].split("/")[0], row[1].split("/")[0], row.k)
        assert row.loss == pytest.approx(expected[key], rel=1e-12)
    # one hover text per heat-map cell and per point of the overlaid fronts
    assert (plots / "devices_front_cross.svg").read_text().count("<title>") == 16
    assert (plots / "devices_front_fronts.svg").read_text().count("<title>") == 16
    fronts = pd.read_csv(plots / "devices_front_fronts.csv")
    for front in outcome.fronts.fronts:
        mine = fronts[fronts.context == outcome.fronts.labels[front.device]].sort_values("k")
        assert list(mine.speedup) == pytest.approx([front.original_s / p.latency_s for p in front.points], rel=1e-12)
    page = report.index.read_text()
    assert "## Device-aware plans: mobilenet_v2 on 2 contexts" in page and page.count("## Planner's front") == 2

    # the same fronts as two files of one context each: overlaid too (no cross table without a file over both)
    singles = []
    for b in BACKENDS:
        singles.append(plan_to_file(ModelRef.of(NAME, options=OPTIONS, resolution=RESOLUTION), luts[b],
                                    out=tmp_path / f"{b}.front.json", max_span=MAX_SPAN).paths[0])
    dsprof.report(records, tmp_path / "report2", fronts=singles)
    svgs = sorted((tmp_path / "report2" / "plots").glob("devices_*"))
    assert [p.suffix for p in svgs] == [".csv", ".png", ".svg"]
    assert svgs[2].read_text().count("<title>") == 16


def test_several_contexts_and_a_keep_name_a_call_that_runs_as_written(luts, tmp_path, capsys):
    """Issue #44: the hint names `joint=` as a Python value (a quoted string, which `Joint` splits at commas), so the
    call runs once CONTEXT is filled in; the command line reads it as --for CONTEXT,CONTEXT, no Python left in it."""
    import dsprof

    model = ModelRef.of(NAME, options=OPTIONS, resolution=RESOLUTION)
    both = [luts[b] for b in BACKENDS]
    with pytest.raises(dsprof.errors.UsageError) as caught:
        dsprof.plan(model, both, keep=3, out=tmp_path / "f.json")
    keys = ", ".join(str(d) for d in LUT.concat([LUT.load(x) for x in both]).devices())  # the keys to choose from
    assert str(caught.value) == (f"several contexts (the LUT holds {keys}): choose one with "
                                 "`pricing=Pricing(device_key=KEY)` (or `pricing=Pricing(backend=, batch=)`) to write "
                                 "its plan, or give `joint='CONTEXT,CONTEXT'` for one plan for several")
    planned = dsprof.plan(model, both, keep=3, out=tmp_path / "f.json", joint="torch,onnxruntime")
    assert planned.chosen.k == 3 and sum(planned.chosen.plan.keep) == 3
    assert main(["plan", "--model", NAME, "--depths", "1,1,1,1,1,1,1", "--resolution", str(RESOLUTION), "--lut",
                 str(luts["torch"]), "--lut", str(luts["onnxruntime"]), "--keep", "3", "--out", str(tmp_path / "g.json")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"dsprof plan: error: several contexts (the LUT holds {keys}): choose one with --device-key KEY (or --backend "
        "--batch) to write its plan, or give --for CONTEXT,CONTEXT for one plan for several"]


def test_joint_takes_the_contexts_as_the_lut_gives_them(luts, tmp_path):
    """`joint=` names contexts by label, key or backend; a key as `lut.devices()` gives it (a `DeviceContext`) was
    refused ("names no context"). The same plan either way."""
    import dsprof

    model = ModelRef.of(NAME, options=OPTIONS, resolution=RESOLUTION)
    both = [luts[b] for b in BACKENDS]
    keys = LUT.concat([LUT.load(x) for x in both]).devices()
    by_key = dsprof.plan(model, both, keep=3, out=tmp_path / "a.json", joint=keys)
    by_text = dsprof.plan(model, both, keep=3, out=tmp_path / "b.json", joint=",".join(map(str, keys)))
    assert by_key.chosen.plan.digest == by_text.chosen.plan.digest and sum(by_key.chosen.plan.keep) == 3
