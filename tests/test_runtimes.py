"""The backend registry (dsprof.runtimes): one table that the command line, export, import and --remote
read, and that the standalone bundle runner must agree with."""

from dsprof.edge import runner
from dsprof.profiler.backends import get_backend
from dsprof.profiler.backends.base import BackendSettings
from dsprof.runtimes import BACKENDS as REGISTRY
from dsprof.runtimes import FORMATS, RUNTIMES, runtime_of_format


def test_the_runner_knows_the_same_runtimes_formats_and_layouts():
    # the runner ships to devices without dsprof, so it keeps its own copy of (format, layout) per runtime
    assert runner.RUNTIMES == {r.name: (r.format, r.layout) for r in RUNTIMES.values()}


def test_backend_to_runtime_to_file_format():
    chain = {b.name: (b.remote_runtime, FORMATS[RUNTIMES[b.remote_runtime].format]) for b in REGISTRY.values()
             if b.remote_runtime}
    assert chain == {"torch": ("torchscript", ".pt"), "onnxruntime": ("onnxruntime", ".onnx"),
                     "openvino": ("openvino", ".onnx"), "tflite": ("tflite", ".tflite")}
    assert tuple(REGISTRY) == ("torch", "torch-compile", "onnxruntime", "openvino", "tflite")
    # torch.compile builds its kernels where they run: no bundle runtime, and a line that says so
    assert REGISTRY["torch-compile"].remote_runtime is None and "on the device" in REGISTRY["torch-compile"].no_remote
    assert {fmt: runtime_of_format(fmt) for fmt in FORMATS} == {
        "onnx": "onnxruntime", "tflite": "tflite", "torchscript": "torchscript"}
    # what imported records are named: benchmark_model times TFLite files; TorchScript stays apart from eager;
    # OpenVINO reads the bundle's ONNX files and its records are OpenVINO's
    assert RUNTIMES["benchmark_model"].records_backend == "tflite"
    assert RUNTIMES["torchscript"].records_backend == "torchscript"
    assert RUNTIMES["openvino"].records_backend == "openvino" and RUNTIMES["openvino"].format == "onnx"


def test_get_backend_loads_the_registered_implementation():
    backend = get_backend(BackendSettings("onnxruntime", threads=1))
    assert type(backend).__name__ == "OnnxRuntimeBackend" and backend.name == "onnxruntime"
    assert type(get_backend(BackendSettings("torch"))).__name__ == "TorchBackend"
    assert type(get_backend(BackendSettings("torch-compile", threads=1))).__name__ == "TorchCompileBackend"
    assert type(get_backend(BackendSettings("openvino", threads=1))).__name__ == "OpenVINOBackend"
