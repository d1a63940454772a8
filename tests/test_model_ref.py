"""One model reference through every door (issue #44): a module passed as an object is taken where a name is, by
every API verb, and gives the answers a registered model gives.

The module is tests/models/tinyconv.py's `TinyConv` (three inverted-residual blocks; its blocks and MACs read by hand
in that file), at 32 px, with random BatchNorm statistics. It is measured for real with a tiny budget, once; the LUT
then gets tests/rule_lut.py's medians, so that what the planner, `predict` and the report do with it is known in
advance and holds on a busy machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

import dsprof
from dsprof.errors import UsageError
from dsprof.lut import MergeChoice, Pricing
from dsprof.merging import linearize_model
from dsprof.models import ModelRef, find_blocks, input_size_of, named_model
from dsprof.records.plan import Plan, load_plan
from dsprof.profiler import TimingConfig, Workloads
from models.tinyconv import BLOCK_MACS_32, MACS_32, TinyConv
from rule_lut import rule_lut, rule_median_s

QUICK = TimingConfig(warmup_s=0, warmup_max_s=0.05, first_warmup_s=0.05, min_samples=3, max_samples=4, budget_s=0.01,
                      min_sample_s=0)
SPANS = Workloads(variants=("original", "merged", "linear"), model_variants=("original",), spans=2)
TINY_FILE = str(Path(__file__).parent / "models" / "tinyconv.py") + ":build"
pytestmark = pytest.mark.usefixtures("one_thread")


def tiny(seed: int = 0) -> TinyConv:
    """A TinyConv with random weights and random BatchNorm statistics (default statistics hide bias bugs)."""
    torch.manual_seed(seed)
    net = TinyConv()
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.5, 0.5)
    return net.eval()


def state(net: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in net.state_dict().items()}


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """TinyConv measured at 32 px (blocks in three variants, spans of two, the whole model), the rule LUT, the
    front planned at k = 1, and the plan file written: what every door below reads."""
    folder = tmp_path_factory.mktemp("doors")
    net = tiny()
    run = dsprof.measure(ModelRef.of(net, resolution=32), workloads=SPANS, timing=QUICK, out=folder / "results",
                         progress=False)
    dsprof.build_lut([folder / "results"], folder / "lut.csv")
    lut = rule_lut(folder / "lut.csv", [folder / "results"])
    planned = dsprof.plan(ModelRef.of(net, resolution=32), lut, keep=1, pricing=Pricing(max_span=2),
                          out=folder / "front.json")
    return folder, net, run, lut, planned


def test_a_model_reference_is_resolved_once_from_every_form():
    ref = ModelRef.of("mobilenet_v2", options={"depths": [1] * 7}, resolution=32)
    assert (ref.name, ref.entry, ref.input_size, ref.is_module) == ("mobilenet_v2", "mobilenet_v2", (32, 32), False)
    assert len(find_blocks(ref.build())) == 7  # one block per stage
    assert ref.replay() == {"model": "mobilenet_v2", "options": {"depths": [1] * 7}, "resolution": 32}
    assert ModelRef.of(ref) is ref and ModelRef.of(ref, resolution=64).input_size == (64, 64)

    from_file = ModelRef.of(TINY_FILE, resolution=32)
    assert (from_file.name, from_file.file) == ("file:tinyconv:build", TINY_FILE)
    assert [b.name for b in find_blocks(from_file.build())] == ["blocks.0", "blocks.1", "blocks.2"]

    net = tiny()
    module = ModelRef.of(net, resolution=32)
    assert (module.name, module.entry, module.is_module, module.input_size) == ("TinyConv", None, True, (32, 32))
    built = module.build()  # traced at the size given, not at 224, and the caller's module left as it was
    assert input_size_of(built) == (32, 32) and input_size_of(net) == (224, 224) and not hasattr(net, "dsprof_input_size")
    assert built.stem[0].weight is net.stem[0].weight and module.module is net  # its weights, not a copy of them
    assert ModelRef.of(net, name="mine").name == "mine" and str(ModelRef.of(net, name="mine")) == "mine"
    assert ModelRef.of("mine").build() is net  # the name finds the module it was given to, in this process
    assert named_model(net) == ("mine", net)  # the name it was last given
    with pytest.raises(UsageError, match="load them into the module"):
        ModelRef.of(net, weights="w.pt")


def test_a_reference_built_once_carries_its_name_options_and_size_and_names_its_own_call():
    ref = ModelRef.of("mobilenet_v2", options={"depths": [1] * 7}, resolution=32)
    built = ref.built()  # what an engine priced in several LUT contexts takes: the module built here, once
    assert (built.name, built.options, built.input_size, built.is_module) == (
        "mobilenet_v2", {"depths": [1] * 7}, (32, 32), True)
    assert built.built() is built and built.build() is built.module
    assert len(find_blocks(built.module)) == 7  # one block per stage: the depths given
    # the API argument that builds it again, as a message names it (`model_args`), at its size or at another
    call = "model=ModelRef.of('mobilenet_v2', options={'depths': [1, 1, 1, 1, 1, 1, 1]}, resolution=%d)"
    assert ref.argument() == built.argument() == call % 32 and ref.argument(160) == call % 160
    assert ModelRef.of("resnet18").argument() == "model='resnet18'"  # its own size: nothing more to say
    assert ModelRef.of(tiny(), name="tiny-b").argument(64) == "model=ModelRef.of('tiny-b', resolution=64)"


def test_a_plan_names_a_module_without_the_registry_and_replays_on_it():
    other = tiny(2)
    assert Plan(model=ModelRef.of(other, name="tiny-a"), keep=(1, 0, 0)).model == "tiny-a"
    net = tiny(1)
    plan = Plan(model=net, keep=(1, 0, 0))
    assert plan.model == "TinyConv" and Plan.from_json(plan.to_json()) == plan
    with pytest.raises(dsprof.errors.PlanError, match="is for model 'TinyConv', not 'tiny-a'"):
        dsprof.merge(ModelRef.of(other, resolution=32), plan, merge=MergeChoice.macs())  # another module's plan
    merged = dsprof.merge(ModelRef.of(net, resolution=32), plan, merge=MergeChoice.macs())
    assert merged.report.plan.model == "TinyConv" and merged.merges.plan.merge is not None
    with pytest.warns(DeprecationWarning, match="merge\\(model=\\)"):  # the parameter's old name, for a release
        renamed = dsprof.merge(model_name=ModelRef.of(net, resolution=32), plan=plan, merge=MergeChoice.macs())
    assert renamed.merges.plan == merged.merges.plan
    x = torch.randn(3, 3, 32, 32)
    reference = linearize_model(net, merged.merges.plan)
    torch.testing.assert_close(merged.model(x), reference(x), rtol=1e-4, atol=1e-4)  # the exact merge


def test_merge_takes_one_merge_choice_and_the_loose_keywords_of_before_warn():
    # dsprof.merge takes what decides the merges as one object, as dsprof.measure does (issue #44); its signature
    # stays about a dozen parameters, and the keywords of before still work for a release, with a warning
    import inspect

    assert len(inspect.signature(dsprof.merge).parameters) <= 13
    net = tiny(1)
    plan = Plan(model=net, keep=(1, 0, 0))
    chosen = dsprof.merge(ModelRef.of(net, resolution=32), plan, merge=MergeChoice.macs())
    with pytest.warns(DeprecationWarning, match=r"dsprof\.merge\(merge_by=, resolution=\) is now dsprof\.merge\("
                      r"merge=MergeChoice\(merge_by=\), model=ModelRef.of\(resolution=\)\)"):
        loose = dsprof.merge(net, plan, merge_by="macs", resolution=32)
    assert chosen.merges.by == loose.merges.by == "macs" and loose.merges.plan == chosen.merges.plan
    assert len(chosen.merges.plan.merge) == 3 and not chosen.merges.plan.merge[0]  # block 0 keeps its activations
    with pytest.raises(TypeError, match="unexpected keyword argument 'lutt'"):
        dsprof.merge(net, plan, lutt="lut.csv")


def test_measure_plan_predict_merge_and_report_take_the_module(measured, tmp_path):
    folder, net, run, lut, planned = measured
    records = run.run.measurements
    assert {r.model for r in records if r.scope != "probe"} == {"TinyConv"}
    assert [r.name for r in records if r.scope == "block" and r.variant == "original"] == ["blocks.0", "blocks.1",
                                                                                           "blocks.2"]
    assert [r.macs for r in records if r.scope == "block" and r.variant == "original"] == list(BLOCK_MACS_32)
    whole = next(r for r in records if r.scope == "model")
    assert whole.model_options["resolution"] == 32 and whole.macs == MACS_32  # counted by hand in tinyconv.py

    # the planner: its front names the module; the original it prices is the rule's whole model (3 blocks)
    assert planned.front.name == "TinyConv" and planned.chosen.k == 1
    assert planned.front.original_s == pytest.approx(rule_median_s(MACS_32, 3), rel=1e-9)
    plan = load_plan(planned.plan_path)
    assert plan.model == "TinyConv" and sum(plan.keep) == 1 and len(plan.keep) == 3

    # predict prices the plan as the planner did (one latency model), for the module as for its plan file
    found = dsprof.predict(ModelRef.of(net, resolution=32), lut, planned.plan_path)
    assert found.prediction.speedup == pytest.approx(planned.front.original_s / planned.chosen.latency_s, rel=1e-9)

    before = state(net)
    merged = dsprof.merge(ModelRef.of(net, resolution=32), planned.plan_path, out=tmp_path / "merged.pt")
    again = dsprof.merge(None, planned.plan_path)  # the plan's model: the module it names, found by its name
    x = torch.randn(2, 3, 32, 32)
    reference = linearize_model(net, merged.merges.plan)
    torch.testing.assert_close(merged.model(x), reference(x), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(again.model(x), merged.model(x), rtol=0, atol=0)
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())  # the module passed is not changed

    # the plan's merged model timed beside the module, then the report with the LUT's validation of it
    checked = dsprof.measure(ModelRef.of(net, resolution=32), workloads=Workloads((), ("original",)),
                             plans=[planned.plan_path], merge=MergeChoice(lut), timing=QUICK, out=tmp_path / "results",
                             progress=False)
    assert list(checked.checks) == [plan.name] and checked.checks[plan.name] is not None
    pages = dsprof.report([tmp_path / "results"], tmp_path / "report", lut=lut, plans=[planned.plan_path])
    validation = (tmp_path / "report" / "tables" / "lut_validation.csv").read_text()
    assert plan.name in validation and not any("memory plot" in s for s in pages.skipped)


def test_the_command_line_and_a_model_file_plan_the_module_alike(measured, tmp_path, monkeypatch, capsys):
    """The same architecture through the other door -- its model file on the command line -- is measured, tabled and
    planned into the same plan (the LUTs' rule medians hang on MACs alone, the same for both)."""
    from dsprof.cli import main

    _, _, _, _, planned = measured
    monkeypatch.chdir(tmp_path)
    fast = ["--threads", "1", "--warmup", "0", "--max-warmup", "0.05", "--min-samples", "3", "--max-samples", "4", "--budget", "0.01",
            "--min-sample-time", "0", "--no-progress"]
    model = ["--model-file", TINY_FILE, "--resolution", "32"]
    assert main(["measure", *model, "--variants", "original,merged,linear", "--model-variants", "original",
                 "--spans", "2", *fast, "--out", "results"]) == 0
    assert main(["build-lut", "results", "-o", "lut.csv"]) == 0
    rule_lut("lut.csv", ["results"])
    assert main(["plan", *model, "--lut", "lut.csv", "--keep", "1", "--max-span", "2", "--out", "front.json"]) == 0
    capsys.readouterr()
    by_file, by_module = load_plan("front.plan.json"), load_plan(planned.plan_path)
    assert by_file.model == "file:tinyconv:build" and by_module.model == "TinyConv"
    assert (by_file.keep, by_file.merge, by_file.spans) == (by_module.keep, by_module.merge, by_module.spans)
    front = json.loads(Path("front.json").read_text())
    assert front["original_s"] == pytest.approx(planned.front.original_s, rel=1e-12)


def test_training_and_explaining_take_the_module(measured, tmp_path):
    _, net, _, lut, planned = measured
    from dsprof.profiler.explain import explain_block
    from dsprof.search import ProxySettings
    from dsprof.search.finetuning import finetune
    from dsprof.search.registry import search
    from dsprof.search.settings import TrainConfig, TrainRun

    before = state(net)
    settings = ProxySettings(batches=2, eval_batches=2, batch_size=16)
    scored = dsprof.importance(net, proxy="zero-shot", data="digits", settings=settings, device="cpu",
                               out=tmp_path / "importance.json")
    record = json.loads((tmp_path / "importance.json").read_text())
    assert record["model"]["name"] == "TinyConv" and len(record["importance"]) == 3 == len(scored.scores.scores)

    config = TrainConfig(epochs=1, max_batches=2, max_eval_batches=1, batch_size=16)
    found = search(net, keep=1, method="random", config=config, run=TrainRun(device="cpu"),
                   out=tmp_path / "random.json")
    assert found.plan.model == "TinyConv" and sum(found.plan.keep) == 1 and len(found.plan.keep) == 3
    chosen = search(net, keep=1, method="planner", lut=lut, pricing=Pricing(max_span=2), config=config,
                    out=tmp_path / "planner.json")
    front_plan = load_plan(planned.plan_path)  # the planner's search and dsprof.plan: one plan for the module
    assert (chosen.plan.keep, chosen.plan.merge, chosen.plan.spans) == (front_plan.keep, front_plan.merge,
                                                                        front_plan.spans)
    tuned = finetune(planned.plan_path, model=net, config=config,
                     run=TrainRun(device="cpu", checkpoint=tmp_path / "ft.pt"))
    assert tuned.merged_max_abs_diff < 1e-4  # the fine-tuned model, merged exactly
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())  # trained on a copy

    explained = explain_block(ModelRef.of(net, resolution=32), "blocks.1", timing=TimingConfig(budget_s=0.02), profile_calls=2)
    assert explained.model == "TinyConv" and explained.spec.startswith("inverted_residual") and explained.block_s > 0


