"""The calibration group (issue #27): `measure --calibrate` ends a run with the whole model, every block linearised
and merged where the run's own entries say merging pays, timed against the original in one group; the intervals
of predictions take its measured saving as a third point of the range a saving inside the model lies in.

The runs are real (a tiny MobileNetV2, PyTorch eager, 32 px); the interval test rewrites the calibration group's
samples to a known per-round ratio and computes the expected half-width by hand from the docstring's rule.
"""

import contextlib
import dataclasses
import io
import math
import re
import statistics
import warnings

import pytest

import dsprof
from dsprof.models import ModelRef
from dsprof.cli import main
from dsprof.errors import UsageError
from dsprof.lut import build_lut, model_label, predict_latency
from dsprof.records.plan import Plan
from dsprof.profiler import Workloads
from dsprof.lut.predict import prices_of
from dsprof.records.measurement import (CALIBRATION, IN_SITU_SCOPE, SESSION_AGAIN, MeasurementWriter, is_session_pair,
                                        read_measurements)
from dsprof.workflows.calibrate import COSTLY_PIECES, SESSION_PAIRS
from fast_timing import FAST, FEWER

pytestmark = pytest.mark.usefixtures("one_thread")
OPTIONS = {"depths": [1] * 7}
LABEL = model_label("mobilenet_v2", {**OPTIONS, "resolution": 32})
N_BLOCKS = 7  # one block per stage (depths 1 x 7)
Z = 1.959964


