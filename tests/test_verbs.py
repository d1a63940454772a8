"""Each verb takes about a dozen parameters, and every option stays reachable (issue #44, item 1).

The options travel in the objects that name them: the model in a `ModelRef`, how a LUT prices it in a `Pricing`, a
latency budget in a `LatencyBudget`, the check in a `CheckSettings`, the timing context in a `BackendSettings`, the
merge choice in a `MergeChoice`, the differentiable search's scores in a `GateSettings`, a training run's device and
checkpoint in a `TrainRun`, distillation in a `DistillSettings`. The keywords of before still work for a release, with
one `DeprecationWarning` that names the new parameter, object and field, and give what the objects give: each is
called both ways here, for real, on tests/models/tinyconv.py at 32 px (its MACs counted by hand there), measured once
with a tiny budget, its LUT then given tests/rule_lut.py's medians (so that what the planner and `predict` answer is
known in advance: the original is the rule's whole model of three blocks)."""

from __future__ import annotations

import csv
import dataclasses
import inspect
import json
import warnings
from pathlib import Path

import pytest

import dsprof
import dsprof.api
from dsprof.lut import LUT, MergeChoice, Pricing
from dsprof.planning import LatencyBudget
from dsprof.records.plan import Plan
from dsprof.profiler import BackendSettings, TimingConfig, Workloads
from dsprof.search import DistillSettings, GateSettings, ProxySettings, TrainConfig, TrainRun
from dsprof.search.finetuning import finetune
from dsprof.search.registry import search
from dsprof.workflows.check import CheckSettings
from models.tinyconv import MACS_32
from rule_lut import rule_lut, rule_median_s

QUICK = TimingConfig(warmup_s=0, warmup_max_s=0.05, first_warmup_s=0.05, min_samples=3, max_samples=4, budget_s=0.01,
                      min_sample_s=0)
TINY_FILE = str(Path(__file__).parent / "models" / "tinyconv.py") + ":build"
TINY = dsprof.ModelRef.of(TINY_FILE, resolution=32)
TRAIN = TrainConfig(epochs=1, max_batches=1, max_eval_batches=1, batch_size=16)
pytestmark = pytest.mark.usefixtures("one_thread")

#: Every verb (issue #44: "about a dozen at most", 13 the most).
VERBS = (dsprof.measure, dsprof.predict, dsprof.plan, dsprof.api.measure_few, search, finetune, dsprof.build_lut,
         dsprof.report, dsprof.importance, dsprof.export, dsprof.merge)


@pytest.fixture(scope="module")
def lut_path(tmp_path_factory) -> Path:
    """TinyConv (its model file) measured at 32 px: blocks in three variants, spans of two, the whole model; the LUT
    built and its medians rewritten by the rule."""
    folder = tmp_path_factory.mktemp("verbs")
    dsprof.measure(TINY, workloads=Workloads(("original", "merged", "linear"), ("original",), spans=2),
                   settings=BackendSettings(threads=1), timing=QUICK, out=folder / "results", progress=False)
    dsprof.build_lut([folder / "results"], folder / "lut.csv")
    rule_lut(folder / "lut.csv", [folder / "results"])
    return folder / "lut.csv"


def _said(caught) -> list[str]:
    """What the call's DeprecationWarnings said, after "is now"."""
    return [str(w.message).split(" is now ")[1].split(";")[0] for w in caught if w.category is DeprecationWarning]


@pytest.mark.parametrize("verb", VERBS, ids=lambda v: v.__name__)
def test_each_verb_takes_about_a_dozen_parameters(verb):
    named = [p for p in inspect.signature(verb).parameters.values() if p.kind is not p.VAR_KEYWORD]
    assert len(named) <= 13, [p.name for p in named]


