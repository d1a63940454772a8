"""Backends: turn a module and an input shape into a zero-argument callable that runs one forward pass.

``torch`` (eager, CPU or CUDA), ``torch-compile`` (``torch.compile``/Inductor, CPU or CUDA), ``onnxruntime`` (CPU,
or the CUDA provider when installed), ``openvino`` (OpenVINO's CPU plugin, from the exported ONNX) and ``tflite``
(torch -> ONNX -> TFLite converted offline, timed with the LiteRT interpreter).
"""

from __future__ import annotations

from .base import (BACKENDS, DTYPES, Backend, BackendSettings, Prepared, WorkloadUnsupported, get_backend,
                   validate_settings)

__all__ = ["BACKENDS", "DTYPES", "Backend", "BackendSettings", "Prepared", "WorkloadUnsupported", "get_backend",
           "validate_settings"]
