"""Ties broken by measurement (issue #46, item 6): `dsprof.plan(tie_break=...)` and `dsprof plan --tie-break SECONDS`.

A real LUT of a tiny MobileNetV2 (one block per stage, 7 blocks, 32 x 32), timed here through PyTorch eager with
spans of two blocks, its medians rewritten by tests/rule_lut.py's rule so that what the planner prices is known in
advance; the tie-break then times real merged models with the real profiler, on tiny budgets. What is asserted is the
mechanics, never a timing:

- the candidates are the top-priced plans of the k, exactly: brute force over every plan of that k (`tests/plans.py`,
  priced by `dsprof.lut.Pricer`) gives the same latencies in the same order;
- the plans timed are distinct plans of that k, the front's first, every one priced inside the front plan's
  interval and the front plan inside theirs;
- each plan is timed in a group of its own with the original (one measurement file each, nothing else in it);
- the plan returned and written is the one whose paired speed-up, recomputed from its file's raw samples (the median
  of the per-round ratios over that file's original), is highest;
- `build_lut` reads the folder: one entry per timed plan whose paired ratio is its file's, and the whole model's
  original one group more per timed plan;
- the command line prints the measured figure, labelled, beside the predicted one; a bad budget and a LUT of another
  machine are refused in one line.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

import dsprof
from cli_run import dsprof_here
from dsprof.errors import DeviceError, UsageError
from dsprof.lut import LUT, Pricing, build_lut
from dsprof.lut.pricer import Pricer
from dsprof.lut.predict import prices_of
from dsprof.lut.schema import model_label
from dsprof.planning.planner import top_plans
from dsprof.profiler import BackendSettings, Workloads, measure
from dsprof.models import ModelRef
from dsprof.records.measurement import read_measurements
from dsprof.records.plan import Plan
from dsprof.workflows.tiebreak import TieBreak
from plans import every_plan
from rule_lut import rule_lut
from fast_timing import FAST

pytestmark = pytest.mark.usefixtures("one_thread")
NAME, OPTIONS, RESOLUTION, K, MAX_SPAN = "mobilenet_v2", {"depths": [1] * 7}, 32, 3, 2
SMALL = ModelRef.of(NAME, options=OPTIONS, resolution=RESOLUTION)
MODEL = ["--model", NAME, "--depths", "1,1,1,1,1,1,1", "--resolution", str(RESOLUTION)]


@pytest.fixture(scope="module")
def lut_path(tmp_path_factory):
    """A LUT of this machine: blocks original, merged and linear, spans of two blocks, the whole model; medians from
    the rule."""
    d = tmp_path_factory.mktemp("tiebreak")
    result = measure(ModelRef.of(NAME, options=OPTIONS, resolution=RESOLUTION),
                     settings=BackendSettings(backend="torch", threads=1),
                     workloads=Workloads(variants=("original", "merged", "linear"), model_variants=("original",), spans=MAX_SPAN),
                     timing=FAST, out=d / "lut-run" / "torch.jsonl", progress=False)
    path = d / "lut.csv"
    build_lut([result.path]).save(path)
    rule_lut(path, [result.path])
    return path


@pytest.fixture(scope="module")
def broken(lut_path, tmp_path_factory):
    """`dsprof.plan` at k = 3 with a tie-break of 1 s over the 6 top-priced plans."""
    d = tmp_path_factory.mktemp("broken")
    planned = dsprof.plan(SMALL, lut_path, keep=K, pricing=Pricing(max_span=MAX_SPAN),
                          out=d / "front.json", tie_break=TieBreak(1.0, 6, d / "tie-break"))
    return planned, d


def test_the_candidates_are_the_top_priced_plans_of_their_k(lut_path):
    prices = prices_of(ModelRef.of(NAME, options=OPTIONS, resolution=RESOLUTION), lut_path)
    pricer, blocks = Pricer(prices), prices.blocks
    brute = sorted(pricer.price(keep=keep, spans=spans).latency_s
                   for keep, spans in every_plan(blocks, MAX_SPAN) if sum(keep) == K)
    top = top_plans(prices, K, 12, max_span=MAX_SPAN, model=ModelRef.of(NAME, options=OPTIONS))
    assert len(top) == 12
    assert len({p.plan.digest for p in top}) == 12  # distinct plans
    assert all(p.k == K and sum(p.plan.keep) == K for p in top)
    assert [p.latency_s for p in top] == pytest.approx(brute[:12], rel=1e-12)
    # each is priced as predict prices it (the Pricer, from the plan file's content)
    for p in top:
        assert pricer.price(p.plan).latency_s == pytest.approx(p.latency_s, rel=1e-12)
    # fewer plans than asked where the k has fewer: k = 0 (every block linearised, spans of two over 7 blocks)
    assert len(top_plans(prices, 0, 10_000, max_span=MAX_SPAN, model=ModelRef.of(NAME, options=OPTIONS))) == sum(
        1 for keep, _ in every_plan(blocks, MAX_SPAN) if sum(keep) == 0)


def test_the_tied_plans_are_timed_and_the_measured_best_is_kept(broken):
    planned, d = broken
    tb = planned.tie_break
    front = planned.front.at_k(K)
    assert tb.front.plan.digest == front.plan.digest and tb.candidates[0].point.plan.digest == front.plan.digest
    plans = [c.point for c in tb.candidates]
    assert len({p.plan.digest for p in plans}) == len(plans) >= 2  # on the rule's prices, k = 3 has ties
    assert tb.ranked == 6 and len(plans) <= 6
    for p in plans:  # all of k = 3, priced inside each other's intervals
        assert sum(p.plan.keep) == K
        assert front.low_s <= p.latency_s <= front.high_s and p.low_s <= front.latency_s <= p.high_s
    # the paired speed-up of each, recomputed from the raw samples of the file: the median of the per-round ratios
    files = sorted(tb.path.glob("*.jsonl"))
    assert len(files) == len(plans)  # a group of two per plan
    measured = {}
    for f in files:
        records = [r for r in read_measurements(f) if r.scope == "model" and r.ok]
        assert sorted(r.variant for r in records) == ["custom", "original"]
        (original,) = [r for r in records if r.variant == "original"]
        (r,) = [r for r in records if r.variant == "custom"]
        assert len(r.samples_s) == len(original.samples_s) >= 2
        measured[r.name] = statistics.median(b / v for b, v in zip(original.samples_s, r.samples_s))
    assert set(measured) == {p.plan.name for p in plans}
    best = max(measured, key=measured.get)
    for c in tb.candidates:
        assert c.measured.speedup.ratio == pytest.approx(measured[c.point.plan.name], rel=1e-12)
        assert c.measured.speedup.low <= c.measured.speedup.ratio <= c.measured.speedup.high
    assert planned.chosen.plan.name == best == tb.best.point.plan.name
    # the plan written is that plan, as priced; the front's JSON quotes what was measured
    written = Plan.from_json((d / "front.plan.json").read_text())
    assert written.digest == planned.chosen.plan.digest and written.name == best
    data = json.loads((d / "front.json").read_text())
    assert data["tie_break"]["chosen"] == best and data["tie_break"]["front"] == front.plan.name
    quoted = {c["name"]: c for c in data["tie_break"]["candidates"]}
    assert quoted[best]["measured_speedup"] == pytest.approx(measured[best], rel=1e-12)
    assert quoted[best]["speedup"] == pytest.approx(planned.chosen.speedup, rel=1e-12)
    assert "measured" in tb.line() and f"{measured[best]:.3f}x" in tb.line()


def test_build_lut_reads_the_tie_break_records(broken, lut_path):
    planned, _ = broken
    tb = planned.tie_break
    before = LUT.load(lut_path)
    lut = build_lut([lut_path.parent / "lut-run", tb.path])
    context = before.devices()[0]
    assert lut.devices() == [context]  # the same context: measured on this machine, in the LUT's settings
    for c in tb.candidates:
        (f,) = [f for f in tb.path.glob("*.jsonl") if f.stem == c.point.plan.name]
        records = [r for r in read_measurements(f) if r.scope == "model" and r.ok]
        (original,) = [r for r in records if r.variant == "original"]
        (r,) = [r for r in records if r.variant == "custom"]
        entry = lut.find(model_label(r.name, r.model_options), "custom", context, scope="model")
        assert entry is not None  # paired with the original of its own group
        assert entry.ratio == pytest.approx(statistics.median(v / b for v, b in zip(r.samples_s, original.samples_s)),
                                            rel=1e-12)
    label = model_label(NAME, original.model_options)
    whole = lut.find(label, "original", context, scope="model")
    assert whole.groups == before.find(label, "original", context, scope="model").groups + len(tb.candidates)


def test_the_command_line_quotes_the_measured_figure(lut_path, tmp_path):
    done = dsprof_here("plan", *MODEL, "--lut", lut_path, "--keep", K, "--max-span", MAX_SPAN, "--tie-break", "0.5",
                       "--tie-break-candidates", "3", "--out", tmp_path / "front.json")
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("tie-break at k = 3:"))
    assert "measured" in line and "predicted" in line and "timed paired with the original (0.5 s)" in line
    (folder,) = (tmp_path / "tie-break").glob("tie-break_*")  # beside --out by default
    assert folder.is_dir() and f"wrote {folder}" in done.stdout
    timed = json.loads((tmp_path / "front.json").read_text())["tie_break"]["candidates"]
    assert sorted(f.stem for f in folder.glob("*.jsonl")) == sorted(c["name"] for c in timed)
    assert json.loads((tmp_path / "front.json").read_text())["tie_break"]["ranked"] == 3


@pytest.mark.parametrize("seconds", ["0", "-1", "nan", "inf"])
def test_a_bad_budget_is_one_line(lut_path, tmp_path, seconds):
    done = dsprof_here("plan", *MODEL, "--lut", lut_path, "--keep", K, "--tie-break", seconds,
                       "--out", tmp_path / "front.json")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "--tie-break" in done.stderr and "above 0" in done.stderr
    assert not (tmp_path / "front.json").exists()


def test_refused_without_a_k_with_importance_and_over_several_contexts(lut_path, tmp_path):
    with pytest.raises(UsageError, match="give `keep=`"):
        dsprof.plan(SMALL, lut_path, tie_break=1.0)
    with pytest.raises(UsageError, match="importance"):
        dsprof.plan(SMALL, lut_path, keep=K, importance=[0.1] * 7,
                    tie_break=1.0)
    with pytest.raises(UsageError, match="candidates=0"):
        TieBreak(1.0, 0)


def test_a_lut_of_another_machine_is_refused(lut_path, tmp_path):
    lut = LUT.load(lut_path)
    frame = lut.to_dataframe()
    frame["env_id"] = "0123456789ab"  # the same rows, measured in another environment
    other = tmp_path / "other.csv"
    LUT(frame, str(other)).save(other)
    with pytest.raises(DeviceError, match="this machine is"):
        dsprof.plan(SMALL, other, keep=K, out=tmp_path / "front.json",
                    tie_break=TieBreak(0.5, 3, tmp_path / "tb"))
    assert not (tmp_path / "tb").exists()  # nothing timed


# -- item 4's last sentence: a figure built on a contended LUT run says so where it is shown --------------------------
DRAFT = "draft: LUT run contended, 70 % CPU"
#: this module's LUT times no piece inside the model: every front built on it carries this label too (issue #46)
ALONE = "draft: priced from pieces timed alone, none timed inside the model"
BOTH = f"{DRAFT}; {ALONE}"


def test_build_lut_keeps_the_cpu_share_each_entry_was_timed_with(lut_path):
    records = [r for r in read_measurements(next((lut_path.parent / "lut-run").glob("*.jsonl"))) if r.ok]
    lut = build_lut([lut_path.parent / "lut-run"])  # as measured (the rule's table records no share)
    assert LUT.load(lut_path).to_dataframe()["cpu_share"].isna().all()
    context = lut.devices()[0]
    checked = 0
    for r in records:
        if r.scope != "block":
            continue
        shares = [x.state_after["process_cpu_share"] for x in records
                  if x.scope == "block" and x.spec == r.spec and x.variant == r.variant]
        entry = lut.find(r.spec, r.variant, context)
        assert entry.cpu_share == pytest.approx(statistics.median(shares), rel=1e-12)
        assert 0 < entry.cpu_share <= 1.5
        checked += 1
    assert checked >= 7
    # the drift probe records no share: empty, not 0
    frame = lut.to_dataframe()
    assert frame[frame["scope"] == "probe"]["cpu_share"].isna().all()


def _with_share(lut_path: Path, path: Path, share: float, backend: str | None = None) -> Path:
    """The LUT at ``lut_path`` with every entry's CPU share ``share`` (and its context's backend ``backend``)."""
    frame = LUT.load(lut_path).to_dataframe()
    frame["cpu_share"] = share
    if backend is not None:
        frame["backend"] = backend
    LUT(frame, str(path)).save(path)
    return path


def test_a_contended_lut_run_is_labelled_a_draft_where_its_figures_are_shown(lut_path, tmp_path):
    contended = _with_share(lut_path, tmp_path / "contended.csv", 0.7)
    assert LUT.load(contended).contention() == pytest.approx(0.7) and LUT.load(contended).contention_label() == DRAFT
    quiet = _with_share(lut_path, tmp_path / "quiet.csv", 0.95)
    assert LUT.load(quiet).contention() is None and LUT.load(quiet).contention_label() == ""
    # the front: its notes (table and JSON) and the chosen line
    planned = dsprof.plan(SMALL, contended, keep=K, out=tmp_path / "f.json")
    assert planned.front.draft == BOTH and planned.front.notes()[0] == BOTH
    data = json.loads((tmp_path / "f.json").read_text())
    assert data["draft"] == BOTH and data["notes"][0] == BOTH
    assert dsprof.plan(SMALL, quiet).front.draft == ALONE
    # the activation-level front reads the same LUT the same way (one place: `Prices.draft`)
    assert dsprof.plan(SMALL, contended, unit="activation").front.draft == BOTH
    assert dsprof.plan(SMALL, quiet, unit="activation").front.draft == ALONE
    done = dsprof_here("plan", *MODEL, "--lut", contended, "--keep", K, "--out", tmp_path / "cli.json")
    assert done.returncode == 0, done.stderr[-3000:]
    chosen = next(x for x in done.stdout.splitlines() if x.startswith("chosen: k = 3"))
    assert chosen.endswith(f"; {BOTH}")
    # the cross table: two contexts, one contended (torch), one not (the same rows as another backend's)
    both = tmp_path / "both.csv"
    LUT.concat([LUT.load(contended), LUT.load(_with_share(lut_path, tmp_path / "other.csv", 0.95, "onnxruntime"))]
               ).save(both)
    outcome = dsprof.plan(SMALL, both, out=tmp_path / "two.json")
    for c in outcome.fronts.cross:  # a figure built on the torch context's LUT is contended; the other's is not
        assert c.draft == (BOTH if "torch" in (c.chosen_for.backend, c.runs_on.backend) else ALONE)
    assert any(c.draft == ALONE for c in outcome.fronts.cross) and any(c.draft == BOTH for c in outcome.fronts.cross)
    rows = [x for x in outcome.fronts.table().splitlines() if x.endswith(f"({BOTH})")]
    assert len(rows) == 2  # both ordered pairs of the cross table
    from dsprof.reports.devices import cross_table
    table = cross_table(json.loads((tmp_path / "two.json").read_text()))
    assert len(table) and set(table["draft"]) == {BOTH}


def test_a_lut_without_the_cpu_share_column_loads_and_a_bad_share_is_refused(lut_path, tmp_path):
    from dsprof.lut import LUTError
    frame = LUT.load(lut_path).to_dataframe()
    old = tmp_path / "old.csv"
    LUT(frame.drop(columns=["cpu_share"]), str(old)).save(old)
    assert LUT.load(old).to_dataframe()["cpu_share"].isna().all() and LUT.load(old).contention() is None
    frame["cpu_share"] = -0.5
    with pytest.raises(LUTError, match="cpu_share"):
        LUT(frame, "bad.csv")


@pytest.mark.parametrize(("seconds", "size"), [(0.5, 21), (1.0, 7), (60.0, 3)])
def test_warm_up_and_rounds_share_the_budget_asked_for(seconds, size):
    """``tie_break=S`` is the time spent timing: the group's ``size`` workloads warm up (the first group's longer
    warm-up included) and time within S in all -- before, the first group's 0.5 s warm-up each took a 0.5 s budget of
    21 plans to 16 s. A share below 20 ms keeps the 10 ms floor of warm-up; the cap is the profiler's 2 s."""
    from dsprof.workflows.tiebreak import _timing

    timing = _timing(seconds, size)
    first = timing.first_group()
    per_workload = first.warmup_max_s + timing.budget_s
    assert first.warmup_max_s == pytest.approx(min(2.0, max(0.01, seconds / size / 2)))
    assert timing.budget_s == pytest.approx(seconds / size / 2)
    assert size * per_workload <= seconds * 1.2 + size * 0.01
