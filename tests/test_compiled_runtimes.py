"""The torch-compile and openvino backends (issue #39), run for real: torch.compile with Inductor building C++ kernels
with this machine's compiler (one compile cache for the session: tests/conftest.py), and OpenVINO's CPU plugin.

Expected values come from elsewhere than the code under test: what a block computes from float64 PyTorch eager of the
block as built (BatchNorm randomised, unfolded); versions from the installed packages' metadata; the CPU plugin's
name and the compiled model's settings from OpenVINO asked directly; graph breaks from a module written to break.
Small modules and sizes (a few blocks, 32 px), one resolution per shape. No timing asserts.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torchvision.models.mobilenetv2 import InvertedResidual

from conftest import randomise_bn
from dsprof.cli import main
from dsprof.device_context import DeviceContext, short_labels
from dsprof.errors import DeviceError, DsprofError
from dsprof.lut import LUT, build_lut
from dsprof.merging.fold import fold_batchnorm
from dsprof.profiler import TimingConfig, Workloads, measure
from dsprof.models import ModelRef
from dsprof.records.measurement import read_measurements
from dsprof.profiler.backends import BackendSettings, WorkloadUnsupported, get_backend
from dsprof.models.onnx_export import export_onnx
from dsprof.records.measurement import record_checksum

pytestmark = pytest.mark.usefixtures("one_thread")
BACKENDS = ["torch-compile", pytest.param("openvino", marks=pytest.mark.openvino)]
#: Three or four one-call samples a workload: `max_samples` ends every group within a few milliseconds. The budget
#: only ends a group whose calls are slow, after 2 rounds (fewer than `min_samples`, which a test asserts): at 0.02 s
#: a workload of the `runs` fixture got 2 samples under `pytest -n 2` on a loaded machine; 0.1 s costs nothing where
#: the calls take what they should.
FAST = TimingConfig(warmup_s=0.0, warmup_min_iters=1, warmup_max_s=0.01, first_warmup_s=0.0,
                    min_samples=3, max_samples=4, budget_s=0.1, min_sample_s=0.0)
TINY = {"depths": [1] * 7}  # MobileNetV2 with one block per stage


def _block(kind: str) -> tuple[nn.Module, tuple[int, int, int, int]]:
    """A real block with randomised BatchNorm, and the input shape it is checked at: MobileNetV2's stride-2
    inverted residual at an odd size (33 px: the border of a stride-2 3x3 convolution), its residual one, and a
    dense 5x5 convolution (what merging makes of a span) with ReLU6."""
    torch.manual_seed(0)
    if kind == "stride2":
        return randomise_bn(InvertedResidual(16, 24, stride=2, expand_ratio=6)).eval(), (1, 16, 33, 33)
    if kind == "residual":
        return randomise_bn(InvertedResidual(24, 24, stride=1, expand_ratio=6), seed=1).eval(), (2, 24, 16, 16)
    return nn.Sequential(nn.Conv2d(16, 24, 5, stride=2, padding=2), nn.ReLU6()).eval(), (1, 16, 32, 32)


def _reference(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """float64 PyTorch eager of the module as built (BatchNorm not folded), as float32."""
    import copy

    with torch.no_grad():
        return copy.deepcopy(module).double()(x.double()).float()


@pytest.mark.parametrize("kind", ["stride2", "residual", "dense"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_compiled_block_computes_what_eager_computes(backend, kind, tmp_path):
    module, shape = _block(kind)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    folded = fold_batchnorm(module, x[:1])  # what every timed workload is: BatchNorm folded into its convolution
    impl = get_backend(BackendSettings(backend, threads=1))
    if backend == "torch-compile":
        call, info = impl.ready(folded, x)
        with torch.inference_mode():
            got = call(x)
        assert info["graph_breaks"] == 0 and info["mode"] == "default" and info["compile_s"] > 0
    else:
        compiled = impl.compile(export_onnx(folded, shape, tmp_path / "block.onnx"))
        got = torch.from_numpy(np.asarray(compiled(x.numpy())[0]))
        # OpenVINO's own reading of the settings the backend gives every model
        assert compiled.get_property("PERFORMANCE_HINT") == "LATENCY"
        assert compiled.get_property("INFERENCE_NUM_THREADS") == 1
        assert compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name() == "f32"
        assert compiled.get_property("ENABLE_CPU_PINNING") is False
    ref = _reference(module, x)
    assert got.shape == ref.shape
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.openvino
def test_openvino_bf16_runs_in_bf16_where_the_cpu_has_it(tmp_path):
    import openvino as ov

    module, shape = _block("dense")
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    if "BF16" not in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
        with pytest.raises(DeviceError, match="no bf16 support"):
            get_backend(BackendSettings("openvino", dtype="bf16", threads=1))
        return
    impl = get_backend(BackendSettings("openvino", dtype="bf16", threads=1))
    compiled = impl.compile(export_onnx(module, shape, tmp_path / "dense.onnx"))
    assert compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name() == "bf16"
    got = torch.from_numpy(np.asarray(compiled(x.numpy())[0]))
    ref = _reference(module, x)
    # bf16 keeps 8 bits of mantissa: within a few per cent of the float64 result, and not equal to fp32's to 1e-4
    torch.testing.assert_close(got, ref, rtol=5e-2, atol=5e-2)
    assert (got - ref).abs().max() > 1e-4


@pytest.mark.cuda
@pytest.mark.parametrize("dtype, channels_last, tolerance", [("fp32", False, 1e-3), ("fp16", True, 2e-2)])
def test_torch_compile_on_cuda_computes_what_eager_computes_and_is_timed_with_events(dtype, channels_last, tolerance,
                                                                                      tmp_path):
    from dsprof.profiler.timing import CudaEventTimer

    module, shape = _block("stride2")
    shape = (8, *shape[1:])
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    folded = fold_batchnorm(module, x[:1])
    settings = BackendSettings("torch-compile", device="cuda", dtype=dtype, channels_last=channels_last)
    impl = get_backend(settings)
    torch_dtype = {"fp32": torch.float32, "fp16": torch.float16}[dtype]
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    on_gpu = folded.cuda().to(dtype=torch_dtype, memory_format=fmt)
    xg = x.cuda().to(dtype=torch_dtype, memory_format=fmt)
    call, info = impl.ready(on_gpu, xg)
    with torch.inference_mode():
        got = call(xg).float().cpu()
    assert info["graph_breaks"] == 0 and info["compile_s"] > 0
    torch.testing.assert_close(got, _reference(module, x), rtol=tolerance, atol=tolerance)
    prepared = impl.prepare(folded, shape, tmp_path)
    assert isinstance(prepared.timer, CudaEventTimer) and prepared.threads is None
    with torch.inference_mode():
        assert prepared.timer(prepared.run, 3) > 0
    prepared.close()


class _Branchy(nn.Module):
    """A network whose forward branches on its data: Dynamo cannot capture it as one graph (one graph break)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        if y.sum() > 0:
            return y * 2
        return y


