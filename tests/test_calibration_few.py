"""A calibration is never unused in silence (issue #46, item 1): a model with fewer pieces than the in-model scales
need (`dsprof.lut.inmodel.MIN_PIECES`, 5) has them all timed inside it, says so in one line when it is measured and
wherever its prices are used (a `CalibrationFallbackWarning`: the API, `dsprof predict`, `dsprof plan`), and prices
with the one line through its pieces' paired savings, shrunk toward 1 -- what its pieces change, not the in-model
factor, which counts the stem, the head and everything else a plan cannot change.

The run is real: tests/models/tinyconv.py (three inverted-residual blocks, read by hand there) timed by PyTorch eager
at 32 px with `calibrate=True`. The expected scale is worked out from the LUT's own entries by the rule of
dsprof.lut.inmodel's docstring, not from the code's output.
"""

import statistics
import warnings
from pathlib import Path

import pytest

import dsprof
from cli_run import dsprof_here
from dsprof.lut import CalibrationFallbackWarning, build_lut, model_label, predict_latency
from dsprof.lut.inmodel import MIN_PIECES, PRIOR_SD
from dsprof.models import ModelRef, find_blocks, get_model
from dsprof.profiler import Workloads
from dsprof.records.measurement import CALIBRATION, IN_SITU_SCOPE, SESSION_AGAIN
from dsprof.records.plan import Plan
from dsprof.workflows.calibrate import COSTLY_PIECES
from fast_timing import FAST
from posterior_by_hand import posterior_prices

pytestmark = pytest.mark.usefixtures("one_thread")
TINY_FILE = str(Path(__file__).parent / "models" / "tinyconv.py") + ":build"
N_BLOCKS = 3  # tinyconv.py: blocks.0, blocks.1, blocks.2; no spans timed (spans=1): 3 pieces, fewer than 5


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("few")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        measured = dsprof.measure(ModelRef.of(TINY_FILE, resolution=32),
                                  workloads=Workloads(("original", "merged", "linear"), ("original",), calibrate=True),
                                  timing=FAST, out=folder / "m.jsonl", progress=False).run
    lut = build_lut([measured.path])
    return measured, lut, [w for w in said if issubclass(w.category, CalibrationFallbackWarning)], folder


def test_every_piece_the_model_has_is_timed_inside_it_and_the_run_says_why_no_more(run):
    measured, _, said, _ = run
    assert MIN_PIECES == 5
    timed = [r for r in measured.measurements
             if r.scope == IN_SITU_SCOPE and r.variant not in ("original", SESSION_AGAIN)]
    assert sorted(r.name for r in timed) == ["blocks.0", "blocks.1", "blocks.2"]  # each block once, all three
    assert len(said) == 1  # one line, once
    text = str(said[0].message)
    assert "only 3 pieces to time inside it (3 blocks, 0 spans measured), fewer than the 5" in text
    assert "\n" not in text
    assert [r.variant for r in measured.measurements if r.scope == "model"][-1] == CALIBRATION  # then calibration


