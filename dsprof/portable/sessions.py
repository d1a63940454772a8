"""How each runtime is opened for timing: ONNX Runtime's session, OpenVINO's compiled model, the TFLite interpreter.

Written once for both places that time a model file: the profiler's backends (`dsprof.profiler.backends`) and the
bundle runner (`dsprof.edge.runner`, on a device without dsprof), so that a bundle timed on a board runs its files
with the settings `dsprof measure` uses. Each function takes the runtime's module (or class), imported by the caller,
and plain options: this file imports no runtime. Standard library only, and Python 3.6 or later: every export bundle
carries this very file beside its runner, as it carries the timing loop.
"""

__all__ = ["OPENVINO_DEVICE", "OPENVINO_PRECISIONS", "OPENVINO_READ_BACK", "onnxruntime_run", "onnxruntime_session",
           "openvino_compile", "openvino_config", "openvino_read_back", "tflite_interpreter"]

#: dsprof dtype -> OpenVINO inference precision.
OPENVINO_PRECISIONS = {"fp32": "f32", "bf16": "bf16"}
#: The OpenVINO plugin every model is compiled for.
OPENVINO_DEVICE = "CPU"
#: The properties read back from each compiled OpenVINO model, under the names the records use.
OPENVINO_READ_BACK = {"PERFORMANCE_HINT": "performance_hint", "INFERENCE_PRECISION_HINT": "inference_precision",
                      "INFERENCE_NUM_THREADS": "inference_num_threads", "NUM_STREAMS": "num_streams",
                      "ENABLE_CPU_PINNING": "cpu_pinning", "EXECUTION_MODE_HINT": "execution_mode"}


def _cuda_index(device):
    return int(device.split(":")[1]) if ":" in device else 0


def onnxruntime_session(ort, path, threads, device="cpu"):
    """An ONNX Runtime ``InferenceSession`` of the file ``path`` (``ort``: the onnxruntime module): every graph
    optimisation, warnings and errors only, ``threads`` intra-op threads and one inter-op thread; the CUDA provider
    (then the CPU one) for a ``cuda[:N]`` ``device``, else the CPU provider."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    options.intra_op_num_threads = int(threads)
    options.inter_op_num_threads = 1
    if device.startswith("cuda"):
        providers = [("CUDAExecutionProvider", {"device_id": _cuda_index(device)}), "CPUExecutionProvider"]
    else:
        providers = ["CPUExecutionProvider"]
    return ort.InferenceSession(str(path), options, providers=providers)


def onnxruntime_run(ort, session, x, device="cpu"):
    """(run, sync) of one forward pass of ``session`` on the array ``x``: on CUDA with the input and the output bound
    on the GPU (``sync`` waits for the output), on the CPU with ``x`` fed (``sync`` None)."""
    name, output = session.get_inputs()[0].name, session.get_outputs()[0].name
    if device.startswith("cuda"):
        index = _cuda_index(device)
        binding = session.io_binding()
        binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(x, "cuda", index))
        binding.bind_output(output, "cuda", index)

        def run_bound():
            return session.run_with_iobinding(binding)  # synchronises at its end

        return run_bound, binding.synchronize_outputs
    feed = {name: x}

    def run():
        return session.run(None, feed)

    return run, None


def openvino_config(ov, threads, dtype="fp32", profiling=False):
    """The properties every model is compiled with (``ov``: the openvino module): the latency hint (one stream, one
    request at a time), ``threads`` inference threads, the dtype's inference precision (f32 for fp32: CPUs with bf16
    or AMX units would otherwise run bf16), threads not pinned; ``profiling`` adds the per-layer counters."""
    props, hints = ov.properties, ov.properties.hint
    config = {
        hints.performance_mode: hints.PerformanceMode.LATENCY,
        props.inference_num_threads: int(threads),
        hints.inference_precision: ov.Type.f32 if dtype == "fp32" else ov.Type.bf16,
        hints.enable_cpu_pinning: False,
    }
    if profiling:
        config[props.enable_profiling] = True
    return config


def openvino_compile(ov, core, path, threads, dtype="fp32", profiling=False):
    """The ONNX file ``path`` read by ``core`` (an ``ov.Core``) and compiled for its CPU plugin with
    `openvino_config`."""
    return core.compile_model(core.read_model(str(path)), OPENVINO_DEVICE,
                              openvino_config(ov, threads, dtype, profiling))


def _plain(value):
    """A property as JSON holds it: enums and element types by name, numbers and flags as they are."""
    if isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "get_type_name"):  # an element type: f32, bf16
        return value.get_type_name()
    return getattr(value, "name", str(value))


def openvino_read_back(compiled):
    """The compiled model's own reading of `OPENVINO_READ_BACK`'s properties (those its version reports)."""
    info = {}
    for prop, key in OPENVINO_READ_BACK.items():
        try:
            info[key] = _plain(compiled.get_property(prop))
        except Exception:  # noqa: BLE001 - a property this plugin version does not report
            continue
    return info


def tflite_interpreter(interpreter_class, path, threads, make_input):
    """A TFLite interpreter (``interpreter_class``: LiteRT's or tflite_runtime's ``Interpreter``) of the file
    ``path`` on ``threads`` threads, its tensors allocated and its input set to ``make_input(shape)``."""
    interpreter = interpreter_class(model_path=str(path), num_threads=int(threads))
    interpreter.allocate_tensors()
    detail = interpreter.get_input_details()[0]
    interpreter.set_tensor(detail["index"], make_input(tuple(int(d) for d in detail["shape"])))
    return interpreter