def _measure(out, calibrate=False, progress=False, **kw):
    return dsprof.measure(ModelRef.of("mobilenet_v2", options=OPTIONS, resolution=32),
                          workloads=Workloads(("original", "merged", "linear"), ("original",), calibrate=calibrate),
                          timing=FAST, out=out, progress=progress, **kw).run


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
    """The run, with its progress bar drawn (to a buffer, as on a terminal's stderr: tqdm writes to the `sys.stderr`
    of when it starts), and what the bar wrote: (run, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        run = _measure(tmp_path_factory.mktemp("calibration") / "m.jsonl", calibrate=True, progress=True)
    return run, err.getvalue()


@pytest.fixture(scope="module")
def run(timed):
    return timed[0]


def test_the_run_ends_with_the_calibration_group(run):
    timed = [r for r in run.measurements if r.scope != "probe"]
    last = [r for r in timed if r.group == timed[-1].group]
    assert [(r.scope, r.name, r.variant) for r in last] == [("model", "mobilenet_v2", "original"),
                                                             ("model", "mobilenet_v2", CALIBRATION)]
    assert all(r.ok and len(r.samples_s) == len(last[0].samples_s) for r in last)  # paired round by round
    # the LUT keeps its paired ratio, under the model's label: the median of the per-round ratios (one group)
    entry = build_lut([run.path]).lookup(LABEL, CALIBRATION, scope="model", strict=True)
    rounds = [c / o for o, c in zip(last[0].samples_s, last[1].samples_s)]
    assert entry.ratio == pytest.approx(statistics.median(rounds), rel=1e-12) and entry.ratio_se == entry.ratio_se


def test_before_it_the_model_is_timed_against_itself_and_the_checks_noise_is_read_from_those_pairs(run):
    """`SESSION_PAIRS` groups of the whole model twice, each built anew, come before the calibration group; the
    intervals' check term is then the root mean square of their paired ratios' distance from 1, each ratio the median
    of its rounds' ratios (worked out here from the records' samples), widened to Student's t of that many pairs, with
    nothing added for the calibration group's rounds (a pair's ratio holds its own)."""
    timed = [r for r in run.measurements if r.scope != "probe"]
    pairs = [r for r in timed if r.scope == IN_SITU_SCOPE and is_session_pair(r.name)]
    assert [(r.name, r.variant) for r in pairs] == [
        (f"(session {i})", v) for i in range(1, SESSION_PAIRS + 1) for v in ("original", SESSION_AGAIN)]
    assert [len({r.group for r in pairs[i:i + 2]}) for i in range(0, len(pairs), 2)] == [1] * SESSION_PAIRS
    assert len({r.group for r in pairs}) == SESSION_PAIRS
    calibration = next(i for i, r in enumerate(timed) if r.variant == CALIBRATION)
    assert max(timed.index(r) for r in pairs) < calibration
    ratios = [statistics.median(b / a for a, b in zip(first.samples_s, second.samples_s))
              for first, second in zip(pairs[::2], pairs[1::2])]
    # Student's t with one degree of freedom per pair over the normal quantile, from a printed table (97.5 %): the
    # pairs' root mean square is itself an estimate from a few pairs, and the check's 95 % interval is t's
    t975 = {3: 3.182446, 4: 2.776445, 5: 2.570582, 6: 2.446912, 7: 2.364624, 8: 2.306004}[SESSION_PAIRS]
    expected = math.sqrt(sum((1 - q) ** 2 for q in ratios) / len(ratios)) * t975 / 1.959964
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prices = prices_of(ModelRef.of("mobilenet_v2", options=OPTIONS, resolution=32), build_lut([run.path]))
    assert prices.method == "in-model"
    assert prices.terms.check == pytest.approx(expected, rel=1e-6)  # the table's six digits
    assert prices.terms.check_source == f"{SESSION_PAIRS} session pairs (the whole model against itself)"


def test_the_pieces_that_cost_the_most_time_alone_are_timed_inside_the_model_too(tmp_path):
    """Issue #46, item 4: another runtime's plan takes pieces this one's front never does, those that cost time alone
    here; `COSTLY_PIECES` of them are timed inside the model, the costliest first (one form of a block), worked out
    here from the run's own records: a block's merged or linear form, or a span, whose median is above its blocks'
    originals'. At 64 px the spans of three early blocks are dense 9x9 convolutions of about eight times their blocks'
    MACs: some piece costs time alone."""
    run = dsprof.measure(ModelRef.of("mobilenet_v2", options=OPTIONS, resolution=64),
                         workloads=Workloads(("original", "merged", "linear"), ("original",), spans=3, calibrate=True),
                         timing=FEWER, out=tmp_path / "m.jsonl", progress=False).run
    blocks = {r.name: r for r in run.measurements if r.scope == "block" and r.variant == "original" and r.ok}
    order = sorted(blocks, key=lambda b: blocks[b].index)
    costs = []
    for r in run.measurements:
        if r.scope != "block" or not r.ok or r.variant not in ("merged", "linear"):
            continue
        if r.name in blocks:  # a block alone
            costs.append((r.median_s - blocks[r.name].median_s, (r.name,), r.name, r.variant))
        elif "+" in r.name:  # a span, named by its first and last blocks
            first, last = r.name.split("+")
            inside = order[order.index(first):order.index(last) + 1]
            costs.append((r.median_s - sum(blocks[b].median_s for b in inside), tuple(inside), f"{first}..{last}",
                          "merged"))
    chosen = {}
    for cost, where, name, variant in sorted(costs, reverse=True):  # the costliest first, one form a block or span
        if cost > 0 and len(chosen) < COSTLY_PIECES:
            chosen.setdefault(where, (name, variant))
    assert chosen
    inside = {(r.name, r.variant) for r in run.measurements if r.scope == IN_SITU_SCOPE and r.ok}
    assert all(piece in inside for piece in chosen.values()), (chosen, sorted(inside))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prices = prices_of(ModelRef.of("mobilenet_v2", options=OPTIONS, resolution=64), build_lut([run.path]))
    costly = [t for t in prices.in_model.timed.values() if t.alone_s < 0]
    assert ("cost" in prices.in_model.scales) == (len(costly) >= 3)  # its own line where three are timed


def test_the_calibration_model_is_every_block_linearised_merged_where_the_run_says(run):
    """Its MACs are the stem's and head's plus, per block, those of the variant the rule picks from the same
    run: merged where its median is below the linear one's (the records' own MACs, counted per workload)."""
    records = {(r.scope, r.name, r.variant): r for r in run.measurements if r.ok and r.scope != "probe"}
    stem, head = records[("stem", "mobilenet_v2", "original")], records[("head", "mobilenet_v2", "original")]
    blocks = sorted({name for scope, name, _ in records if scope == "block"})
    assert len(blocks) == N_BLOCKS
    whole = records[("model", "mobilenet_v2", "original")]
    assert whole.macs == stem.macs + head.macs + sum(records[("block", b, "original")].macs for b in blocks)
    chosen = []
    for b in blocks:
        merged, linear = records[("block", b, "merged")], records[("block", b, "linear")]
        chosen.append(merged if merged.median_s < linear.median_s else linear)
    calibration = records[("model", "mobilenet_v2", CALIBRATION)]
    assert calibration.macs == stem.macs + head.macs + sum(r.macs for r in chosen)
    assert calibration.macs != whole.macs  # every block changed form


def test_resume_times_only_what_is_missing(run, tmp_path):
    again = _measure(run.path, calibrate=True, resume=True)
    assert again.new == 0  # the calibration group is in the file: nothing to time
    plain = tmp_path / "plain.jsonl"
    with MeasurementWriter(plain) as writer:  # the same run without its calibration group
        writer.write([r for r in run.measurements if r.group != [x for x in run.measurements if x.variant == CALIBRATION][0].group])
    resumed = _measure(plain, calibrate=True, resume=True)
    timed = [r for r in read_measurements(plain) if r.scope != "probe"]
    new = timed[len(timed) - resumed.new:]
    # the calibration group last; before it only pieces of the front that the file did not time inside the model yet
    # (the front planned from the file's records may take some: issue #36), none timed twice (nor a session pair)
    assert [r.variant for r in new[-2:]] == ["original", CALIBRATION]
    assert all(r.scope == IN_SITU_SCOPE for r in new[:-2])
    # (a block may be timed inside the model both merged and unmerged: two groups, each with its original)
    keys = [(r.name, r.variant) for r in timed if r.scope == IN_SITU_SCOPE and r.variant != "original"]
    assert len(keys) == len(set(keys))


def test_calibrate_needs_what_prices_its_plan(tmp_path, capsys):
    with pytest.raises(UsageError, match=r"needs `workloads=Workloads\(variants=\)` with original and merged"):
        dsprof.measure(ModelRef.of("mobilenet_v2", options=OPTIONS, resolution=32),
                       workloads=Workloads(("original",), ("original",), calibrate=True), timing=FAST,
                       out=tmp_path / "a.jsonl", progress=False)
    assert main(["measure", "--depths", "1,1,1,1,1,1,1", "--resolution", "32", "--calibrate", "--remote", "me@host",
                 "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--calibrate" in err[0]
    assert not (tmp_path / "b").exists()


def _with_calibration_ratio(run, tmp_path, ratio):
    """``run``'s records with the calibration group rewritten: its original's samples those of the run's whole
    model (so the whole-model entry, and phi, stay as they were) and the calibration model's each ``ratio`` times
    its round's (per-round ratio exactly ``ratio``); ``ratio`` None drops the group."""
    group = next(r.group for r in run.measurements if r.variant == CALIBRATION)
    whole = next(r for r in run.measurements if r.scope == "model" and r.variant == "original" and r.group != group)
    out = []
    for r in run.measurements:
        if r.scope == IN_SITU_SCOPE:
            continue
        if r.group != group:
            out.append(r)
        elif ratio is not None:
            scale = 1.0 if r.variant == "original" else ratio
            out.append(dataclasses.replace(r, samples_s=tuple(scale * s for s in whole.samples_s)))
    path = tmp_path / f"ratio-{ratio}.jsonl"
    with MeasurementWriter(path) as writer:
        writer.write(out)
    return build_lut([path])