def _expected_scale(measured, lut):
    """The line through the three pieces' paired savings against their savings alone, shrunk toward 1 (prior sd 0.5)
    by its own standard error: the rule of dsprof.lut.inmodel, from the LUT's entries. Also each timed piece,
    {(block name, variant): (saving alone, saving inside, its standard error)}."""
    label = model_label("file:tinyconv:build", {"resolution": 32})
    blocks = find_blocks(get_model("file:tinyconv:build", resolution=32))
    whole = lut.lookup(label, "original", scope="model", strict=True).median_s
    bases = {b.name: lut.lookup(f"{label}@{b.name}", "original", scope=IN_SITU_SCOPE, strict=True) for b in blocks}
    reference = statistics.median([whole] + [e.median_s for e in bases.values()])  # the median of the model's medians
    pieces = {}
    for r in measured.measurements:
        if r.scope != IN_SITU_SCOPE or r.variant in ("original", SESSION_AGAIN):
            continue
        swap = lut.lookup(f"{label}@{r.name}", r.variant, scope=IN_SITU_SCOPE, strict=True)
        block = next(b for b in blocks if b.name == r.name)
        alone = (lut.lookup(block.spec.to_str(), "original", strict=True).median_s
                 - lut.lookup(block.spec.to_str(), r.variant, strict=True).median_s)
        pieces[(r.name, r.variant)] = (alone, reference * (1 - swap.ratio), reference * swap.ratio_se)
    rows = list(pieces.values())
    a2 = sum(a * a for a, _, _ in rows)
    fitted = sum(a * m for a, m, _ in rows) / a2
    var = [max((m - fitted * a) ** 2 * 3 / 2, s * s) for a, m, s in rows]  # n / (n - 1) = 3 / 2
    se2 = sum(a * a * v for (a, _, _), v in zip(rows, var)) / a2 ** 2
    w, w0 = 1 / se2, 1 / PRIOR_SD ** 2
    return fitted, (w * fitted + w0) / (w + w0), reference, pieces


def test_the_prices_count_the_pieces_own_line_shrunk_and_say_so_once(run):
    measured, lut, _, _ = run
    fitted, scale, reference, pieces = _expected_scale(measured, lut)
    plan = Plan("file:tinyconv:build", (1, 0, 0), {}, merge=(False, True, True))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        pred = predict_latency(ModelRef.of(TINY_FILE, resolution=32), lut, plan, strict=True)
    lines = [str(w.message) for w in said if issubclass(w.category, CalibrationFallbackWarning)]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert "3 pieces timed inside the model, fewer than the 5 the in-model scales need (the model has only 3 to time " \
           "(3 blocks, 0 spans measured))" in lines[0]
    assert f"prices count each saving alone x{scale:.3f}" in lines[0] and f"(x{fitted:.3f})" in lines[0]
    assert "each timed piece moved toward what it measured inside the model; not the in-model factor" in lines[0]
    assert pred.method == (f"in-model (x{scale:.3f}, 3 pieces timed in the model, fewer than 5: one line, shrunk "
                           "toward 1)")
    assert pred.factor == pytest.approx(scale, rel=1e-9)
    # the plan's saving: that scale times the two linearised blocks' savings alone (merged, as its list says), each
    # piece timed inside the model moved toward its measurement (`posterior_prices`; the sessions' part of a measurement,
    # s R, read from the prices: `dsprof.lut.interval.session_noise` of the LUT's session pairs), from the whole model's
    # reference: no stem, head or factor of the model's other parts in it; rho the calibration group's measured
    # saving over the one these prices predict for its plan (every block linearised, the cheaper of merged and
    # linear), shrunk toward 1 by its own error, where it says one: below 1, times rho; above, plus its share of the
    # calibration plan's blocks (PyTorch eager runs each activation apart: 2 of 3 linearised) of what that plan saved
    # beyond its pieces, (rho - 1) x its pieces' sum
    blocks = find_blocks(get_model("file:tinyconv:build", resolution=32))
    session_s = dsprof.lut.prices_of(ModelRef.of(TINY_FILE, resolution=32), lut).in_model.session_s
    timed = posterior_prices({k: (*p, fitted, scale) for k, p in pieces.items()}, reference, session_s)
    median = lambda b, v: lut.lookup(b.spec.to_str(), v, strict=True).median_s  # noqa: E731
    price = lambda b, v: timed.get((b.name, v), scale * (median(b, "original") - median(b, v)))  # noqa: E731
    cheaper = lambda b: min(("merged", "linear"), key=lambda v: median(b, v))  # noqa: E731
    alone = sum(price(b, "merged") for b in blocks[1:])
    every = sum(price(b, cheaper(b)) for b in blocks)
    label = model_label("file:tinyconv:build", {"resolution": 32})
    calibration = lut.lookup(label, CALIBRATION, scope="model", strict=True)
    measured_share, predicted_share = 1 - calibration.ratio, every / reference
    rho = measured_share / predicted_share
    if abs(predicted_share) >= 0.02 and rho > 0:
        w = 1 / (calibration.ratio_se / predicted_share) ** 2  # rho's absolute standard error: the ratio's / predicted
        rho = (w * rho + 1 / PRIOR_SD ** 2) / (w + 1 / PRIOR_SD ** 2)
    else:
        rho = 1.0
    saving = rho * alone if rho <= 1 else alone + (rho - 1) * every * 2 / 3
    assert pred.total_s == pytest.approx(reference - saving, rel=1e-9)
    # the factor it does not use: the middle of 1 and the in-model factor (the whole model less stem and head over the
    # blocks alone), told apart as numbers, not by the method's three decimals (asserted above): a real run's
    # (1 + phi) / 2 (x0.91-1.11 in 35 runs) and its line (x0.82-1.44) round to the same three in a few runs of 1000
    phi = pred.in_model_factor
    assert phi is not None and pred.factor != pytest.approx((1 + phi) / 2, rel=1e-9)