def test_predict_takes_its_options_as_objects_and_the_keywords_of_before_warn(lut_path, tmp_path):
    lut = LUT.load(lut_path)
    key = lut.devices()[0]
    new = dsprof.predict(TINY, lut, pricing=Pricing(device_key=key, method="isolated", strict=True))
    # the original priced as the rule prices the whole model of three blocks (one call each and one for the rest)
    assert new.prediction.speedup == pytest.approx(1.0, abs=1e-12)
    assert new.prediction.latency_s == pytest.approx(rule_median_s(MACS_32, 3), rel=1e-9)
    with pytest.warns(DeprecationWarning) as caught:
        old = dsprof.predict(TINY_FILE, lut, resolution=32, device_key=str(key), method="isolated", strict=True,
                             weights=False)
    assert _said(caught) == ["dsprof.predict(model=ModelRef.of(resolution=, weights=), "
                             "pricing=Pricing(device_key=, method=, strict=))"]
    assert old.prediction.latency_s == new.prediction.latency_s
    # the check: where its records go, with what timing, as one object (`check=True`: the defaults)
    checked = dsprof.predict(TINY, lut, check=CheckSettings(tmp_path / "new", QUICK, progress=False))
    assert checked.check.path.parent == tmp_path / "new" and checked.check.paired is None  # no plan: the original
    with pytest.warns(DeprecationWarning, match=r"check=CheckSettings\(out=, timing=, progress=\)"):
        again = dsprof.predict(TINY, lut, check=True, check_out=tmp_path / "old", check_timing=QUICK, progress=False)
    assert again.check.path.parent == tmp_path / "old"
    # a LUT file changed by hand is read with LUT.load(accept_modified=True), or the keyword of before
    header, first, rest = lut_path.read_text().split("\n", 2)
    median = next(csv.DictReader([header, first]))["median_s"]
    changed = tmp_path / "changed.csv"
    changed.write_text("\n".join([header, first.replace(f",{median},", f",{float(median) * 2!r},"), rest]))
    with pytest.raises(dsprof.errors.DsprofError, match="accept_modified=True"):
        dsprof.predict(TINY, changed)
    with pytest.warns(DeprecationWarning, match=r"lut=LUT.load\(accept_modified=\)"):
        loose = dsprof.predict(TINY, changed, accept_modified=True)
    assert loose.prediction.latency_s == dsprof.predict(TINY, LUT.load(changed, accept_modified=True)
                                                        ).prediction.latency_s
    with pytest.raises(TypeError, match="'devicekey'"):
        dsprof.predict(TINY, lut, devicekey=key)


def test_prices_and_predict_latency_take_the_model_as_one_reference_and_the_keywords_of_before_warn(lut_path):
    from dsprof.lut import predict_latency
    from dsprof.lut.predict import prices_of

    lut = LUT.load(lut_path)
    new = predict_latency(TINY, lut, method="isolated", strict=True)
    # the original: the rule's whole model of three blocks (one call each and one for the rest)
    assert new.latency_s == pytest.approx(rule_median_s(MACS_32, 3), rel=1e-9)
    with pytest.warns(DeprecationWarning) as caught:
        old = predict_latency(TINY_FILE, lut, resolution=32, method="isolated", strict=True)
    assert _said(caught) == ["dsprof.lut.predict_latency(model=ModelRef.of(resolution=))"]
    assert caught[0].filename == __file__  # said where the caller wrote the keyword
    assert old.latency_s == new.latency_s
    with pytest.warns(DeprecationWarning) as caught:
        before = prices_of(TINY_FILE, lut, name="tiny", resolution=32, method="isolated")
    assert _said(caught) == ["dsprof.lut.prices_of(model=ModelRef.of(name=, resolution=))"]
    assert caught[0].filename == __file__
    now = prices_of(dsprof.ModelRef.of(TINY_FILE, name="tiny", resolution=32), lut, method="isolated")
    assert (before.label, before.model_args, len(before.blocks)) == (now.label, now.model_args, 3)
    assert before.label.startswith("tiny{") and before.total_s(before.pieces(None)) == now.total_s(now.pieces(None))
    with pytest.raises(TypeError, match="'width'"):
        prices_of(TINY, lut, width=2)