def test_the_calibration_widens_the_range_of_the_systematic_term_by_hand(run, tmp_path):
    model, kw = ModelRef.of("mobilenet_v2", options=OPTIONS, resolution=32), dict(method="in-model", strict=True)
    plan = Plan("mobilenet_v2", (1, 0, 1, 0, 1, 1, 0), OPTIONS)
    every = Plan("mobilenet_v2", (0,) * N_BLOCKS, OPTIONS)
    without = _with_calibration_ratio(run, tmp_path, None)
    # phi by hand from the entries: (whole - stem - head) / sum of the blocks' originals; the method counts (1 + phi) / 2
    frame = without.to_dataframe()
    median = lambda scope, variant="original": frame.query("scope == @scope and variant == @variant").median_s  # noqa: E731
    phi = (float(median("model").iloc[0]) - float(median("stem").iloc[0]) - float(median("head").iloc[0])) / float(
        median("block").sum())
    F = (1 + phi) / 2
    base = predict_latency(model, without, plan, **kw)
    assert base.method == f"in-model (x{F:.3f})"
    u = 1 - 1 / base.speedup
    three = 0.004 * math.sqrt(3)  # how the plan's three linearised blocks meet their neighbours, a share of the model
    spread = abs(u) * math.sqrt((phi - 1) ** 2 / 12 + (F - (1 + phi) / 2) ** 2) / F
    assert base.systematic == pytest.approx(Z * base.speedup * math.hypot(spread, three), rel=1e-9)
    # the calibration saved half of what the method predicts for its plan: rho = 0.5, a third point at 0.5 F
    u_every = 1 - 1 / predict_latency(model, without, every, **kw).speedup
    half = _with_calibration_ratio(run, tmp_path, 1 - 0.5 * u_every)
    pred = predict_latency(model, half, plan, **kw)
    assert pred.speedup == pytest.approx(base.speedup, rel=1e-12)  # the prediction stays; its interval widens
    low, high = min(1, phi, 0.5 * F), max(1, phi, 0.5 * F)
    factor = math.sqrt((high - low) ** 2 / 12 + (F - (low + high) / 2) ** 2) / F
    assert pred.systematic == pytest.approx(Z * pred.speedup * math.hypot(abs(u) * factor, three), rel=1e-6)
    # a calibration that saved what the method predicts (rho = 1, inside [1, phi] / F) leaves the range as it was;
    # its LUT is built as `half`'s (the calibration group copied from the whole model's samples), so the interval's
    # other terms (the drift between groups) are the same in both
    same = predict_latency(model, _with_calibration_ratio(run, tmp_path, 1 - u_every), plan, **kw)
    assert same.systematic == pytest.approx(base.systematic, rel=1e-6)
    if 0.5 * F < 1:  # the third point lies below the range [1, phi]: it widens (else, inside it, it changes nothing)
        assert pred.systematic > same.systematic
        assert pred.speedup_high - pred.speedup_low > same.speedup_high - same.speedup_low
    assert "calibration saved" in pred.systematic_source and "(x0.500)" in pred.systematic_source


