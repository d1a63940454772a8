"""`measure` and `dsprof measure` on real models on the CPU, at small resolutions and tiny budgets.

No timing asserts: the tests check which records exist, what they hold, and that files read back.
"""

import json
from dataclasses import replace
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from dsprof.cli import main
from dsprof.models import BlockSpec, ModelRef, find_blocks, get_model
from dsprof.records.measurement import Measurement, read_measurements
from dsprof.profiler import BackendSettings, Workloads, measure
from dsprof.profiler.backends.tflite import NetworkBlocked, no_network
from dsprof.profiler.fingerprint import environment, environment_id
from fast_timing import FEWER

DSPROF = str(Path(sys.executable).parent / "dsprof")
pytestmark = pytest.mark.usefixtures("one_thread")  # building workloads runs small convolutions; see conftest.py
# One thread: another test process may share this machine, and spinning OpenMP threads of two
# processes on two cores wait on each other for whole scheduler slices.
FAST_ARGS = ["--threads", "1", "--warmup", "0", "--max-warmup", "0.05", "--min-samples", "3", "--max-samples", "4", "--budget", "0.01", "--min-sample-time", "0", "--no-progress"]
VARIANTS = ("original", "merged", "flops_matched")  # what a block is timed as by default where activations fuse
# PyTorch eager runs each activation as a kernel of its own: by default a block is also timed without them
# (docs/measuring.md, "Variants")
EAGER = (*VARIANTS, "linear")


def check_block_records(records, model, variants, batch=1):
    blocks = find_blocks(model)
    by_key = {(r.name, r.variant): r for r in records if r.scope == "block"}
    assert set(by_key) == {(b.name, v) for b in blocks for v in variants}
    for b in blocks:
        for v in variants:
            r = by_key[(b.name, v)]
            assert r.ok, r.error
            assert r.spec == b.spec.to_str() and BlockSpec.from_str(r.spec) == b.spec
            assert len(r.samples_s) >= 2 and all(s > 0 for s in r.samples_s)
            assert r.input_shape[0] == batch and r.macs > 0
        group = {by_key[(b.name, v)].group for v in variants}
        assert len(group) == 1  # a block's variants were interleaved together
    return by_key


#: MobileNetV2 with one stage repeated: 8 blocks instead of 17, and every kind of block the full model has (the
#: depthwise-separable first, stride 2, a residual repeat, stride 1 with new channels); what a test of every block
#: checks of each block is the same for 8 as for 17.
SHALLOW = {"depths": [1, 2, 1, 1, 1, 1, 1]}


def test_torch_per_block_records_for_mobilenet_v2(tmp_path):
    result = measure(ModelRef.of("mobilenet_v2", options=SHALLOW, resolution=32), settings=BackendSettings(threads=1),
                     timing=FEWER, out=tmp_path, progress=False)
    model = get_model("mobilenet_v2", resolution=32, **SHALLOW)
    check_block_records(result.measurements, model, EAGER)
    models = [r for r in result.measurements if r.scope == "model"]
    assert {r.variant for r in models} == {"original", "flops_matched"}
    r = models[0]
    assert r.backend == "torch" and r.device == "cpu" and r.dtype == "fp32" and r.layout == "nchw" and r.batch == 1
    assert r.threads == 1
    assert r.env_id == environment_id(r.environment) == environment_id(environment())
    # Load-independent bounds: the process ran (CPU time > 0) and cannot get more CPU time than the
    # machine's logical cores give in that wall time; its one timing thread is what the share divides by.
    share = r.state_after["process_cpu_share"]
    assert 0 < share <= os.cpu_count() / r.threads + 1e-4 and r.state_after["involuntary_switches_per_s"] >= 0
    assert result.path.parent == tmp_path  # named after the settings: test_a_string_of_variants_... checks the name
    assert read_measurements(result.path) == result.measurements  # the file reads back to equal records
    table = result.summary  # stem, 8 blocks, head, the model
    assert len(table) == 11 and list(table.scope[[0, 1, 9, 10]]) == ["stem", "block", "head", "model"]
    assert table.loc[10, "fps"] == pytest.approx(1 / models[0].stats.median, rel=1e-9)
    assert table.loc[1, "original_ms"] == pytest.approx(result.measurements[0].stats.median * 1e3, rel=1e-9)

    # Stem and head, timed with the whole models: stem + blocks + head is the model's forward
    parts = {r.scope: r for r in result.measurements if r.scope in ("stem", "head")}
    assert parts["stem"].name == parts["head"].name == "mobilenet_v2" and parts["stem"].group == models[0].group
    assert parts["stem"].input_shape == (1, 3, 32, 32) and parts["head"].input_shape == (1, 320, 1, 1)
    blocks_macs = sum(r.macs for r in result.measurements if r.scope == "block" and r.variant == "original")
    assert parts["stem"].macs + blocks_macs + parts["head"].macs == models[0].macs