def test_a_size_given_to_the_pricing_names_the_model_at_that_size(lut_path):
    """`pricing=Pricing(resolution=)` is for a model trained at another size (a search); `plan` and `predict` price
    the model at its own, and say how to ask for the one asked for: its own call, at that size."""
    small = dsprof.ModelRef.of("mobilenet_v2", options={"width": 0.5})
    for verb, what in ((dsprof.plan, "a plan"), (dsprof.predict, "a prediction")):
        with pytest.raises(dsprof.errors.UsageError) as caught:
            verb(small, lut_path, pricing=Pricing(resolution=160))
        assert str(caught.value) == (
            "`pricing=Pricing(resolution=)` prices a model trained at another size (a search); "
            f"{what} prices the model at its own: give "
            "`model=ModelRef.of('mobilenet_v2', options={'width': 0.5}, resolution=160)`")
        with pytest.raises(dsprof.errors.UsageError, match=r"give `model=ModelRef.of\('.*tinyconv.py:build', "
                                                           r"resolution=64\)`$"):
            verb(TINY, lut_path, pricing=Pricing(resolution=64))
    # the text a Python caller is given, as the command line shows it: the model's options
    from dsprof.cli.flags import command_line_text

    assert command_line_text("give `model=ModelRef.of('mobilenet_v2', options={'width': 0.5}, resolution=160)`",
                             "plan") == "give --model mobilenet_v2 --width 0.5 --resolution 160"


def test_plan_takes_its_options_as_objects_and_the_keywords_of_before_warn(lut_path, tmp_path):
    lut = LUT.load(lut_path)
    key = lut.devices()[0]
    new = dsprof.plan(TINY, lut, budget=LatencyBudget(speedup=1.05), pricing=Pricing(key, max_span=2),
                      out=tmp_path / "new.json")
    with pytest.warns(DeprecationWarning) as caught:
        old = dsprof.plan(TINY_FILE, lut, resolution=32, speedup=1.05, max_span=2, device_key=key,
                          out=tmp_path / "old.json")
    assert _said(caught) == ["dsprof.plan(model=ModelRef.of(resolution=), budget=LatencyBudget(speedup=), "
                             "pricing=Pricing(max_span=, device_key=))"]
    assert new.front.original_s == pytest.approx(rule_median_s(MACS_32, 3), rel=1e-9)
    assert new.chosen.speedup >= 1.05  # the budget: the plan reaches the speed-up asked for
    assert (old.chosen.k, old.chosen.plan.keep, old.chosen.plan.spans) == (new.chosen.k, new.chosen.plan.keep,
                                                                           new.chosen.plan.spans)
    assert max((b - a for a, b in new.chosen.plan.spans), default=1) <= 2  # spans of two blocks at most
    with pytest.warns(DeprecationWarning, match=r"is now dsprof.plan\(joint=Joint\(objective=\)\)"):
        one = dsprof.plan(TINY, lut, keep=new.chosen.k, objective="mean", pricing=Pricing(max_span=2))  # one context
    assert one.chosen.plan.keep == new.chosen.plan.keep
    with pytest.raises(dsprof.errors.UsageError, match=r"budget=LatencyBudget\(speedup=\)"):
        LatencyBudget(speedup=0)  # refused where it is given, before any LUT is read