def test_cli_measure_calibrate_shows_its_row_and_predict_names_it(tmp_path, capsys):
    out = tmp_path / "m.jsonl"
    args = ["measure", "--depths", "1,1,1,1,1,1,1", "--resolution", "32", "--variants", "original,merged,linear",
            "--model-variants", "original", "--calibrate", "--budget", "0.02", "--out", str(out), "--no-progress",
            # tests/fast_timing.py's FAST, as flags: no warm-up beyond a call, five or six samples of one call each
            "--warmup", "0", "--max-warmup", "0.01", "--min-samples", "5", "--max-samples", "6",
            "--min-sample-time", "0"]
    assert main(args) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if "calibration: every block linearised" in line)
    assert "x [" in row  # its paired speed-up over the original beside it
    assert main(["build-lut", str(out), "-o", str(tmp_path / "lut.csv")]) == 0
    capsys.readouterr()
    plan = tmp_path / "plan.json"
    plan.write_text(Plan("mobilenet_v2", (1, 0, 1, 0, 1, 1, 0), OPTIONS, name="p").to_json())
    assert main(["predict", "--lut", str(tmp_path / "lut.csv"), "--depths", "1,1,1,1,1,1,1", "--resolution", "32",
                 "--plan", str(plan)]) == 0
    shown = capsys.readouterr().out
    # the systematic term names what it reads: the pieces the run timed inside the model, or (where the run's own
    # entries could not be planned, e.g. a tiny model that a loaded machine timed faster than its blocks) the factor
    assert ("systematic: in-model factor" in shown or "pieces timed in the model save" in shown), shown
    assert "calibration" in shown, shown


def test_the_profilers_measure_refuses_calibrate_in_one_line_and_writes_nothing(tmp_path):
    """`dsprof.profiler.measure` times the groups it builds and nothing after them, so `calibrate=True` given there
    was once dropped without a word: the run wrote a LUT without its calibration group. It is now refused, before
    anything is built or written, in one line that names the door that calibrates."""
    from dsprof.profiler import measure

    out = tmp_path / "m.jsonl"
    with pytest.raises(UsageError) as err:
        measure(ModelRef.of("mobilenet_v2", options=OPTIONS, resolution=32),
                workloads=Workloads(("original",), ("original",), calibrate=True), timing=FAST, out=out,
                progress=False)
    assert "\n" not in str(err.value) and "dsprof.measure" in str(err.value)
    assert not out.exists() and list(tmp_path.iterdir()) == []


ALONE = "draft: priced from pieces timed alone, none timed inside the model"


