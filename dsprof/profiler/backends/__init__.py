"""Backends: turn a module and an input shape into a zero-argument callable that runs one forward pass.

``torch`` (eager, CPU or CUDA), ``torch-compile`` (``torch.compile``/Inductor, CPU or CUDA), ``onnxruntime`` (CPU,
or the CUDA provider when installed), ``openvino`` (OpenVINO's CPU plugin, from the exported ONNX) and ``tflite``
(torch -> ONNX -> TFLite converted offline, timed with the LiteRT interpreter).

The names below are imported on first use.
"""

from ..._lazy import lazy_exports

_EXPORTS = dict.fromkeys(("DTYPES", "Backend", "BackendSettings", "Prepared", "WorkloadUnsupported",
                          "get_backend", "validate_settings"), ".base")

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