def test_measure_few_takes_its_options_as_objects_and_the_keywords_of_before_warn(lut_path, tmp_path):
    with warnings.catch_warnings(record=True) as unplanned:
        warnings.simplefilter("always")
        new = dsprof.api.measure_few(TINY, lut_path, 5, pricing=Pricing(max_span=2),
                                     settings=BackendSettings(threads=1), timing=QUICK, out=tmp_path / "new.jsonl",
                                     progress=False)
    # five entries timed for 10 ms each can make the new context's LUT contradict itself: then no front, said in one
    # line naming the LUT, which is kept
    assert new.lut_path.is_file()
    if new.front is None:
        said = [str(w.message) for w in unplanned if "no front planned" in str(w.message)]
        assert len(said) == 1 and said[0].startswith(f"{new.lut_path}: no front planned from it: the LUT's entries")
    else:
        assert len(new.front.points) >= 1
    with pytest.warns(DeprecationWarning) as caught:
        old = dsprof.api.measure_few(TINY_FILE, lut_path, 5, resolution=32, max_span=2, threads=1, timing=QUICK,
                                     out=tmp_path / "old.jsonl", progress=False)
    assert _said(caught) == ["dsprof.measure_few(model=ModelRef.of(resolution=), pricing=Pricing(max_span=), "
                             "settings=BackendSettings(threads=))"]
    assert old.chosen == new.chosen and len(new.chosen) == 5  # the same entries chosen, five of them
    assert {r.threads for r in new.run.measurements} == {r.threads for r in old.run.measurements} == {1}


def test_search_takes_its_options_as_objects_and_the_keywords_of_before_warn(lut_path, tmp_path):
    lut = LUT.load(lut_path)
    new = search(TINY, keep=1, method="planner", lut=lut, pricing=Pricing(max_span=2), out=tmp_path / "new.json")
    with pytest.warns(DeprecationWarning) as caught:
        old = search(TINY_FILE, keep=1, method="planner", lut=lut, resolution=32, max_span=2, device="cpu",
                     out=tmp_path / "old.json")
    assert _said(caught) == ["dsprof.search.search(model=ModelRef.of(resolution=), pricing=Pricing(max_span=), "
                             "run=TrainRun(device=))"]
    planned = dsprof.plan(TINY, lut, keep=1, pricing=Pricing(max_span=2))
    assert new.plan.keep == old.plan.keep == planned.chosen.plan.keep  # the planner's plan, however it was asked
    assert new.plan.spans == old.plan.spans == planned.chosen.plan.spans
    # the importance search's proxy settings: the method's `settings` (a ProxySettings), once `proxy_settings`
    few = ProxySettings(batches=1, eval_batches=1, batch_size=16)
    scored = search(TINY, keep=1, proxy="zero-shot", settings=few, run=TrainRun("cpu"), out=tmp_path / "s.json")
    with pytest.warns(DeprecationWarning, match=r"is now dsprof.search.search\(settings=\)"):
        before = search(TINY, keep=1, proxy="zero-shot", proxy_settings=few, run=TrainRun("cpu"),
                        out=tmp_path / "b.json")
    assert scored.scores == before.scores and len(scored.scores) == 3  # one score per block, the same draws
    with pytest.warns(DeprecationWarning, match=r"settings=GateSettings\(lam=, score_bound=\)"):
        with pytest.raises(dsprof.errors.UsageError, match="resume"):  # read, then refused before any training
            search(TINY, keep=1, method="random", lam=0.1, score_bound=1.0, resume=True, out=tmp_path / "r.json")
    assert GateSettings(lam=0.1, score_bound=1.0) == GateSettings(0.1, 0.01, 1.0, False, 1.0, 0.0)


def test_a_search_trains_one_reference_however_the_model_is_named(tmp_path):
    """`training_model` resolves the model once, into the reference a search trains (at the training size: 32 px on
    digits, else its own) and the weights it starts from, beside it: a registered model by the registered name its
    plans record, a module as it is. A model file named by its path alone is its registered name, as with a size."""
    from dsprof.search.build import training_model
    from models.tinyconv import build

    ref, weights = training_model(TINY_FILE, "digits")
    assert (ref.entry, ref.name, ref.resolution, ref.options, weights) == ("file:tinyconv:build",) * 2 + (32, {}, None)
    checkpoint = tmp_path / "start.pt"
    named = dsprof.ModelRef.of(TINY_FILE, name="mine", resolution=16, weights=checkpoint)
    ref, weights = training_model(named, "digits")
    assert (ref.name, ref.resolution, ref.weights, weights) == ("file:tinyconv:build", 16, False, checkpoint)
    assert training_model(named, "digits", weights=True)[1] is True  # the weights given here win
    module = build()
    ref, weights = training_model(module, "digits", weights=checkpoint)
    assert (ref.module is module, ref.resolution, weights) == (True, 32, checkpoint)
    plans = [search(model, keep=1, method="random").plan for model in (TINY_FILE, TINY)]
    assert plans[0] == plans[1] and plans[0].model == "file:tinyconv:build" and sum(plans[0].keep) == 1