def test_records_are_self_contained_json_lines_in_seconds(tmp_path):
    result = measure(ModelRef.of("mobilenet_v2", resolution=32), settings=BackendSettings(threads=1),
                     workloads=Workloads(blocks="features.2", model_variants=()), timing=FEWER, out=tmp_path / "m.jsonl",
                     progress=False)
    lines = result.path.read_text().splitlines()
    assert len(lines) == 5  # four variants, then the drift probe timed after their group
    data = json.loads(lines[0])
    for key in ("model", "spec", "variant", "samples_s", "backend", "device", "dtype", "layout", "batch", "threads", "env_id", "environment", "state_before", "state_after", "schema"):
        assert key in data
    assert Measurement.from_dict(data) == result.measurements[0]
    assert "median_s" not in data  # derived, never stored instead of the samples


def test_linear_variant_channels_last_bf16_and_given_modules(tmp_path):
    tiny = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU())
    result = measure(ModelRef.of("mobilenet_v2", resolution=32),
                     settings=BackendSettings(dtype="bf16", channels_last=True, threads=1),
                     workloads=Workloads(blocks=["features.1", "features.5"], variants=("original", "linear"), model_variants=("original",)),
                     extra_models={"tiny": tiny}, timing=FEWER, out=tmp_path, progress=False)
    got = {(r.name, r.variant) for r in result.measurements if r.scope != "probe"}
    assert got == {("features.1", "original"), ("features.1", "linear"), ("features.5", "original"), ("features.5", "linear"), ("mobilenet_v2", "original"), ("tiny", "custom")}
    assert all(r.layout == "channels_last" and r.dtype == "bf16" and r.threads == 1 and r.ok for r in result.measurements)
    assert "tiny" in set(result.summary.name)


def test_onnxruntime_per_block_records_for_mobilenet_v2(tmp_path):
    result = measure(ModelRef.of("mobilenet_v2", options=SHALLOW, resolution=32),
                     settings=BackendSettings(threads=1, backend="onnxruntime"), timing=FEWER, out=tmp_path,
                     progress=False)
    check_block_records(result.measurements, get_model("mobilenet_v2", resolution=32, **SHALLOW), VARIANTS)
    assert all(r.backend == "onnxruntime" and r.layout == "nchw" and r.ok for r in result.measurements)
    assert len([r for r in result.measurements if r.scope == "model"]) == 2


@pytest.mark.tflite
@pytest.mark.slow
def test_tflite_per_block_records_for_mobilenet_v2_converted_offline(tmp_path):
    # A block in two variants (each variant is its own conversion, 1-3 s here) and the whole model (one block a
    # stage: fewer layers to convert), whose 3-channel input is what makes onnx2tf fetch sample images unless it
    # finds them locally. `benchmarks/profiler_quality.py --backend tflite` runs all 17 blocks in all variants.
    blocks = ["features.1"]
    variants = ("original", "merged")
    result = measure(ModelRef.of("mobilenet_v2", options={"depths": [1] * 7}, resolution=32),
                     settings=BackendSettings(backend="tflite", threads=1),
                     workloads=Workloads(blocks=blocks, variants=variants, model_variants=("original",)), timing=FEWER,
                     out=tmp_path, progress=False)
    records = result.measurements
    assert {(r.name, r.variant) for r in records if r.scope == "block"} == {(b, v) for b in blocks for v in variants}
    assert all(r.ok and r.layout == "nhwc" and r.backend == "tflite" for r in records), [r.error for r in records]
    assert [r.scope for r in records].count("model") == 1


