"""benchmarks/reproduce_paper.py --quick end to end on a tiny configuration (32 px, few models)."""

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

from dsprof.merging import merge_model
from dsprof.records.plan import load_preset
from dsprof.models import count_macs, get_model
from dsprof.records.measurement import read_measurements
from dsprof.planning.decide import merge_rule
from dsprof.profiler import TimingConfig

pytestmark = pytest.mark.slow  # the fixture runs the script once: about 20 s

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "reproduce_paper.py"


def load_script():
    spec = importlib.util.spec_from_file_location("reproduce_paper", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


#: Short timing, as `dsprof measure` options (about tests/fast_timing.py's FEWER): the tests assert tables, files and
#: plots, not how precise the timing is.
TIMING = ["--budget", "0.01", "--warmup", "0", "--max-warmup", "0.05", "--min-samples", "3", "--max-samples", "4",
          "--min-sample-time", "0"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("paper")
    argv = ["--quick", "--resolution", "32", *TIMING, "--threads", "1", "--no-progress", "--out", str(out),
            "--models", "MobileNetV2", "ResNet-50*", "MBV2 [[]1,1,1,1,1,1,1]*", "--presets", "mbv2-ds-a",
            "--cpu-backends", "onnxruntime"]
    script = load_script()
    assert script.main(argv) == 0
    return script, out, argv


def test_timing_defaults_to_what_the_tables_were_made_with():
    """Without timing options the script times as it did before it took them (what benchmarks/RESULTS.md ran with):
    `TimingConfig`'s defaults, but 1 s a workload (0.25 s with --quick) and at most --budget of warm-up."""
    script = load_script()
    before = TimingConfig(target_precision=0.02, min_samples=10, warmup_s=0.05)  # the script's former hard-coded timing
    assert script.timing_of(script.parse_args([])) == TimingConfig(**{**vars(before), "budget_s": 1.0})
    assert script.timing_of(script.parse_args(["--quick"])) == TimingConfig(**{**vars(before), "budget_s": 0.25})
    assert script.timing_of(script.parse_args(["--budget", "0.02"])) == TimingConfig(
        **{**vars(before), "budget_s": 0.02, "warmup_s": 0.02})
    # every option given is taken as `dsprof measure` takes it
    assert script.timing_of(script.parse_args(["--quick", *TIMING, "--target-precision", "0.05"])) == TimingConfig(
        budget_s=0.01, warmup_s=0.0, warmup_max_s=0.05, first_warmup_s=0.05, min_samples=3, max_samples=4,
        min_sample_s=0.0, target_precision=0.05)


def table(out, name):
    return pd.read_csv(out / "tables" / f"{name}.csv").set_index("model")


def test_tables_hold_our_measurements_beside_the_paper(run):
    script, out, _ = run
    t1 = table(out, "tab1")
    assert list(t1.index) == ["MobileNetV2", "ResNet-50"]
    for label, model in (("MobileNetV2", "mobilenet_v2"), ("ResNet-50", "resnet50")):
        assert t1.loc[label, "GMACs"] == pytest.approx(count_macs(get_model(model), (32, 32)) / 1e9, rel=1e-6)
        assert t1.loc[label, "dense/original"] == pytest.approx(t1.loc[label, "dense FPS"] / t1.loc[label, "original FPS"], rel=1e-9)
    assert t1.loc["MobileNetV2", "paper V100"] == pytest.approx(12090 / 3088, rel=1e-9)

    t9 = table(out, "tab9")
    assert list(t9.index) == ["ResNet-50 x1.00", "MBV2 [1,1,1,1,1,1,1] x1.45"]
    assert t9.loc["ResNet-50 x1.00", "FPS vs standard"] == pytest.approx(1.0)

    t23 = table(out, "tab23")
    net = get_model("mobilenet_v2", resolution=32)
    merged = merge_model(net, merge_rule(net, merge_by="macs").decide(load_preset("mbv2-ds-a")).plan)
    assert t23.loc["mbv2-ds-a", "MMACs"] == pytest.approx(count_macs(merged, (32, 32)) / 1e6, rel=1e-6)
    assert t23.loc["mbv2-ds-a", "MMACs"] < t23.loc["MobileNetV2", "MMACs"]
    assert t23.loc["mbv2-ds-a", "speed-up"] == pytest.approx(t23.loc["mbv2-ds-a", "FPS"] / t23.loc["MobileNetV2", "FPS"], rel=1e-9)
    assert t23.loc["mbv2-ds-a", "paper 2080Ti"] == pytest.approx(3505 / 2364, rel=1e-9)

    t4 = table(out, "tab4")
    assert t4.loc["MobileNetV2", "onnxruntime change"] == 0 and t4.loc["mbv2-ds-a", "onnxruntime ms"] > 0
    assert t4.loc["mbv2-ds-a", "paper Raspi 4 change"] == pytest.approx(0.147 / 0.200 - 1, rel=1e-9)


def test_lut_predictions_cover_every_model(run):
    _, out, _ = run
    lut = table(out, "lut")
    assert set(lut.index) == {"MobileNetV2", "MobileNetV2 dense", "mbv2-ds-a", "ResNet-50", "ResNet-50 dense",
                              "ResNet-50 x1.00", "MBV2 [1,1,1,1,1,1,1] x1.45"}
    # stem and head were timed: every row, the originals too, is predicted from parts timed alone
    assert (lut["stem+head FPS"] > 0).all() and (lut["stem+head FPS"] != lut["measured FPS"]).all()
    assert lut["stem+head error"].to_numpy() == pytest.approx((lut["stem+head FPS"] / lut["measured FPS"] - 1).to_numpy(), rel=1e-9)
    # with the measured original standing for the rest, the original is its measurement
    originals = lut.loc[["MobileNetV2", "ResNet-50", "ResNet-50 x1.00", "MBV2 [1,1,1,1,1,1,1] x1.45"]]
    assert originals["model-blocks error"].abs().max() < 1e-9
    assert lut.loc["mbv2-ds-a", "model-blocks FPS"] > 0


def test_files_plots_and_resume(run):
    script, out, argv = run
    text = (out / "summary.md").read_text()
    for caption in ("Tab. 1", "Tab. 9", "Tab. 2/3", "Tab. 4", "LUT"):
        assert f"### {caption}" in text
    assert "onnxruntime ms" in text
    for name in ("fig1_block_latency_dense",):
        assert (out / "plots" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "lut.csv").is_file()
    files = sorted((out / "measurements").glob("*.jsonl"))
    counts = {p.name: len(read_measurements(p)) for p in files}
    assert any("onnxruntime" in p.name for p in files) and any("resnet50" in p.name for p in files)
    # the timing options reached every measurement (--quick alone would time 0.25 s a workload, up to 2000 samples)
    records = [r for p in files for r in read_measurements(p)]
    assert {r.budget_s for r in records} == {0.01}
    assert max(len(r.samples_s) for r in records) <= 4
    # A second run resumes: everything is already measured, nothing is appended
    assert script.main(argv) == 0
    assert {p.name: len(read_measurements(p)) for p in sorted((out / "measurements").glob("*.jsonl"))} == counts
