"""The planner (issue #20): its front against brute force, its plans through merge and predict, the one cost.

Real LUTs: two tiny models timed here (few samples, 32 x 32), their medians rewritten by tests/rule_lut.py's fixed
rule (a call's overhead plus a time per MAC: what a busy machine's clock says must not decide whether the planner
accepts the table or which plans exist). The expected values come from brute force (every keep-vector x every span
partition, each priced by the prediction function) or from the LUT's raw rows, never from the planner itself. No
timing asserts.
"""

import itertools
import json
from pathlib import Path
from fractions import Fraction

import pandas as pd
import pytest
import torch

from dsprof.cli import build_parser, main
from dsprof.errors import LUTMissError
from dsprof.lut import LUT, MergeChoice, Pricing, build_lut, model_label, predict_latency
from dsprof.lut.predict import prices_of, predict_plan
from dsprof.merging import linearize_model, merge_model, merge_report
from dsprof.records.plan import Plan
from dsprof.workflows.merge import merge
from dsprof.models.spans import span_runs, span_spec
from dsprof.models import ModelRef, find_blocks, get_model
from dsprof.planning import best_plan, plan_front
from dsprof.profiler import Workloads, measure
from dsprof.workflows.report import report as write_report

from conftest import randomise_bn
from rule_lut import rule_lut
from fast_timing import FAST

pytestmark = pytest.mark.usefixtures("one_thread")
MODELS = {
    "mbv2": ("mobilenet_v2", {"depths": [1] * 7}),  # 7 blocks, one run of 7 spannable blocks
    "resnet": ("resnet18", {"width": 0.25}),  # 8 basic blocks: a ReLU after each addition, no spans
}
MAX_SPAN = 3
IMPORTANCE = [0.1, 0.3, 0.05, 0.2, 0.02, 0.4, 0.15, 0.25]


def _measure(tmp, name, options, spans):
    out = tmp / f"{name}-{spans}.jsonl"
    result = measure(ModelRef.of(name, options=options, resolution=32),
                     workloads=Workloads(variants=("original", "merged", "linear"), model_variants=("original",), spans=spans),
                     timing=FAST, out=out, progress=False)
    return rule_lut(build_lut([result.path]).save(out.with_suffix(".csv")), result.path)