@pytest.mark.tflite
def test_tflite_conversion_computes_what_torch_computes_and_writes_no_saved_model(tmp_path):
    # onnx2tf's SavedModel of each conversion is skipped (issue #44: four fifths of a conversion's time); the float32
    # file must still compute the block: a 3x3 convolution 16 -> 24, stride 2, and ReLU6 at 16 px, against float64
    # PyTorch. LiteRT takes NHWC: the input transposed in, the output transposed back.
    from ai_edge_litert.interpreter import Interpreter

    from dsprof.models.onnx_export import export_onnx
    from dsprof.profiler.backends.tflite import convert_onnx_to_tflite

    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Conv2d(16, 24, 3, stride=2, padding=1), torch.nn.ReLU6()).eval()
    x = torch.randn(1, 16, 16, 16)
    path = convert_onnx_to_tflite(export_onnx(block, (1, 16, 16, 16), tmp_path / "block.onnx"), tmp_path / "out")
    assert path.name == "block_float32.tflite" and path.is_file()
    assert not list(tmp_path.rglob("saved_model.pb")) and not (path.parent / "variables").exists()
    interpreter = Interpreter(model_path=str(path), num_threads=1)
    interpreter.allocate_tensors()
    (inp,), (out,) = interpreter.get_input_details(), interpreter.get_output_details()
    assert tuple(inp["shape"]) == (1, 16, 16, 16) and tuple(out["shape"]) == (1, 8, 8, 24)  # NHWC
    interpreter.set_tensor(inp["index"], x.permute(0, 2, 3, 1).contiguous().numpy())
    interpreter.invoke()
    got = torch.from_numpy(interpreter.get_tensor(out["index"])).permute(0, 3, 1, 2)
    with torch.no_grad():
        ref = block.double()(x.double()).float()
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.tflite
def test_network_guard_stops_onnx2tf_from_fetching_sample_data(tmp_path, monkeypatch):
    from onnx2tf.utils.common_functions import download_test_image_data

    monkeypatch.chdir(tmp_path)  # no local sample file here: onnx2tf would download it
    with pytest.raises(NetworkBlocked), no_network():
        download_test_image_data()


def test_interrupted_run_resumes_without_losing_or_repeating(tmp_path):
    out = tmp_path / "run.jsonl"
    # Killed (SIGKILL) right after the second group of records reached the file: two blocks x four variants.
    # MobileNetV2 with one block a stage (seven blocks): what the resume times after the kill is no test of its size.
    die_after = [sys.executable, str(Path(__file__).parent / "die_after.py"), "dsprof.records.measurement:MeasurementWriter.write", "2"]
    fast = ["measure", "--resolution", "32", "--depths", "1,1,1,1,1,1,1", "--out", str(out), *FAST_ARGS]
    killed = subprocess.run([*die_after, *fast], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    before = out.read_text().splitlines()
    kept = [r for r in read_measurements(out) if r.scope != "probe"]  # what survived the kill reads back
    assert [(r.name, r.variant) for r in kept] == [(b, v) for b in ("features.1", "features.2") for v in EAGER]
    assert main([*fast, "--resume"]) == 0
    after = read_measurements(out)
    assert out.read_text().splitlines()[: len(before)] == before  # nothing measured was lost or rewritten
    keys = [r.workload_key for r in after if r.scope != "probe"]  # the drift probe recurs after every group
    assert len(keys) == len(set(keys)) == 7 * 4 + 2 + 2  # nothing repeated, nothing missing (+ stem, head)
    assert main([*fast, "--resume"]) == 0  # a complete file: nothing left to do
    assert read_measurements(out) == after


def test_a_string_of_variants_is_read_as_the_command_line_reads_it(tmp_path):
    """``Workloads(variants="original")`` was split into its letters ("unknown block variant(s) ['o', 'r', ...]")."""
    chosen = Workloads(variants="original, linear", model_variants="original", in_situ="merged", blocks="features.1")
    assert (chosen.variants, chosen.model_variants, chosen.in_situ) == (("original", "linear"), ("original",), ("merged",))
    result = measure(ModelRef.of("mobilenet_v2", resolution=32), settings=BackendSettings(threads=1),
                     workloads=Workloads(variants="linear", model_variants=(), blocks="features.1"), timing=FEWER,
                     out=tmp_path, progress=False)
    assert [(r.name, r.variant) for r in result.measurements if r.scope != "probe"] == [("features.1", "linear")]
    # given a folder, the file is named after the settings (docs/measuring.md)
    assert result.path == tmp_path / "mobilenet_v2_32px_torch_cpu_fp32_b1.jsonl"


def test_resume_drops_a_line_cut_short_by_a_kill(tmp_path):
    out = tmp_path / "m.jsonl"
    measure(ModelRef.of("mobilenet_v2", resolution=32), settings=BackendSettings(threads=1),
            workloads=Workloads(blocks="features.1", model_variants=()), timing=FEWER, out=out, progress=False)
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines[:2]) + "\n" + lines[2][:100])  # the last write was cut off
    with pytest.warns(UserWarning, match="cut short"):
        result = measure(ModelRef.of("mobilenet_v2", resolution=32), settings=BackendSettings(threads=1),
                         workloads=Workloads(blocks="features.1", model_variants=()), timing=FEWER, out=out, resume=True,
                         progress=False)
    # the two the cut group lacks are timed with its original again, so that both are paired with one
    assert result.new == 3 and result.skipped == 1
    records = [r for r in read_measurements(out) if r.scope != "probe"]
    assert [r.variant for r in records] == [*EAGER[:2], "original", *EAGER[2:]]
    assert len({r.group for r in records[2:]}) == 1 and records[2].group != records[0].group