def test_finetune_takes_its_options_as_objects_and_the_keywords_of_before_warn(tmp_path):
    plan = Plan(TINY.name, (1, 0, 1))  # block 1 linearised: merged where that lowers its MACs
    new = finetune(plan, model=TINY, config=TRAIN, distill=DistillSettings(alpha=0.3),
                   run=TrainRun("cpu", tmp_path / "new.pt"), merge=MergeChoice(merge_by="macs"))
    with pytest.warns(DeprecationWarning) as caught:
        old = finetune(plan, model=TINY_FILE, resolution=32, config=TRAIN, distill=True, distill_alpha=0.3,
                       device="cpu", out=tmp_path / "old.pt", merge_by="macs")
    assert _said(caught) == ["dsprof.search.finetune(model=ModelRef.of(resolution=), distill=DistillSettings(alpha=), "
                             "run=TrainRun(device=, checkpoint=), merge=MergeChoice(merge_by=))"]
    assert (tmp_path / "new.pt").is_file() and (tmp_path / "old.pt").is_file()  # the checkpoint, where asked
    assert old.accuracy == new.accuracy  # the same seeded run, asked either way
    assert new.merged_max_abs_diff < 1e-4 and old.merged_max_abs_diff < 1e-4  # and merged exactly
    with pytest.raises(dsprof.errors.UsageError, match=r"run=TrainRun\(checkpoint=\)"):
        finetune(plan, model=TINY, config=TRAIN, run=TrainRun("cpu", weights_out=tmp_path / "w.pt"))


def test_measure_takes_merged_models_among_its_plans_and_calibration_as_a_workload(tmp_path):
    """`calibrate=` is `Workloads(calibrate=True)` and `merged_models=` entries of `plans=` (issue #44): the keywords of
    before still work, with one warning naming where each went."""
    from dsprof.records.measurement import CALIBRATION

    plan = Plan(TINY.name, (0, 0, 0), dict(TINY.options), merge=(True, True, True), name="all")
    merged = dsprof.merge(TINY, plan, out=tmp_path / "all.pt")
    what = Workloads(("original", "merged", "linear"), ("original",), calibrate=True)
    new = dsprof.measure(TINY, workloads=what, plans=[merged.out], timing=QUICK, out=tmp_path / "new.jsonl",
                         progress=False).run
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = dsprof.measure(TINY, workloads=Workloads(("original", "merged", "linear"), ("original",)),
                             merged_models=[merged.out], calibrate=True, timing=QUICK, out=tmp_path / "old.jsonl",
                             progress=False).run
    assert _said(caught) == ["dsprof.measure(plans=, workloads=Workloads(calibrate=))"]
    for run in (new, old):
        models = {r.name for r in run.measurements if r.scope == "model"}
        assert "all" in models  # the merged model, named after its file
        assert any(r.variant == CALIBRATION for r in run.measurements)