def test_a_front_priced_without_pieces_timed_inside_the_model_says_it_is_a_draft(run, tmp_path):
    """Issue #46, item 4: from one run's LUT with and without its pieces timed inside the model, predicted
    cross-runtime losses were inside their intervals 9 of 9 times against 4-5 of 9 (224 px), so a front priced
    from pieces timed alone labels its figures drafts, where a contended run's are (`Front.draft`). The same run's
    records: all of them (no label), then without the pieces timed inside the model and the calibration group."""
    import json

    lines = [json.loads(x) for x in run.path.read_text().splitlines() if x.strip()]
    groups = {r["group"] for r in lines if r["variant"] == CALIBRATION}
    alone = tmp_path / "alone.jsonl"
    alone.write_text("".join(json.dumps(r) + "\n" for r in lines
                             if r["scope"] != IN_SITU_SCOPE and r["group"] not in groups))
    assert len(alone.read_text().splitlines()) < len(lines)  # something was taken out
    model = ModelRef.of("mobilenet_v2", options=OPTIONS, resolution=32)
    # (a run timed while the machine is loaded, as a test run may be, also carries the contended label: not this one's)
    calibrated = dsprof.plan(model, build_lut([run.path]))
    assert ALONE not in calibrated.front.draft.split("; ") and ALONE not in calibrated.front.notes()
    planned = dsprof.plan(model, build_lut([alone]))
    assert planned.front.draft.split("; ")[-1] == ALONE and planned.front.notes()[0] == planned.front.draft


def test_a_chain_that_cannot_merge_is_no_block_so_every_front_plan_of_a_tf_model_merges(tmp_path):
    """timm's tf_mobilenetv3_small_075 chains the stem's 3x3 stride-2 convolution into the first depthwise 3x3
    stride-2, both with TensorFlow's dynamic 'SAME' padding. No one padding in front of their composite is right at
    every input size (`dsprof.models.padding.tf_same_chain_problem`), so they cannot merge. That chain was a block:
    `measure --calibrate` failed on it after everything was timed, and the planner offered plans that linearised it,
    which `merge` refused. Discovery refuses it now, with the reason, and every plan of the front merges.

    From the architecture: 11 inverted-residual or depthwise-separable blocks after the stem; the first one's
    squeeze-excitation gate leaves no chain to merge there, so the 10 others are the blocks."""
    from dsprof.models import discover_blocks

    ref = ModelRef.of("timm:tf_mobilenetv3_small_075", resolution=32)
    found = discover_blocks(ref.build(), (32, 32))
    assert len(found.blocks) == 10 and not any("conv_stem" in b.name for b in found.blocks)
    assert any(r.name.startswith("conv_stem") and "TensorFlow 'SAME' padding is dynamic" in r.reason
               for r in found.refusals)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = dsprof.measure(ref, workloads=Workloads(("original", "merged"), ("original",), calibrate=True),
                             timing=FEWER, out=tmp_path / "m.jsonl", progress=False).run
    assert not [w for w in caught if "cannot be linearised" in str(w.message)]
    calibration = [r for r in run.measurements if r.variant == CALIBRATION]
    assert len(calibration) == 1 and calibration[0].ok
    front = dsprof.plan(ref, build_lut([run.path])).front
    assert len(front.points) >= 5
    # each merges, or the line raises MergeError: merged as `dsprof merge` merges it (linearised, then merged), on one
    # model built once; the plan that linearises the most blocks also through `dsprof.merge` itself (which adds the
    # plan's checks, the replay of its merge list and the cost table to those two steps)
    from dsprof.merging import merge_model

    model = ref.build()
    for point in front.points:
        merge_model(model, point.plan)
    dsprof.merge(ref, min(front.points, key=lambda p: sum(p.plan.keep)).plan)


def test_the_progress_bar_grows_by_each_batch_of_calibration_groups_and_says_what_they_are(timed):
    """The groups `calibrate=True` plans from the run are known a batch at a time: the bar's total used to grow by one
    group at a time, at 100 % after each. It grows by a batch now (the front's pieces of a round; the session pairs and
    the calibration group), says what they are, and ends at the number of groups the records hold. (The module's run,
    timed with its bar drawn.)"""
    from dsprof.workflows.calibrate import IN_MODEL_ROUNDS

    run, err = timed
    err = err.replace("\r", "\n")
    groups = len({r.group for r in run.measurements if r.scope != "probe"})
    # each change of the total is drawn at once (the counts between may be skipped: tqdm draws at most every 0.1 s)
    totals = list(dict.fromkeys(int(total) for total in re.findall(r"\| *\d+/(\d+) \[", err)))  # in order, once each
    assert totals[-1] == groups
    assert 2 <= len(totals) <= 1 + IN_MODEL_ROUNDS + 1, totals
    assert totals[-1] - totals[-2] >= SESSION_PAIRS + 1  # the pairs and the calibration group, told at once
    assert "then the calibration's groups, planned from these" in err