def test_export_takes_the_module(measured, tmp_path):
    _, net, run, _, _ = measured
    result, merges = dsprof.export(ModelRef.of(net, resolution=32), workloads=SPANS, out=tmp_path / "bundle")
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    timed = [r for r in run.run.measurements if r.scope != "probe"]  # a bundle does not time the drift probe
    assert merges == () and len(manifest["workloads"]) == len(timed)


def test_the_timing_context_is_one_object(tmp_path):
    """`dsprof.measure` takes where and how it times as one `BackendSettings` (or a LUT's `DeviceContext`), and what
    it times as one `Workloads`; the separate keywords of before still work, with a DeprecationWarning, and time the
    same workloads in the same context."""
    from dsprof.profiler import BackendSettings

    mlp = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 4))
    quiet = dict(workloads=Workloads((), ("original",)), timing=QUICK, progress=False)
    small = ModelRef.of(mlp, resolution=8)
    run = dsprof.measure(small, settings=BackendSettings("torch", threads=1), out=tmp_path / "a.jsonl", **quiet).run
    (whole,) = [r for r in run.measurements if r.scope == "model"]
    assert (whole.backend, whole.threads, whole.batch) == ("torch", 1, 1)
    again = dsprof.measure(small, settings=whole.context, out=tmp_path / "b.jsonl", **quiet).run  # a LUT key's context
    assert {r.context for r in again.measurements if r.scope == "model"} == {whole.context}
    quiet.pop("workloads")
    with pytest.warns(DeprecationWarning) as said:  # one warning, naming each keyword's parameter and field now
        old = dsprof.measure(mlp, resolution=8, backend="torch", threads=1, variants=(), model_variants=("original",),
                             out=tmp_path / "c.jsonl", **quiet).run
    assert [str(w.message) for w in said if w.category is DeprecationWarning] == [
        "dsprof.measure(resolution=, backend=, threads=, variants=, model_variants=) is now dsprof.measure("
        "model=ModelRef.of(resolution=), settings=BackendSettings(backend=, threads=), "
        "workloads=Workloads(variants=, model_variants=)); the keywords of before go in dsprof 0.2"]
    with pytest.warns(DeprecationWarning, match=r"export\(resolution=, merge_by=\) is now dsprof.export\("
                      r"model=ModelRef.of\(resolution=\), merge=MergeChoice\(merge_by=\)\)"):
        dsprof.export(mlp, resolution=8, merge_by="macs", model_variants=("original",), variants=(),
                      out=tmp_path / "bundle-old")
    assert [(r.scope, r.context) for r in old.measurements if r.scope != "probe"] == [("model", whole.context)]
    with pytest.raises(TypeError, match="'thread'"):
        dsprof.measure(mlp, thread=1, out=tmp_path / "d.jsonl", **quiet)
    from dsprof.edge import RemoteHost
    from dsprof.workflows.measure import remote_host

    with pytest.warns(DeprecationWarning, match=r"ssh=, remote_dir=\) is now dsprof.measure\(remote=RemoteHost"):
        host = remote_host("me@edge", {"ssh": ["ssh", "-p", "2222"], "remote_dir": "b"})
    assert host == RemoteHost("me@edge", ("ssh", "-p", "2222"), "python3", "b")
    with pytest.raises(dsprof.errors.UsageError, match="fp32"):  # refused before anything is built or reached
        dsprof.measure(mlp, remote=host, settings=BackendSettings(dtype="fp16"), out=tmp_path / "e", **quiet)
    with pytest.raises(dsprof.errors.UsageError, match="workloads.in_situ"):
        dsprof.export(ModelRef.of(mlp, resolution=8), workloads=Workloads(in_situ=("merged",)), out=tmp_path / "bundle")