class _Mystery(torch.autograd.Function):
    """Doubles its input in PyTorch; exported to ONNX as an operator of a domain no runtime knows."""

    @staticmethod
    def forward(ctx, x):  # noqa: ANN001
        return x * 2

    @staticmethod
    def symbolic(g, x):  # noqa: ANN001
        return g.op("dsprof.test::Mystery", x)


class _Unknown(nn.Module):
    """A convolution followed by `_Mystery`: it exports to ONNX, and OpenVINO has no conversion rule for it."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _Mystery.apply(self.conv(x))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{backend: (the measure result, its log lines)}: a tiny MobileNetV2 at 32 px, one block (original, merged),
    the whole model, its stem and head, and one more whole model that the runtime cannot run."""
    tmp = tmp_path_factory.mktemp("compiled")
    out = {}
    for backend, refused in (("torch-compile", _Branchy()), ("openvino", _Unknown())):
        lines: list[str] = []
        result = measure(ModelRef.of("mobilenet_v2", options=TINY, resolution=32),
                         settings=BackendSettings(backend=backend, threads=1),
                         workloads=Workloads(blocks="features.2", variants=("original", "merged"), model_variants=("original",)),
                         extra_models={"refused": refused.eval()}, timing=FAST, out=tmp / f"{backend}.jsonl",
                         progress=False, log=lines.append)
        out[backend] = (result, lines)
    return out


@pytest.mark.openvino  # the fixture measures through both
@pytest.mark.parametrize("backend", ["torch-compile", "openvino"])
def test_a_workload_the_runtime_refuses_is_one_line_and_the_run_goes_on(runs, backend):
    result, lines = runs[backend]
    records = [r for r in result.measurements if r.scope != "probe"]
    refused = [r for r in records if r.name == "refused"]
    assert len(refused) == 1 and not refused[0].ok and refused[0].samples_s == ()
    error = refused[0].error
    assert "\n" not in error and len(error) < 400
    if backend == "torch-compile":
        assert "torch.compile (default) refused it: 1 graph break" in error
    else:
        assert "OpenVINO cannot run it" in error and "dsprof.test.Mystery" in error
    # said once, in one line, while the run went on: the block, the model, its stem and head were all timed
    assert [line for line in lines if line.startswith("refused custom:")] == [f"refused custom: {error}"]
    timed = {(r.scope, r.name, r.variant) for r in records if r.ok}
    assert timed == {("block", "features.2", "original"), ("block", "features.2", "merged"),
                     ("model", "mobilenet_v2", "original"), ("stem", "mobilenet_v2", "original"),
                     ("head", "mobilenet_v2", "original")}
    assert all(len(r.samples_s) >= FAST.min_samples for r in records if r.ok)
    assert read_measurements(result.path) == result.measurements  # all of it in the file


