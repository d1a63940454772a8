"""Everything downstream of a measurement in the OpenVINO and torch.compile contexts (issue #39, items 3 and the
check): `dsprof measure --backend openvino|torch-compile` on a model from --model-file, `build-lut`, `plan` (one
context, several, `--for`), `predict`, `measure --plan` (paired), `predict --measure` and `report`.

The model is tests/models/flatnet.py (six inverted-residual blocks that no module owns, 32 px), timed here for real in
each context with tiny budgets (real OpenVINO, real torch.compile: one Inductor compile cache for the session,
tests/conftest.py). The LUTs' medians are then rewritten by tests/rule_lut.py's fixed rule, so what the planner
chooses is known by hand (`test_new_user.FRONT`, worked from flatnet's MACs) in each context. For the plans over
both contexts, the torch.compile LUT is also priced by a second rule (a call a quarter as dear, a MAC three times
as dear: a compiler's trade), so that the two contexts disagree; expected values come from brute force there: every
plan -- keep list, span partition, and for each block linearised alone merged or not -- priced in each context by
`predict_plan`, never by the planner. No timing asserts.
"""

from __future__ import annotations

import itertools
import math
import json
import shutil

import pytest

import rule_lut as rule
from dsprof.cli import main
from dsprof.lut import LUT, Pricing
from dsprof.lut.predict import prices_of, predict_plan
from dsprof.records.plan import Plan
from dsprof.models import ModelRef
from dsprof.models.spans import span_runs
from dsprof.planning import plan_contexts, plan_front
from dsprof.planning.minimax import joint_front
from dsprof.records.measurement import read_measurements
from test_new_user import FLATNET, FRONT, LABEL

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.openvino]
BACKENDS = ("openvino", "torch-compile")
MAX_SPAN = 2
FAST = ["--warmup", "0", "--max-warmup", "0.05", "--min-samples", "3", "--max-samples", "4", "--budget", "0.02",
        "--min-sample-time", "0"]
MODEL = ["--model-file", FLATNET, "--resolution", "32"]
#: The second rule (`rule_lut`'s constants) of the torch.compile LUT in the plans over both contexts.
COMPILER_RULE = {"OVERHEAD_S": 50e-6, "S_PER_MAC": 3e-10}


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def contexts(tmp_path_factory):
    """{backend: (its measurement folder, its LUT under the rule)}, plus ``"compiler"``: the torch.compile LUT under
    `COMPILER_RULE`. Measured with the command line, as a user would: originals, merged, linear, spans of two, the
    whole model (with its stem and head), one thread."""
    tmp = tmp_path_factory.mktemp("contexts")
    out = {}
    for backend in BACKENDS:
        folder = tmp / backend
        assert main(["measure", *MODEL, "--backend", backend, "--variants", "original,merged,linear", "--spans",
                     str(MAX_SPAN), "--model-variants", "original", *FAST, "--out", str(folder), "--no-progress"]) == 0
        lut = tmp / f"lut_{backend}.csv"
        assert main(["build-lut", str(folder), "-o", str(lut)]) == 0
        rule.rule_lut(lut, folder)
        out[backend] = (folder, lut)
    compiler = tmp / "lut_torch-compile_compiler.csv"
    shutil.copyfile(out["torch-compile"][1], compiler)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in COMPILER_RULE.items():
            patch.setattr(rule, name, value)
        rule.rule_lut(compiler, out["torch-compile"][0])
    out["compiler"] = (out["torch-compile"][0], compiler)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_measure_from_a_model_file_times_every_workload_in_its_context(contexts, backend):
    folder, lut_path = contexts[backend]
    (path,) = folder.glob("*.jsonl")
    records = [r for r in read_measurements(path) if r.scope != "probe"]
    # flatnet: 6 blocks x (original, merged, linear); 5 spans of two blocks, of which 2-3 and 3-4 are one key (a 5x5
    # convolution 24 -> 32 at 8 x 8), timed once; the model, its stem and head
    spans = {r.name for r in records if "+" in r.name}
    assert spans == {"e0..p0+e1..p1", "e1..p1+e2..p2", "e2..p2+e3..p3", "e4..p4+e5..p5"}
    assert len(records) == 6 * 3 + 4 + 3 and all(r.ok for r in records)
    assert {(r.backend, r.compile, r.threads) for r in records} == {
        (backend, "default" if backend == "torch-compile" else "", 1)}
    assert all(r.runtime_info["compile_s"] > 0 for r in records)  # compiled, and the seconds kept outside the samples
    (key,) = LUT.load(lut_path).devices()
    assert (key.backend, key.compile) == (backend, "default" if backend == "torch-compile" else "")


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_planner_chooses_the_hand_worked_front_in_each_context(contexts, backend, tmp_path, capsys):
    _, lut_path = contexts[backend]
    front_path = tmp_path / "front.json"
    code, out, err = cli(capsys, "plan", *MODEL, "--lut", lut_path, "--max-span", MAX_SPAN, "--out", front_path)
    assert code == 0, err
    points = json.loads(front_path.read_text())["points"]
    assert {p["k"]: (tuple(p["keep"]), tuple(map(tuple, p["spans"] or ()))) for p in points} == FRONT
    assert backend in out  # the context is named in what the planner prints


