"""A block left unmerged in a larger form than built, or losing an activation that no runtime folds away, is timed and
priced as it deploys (issue #46).

Where a linearised block's padding cannot go back in place (ResNet's basic block: two padded 3x3 convolutions), a plan
that leaves it unmerged deploys it with its padding in front: its first convolution runs over a map two pixels wider
and taller than built. A runtime that fuses activations has no ``linear`` in its default variants, and the pricer
read such a block's ``original`` entry for it, so that plans leaving these blocks unmerged were priced as if the ring
cost nothing (MobileNetV4-conv-medium on OpenVINO at 160 px: every such block up to twice the MACs; benchmarks/RESULTS.md,
"Blocks left unmerged in a larger form"). Expected MACs are worked from the architecture; expected prices are the
LUT's own rows, read with `csv`.
"""

from __future__ import annotations

import csv

import pytest
import timm
import torchvision

from dsprof.lut import LUT, Pricing, build_lut
from dsprof.lut.predict import prices_of
from dsprof.models import ModelRef
from dsprof.planning.planner import plan_front
from dsprof.profiler import BackendSettings, Workloads, measure
from dsprof.profiler.workloads import block_workloads
from fast_timing import FEWER

pytestmark = pytest.mark.usefixtures("one_thread")


def variants_of(groups) -> list[list[str]]:
    return [[w.variant for w in g] for g in groups]


def test_a_block_left_unmerged_in_a_larger_form_is_timed_linear_wherever_merged_is():
    resnet = torchvision.models.resnet18().eval()
    groups = block_workloads(resnet, ("original", "merged"), (64, 64))
    assert variants_of(groups) == [["original", "merged", "linear"]] * 8  # every basic block, unasked
    # layer1.0 at 64 px: 64 channels on the 16x16 map the stem's stride 4 leaves; built, two 3x3 convolutions at 16x16;
    # unmerged with its padding in front, the first runs at 18x18 (input padded by 2, no padding of its own but 1)
    original, _, linear = groups[0]
    assert original.macs == 2 * 9 * 64 * 64 * 16 * 16
    assert linear.macs == 9 * 64 * 64 * 18 * 18 + 9 * 64 * 64 * 16 * 16
    # layer4.1 at 64 px: 512 channels at 2x2, the first convolution at 4x4: 2.5 times the block's MACs
    assert groups[7][2].macs == 9 * 512 * 512 * (4 * 4 + 2 * 2)
    # asked without merged, nothing is added; an inverted residual's padding goes back in place, so it never is
    assert variants_of(block_workloads(resnet, ("original",), (64, 64))) == [["original"]] * 8
    mnv2 = torchvision.models.mobilenet_v2().eval()
    assert {tuple(v) for v in variants_of(block_workloads(mnv2, ("original", "merged"), (64, 64)))} == {
        ("original", "merged")}


def test_a_block_losing_an_activation_no_runtime_folds_is_timed_linear_wherever_merged_is():
    """MobileNetV3-Small as torchvision builds it: a hardswish stem, then inverted residuals whose activations are
    ReLU in the first three and hardswish in the other eight. A runtime that fuses activations folds ReLU into the
    convolution for free, not every other (on OpenVINO, SiLU blocks 1.18-1.22x faster linearised, hardswish blocks
    0.99-1.07x), so every block holding a hardswish is timed ``linear`` beside ``merged``, unasked; MobileNetV1's ReLU
    blocks not."""
    mnv3 = torchvision.models.mobilenet_v3_small().eval()
    groups = block_workloads(mnv3, ("original", "merged"), (64, 64))
    # the stem's convolution with the first bneck's depthwise (its SE splits the bneck), then the two ReLU bnecks
    # whole, then the eight hardswish bnecks' expansion and depthwise, before their SE
    assert [g[0].name for g in groups] == ["features.0.0..features.1.block.0.0", "features.2", "features.3",
                                           *(f"features.{i}.block[0:2]" for i in range(4, 12))]
    assert variants_of(groups) == [["original", "merged", "linear"]] + [["original", "merged"]] * 2 + \
        [["original", "merged", "linear"]] * 8
    mnv1 = timm.create_model("mobilenetv1_100").eval()
    assert {tuple(v) for v in variants_of(block_workloads(mnv1, ("original", "merged"), (64, 64)))} == {
        ("original", "merged")}