@pytest.mark.openvino
def test_torch_compile_records_carry_versions_mode_and_compile_seconds(runs):
    result, _ = runs["torch-compile"]
    ok = [r for r in result.measurements if r.ok]
    for r in ok:
        assert (r.backend, r.compile, r.layout, r.threads) == ("torch-compile", "default", "nchw", 1)
        assert str(r.context).endswith("/cpu/torch-compile/fp32/nchw/b1/t1/default")
        # compilation and its first calls are outside the samples, and kept: seconds per workload
        assert r.runtime_info["compile_s"] > 0 and r.runtime_info["graph_breaks"] == 0 and r.runtime_info["mode"] == "default"
        facts = r.environment["runtime"]
        assert facts["torch"] == torch.__version__ and facts["inductor"] == f"torch {torch.__version__}"
        assert facts["mode"] == "default" and facts["fullgraph"] is True and facts["mode_options"] == {}
        assert facts["cxx_version"]  # the C++ compiler that built the kernels, by its own --version
        assert r.environment["versions"]["torch"] == metadata.version("torch")


@pytest.mark.openvino
def test_openvino_records_carry_version_plugin_device_and_settings(runs):
    import openvino as ov

    result, _ = runs["openvino"]
    core = ov.Core()
    for r in (r for r in result.measurements if r.ok):
        assert (r.backend, r.compile, r.layout, r.threads) == ("openvino", "", "nchw", 1)
        assert r.environment["versions"]["openvino"] == metadata.version("openvino")
        facts = r.environment["runtime"]
        assert facts["openvino"] == ov.get_version() and facts["device"] == "CPU"
        assert facts["device_name"] == core.get_property("CPU", "FULL_DEVICE_NAME")
        assert (facts["performance_hint"], facts["inference_precision"], facts["inference_num_threads"]) == \
            ("LATENCY", "f32", 1)
        # and each compiled model's own reading of them
        assert r.runtime_info["performance_hint"] == "LATENCY" and r.runtime_info["inference_precision"] == "f32"
        assert r.runtime_info["inference_num_threads"] == 1 and r.runtime_info["num_streams"] == 1
        assert r.runtime_info["cpu_pinning"] is False and r.runtime_info["compile_s"] > 0


@pytest.mark.openvino
def test_the_lut_keys_both_contexts_apart(runs, tmp_path):
    lut = build_lut([runs[b][0].path for b in ("torch-compile", "openvino")])
    keys = {str(k).split("/", 1)[1] for k in lut.devices()}
    assert keys == {"cpu/torch-compile/fp32/nchw/b1/t1/default", "cpu/openvino/fp32/nchw/b1/t1"}
    back = LUT.load(lut.save(tmp_path / "lut.csv"))
    assert back.devices() == lut.devices()
    assert set(back.to_dataframe()["compile"]) == {"default", ""}
    assert set(short_labels(lut.devices()).values()) == {"torch-compile/cpu t1", "openvino/cpu t1"}


# -- one concept, one place: torch.compile is the torch-compile backend and its mode ---------------------------------

@pytest.mark.openvino
def test_older_spellings_of_torch_compile_read_as_the_torch_compile_backend(runs, tmp_path):
    key = DeviceContext.from_str("abc/cuda:0/torch/fp16/channels_last/b128/t0/compiled")  # an older dsprof's key
    assert (key.backend, key.compile) == ("torch-compile", "default")
    assert str(key) == "abc/cuda:0/torch-compile/fp16/channels_last/b128/t0/default"
    mode = DeviceContext.from_str("abc/cpu/torch-compile/fp32/nchw/b1/t1/max-autotune-no-cudagraphs")
    assert mode.compile == "max-autotune-no-cudagraphs" and DeviceContext.from_str(str(mode)) == mode
    assert str(DeviceContext("abc", "cpu", "openvino", "fp32", "nchw", 1, 1)) == "abc/cpu/openvino/fp32/nchw/b1/t1"
    # and two files: a run in another mode is not a resume of the default's
    from dsprof.profiler.runner import measurement_path

    names = {measurement_path("out", "m", BackendSettings("torch-compile", compile=m), 1, 32).name
             for m in ("default", "max-autotune-no-cudagraphs")}
    assert names == {"m_32px_torch-compile_cpu_fp32_b1.jsonl",
                     "m_32px_torch-compile-max-autotune-no-cudagraphs_cpu_fp32_b1.jsonl"}
    assert BackendSettings("torch", compile=True) == BackendSettings("torch-compile", compile="default")
    assert BackendSettings("torch-compile").compile == "default"
    # two modes are two contexts, and their labels say which is which
    labels = short_labels([DeviceContext("e", "cpu", "torch-compile", "fp32", "nchw", 1, 1, m)
                           for m in ("default", "max-autotune-no-cudagraphs")])
    assert sorted(labels.values()) == ["torch-compile/cpu t1 mode default",
                                       "torch-compile/cpu t1 mode max-autotune-no-cudagraphs"]

    # a record of an older dsprof: backend torch, compile true, no runtime field, its checksum over those values
    data = json.loads(runs["torch-compile"][0].measurements[0].to_json())
    data.pop("sha256")
    data.pop("runtime_info")
    data.update(backend="torch", compile=True)
    data["sha256"] = record_checksum(data)
    old = tmp_path / "old.jsonl"
    old.write_text(json.dumps(data) + "\n")
    (record,) = read_measurements(old)  # intact: its checksum is over what it holds
    assert (record.backend, record.compile, record.runtime_info) == ("torch-compile", "default", {})
    # a LUT of an older dsprof: compile True beside backend torch
    frame = build_lut([old]).to_dataframe()
    frame["backend"], frame["compile"] = "torch", "True"
    (context,) = LUT(frame, "old").devices()
    assert (context.backend, context.compile) == ("torch-compile", "default")