def test_merge_export_and_importance_take_the_model_as_one_reference_and_the_keywords_of_before_warn(tmp_path):
    """The model is one ``model`` on every verb (a `ModelRef` with its options, resolution and weights); the
    keywords of before warn once and name ``model=ModelRef.of(...)``, and build the same model."""
    plan = Plan(TINY.name, (1, 0, 1))  # block 1 linearised: one 3x3 stride-2 convolution 8 -> 16 at 8x8 once merged
    new = dsprof.merge(TINY, plan, merge=MergeChoice.macs())
    with pytest.warns(DeprecationWarning) as caught:
        old = dsprof.merge(TINY_FILE, plan, resolution=32, merge_by="macs")
    assert _said(caught) == ["dsprof.merge(model=ModelRef.of(resolution=), merge=MergeChoice(merge_by=))"]
    # block 1's 116 736 MACs (tests/models/tinyconv.py) become 8*8 * 8*16*9 = 73 728 when merged: MACs drop, so merged
    merged_macs = MACS_32 - 116_736 + 8 * 8 * 8 * 16 * 9
    assert dsprof.count_macs(new.model, (32, 32)) == dsprof.count_macs(old.model, (32, 32)) == merged_macs

    bundle = dsprof.export(TINY, workloads=Workloads(("original",), ("original",)), out=tmp_path / "new")[0]
    with pytest.warns(DeprecationWarning) as caught:
        loose = dsprof.export(TINY_FILE, resolution=32, workloads=Workloads(("original",), ("original",)),
                              out=tmp_path / "old")[0]
    assert _said(caught) == ["dsprof.export(model=ModelRef.of(resolution=))"]
    assert bundle.manifest["model_options"]["resolution"] == loose.manifest["model_options"]["resolution"] == 32
    assert bundle.workloads == loose.workloads == 3 + 3  # three blocks; the whole model, its stem and its head
    whole = [w["macs"] for w in loose.manifest["workloads"] if w["scope"] == "model"]
    assert whole == [w["macs"] for w in bundle.manifest["workloads"] if w["scope"] == "model"] == [MACS_32]  # at 32 px

    # importance at the ModelRef's own resolution (16 px here, not the 32 px the digits default to)
    at16 = dsprof.ModelRef.of(TINY_FILE, resolution=16)
    scored = dsprof.importance(at16, config=TRAIN, device="cpu")
    with pytest.warns(DeprecationWarning) as caught:
        before = dsprof.importance(TINY_FILE, resolution=16, config=TRAIN, device="cpu")
    assert _said(caught) == ["dsprof.importance(model=ModelRef.of(resolution=))"]
    assert scored.record["data"]["resolution"] == before.record["data"]["resolution"] == 16
    assert scored.scores.scores == before.scores.scores and len(scored.scores.scores) == 3  # the same seeded draws


def test_export_bundle_takes_the_model_as_one_reference_and_the_keywords_of_before_warn(tmp_path):
    """`dsprof.edge.export_bundle` takes ``model`` as every engine does (issue #44); ``name=``, ``model_options=`` and
    ``resolution=`` beside it warn once, at the caller, and write the same bundle."""
    from dsprof.edge import export_bundle

    mine = dsprof.ModelRef.of(TINY_FILE, name="tiny", resolution=32)
    new = export_bundle(mine, blocks=None, out=tmp_path / "new")
    with pytest.warns(DeprecationWarning) as caught:
        old = export_bundle(TINY_FILE, name="tiny", model_options={}, resolution=32, blocks=None, out=tmp_path / "old")
    assert _said(caught) == ["dsprof.edge.export_bundle(model=ModelRef.of(name=, options=, resolution=))"]
    assert caught[0].filename == __file__  # said where the caller wrote the keyword
    for bundle in (new, old):  # the whole model, its stem and its head, at 32 px, named as the reference names it
        assert (bundle.manifest["model"], bundle.manifest["model_options"]) == ("tiny", {"resolution": 32})
        assert [(w["name"], w["variant"]) for w in bundle.manifest["workloads"]][0] == ("tiny", "original")
        assert bundle.manifest["workloads"][0]["macs"] == MACS_32
    assert [w["macs"] for w in new.manifest["workloads"]] == [w["macs"] for w in old.manifest["workloads"]]