def test_an_mlp_object_is_measured_at_the_resolution_given(tmp_path):
    mlp = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 64), nn.ReLU(), nn.Linear(64, 10))
    with pytest.warns(UserWarning):  # no blocks: said, and the whole model timed
        run = dsprof.measure(ModelRef.of(mlp, resolution=32), timing=QUICK, out=tmp_path / "mlp.jsonl", progress=False)
    (whole,) = [r for r in run.run.measurements if r.scope == "model"]
    assert whole.model == "Sequential" and whole.model_options["resolution"] == 32
    assert whole.macs == 3 * 32 * 32 * 64 + 64 * 10  # the two Linear layers at 32 px, by hand


def test_a_module_given_a_resolution_keeps_its_own_for_the_next_call(measured, tmp_path):
    """`ModelRef.of(module, resolution=32)` traces, times and prices at 32 px without touching the caller's module
    (issue #44): the module passed again with no resolution is at its own size, 224 px (the size `input_size_of`
    gives a module dsprof did not build, torchvision's own for MobileNetV2) -- timed there, and refused by a LUT that
    holds it at 32 px only. The fixture's TinyConv was measured, planned, predicted and merged at 32 px before."""
    from torchvision.models import MobileNetV2

    net = MobileNetV2(num_classes=10, width_mult=0.25, inverted_residual_setting=[[1, 16, 1, 1], [6, 24, 1, 2]]).eval()
    own = set(vars(net))
    sizes = []
    for i, model in enumerate((ModelRef.of(net, resolution=32), net, ModelRef.of(net, resolution=64))):
        run = dsprof.measure(model, workloads=Workloads((), ("original",)), timing=QUICK, out=tmp_path / f"r{i}",
                             progress=False)
        (whole,) = [r for r in run.run.measurements if r.scope == "model"]
        sizes.append(whole.model_options["resolution"])
        assert set(vars(net)) - {"dsprof_model"} == own and net.training is False  # its name only, as documented
    assert sizes == [32, 224, 64] and not hasattr(net, "dsprof_input_size") and input_size_of(net) == (224, 224)
    at_32 = ModelRef.of(net, resolution=32)  # priced at another size (as `finetune` prices at `lut_resolution`) ...
    assert input_size_of(ModelRef.of(at_32, resolution=64).build()) == (64, 64)
    assert input_size_of(at_32.build()) == (32, 32)  # ... it stays at its own: nothing to set back
    assert ModelRef.of(at_32.build()).input_size == (32, 32) and ModelRef.of(at_32.build()).module is net  # its view

    _, tiny_net, _, lut, planned = measured
    assert not hasattr(tiny_net, "dsprof_input_size") and input_size_of(tiny_net) == (224, 224)
    at_32 = dsprof.plan(ModelRef.of(tiny_net, resolution=32), lut, keep=1, pricing=Pricing(max_span=2),
                        out=tmp_path / "again.json")
    assert at_32.chosen.k == 1
    miss = "holds TinyConv at 32 px, not at 224 px"
    with pytest.raises(dsprof.errors.LUTMissError, match=miss):
        dsprof.plan(tiny_net, lut, keep=1, pricing=Pricing(max_span=2), out=tmp_path / "at224.json")
    dsprof.predict(ModelRef.of(tiny_net, resolution=32), lut, planned.plan_path)
    with pytest.raises(dsprof.errors.LUTMissError, match=miss):
        dsprof.predict(tiny_net, lut, planned.plan_path)
    assert not hasattr(tiny_net, "dsprof_input_size")
