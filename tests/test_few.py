"""A new context from a few measurements (`dsprof measure --few N --like LUT`, issue #29): the chosen entries are
timed for real, the rest predicted and marked, and a context that is exactly twice the other is predicted exactly twice.

Real parts: a tiny MobileNetV2 (7 blocks, 32 x 32) timed through PyTorch eager as the full context, and the few
entries timed through ONNX Runtime. The hand-checkable case takes the full LUT's own entries times 2 as the new
context's measurements. No timing asserts.
"""

import json

import pytest

from dsprof.cli import main
from dsprof.errors import UsageError
from dsprof.lut import LUT, Pricing, build_lut, model_label
from dsprof.lut.few import GROUPS, candidates, choose, few_lut
from dsprof.lut.predict import profiled_options
from dsprof.models import ModelRef, find_blocks, get_model
from dsprof.planning import plan_front
from dsprof.profiler import BackendSettings, Workloads, measure
from dsprof.workflows.few import workload_macs
from fast_timing import FAST

pytestmark = pytest.mark.usefixtures("one_thread")
NAME, OPTIONS, RESOLUTION, MAX_SPAN = "mobilenet_v2", {"depths": [1] * 7}, 32, 3
DEPTHS = ["--depths", "1,1,1,1,1,1,1", "--resolution", str(RESOLUTION)]


@pytest.fixture(scope="module")
def like(tmp_path_factory):
    """The full LUT file of the tiny model through PyTorch eager (blocks, spans of 2..3, the whole model)."""
    tmp = tmp_path_factory.mktemp("few")
    result = measure(ModelRef.of(NAME, options=OPTIONS, resolution=RESOLUTION),
                     settings=BackendSettings(backend="torch", threads=1),
                     workloads=Workloads(variants=("original", "merged", "linear"), model_variants=("original",), spans=MAX_SPAN),
                     timing=FAST, out=tmp / "torch.jsonl", progress=False)
    return build_lut([result.path]).save(tmp / "lut_torch.csv")


@pytest.fixture(scope="module")
def model():
    net = get_model(NAME, resolution=RESOLUTION, **OPTIONS)
    label = model_label(NAME, profiled_options(net, OPTIONS))
    return net, label, find_blocks(net)


def _candidates(like_lut, model):
    net, label, blocks = model
    return candidates(like_lut, like_lut.devices()[0], label, blocks, MAX_SPAN, workload_macs(net, label, MAX_SPAN))


def test_a_context_twice_the_other_is_predicted_twice(like, model):
    like_lut = LUT.load(like)
    cands = _candidates(like_lut, model)
    # every block's three variants, the spans, the whole model, stem and head: what the planner reads
    assert {c.group for c in cands} == set(GROUPS) and len(cands) > 25 and all(c.macs > 0 for c in cands)
    chosen = choose(cands, 10)
    assert chosen[0].scope == "model" and len({c.key for c in chosen}) == 10
    frame = like_lut.to_dataframe()
    keys = {c.key for c in chosen}
    twice = frame[[k in keys for k in zip(frame.scope, frame.workload, frame.variant)]].copy()
    twice["median_s"] *= 2
    twice["iqr_s"] *= 2
    twice["env_id"] = "twice0000000"
    new, fit = few_lut(like_lut, cands, LUT(twice, "twice.csv"))
    assert fit.loo_error == pytest.approx(0.0, abs=1e-9)
    (key,) = new.devices()
    assert key.env_id == "twice0000000"
    for c in cands:
        entry = new.find(c.workload, c.variant, key, scope=c.scope)
        assert entry.median_s == pytest.approx(2 * c.like.median_s, rel=1e-9), c.key
        assert entry.predicted == (c.key not in keys)
        if entry.predicted:
            assert entry.sources.startswith("predicted:") and entry.n_samples == 1
    assert new.predicted_count(key) == len(cands) - 10


def test_choose_asks_for_a_sensible_count(like, model):
    cands = _candidates(LUT.load(like), model)
    with pytest.raises(UsageError, match="at least 5"):
        choose(cands, 3)
    with pytest.raises(UsageError, match="more entries than"):
        choose(cands, len(cands) + 1)
    chosen = choose(cands, 10)
    assert {c.group for c in chosen} == set(GROUPS)  # the design spreads the entries over every group


def test_measure_few_times_the_chosen_entries_and_predicts_the_rest(like, model, tmp_path, capsys):
    out = tmp_path / "few"
    lut_path = tmp_path / "onnxruntime.lut.csv"
    assert main(["measure", "--model", NAME, *DEPTHS, "--backend", "onnxruntime", "--threads", "1", "--few", "8",
                 "--like", str(like), "--spans", str(MAX_SPAN), "--budget", "0.02", "--min-samples", "5",
                 "--out", str(out), "--few-lut-out", str(lut_path), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "timed 8 of the model's" in text and "fastest plan for each k" in text
    (records_path,) = out.glob("*.jsonl")
    records = [json.loads(line) for line in records_path.read_text().splitlines()]
    timed = [r for r in records if r["scope"] != "probe"]
    assert all(r["backend"] == "onnxruntime" and r["samples_s"] for r in timed)  # measured here, for real
    net, label, blocks = model
    keys = {(r["scope"], r["spec"] if r["scope"] == "block" else label, r["variant"]) for r in timed}
    assert len(timed) == len(keys) == 8
    new = LUT.load(lut_path)
    (key,) = new.devices()
    assert key.backend == "onnxruntime"
    cands = _candidates(LUT.load(like), model)
    rows = new.to_dataframe()
    rows = rows[rows.scope != "probe"]
    assert len(rows) == len(cands)  # every entry the planner reads, each once
    for row in rows.itertuples(index=False):
        measured = (row.scope, row.workload, row.variant) in keys
        assert row.sources.startswith("predicted:") != measured
        if measured:
            assert row.sources == records_path.name
    assert new.predicted_count(key) == len(cands) - 8
    # what it printed (`FewResult.text`, `print(dsprof.api.measure_few(...))` too): the LUT it predicted from, the count
    assert f"timed 8 of the model's {len(cands)} entries in {like}: " in text
    assert f"predicted the other {len(cands) - 8} (leave-one-out error of the fit " in text
    front = plan_front(ModelRef.of(NAME, options=OPTIONS, resolution=RESOLUTION), new,
                       pricing=Pricing(max_span=MAX_SPAN))
    assert [p.k for p in front.points] == list(range(len(blocks) + 1))


def test_few_needs_like(tmp_path, capsys):
    assert main(["measure", "--model", NAME, *DEPTHS, "--few", "8", "--out", str(tmp_path)]) == 2
    assert "--like" in capsys.readouterr().err