def test_predict_and_plan_on_the_command_line_say_the_one_line(run):
    _, lut, _, folder = run
    path = folder / "lut.csv"
    lut.save(path)
    model = ["--model-file", TINY_FILE, "--resolution", "32"]
    planned = dsprof_here("plan", *model, "--lut", path, "--keep", "1", "--out", folder / "front.json")
    assert planned.returncode == 0, planned.stderr
    lines = [line for line in planned.stderr.splitlines() if "pieces timed inside the model" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: ") and "fewer than the 5" in lines[0]
    predicted = dsprof_here("predict", *model, "--lut", path, "--plan", folder / "front.plan.json")
    assert predicted.returncode == 0, predicted.stderr
    lines = [line for line in predicted.stderr.splitlines() if "pieces timed inside the model" in line]
    assert len(lines) == 1 and "fewer than the 5" in lines[0]
    assert "3 pieces timed in the model (fewer than 5: one line through them)" in predicted.stdout


def test_a_front_of_fewer_pieces_than_the_scales_need_times_the_model_s_other_pieces(tmp_path):
    """With spans of 2 measured, tinyconv has 5 pieces (3 blocks alone, spans 0-1 and 1-2): exactly what the in-model
    scales need. Whatever the front takes of them, the run times all 5 inside the model, and the prices use them
    without a word of fallback."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        measured = dsprof.measure(ModelRef.of(TINY_FILE, resolution=32),
                                  workloads=Workloads(("original", "merged", "linear"), ("original",), spans=2, calibrate=True),
                                  timing=FAST, out=tmp_path / "m.jsonl", progress=False).run
        lut = build_lut([measured.path])
        pred = predict_latency(ModelRef.of(TINY_FILE, resolution=32), lut, Plan("file:tinyconv:build", (1, 0, 0), {}))
    timed = [(r.name, r.variant) for r in measured.measurements
             if r.scope == IN_SITU_SCOPE and r.variant not in ("original", SESSION_AGAIN)]
    assert sorted({name for name, _ in timed}) == ["blocks.0", "blocks.0..blocks.1", "blocks.1", "blocks.1..blocks.2",
                                                   "blocks.2"]
    # beyond one piece each, at most COSTLY_PIECES lone blocks in their other form, each one that costs time alone
    alone = {(r.name, r.variant): r.median_s for r in measured.measurements if r.scope == "block" and r.ok}
    assert len(timed) - 5 <= COSTLY_PIECES and len(set(timed)) == len(timed)
    for name in {n for n, _ in timed if [m for m, _ in timed].count(n) == 2}:  # of the two, the extra costs time alone
        assert any(alone[(name, v)] > alone[(name, "original")] for n, v in timed if n == name)
    fell_back = [str(w.message) for w in said if issubclass(w.category, CalibrationFallbackWarning)]
    # whatever sign their line takes on a loaded machine, the pieces price the plan, without a word of fallback
    assert pred.method.startswith("in-model (x") and pred.method.endswith(f", {len(timed)} pieces timed in the model)")
    assert not fell_back