def test_plan_refuses_an_out_whose_table_would_overwrite_the_lut_it_reads(lut_path, tmp_path):
    """`out="x.json"` writes the front's table to x.csv: where that is the LUT read (its file, or a LUT loaded from
    it), one line, and the LUT is left as it was (a new user's LUT named x.csv was overwritten before)."""
    lut_file = tmp_path / "x.csv"
    lut_file.write_bytes(lut_path.read_bytes())
    for given in (lut_file, LUT.load(lut_file)):
        with pytest.raises(dsprof.errors.UsageError, match=r"x.csv over the LUT it plans from: choose another `out=`"):
            dsprof.plan(TINY, given, keep=1, out=tmp_path / "x.json")
    assert lut_file.read_bytes() == lut_path.read_bytes() and not (tmp_path / "x.json").exists()
    assert dsprof.plan(TINY, lut_file, keep=1, out=tmp_path / "y.json").plan_path == tmp_path / "y.plan.json"


def test_timing_none_is_the_default_timing_not_an_attribute_error(tmp_path):
    """`dsprof.measure(timing=None)` read ``None.budget_s`` deep in the run; None is the defaults, as for every
    other optional object of the verbs. The record carries the default budget, 1 s per workload (`TimingConfig()`)."""
    from dsprof.models import ModelRef

    run = dsprof.measure(ModelRef.of("mobilenet_v2", options={"depths": [1] * 7}, resolution=32),
                         workloads=Workloads((), ("original",), blocks=None), timing=None,
                         out=tmp_path / "m.jsonl", progress=False).run
    timed = [r for r in run.measurements if r.scope == "model"]
    assert len(timed) == 1 and timed[0].ok and timed[0].budget_s == 1.0


def test_every_door_takes_one_path_or_several_and_none_for_the_default_timing(lut_path, tmp_path):
    """Found by reading each verb's docstring and calling it with each form it names (this session's API audit):
    `build_lut` of a generator read it empty in its check and found no files; `measure(plans=)`, `export(plans=)` and
    `report(plans=)` took one plan file only in a list (a Path: TypeError; a str: read one character at a time);
    `export(timing=None)` failed where `measure(timing=None)` takes the defaults; a preset named by a Path was "no
    preset ... presets: ..., mbv2-ds-a"."""
    records = lut_path.parent / "results"
    assert len(dsprof.build_lut(p for p in [records])) == len(dsprof.build_lut([records])) == len(LUT.load(lut_path))

    plan = Plan(TINY.name, (1, 0, 1), merge=(False, True, False), name="one")
    plan_file = tmp_path / "one.plan.json"
    plan_file.write_text(plan.to_json())
    for i, one in enumerate((plan_file, str(plan_file))):
        run = dsprof.measure(TINY, workloads=Workloads((), ("original",)), plans=one, timing=QUICK,
                             settings=BackendSettings(threads=1), out=tmp_path / f"m{i}.jsonl", progress=False)
        assert set(run.checks) == {"one"}
    bundle = dsprof.export(TINY, plans=plan_file, timing=None, out=tmp_path / "bundle")
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert manifest["timing"] == dataclasses.asdict(TimingConfig()) and bundle[0].workloads >= 2
    report = dsprof.report([tmp_path / "m0.jsonl"], tmp_path / "report", plans=str(plan_file))
    assert "one" in report.index.read_text()

    assert Plan.coerce(Path("mbv2-ds-a")) == Plan.coerce("mbv2-ds-a")  # no file of that name here: the preset


def test_a_search_at_another_size_than_its_lut_is_told_the_pricing_that_prices_it_there(lut_path, tmp_path):
    """A search trains at its model's size and prices at the LUT's with `pricing=Pricing(resolution=)`; the refusal
    said "pass `model=ModelRef.of(..., resolution=32)`" instead, which would train at 32 px (its rewrite looked for a
    model given by its name alone)."""
    from dsprof.lut import LUTMissError

    with pytest.raises(LUTMissError) as refused:
        search(dsprof.ModelRef.of(TINY_FILE, resolution=64), keep=1, method="planner", lut=lut_path,
               out=tmp_path / "s.json")
    assert "at 32 px, not at 64 px: pass `pricing=Pricing(resolution=32)`; or measure" in str(refused.value)