def test_a_file_resumed_with_more_variants_times_them_paired_with_an_original_of_their_group(tmp_path):
    """A records file measured with two variants, resumed with a third (as a file of before PyTorch eager's default
    gained ``linear`` is): the new variant is timed in one group with the block's original again, so the LUT gives it
    a paired ratio (a variant timed alone has none: NaN), and the first group's pair keeps its own."""
    from dsprof.lut import build_lut

    out = tmp_path / "m.jsonl"
    for variants, resume in ((("original", "merged"), False), (("original", "merged", "linear"), True)):
        measure(ModelRef.of("mobilenet_v2", resolution=32), settings=BackendSettings(threads=1),
                workloads=Workloads(variants, (), blocks="features.1"), timing=FEWER, out=out, resume=resume,
                progress=False)
    records = [r for r in read_measurements(out) if r.scope == "block"]
    assert [r.variant for r in records] == ["original", "merged", "original", "linear"]
    assert records[0].group == records[1].group != records[2].group == records[3].group
    frame = build_lut([out]).to_dataframe()
    lut = frame[frame.scope == "block"].set_index("variant")
    assert lut.loc["linear", "ratio"] == lut.loc["linear", "ratio"]  # paired: not NaN
    assert lut.loc["merged", "ratio"] == lut.loc["merged", "ratio"]
    assert lut.loc["original", "groups"] == 2  # the original's entry is the median of both its groups
    # resumed once more, the file is whole: nothing is timed again
    again = measure(ModelRef.of("mobilenet_v2", resolution=32), settings=BackendSettings(threads=1),
                    workloads=Workloads(("original", "merged", "linear"), (), blocks="features.1"), timing=FEWER,
                    out=out, resume=True, progress=False)
    assert again.new == 0 and again.skipped == 3


# ---- bad input: clear messages, exit status 2 ----------------------------------------------------