def test_onnxruntime_prices_a_basic_block_left_unmerged_from_its_own_entry_or_names_the_miss(tmp_path):
    ref = ModelRef.of("resnet18", resolution=32)
    result = measure(ref, settings=BackendSettings(backend="onnxruntime", threads=1),
                     workloads=Workloads(model_variants=("original",)), timing=FEWER, out=tmp_path / "m.jsonl",
                     progress=False)
    build_lut([result.path]).save(tmp_path / "lut.csv")
    with open(tmp_path / "lut.csv", newline="") as f:
        lines = [line for line in f if not line.startswith("#")]
    rows = list(csv.DictReader(lines))
    linear = {r["workload"]: float(r["median_s"]) for r in rows if r["variant"] == "linear" and r["scope"] == "block"}
    prices = prices_of(ref, tmp_path / "lut.csv", method="isolated")
    assert len(prices.blocks) == 8 and set(linear) == {b.spec.to_str() for b in prices.blocks}  # the default timed it
    for i, block in enumerate(prices.blocks):
        piece = prices.linearized(i, merge=False)
        assert (piece.variant, piece.missing) == ("linear", None)
        assert piece.latency_s == pytest.approx(linear[block.spec.to_str()], rel=1e-12)

    # the same LUT without its linear rows (a LUT measured before this default): the piece is a miss that names the
    # entry, and the planner offers the lone block merged, the way it prices
    frame = LUT.load(tmp_path / "lut.csv").to_dataframe()
    LUT(frame[frame["variant"] != "linear"], str(tmp_path / "old.csv")).save(tmp_path / "old.csv")
    old = prices_of(ref, tmp_path / "old.csv", method="isolated")
    piece = old.linearized(0, merge=False)
    assert piece.missing is not None and piece.missing.endswith("[linear]") and old.blocks[0].spec.to_str() in piece.missing
    assert old.linearized(0).variant == "merged"
    front = plan_front(ref, tmp_path / "old.csv", pricing=Pricing(method="isolated"))
    assert [line for line in front.limits if line.startswith("variants: ")] == [
        "variants: blocks 0 1 2 3 4 5 6 7 linearised alone are planned merged (merged): the LUT holds no unmerged "
        f"entry of them for {old.label} on {old.key}; a `dsprof measure` (or dsprof.measure) that times them linear "
        "lets the planner compare both"]
    assert not [line for line in plan_front(ref, tmp_path / "lut.csv", pricing=Pricing(method="isolated")).limits
                if line.startswith("variants: ")]


def test_a_lut_without_the_linear_entries_of_unfolded_activations_says_what_it_prices_as_built(tmp_path):
    """MobileNetV3-Small at 32 px on ONNX Runtime, measured by default: the eight hardswish bnecks (blocks 3-10, by
    torchvision's configuration) get ``linear`` entries, the two ReLU bnecks none, and every block left unmerged is
    priced from its own entry or, for a ReLU block, as built, without a note. The same LUT without its linear rows
    (one measured before that rule) prices the hardswish blocks as built and the front says so in its one
    ``variants:`` line, beside the stem chain (block 0, larger form) that it plans merged."""
    ref = ModelRef.of("mobilenet_v3_small", resolution=32)
    result = measure(ref, settings=BackendSettings(backend="onnxruntime", threads=1),
                     workloads=Workloads(model_variants=("original",)), timing=FEWER, out=tmp_path / "m.jsonl",
                     progress=False)
    build_lut([result.path]).save(tmp_path / "lut.csv")
    prices = prices_of(ref, tmp_path / "lut.csv", method="isolated")
    assert len(prices.blocks) == 11
    assert [prices.unmerged(i)[0] for i in range(11)] == ["linear", "original", "original", *["linear"] * 8]
    assert not [line for line in plan_front(ref, tmp_path / "lut.csv", pricing=Pricing(method="isolated")).limits
                if line.startswith("variants: ")]

    frame = LUT.load(tmp_path / "lut.csv").to_dataframe()
    LUT(frame[frame["variant"] != "linear"], str(tmp_path / "old.csv")).save(tmp_path / "old.csv")
    old = prices_of(ref, tmp_path / "old.csv", method="isolated")
    front = plan_front(ref, tmp_path / "old.csv", pricing=Pricing(method="isolated"))
    assert [line for line in front.limits if line.startswith("variants: ")] == [
        "variants: blocks 0 linearised alone are planned merged (merged): the LUT holds no unmerged entry of them; "
        "blocks 3 4 5 6 7 8 9 10 left unmerged are priced as built (original): the LUT holds no linear entry of them, "
        f"and an activation they lose (not ReLU) may cost time on this runtime for {old.label} on {old.key}; a "
        "`dsprof measure` (or dsprof.measure) that times them linear lets the planner compare both"]