@pytest.mark.parametrize("settings, says", [
    (dict(backend="openvino", device="cuda"), "runs on the CPU only"),
    (dict(backend="openvino", dtype="fp16"), "fp16 on the CPU is not supported"),
    (dict(backend="openvino", channels_last=True), "`settings=BackendSettings(channels_last=True)` applies to "
     "`settings=BackendSettings(backend=)` torch and torch-compile"),
    (dict(backend="onnxruntime", compile="default"), "applies to `settings=BackendSettings(backend='torch-compile')` only"),
    (dict(backend="torch-compile", compile="reduce-overhead"), "unknown torch.compile mode 'reduce-overhead'"),
])
def test_settings_that_cannot_run_are_refused_in_one_line(settings, says):
    with pytest.raises(DeviceError) as caught:
        get_backend(BackendSettings(**settings))
    assert says in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("argv, says", [
    (["--backend", "onnxruntime", "--compile-mode", "default"], "applies to --backend torch-compile only"),
    (["--backend", "openvino", "--device", "cuda"], "runs on the CPU only"),
    (["--backend", "torch-compile", "--remote", "user@board"], "--remote cannot time --backend torch-compile"),
])
def test_the_command_line_refuses_them_in_one_line(argv, says, tmp_path, capsys):
    code = main(["measure", "--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution", "32",
                 "--out", str(tmp_path / "m"), *argv])
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if not line.startswith("warning: ")]
    assert code == 2 and len(lines) == 1 and says in lines[0] and "Traceback" not in err, err
    assert not list(tmp_path.glob("m/*"))  # nothing written


def test_workload_unsupported_is_what_the_runner_records():
    # the runner records a RuntimeError raised while preparing and goes on; WorkloadUnsupported is one
    assert issubclass(WorkloadUnsupported, RuntimeError) and not issubclass(WorkloadUnsupported, DsprofError)


class _CachesOnce(nn.Module):
    """Fills a dict on its first call that its forward reads from then on, as timm's EfficientViT keeps its attention
    biases: compiled again once, on the second call, then settled."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.cache: dict[str, torch.Tensor] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if "bias" not in self.cache:
            self.cache["bias"] = torch.full((1, 8, 1, 1), 0.5)
        return self.conv(x) + self.cache["bias"]


class _NewTagEveryCall(nn.Module):
    """A string attribute its forward branches on, changed on every call: its guards fail on every call."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.calls = 0
        self.tag = ""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        self.tag = "odd" if self.tag != "odd" else "even"
        return self.conv(x) * (2.0 if self.tag == "odd" else 3.0)


def test_a_module_that_fills_a_cache_on_its_first_call_is_timed_compiled_and_one_that_never_settles_is_refused():
    """timm's EfficientViT-M0 was refused by torch.compile's timing ("compiled it again on its second call") although
    its second compile is its last. A module like it is timed compiled and computes what it does eagerly; one whose
    guards fail on every call is still refused, in one line."""
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    impl = get_backend(BackendSettings("torch-compile", threads=1))
    module = _CachesOnce().eval()
    call, info = impl.ready(module, x)
    with torch.inference_mode():
        torch.testing.assert_close(call(x), module.conv(x) + 0.5, rtol=1e-5, atol=1e-5)
    assert info["graph_breaks"] == 0
    with pytest.raises(WorkloadUnsupported) as refused:
        impl.ready(_NewTagEveryCall().eval(), x)
    assert str(refused.value) == ("torch.compile (default) compiled it again on call 3 (its guards keep failing); it "
                                  "cannot be timed compiled")