def run_cli(capsys, *args):
    code = main(["measure", *args, *FAST_ARGS])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "args,message",
    [
        (["--model", "mobilenet_v9"], "unknown model 'mobilenet_v9'"),
        (["--backend", "tensorrt"], "unknown backend 'tensorrt'"),
        (["--dtype", "int4"], "unknown dtype 'int4'"),
        (["--dtype", "fp16"], "fp16 on the CPU is not supported"),
        (["--device", "tpu"], "unknown device 'tpu'"),
        (["--backend", "tflite", "--dtype", "bf16"], "supports fp32"),
        (["--backend", "onnxruntime", "--channels-last"], "--channels-last applies to --backend torch and torch-compile only"),
        (["--variants", "original,squeezed"], "unknown block variant(s) ['squeezed']"),
        (["--blocks", "features.99"], "no block matches"),
        (["--batch", "0"], "--batch 0: give 1 or more images"),
        (["--target-precision", "5"], "--target-precision 5.0: give a fraction"),
    ],
)
def test_bad_input_is_a_clear_error(capsys, tmp_path, args, message):
    code, err = run_cli(capsys, "--resolution", "32", "--out", str(tmp_path), *args)
    assert code == 2 and message in err, err
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given without a GPU")
def test_cuda_without_cuda_is_a_clear_error(capsys, tmp_path):
    code, err = run_cli(capsys, "--device", "cuda", "--out", str(tmp_path))
    assert code == 2 and "--device cuda was requested but PyTorch sees no CUDA GPU" in err