@pytest.mark.parametrize("backend", BACKENDS)
def test_predict_measure_a_plan_paired_and_report_in_each_context(contexts, backend, tmp_path, capsys):
    folder, lut_path = contexts[backend]
    k = 3
    code, _, err = cli(capsys, "plan", *MODEL, "--lut", lut_path, "--max-span", MAX_SPAN, "--keep", k,
                       "--out", tmp_path / "front.json")
    assert code == 0, err
    plan_path = tmp_path / "front.plan.json"
    plan = Plan.from_json(plan_path.read_text())
    assert (plan.keep, plan.spans or ()) == FRONT[k]
    code, out, err = cli(capsys, "predict", *MODEL, "--lut", lut_path, "--plan", plan_path)
    assert code == 0, err
    assert "speed-up" in out
    # the plan's merged model timed beside the original, in one group, in this context
    checks = tmp_path / "checks"
    code, out, err = cli(capsys, "measure", *MODEL, "--backend", backend, "--blocks", "none", "--model-variants",
                         "original", "--plan", plan_path, *FAST, "--out", checks, "--no-progress")
    assert code == 0, err
    assert "measured speed-up" in out and "paired rounds" in out
    models = [r for p in checks.glob("*.jsonl") for r in read_measurements(p) if r.scope == "model"]
    assert {r.variant for r in models} == {"original", "custom"} and len({r.group for r in models}) == 1
    assert {(r.backend, r.context.compile) for r in models} == {(backend, "default" if backend == "torch-compile" else "")}
    # predict, then time it in the LUT's own context here
    code, out, err = cli(capsys, "predict", *MODEL, "--lut", lut_path, "--plan", plan_path, "--measure",
                         "--measure-out", tmp_path / "again", *FAST, "--no-progress")
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("check: "))
    assert "measured speed-up" in line and "predicted" in line
    again = [r for p in (tmp_path / "again").glob("*.jsonl") for r in read_measurements(p)]
    assert {r.backend for r in again} == {backend}
    code, out, err = cli(capsys, "report", folder, checks, "--lut", lut_path, "--plans", plan_path,
                         "--front", tmp_path / "front.json", "-o", tmp_path / "report")
    assert code == 0, err
    page = (tmp_path / "report" / "index.md").read_text()
    assert {"openvino": "OpenVINO", "torch-compile": "torch.compile"}[backend] in page


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
    linearised alone, as a plan with its ``merge`` list spelled out."""
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
                yield Plan(LABEL, keep, {}, merge=tuple(merge), spans=spans or None)


def test_plans_over_both_contexts_equal_brute_force(contexts):
    luts = {"openvino": contexts["openvino"][1], "torch-compile": contexts["compiler"][1]}
    costs = {b: prices_of(ModelRef.of(LABEL, resolution=32), luts[b]) for b in BACKENDS}
    for b in BACKENDS:  # the rules price a block's linear form as its original (flatnet pads in place): none is
        frame = LUT.load(luts[b]).to_dataframe()  # held back, every plan below is one the planner offers
        blocks = frame[frame.scope == "block"].set_index(["workload", "variant"]).median_s
        linear = {w for w, v in blocks.index if v == "linear"}
        assert len(linear) >= 4 and all(blocks[(w, "linear")] <= blocks[(w, "original")] for w in linear)
    plans = list(_every_plan(costs["openvino"].blocks, MAX_SPAN))
    latency = {b: [predict_plan(costs[b], p, strict=True).total_s for p in plans] for b in BACKENDS}
    n = len(plans[0].keep)

    def best(b, k):
        mine = [i for i, p in enumerate(plans) if sum(p.keep) == k]
        low = min(latency[b][i] for i in mine)
        return low, [i for i in mine if latency[b][i] <= low * (1 + 1e-12)]

    result = plan_contexts(ModelRef.of(LABEL, resolution=32), [luts[b] for b in BACKENDS], max_span=MAX_SPAN)
    assert not result.unplanned and len(result.cross) == 4 * (n + 1)
    backend_of = {f.device: f.device.backend for f in result.fronts}
    for point in result.cross:
        a, b = backend_of[point.chosen_for], backend_of[point.runs_on]
        _, chosen = best(a, point.k)
        own, _ = best(b, point.k)
        on_b = [latency[b][i] for i in chosen]
        assert any(point.latency_s == pytest.approx(v, rel=1e-12, abs=0) for v in on_b), (a, b, point.k)
        assert point.own_latency_s == pytest.approx(own, rel=1e-12, abs=0)
        if a == b:
            assert point.loss == 0.0
    assert any(p.loss > 1e-6 for p in result.cross)  # the two contexts disagree somewhere
    ref, pricing = ModelRef.of(LABEL, resolution=32), Pricing(max_span=MAX_SPAN)
    fronts = [plan_front(ref, luts[b], pricing=pricing, prices=costs[b]) for b in BACKENDS]
    joint = joint_front([costs[b] for b in BACKENDS], fronts, objective="worst", max_span=MAX_SPAN)
    assert [p.k for p in joint.points] == list(range(n + 1))
    for point in joint.points:
        own = {b: best(b, point.k)[0] for b in BACKENDS}
        expected = min(max(latency[b][i] / own[b] for b in BACKENDS) for i, p in enumerate(plans)
                       if sum(p.keep) == point.k)
        assert point.worst + 1 == pytest.approx(expected, rel=1e-9), point.k


def test_plan_for_both_contexts_on_the_command_line(contexts, tmp_path, capsys):
    out = tmp_path / "front.json"
    code, text, err = cli(capsys, "plan", *MODEL, "--lut", contexts["openvino"][1], "--lut", contexts["compiler"][1],
                          "--max-span", MAX_SPAN, "--for", "openvino,torch-compile", "--keep", 2, "--out", out)
    assert code == 0, err
    assert "openvino/cpu t1" in text and "torch-compile/cpu t1" in text and "worst loss" in text
    data = json.loads(out.read_text())
    assert data["format"] == "dsprof.fronts" and len(data["fronts"]) == 2
    assert len(data["cross"]) == 4 * 7 and data["joint"]["objective"] == "worst"
    assert sum(json.loads((tmp_path / "front.plan.json").read_text())["keep"]) == 2


@pytest.mark.parametrize("backend, spread", [("openvino", 0.012), ("torch-compile", 0.0)])
def test_a_speedups_interval_holds_the_runtimes_spread_from_process_to_process(contexts, backend, spread):
    """OpenVINO: the same plan checked in fresh processes read 0.7-1.8 % apart (s.d.; 1.2 % pooled, benchmarks/
    RESULTS.md, "OpenVINO's spread from process to process"), more than one process's rounds and session pairs show;
    the LUT is timed in one process, a later check runs in another. A plan's speed-up interval adds that spread to
    the check's noise, in quadrature, and says so; torch.compile's (none seen) is as before. The speed-up's log
    half-width is its three parts in quadrature (the LUT's medians, the factor, the check: docs/predictions.md)."""
    from dataclasses import replace

    from dsprof.lut.inputs import interval_inputs
    from dsprof.lut.interval import Z95, terms_of

    costs = prices_of(ModelRef.of(LABEL, resolution=32), contexts[backend][1])
    n = len(costs.blocks)
    found = predict_plan(costs, Plan(LABEL, tuple(i % 2 == 0 for i in range(n)), {}), strict=True)
    alone = Z95 * terms_of(replace(interval_inputs(costs), process_spread=0.0)).check
    assert found.check ** 2 == pytest.approx(alone ** 2 + (Z95 * spread) ** 2, rel=1e-9)
    assert ("from process to process" in found.check_source) == (spread > 0)
    assert math.log(found.speedup_high / found.speedup) == pytest.approx(
        math.hypot(found.lut_spread, found.systematic, found.check), rel=1e-9)