@pytest.fixture(scope="module")
def luts(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("planner")
    return {key: _measure(tmp, name, options, MAX_SPAN) for key, (name, options) in MODELS.items()}


def _partitions(run, max_span):
    """Every split of a run of block indices into consecutive pieces of 1..max_span blocks, as spans (2+ blocks)."""
    if not run:
        yield ()
        return
    for size in range(1, min(max_span, len(run)) + 1):
        head = (run[0], run[size - 1] + 1) if size > 1 else None
        for rest in _partitions(run[size:], max_span):
            yield ((head,) if head else ()) + rest


def _every_plan(name, options, blocks, max_span):
    """Every keep-vector x span partition (nothing held back: issue #36)."""
    for keep in itertools.product((0, 1), repeat=len(blocks)):
        runs = span_runs(blocks, keep)
        for choice in itertools.product(*[list(_partitions(r, max_span)) for r in runs]):
            spans = tuple(sorted(s for part in choice for s in part))
            yield Plan(name, keep, options, spans=spans or None)


@pytest.mark.parametrize("key", MODELS)
def test_front_equals_brute_force(luts, key):
    name, options = MODELS[key]
    lut = luts[key]
    costs = prices_of(ModelRef.of(name, options=options, resolution=32), lut)
    n = len(costs.blocks)
    importance = IMPORTANCE[:n]
    front = plan_front(ModelRef.of(name, options=options, resolution=32), lut, pricing=Pricing(max_span=MAX_SPAN),
                       importance=importance)
    scored, with_spans = [], 0  # (k, exact loss, latency) of every plan, priced by the prediction function
    for plan in _every_plan(name, options, costs.blocks, MAX_SPAN):
        latency = predict_plan(costs, plan, strict=True).total_s
        scored.append((sum(plan.keep), sum((Fraction(importance[i]) for i in plan.linearized), Fraction(0)), latency))
        with_spans += plan.spans is not None
    if key == "mbv2":
        assert sum(1 for _ in _every_plan(name, options, costs.blocks, 1)) == 2 ** n and with_spans  # spans enumerated
    assert [p.k for p in front.points] == list(range(n + 1))  # every k has a plan: nothing is held back
    for point in front.points:
        best = min(lat for k, _, lat in scored if k == point.k)
        assert point.latency_s == pytest.approx(best, rel=1e-12, abs=0)
    for point in front.least_loss:
        loss = min(l for k, l, _ in scored if k == point.k)
        assert Fraction(point.importance) == pytest.approx(loss, rel=1e-12)
        assert point.latency_s == pytest.approx(min(lat for k, l, lat in scored if k == point.k and l == loss), rel=1e-12)
    # the accuracy-latency front: each brute-force non-dominated (loss, latency) pair, and nothing else
    pareto = sorted({(l, lat) for _, l, lat in scored}, key=lambda t: (t[0], t[1]))
    expected, best_latency = [], float("inf")
    for loss, lat in pareto:
        if lat < best_latency * (1 - 1e-12):
            expected.append((loss, lat))
            best_latency = lat
    assert len(front.pareto) == len(expected)
    for point, (loss, lat) in zip(front.pareto, expected):
        assert float(point.importance) == pytest.approx(float(loss), rel=1e-12)
        assert point.latency_s == pytest.approx(lat, rel=1e-12)


def test_span_plan_counts_the_span_entry_not_its_blocks(luts):
    name, options = MODELS["mbv2"]
    lut = luts["mbv2"]
    blocks = find_blocks(get_model(name, resolution=32, **options))
    keep = (1, 1, 1, 0, 0, 0, 1)
    frame = lut.to_dataframe()
    label = model_label(name, {**options, "resolution": 32})

    def median(scope, workload, variant):
        row = frame[(frame.scope == scope) & (frame.workload == workload) & (frame.variant == variant)]
        return float(row.median_s.iloc[0])

    whole = median("model", label, "original")
    span = median("block", span_spec([b.spec for b in blocks[3:6]]).to_str(), "merged")
    originals = [median("block", b.spec.to_str(), "original") for b in blocks]
    pred = predict_latency(ModelRef.of(name, options=options, resolution=32),
                           lut, Plan(name, keep, options, spans=((3, 6),)),
                           strict=True, method="isolated")
    # the whole model minus what blocks 3..5 took, plus the one convolution they became
    assert pred.total_s == pytest.approx(whole - sum(originals[3:6]) + span, rel=1e-12)
    assert list(pred.blocks.variant) == ["original"] * 3 + ["span"] * 3 + ["original"]
    per_block = predict_latency(ModelRef.of(name, options=options, resolution=32),
                                lut, Plan(name, keep, options), strict=True,
                                method="isolated")
    assert per_block.total_s != pred.total_s


def test_front_plan_round_trips_through_merge_and_predict(luts, tmp_path):
    name, options = MODELS["mbv2"]
    lut = luts["mbv2"]
    front = plan_front(ModelRef.of(name, options=options, resolution=32), lut, pricing=Pricing(max_span=MAX_SPAN))
    point = next(p for p in front.points if p.plan.spans)  # a plan with a span (under the rule, spans pay)
    path = tmp_path / "plan.json"
    path.write_text(point.plan.to_json())
    # predict reads the plan file and gives the planner's number
    assert predict_latency(ModelRef.of(name, options=options, resolution=32),
                           lut, str(path), strict=True).total_s == point.latency_s
    lut_path = lut.save(tmp_path / "lut.csv")
    assert main(["predict", "--lut", str(lut_path), "--model", name, "--depths", "1,1,1,1,1,1,1", "--resolution", "32",
                 "--plan", str(path)]) == 0
    # merge replays the plan's merge and spans as written, exactly (float64, randomised BatchNorm)
    model = randomise_bn(get_model(name, resolution=32, **options)).double().eval()
    plan = Plan.coerce(str(path))
    linear = linearize_model(model, plan).eval()
    merged = merge_model(linear, plan)  # the plan's list, replayed
    assert merge_report(merged).plan.merge == plan.merge and merge_report(merged).plan.spans == plan.spans
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want, got = linear(x), merged(x)
    assert (got - want).abs().max() <= 1e-9 * want.abs().max()


def test_merge_with_a_lut_decides_single_blocks_by_the_lut(luts, tmp_path):
    name, options = MODELS["mbv2"]
    frame = luts["mbv2"].to_dataframe()
    blocks = find_blocks(get_model(name, resolution=32, **options))
    # block 1 (expansion 6, stride 2): merging lowers its MACs; make the LUT say merging it does not pay
    spec = blocks[1].spec.to_str()
    rows = (frame.scope == "block") & (frame.workload == spec)
    linear_s = float(frame[rows & (frame.variant == "linear")].median_s.iloc[0])
    frame.loc[rows & (frame.variant == "merged"), "median_s"] = linear_s * 2
    lut_path = LUT(frame).save(tmp_path / "lut.csv")
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(Plan(name, (1, 0, 0, 1, 1, 1, 1), options).to_json())
    by_macs = merge(ModelRef.of(name, options=options, resolution=32), str(plan_path), merge=MergeChoice.macs())
    assert by_macs.report.decisions[1].merged and by_macs.merges.by == "macs"  # MACs say merge
    by_lut = merge(ModelRef.of(name, options=options, resolution=32), str(plan_path), merge=MergeChoice(lut_path))
    decisions = by_lut.report.decisions
    assert not decisions[1].merged and by_lut.merges.by == "lut" and "merge list" in decisions[1].reason
    # the LUT's own verdict for block 2, independently: merged below linear
    spec2 = blocks[2].spec.to_str()
    rows2 = (frame.scope == "block") & (frame.workload == spec2)
    pays = float(frame[rows2 & (frame.variant == "merged")].median_s.iloc[0]) < \
        float(frame[rows2 & (frame.variant == "linear")].median_s.iloc[0])
    assert decisions[2].merged == pays
    # and the CLI passes the LUT on
    assert main(["merge", "--model", name, "--depths", "1,1,1,1,1,1,1", "--resolution", "32", "--plan", str(plan_path),
                 "--lut", str(lut_path)]) == 0
    # --spans auto with the LUT: the planner's partition for this keep
    auto = merge(ModelRef.of(name, options=options, resolution=32), str(plan_path), merge=MergeChoice(lut_path),
                 spans="auto", max_span=2)
    assert auto.report.plan.spans == best_plan(ModelRef.of(name, options=options, resolution=32),
                                               LUT(frame), (1, 0, 0, 1, 1, 1, 1), max_span=2).spans


def test_intervals_too_wide_to_act_on_are_said_in_one_line(luts, tmp_path):
    """A LUT whose medians scatter (each block's merged and linear entries with an IQR 5x their median, as a run
    beside other work may give) prices plans whose 95 % intervals say nothing. The front says so in one line, in its
    table, its JSON and the report; the same LUT with the rule's 2 % IQRs does not. Both without the groups' timed
    spread (the drift), so that only the ruled entries decide. MobileNetV2 with one block per
    stage: 7 blocks, so k = 0..7, and only k = 7 (nothing linearised) is priced from the originals alone."""
    model = ModelRef.of("mobilenet_v2", options={"depths": [1] * 7}, resolution=32)
    pricing = Pricing(method="isolated", max_span=1)
    frame = luts["mbv2"].to_dataframe()
    frame["group_iqr_s"] = 0.0  # the groups' spread was timed, not ruled: the machine's drift must not decide here
    quiet_lut = LUT(frame.copy())
    quiet = plan_front(model, quiet_lut, pricing=pricing)
    assert not [n for n in quiet.notes() if n.startswith("too wide")]
    rows = (frame.scope == "block") & frame.variant.isin(["merged", "linear"])
    frame.loc[rows, "iqr_s"] = frame.loc[rows, "median_s"] * 5
    front = plan_front(model, LUT(frame), pricing=pricing)
    said = [n for n in front.notes() if n.startswith("too wide")]
    assert len(said) == 1 and said[0].startswith("too wide to act on: 7 of the 8 plans' 95 % intervals span more "
                                                 "than a factor of 2 (k = ")
    worst = front.at_k(int(said[0].split("(k = ")[1].split(":")[0]))
    assert worst.k < 7 and worst.speedup_high > 2 * worst.speedup_low
    assert said[0] in front.table() and said[0] in front.to_dict()["notes"]
    front_file, _ = front.write(tmp_path / "front.json")
    write_report([Path(str(luts["mbv2"].source)).with_suffix(".jsonl")], tmp_path / "report", fronts=[front_file])
    assert "Too wide to act on: 7 of the 8 plans" in (tmp_path / "report" / "index.md").read_text()
    # the same plan through `predict` says it too, in the same words; its prediction on the quiet LUT does not
    wide = predict_latency(model, LUT(frame), worst.plan, method="isolated")
    assert (wide.speedup_low, wide.speedup_high) == (worst.speedup_low, worst.speedup_high)
    assert "too wide to act on: the speed-up's 95 % interval spans more than a factor of 2." in str(wide)
    assert said[0].split(". ", 1)[1] in str(wide)  # why, and what narrows it: one sentence in both
    assert "too wide" not in str(predict_latency(model, quiet_lut, worst.plan, method="isolated"))


def test_a_block_that_buys_nothing_alone_is_named_and_still_offered(tmp_path):
    # efflite0-ds-d linearises all 16 blocks (k = 0); a LUT in which block 0 linearised alone is slower than kept
    # (both its merged and linear entries 10x its original) names it as buying nothing alone, but still offers it
    # (issue #36: the held-back rule left k = 0 without a plan, and the preset against the front plan of k = 1)
    name = "efficientnet_lite0"
    lut = _measure(tmp_path, name, {}, 0)
    frame = lut.to_dataframe()
    spec = find_blocks(get_model(name, resolution=32))[0].spec.to_str()
    rows = (frame.scope == "block") & (frame.workload == spec)
    original_s = float(frame[rows & (frame.variant == "original")].median_s.iloc[0])
    frame.loc[rows & frame.variant.isin(["merged", "linear"]), "median_s"] = original_s * 10
    front = plan_front(ModelRef.of(name, resolution=32), LUT(frame),
                       pricing=Pricing(method="isolated", max_span=1))  # savings as timed alone
    blocks = find_blocks(get_model(name, resolution=32))

    def median(i, variant):
        return float(frame[(frame.scope == "block") & (frame.workload == blocks[i].spec.to_str())
                           & (frame.variant == variant)].median_s.iloc[0])

    # buying nothing alone, read off the rows: neither the merged nor the linear entry below the original
    expected = tuple(i for i in range(16) if min(median(i, "merged"), median(i, "linear")) >= median(i, "original"))
    assert 0 in expected and front.no_gain == expected and [p.k for p in front.points] == list(range(17))
    by_k = {p.k: p for p in front.points}
    # at k = 0 block 0 is linearised too, 9 originals slower than the k = 1 plan that keeps it (the same other blocks)
    assert by_k[0].latency_s == pytest.approx(by_k[1].latency_s + 9 * original_s, rel=1e-9)
    assert front.fastest_k >= 1 and "fastest at k = " in front.table() and "no gain alone: blocks 0 " in front.table()
    assert front.to_dict()["no_gain"] == list(expected) and front.to_dict()["fastest_k"] == front.fastest_k
    # the report says both under the front's figure, which marks the fastest k
    front_file, _ = front.write(tmp_path / "front.json")
    write_report([tmp_path / f"{name}-0.jsonl"], tmp_path / "report", fronts=[front_file])
    index = (tmp_path / "report" / "index.md").read_text()
    assert f"Fastest at k = {front.fastest_k} ({front.at_k(front.fastest_k).speedup:.2f}x): below it" in index
    assert f"No gain alone: blocks {' '.join(map(str, expected))} are predicted no faster linearised alone" in index
    preset = {p.name: p for p in front.presets}["efflite0-ds-d"]
    assert preset.k == 0 and preset.front_latency_s == by_k[0].latency_s
    assert preset.latency_s == pytest.approx(by_k[0].latency_s, rel=1e-12)  # every block linear: the same plan


def test_a_missing_entry_is_one_clear_line(tmp_path, capsys):
    name, options = MODELS["mbv2"]
    no_spans = _measure(tmp_path, name, options, 0)  # no span entries: planned without spans (issue #44)
    ref = ModelRef.of(name, options=options, resolution=32)
    assert plan_front(ref, no_spans, pricing=Pricing(max_span=2)).max_span == 1
    frame = no_spans.to_dataframe()
    first = frame[(frame.scope == "block") & (frame.variant == "original")].workload.iloc[0]
    lut = LUT(frame[~((frame.workload == first) & (frame.variant == "original"))])  # and one block's original missing
    lut.save(tmp_path / "broken.csv")
    (context,) = lut.devices()
    args = "model=ModelRef.of('mobilenet_v2', options={'depths': [1, 1, 1, 1, 1, 1, 1]}, resolution=32)"
    flags = "--model mobilenet_v2 --depths 1,1,1,1,1,1,1 --resolution 32"  # the same, as the command line spells it
    with pytest.raises(LUTMissError) as err:
        plan_front(ModelRef.of(name, options=options, resolution=32), lut, pricing=Pricing(max_span=2))
    # a Python caller: what to time as data (the spans asked for too), and in words in the one line
    request = err.value.hint
    assert (request.context, request.model, request.max_span, request.in_situ) == (context, args, 2, False)
    message = str(err.value)
    assert "\n" not in message and f"lacks block {first} [original]" in message and "{hint}" not in message
    assert (f"run `dsprof measure` (or dsprof.measure) in context {context} with the model's options ({args}), "
            "timing blocks original, merged and linear, spans of up to 2 blocks and rebuild the LUT") in message
    # the command line: the same line, with the command that times it, runnable as written
    argv = ["plan", *flags.split(), "--lut", str(tmp_path / "broken.csv"), "--max-span", "2",
            "--out", str(tmp_path / "front.json")]
    assert main(argv) == 2
    line = capsys.readouterr().err
    assert line.startswith("dsprof plan: error: ") and line.count("\n") == 1 and f"lacks block {first}" in line
    command = line.split("`")[1]
    assert command == (f"dsprof measure {flags} --device cpu --backend torch --dtype fp32 --batch 1 --threads 1 "
                       "--variants original,merged,linear --spans 2 --resume")
    build_parser().parse_args(command.split()[1:])  # a command that runs as written


def test_cli_plan_writes_front_and_an_ordinary_plan(luts, tmp_path, capsys):
    name, options = MODELS["mbv2"]
    lut_path = luts["mbv2"].save(tmp_path / "lut.csv")
    importance = tmp_path / "importance.json"
    importance.write_text(json.dumps({str(i): v for i, v in enumerate(IMPORTANCE[:7])}))
    out = tmp_path / "front.json"
    assert main(["plan", "--model", name, "--depths", "1,1,1,1,1,1,1", "--resolution", "32", "--lut", str(lut_path),
                 "--importance", str(importance), "--keep", "3", "--max-span", "3", "--out", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "fastest plan for each k" in shown
    data = json.loads(out.read_text())
    assert data["format"] == "dsprof.front" and len(data["points"]) == 8
    assert {"k", "keep", "merge", "spans", "latency_s", "low_s", "high_s", "speedup", "importance"} <= set(data["points"][0])
    assert len(pd.read_csv(out.with_suffix(".csv"))) >= 8
    plan = Plan.coerce(str(out.with_suffix(".plan.json")))
    assert sum(plan.keep) == 3 and plan.merge is not None
    pred = predict_latency(ModelRef.of(name, options=options, resolution=32), str(lut_path), plan, strict=True)
    least = next(p for p in data["least_loss"] if p["k"] == 3)
    assert pred.total_s == pytest.approx(least["latency_s"], rel=1e-12)