def test_unwritable_output_folder_is_a_clear_error(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    code, err = run_cli(capsys, "--resolution", "32", "--out", str(blocker / "results"))
    assert code == 2 and "cannot write the measurement file" in err and "--out" in err


def test_existing_file_needs_resume_or_overwrite(capsys, tmp_path):
    out = tmp_path / "m.jsonl"
    out.write_text("")
    code, err = run_cli(capsys, "--resolution", "32", "--out", str(out), "--blocks", "features.1")
    assert code == 2 and "--resume" in err and "--overwrite" in err


def test_corrupt_resume_file_is_a_clear_error(capsys, tmp_path):
    out = tmp_path / "m.jsonl"
    out.write_text('{"not": "a record"}\n')
    code, err = run_cli(capsys, "--resolution", "32", "--out", str(out), "--resume")
    assert code == 2 and "line 1: not a dsprof measurement record" in err


def test_resume_with_other_settings_is_a_clear_error(capsys, tmp_path):
    out = tmp_path / "m.jsonl"
    measure(ModelRef.of("mobilenet_v2", resolution=32), settings=BackendSettings(threads=1),
            workloads=Workloads(blocks="features.1", model_variants=()), timing=FEWER, out=out, progress=False)
    code, err = run_cli(capsys, "--resolution", "32", "--out", str(out), "--resume", "--width", "1.4")
    assert code == 2 and "other settings" in err and "model_options" in err


def test_cli_prints_the_summary(capsys, tmp_path):
    code = main(["measure", "--resolution", "32", "--out", str(tmp_path), "--blocks", "features.1,features.2", *FAST_ARGS])
    out = capsys.readouterr().out
    assert code == 0
    assert "features.1" in out and "features.2" in out and "model: mobilenet_v2" in out and "FPS" in out
    assert "stem: mobilenet_v2" in out and "head: mobilenet_v2" in out
    assert "12 workloads measured" in out  # 2 blocks x 4 variants, the model and its FLOPs-matched twin, stem, head


def test_cli_times_models_from_a_plan_and_a_merged_model_file(capsys, tmp_path):
    from dsprof.merging import merge_model, save_merged

    from dsprof.planning.decide import merge_rule

    net = get_model("mobilenet_v2", resolution=32)
    saved = save_merged(merge_model(net, merge_rule(net, merge_by="macs").decide("mbv2-ds-b").plan), tmp_path / "ds-b.pt")
    out = tmp_path / "m.jsonl"
    code = main(["measure", "--resolution", "32", "--out", str(out), "--blocks", "none", "--model-variants", "original",
                 "--plan", "mbv2-ds-a", "--merge-by", "macs", "--merged-model", str(saved), *FAST_ARGS])
    assert code == 0, capsys.readouterr().err
    records = [r for r in read_measurements(out) if r.scope != "probe"]
    # no blocks timed, so no stem and head (they serve predictions from blocks): the original and the two models
    assert [(r.scope, r.name, r.variant) for r in records] == [
        ("model", "mobilenet_v2", "original"), ("model", "mbv2-ds-a", "custom"), ("model", "ds-b", "custom")]
    assert len({r.group for r in records}) == 1 and records[1].macs < records[0].macs
    out = capsys.readouterr().out
    assert "model: mbv2-ds-a" in out
    # each paired with the original, the speed-up first: the median of the per-round ratios
    ratio = float(np.median(np.array(records[0].samples_s) / np.array(records[1].samples_s)))
    assert f"mbv2-ds-a: measured speed-up {ratio:.3f}x over the original" in out


# ---- CUDA: skipped here, run where a GPU is at hand -----------------------------------------------

cuda = pytest.mark.cuda  # skipped without a GPU (conftest.py)


@cuda
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_cuda_per_block_records(tmp_path, dtype):
    result = measure(ModelRef.of("mobilenet_v2", resolution=64),
                     settings=BackendSettings(device="cuda", dtype=dtype, channels_last=True), batch=8, timing=FEWER,
                     out=tmp_path, progress=False)
    check_block_records(result.measurements, get_model("mobilenet_v2", resolution=64), EAGER, batch=8)
    r = result.measurements[0]
    assert r.device == "cuda:0" and r.threads is None and r.batch == 8
    assert r.device_name == torch.cuda.get_device_name(0)
    assert r.environment["gpu"] and "sm_clock_mhz" in r.state_before


@cuda
def test_cuda_out_of_memory_is_recorded_and_the_run_goes_on(tmp_path):
    huge = 1 << 16  # a batch no GPU holds at 224 x 224 for the first blocks
    result = measure(ModelRef.of("mobilenet_v2", resolution=224), settings=BackendSettings(device="cuda"), batch=huge,
                     workloads=Workloads(blocks="features.1", model_variants=()), timing=FEWER, out=tmp_path,
                     progress=False)
    assert all(r.error and "out of memory" in r.error for r in result.measurements)


def test_environment_id_separates_environments_not_hosts_or_times():
    env = environment()
    assert env["cpu"]["logical_cores"] == os.cpu_count() and env["versions"]["torch"]
    moved = dict(env, host="elsewhere", time_utc="2000-01-01T00:00:00+00:00")
    assert environment_id(moved) == environment_id(env)
    upgraded = dict(env, versions=dict(env["versions"], torch="0.0"))
    assert environment_id(upgraded) != environment_id(env) and len(environment_id(env)) == 12


def test_a_session_times_the_groups_it_is_given_in_one_file_and_resumes_them(tmp_path):
    """The profiler only times the groups it is given (issue #44): one `MeasureSession` times the groups built from the
    request, then a group built after them (as `dsprof.measure(calibrate=True)` builds its groups from the records),
    into the one file; Ctrl-C during the later groups keeps what is timed, and a resumed session skips it."""
    from dsprof.errors import Interrupted
    from dsprof.profiler import MeasureRequest, model_workload, open_session

    request = MeasureRequest(ModelRef.of("mobilenet_v2", resolution=32), settings=BackendSettings(threads=1),
                             workloads=Workloads(("original", "merged"), (), blocks="features.1"), timing=FEWER,
                             out=tmp_path / "m.jsonl")

    def later(session):  # a group built from what is timed before it, then Ctrl-C before the next
        assert [(r.name, r.variant) for r in session.records if r.scope == "block"] == [
            ("features.1", "original"), ("features.1", "merged")]
        yield [model_workload(session.net, session.label, "original", session.input_size)]
        raise KeyboardInterrupt

    with pytest.raises(Interrupted) as stopped:
        with open_session(request, progress=False) as session:
            assert [[(w.name, w.variant) for w in g] for g in session.todo] == [
                [("features.1", "original"), ("features.1", "merged")]]
            try:
                session.time(session.todo)
                session.time(later(session))
            except KeyboardInterrupt:
                raise session.interrupted(" (then more)") from None
    # both workloads of the built groups are in the file, and the later group's one as well
    assert str(stopped.value) == (f"interrupted: 2 of 2 workloads saved in {tmp_path / 'm.jsonl'} (then more); "
                                  "`resume=True` continues")
    records = read_measurements(tmp_path / "m.jsonl")
    assert [(r.scope, r.variant) for r in records] == [("block", "original"), ("block", "merged"), ("probe", "original"),
                                                       ("model", "original"), ("probe", "original")]
    assert len({r.group for r in records}) == 4  # two groups, each with its own probe after it
    with open_session(replace(request, resume=True), progress=False) as again:
        assert again.todo == [] and len(again.existing) == 5
        again.time(again.todo)
        again.time([[model_workload(again.net, again.label, "custom", again.input_size)]])
    result = again.result()
    assert (result.new, result.skipped, result.calibrated) == (1, 2, 1)  # the later group's one workload
    assert len(read_measurements(tmp_path / "m.jsonl")) == 7


def test_the_keywords_of_before_still_time_the_same_with_one_warning(tmp_path):
    """`dsprof.profiler.measure`'s keywords of before (issue #44) time what the objects time, with one
    DeprecationWarning that names each one's parameter and field now; `planned=` (the callback calibration was) is
    gone."""
    new = measure(ModelRef.of("mobilenet_v2", resolution=32), settings=BackendSettings(threads=1),
                  workloads=Workloads(("original",), (), blocks="features.1"), timing=FEWER, out=tmp_path / "new.jsonl",
                  progress=False)
    with pytest.warns(DeprecationWarning) as said:
        old = measure("mobilenet_v2", resolution=32, threads=1, variants=("original",), model_variants=(),
                      blocks="features.1", timing=FEWER, out=tmp_path / "old.jsonl", progress=False)
    assert [str(w.message) for w in said if w.category is DeprecationWarning] == [
        "dsprof.profiler.measure(resolution=, threads=, variants=, model_variants=, blocks=) is now "
        "dsprof.profiler.measure(model=ModelRef.of(resolution=), settings=BackendSettings(threads=), "
        "workloads=Workloads(variants=, model_variants=, blocks=)); the keywords of before go in dsprof 0.2"]
    key = lambda r: (r.scope, r.name, r.variant, r.spec, r.input_shape, r.threads, r.model_options)  # noqa: E731
    assert [key(r) for r in old.measurements] == [key(r) for r in new.measurements]
    assert [r.scope for r in old.measurements] == ["block", "probe"]
    with pytest.raises(TypeError, match="'planned'"):
        measure("mobilenet_v2", planned=lambda *a: [], out=tmp_path / "none.jsonl")



def test_a_whole_model_the_runtime_cannot_prepare_is_said_once_with_what_it_means(tmp_path, capfd):
    """A timm CondConv model (per-image kernels, TF padding) on ONNX Runtime: its whole model does not export, the run
    went on and said "N workloads measured", and `dsprof plan` then asked to time it again with `--resume`, which
    fails the same way. The run now says what failed, that a LUT of it prices no plan, and that timing again will
    not help; the exporter's dump of the whole graph (thousands of lines on standard output) is kept off it."""
    out = tmp_path / "m.jsonl"
    assert main(["measure", "--model", "timm:tf_efficientnet_cc_b0_8e", "--resolution", "32", "--backend",
                 "onnxruntime", "--threads", "1", "--blocks", "none", "--model-variants", "original", "--budget",
                 "0.01", "--warmup", "0", "--max-warmup", "0.05", "--min-samples", "3", "--max-samples", "4",
                 "--out", str(out), "--no-progress"]) == 0
    said = capfd.readouterr()
    lines = said.out.splitlines()
    assert "Torch IR graph" not in said.out + said.err and len(lines) < 40, len(lines)
    records = [r for r in read_measurements(out) if r.scope != "probe"]
    failed = [r for r in records if not r.ok]
    assert ("model", "original") in {(r.scope, r.variant) for r in failed}
    assert all("ONNX export of convolution" in r.error for r in failed), failed
    assert lines[-2].startswith(f"{len(records)} workload{'' if len(records) == 1 else 's'} measured")
    assert lines[-1].startswith(f"{len(failed)} of them failed, e.g. ")
    assert "failed to prepare: SymbolicValueError" in lines[-1] and len(lines[-1]) < 500
    assert ("without the whole model a LUT of this file prices no plan of timm:tf_efficientnet_cc_b0_8e on "
            "onnxruntime: time it on a runtime that prepares it") in lines[-1]
    assert lines[-1].endswith("(timed again with the same model and settings, they will likely fail the same way)")
