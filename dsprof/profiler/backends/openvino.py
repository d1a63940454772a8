"""OpenVINO on the CPU: the exported ONNX read by OpenVINO's ONNX frontend, compiled for its CPU plugin.

Each workload goes through the same ONNX export as ONNX Runtime and TFLite (`onnx_export`, BatchNorm already
folded), is read with ``Core.read_model`` (no model conversion tool, nothing that reports usage) and compiled with
its settings given explicitly, never left to the plugin's defaults:

* ``PERFORMANCE_HINT`` ``LATENCY`` (one stream, one request at a time: what batch-1 timing means);
* ``INFERENCE_NUM_THREADS`` the run's threads (one by default, as every backend);
* ``INFERENCE_PRECISION_HINT`` the dtype's (``f32`` for fp32: on CPUs with bf16 or AMX units the plugin would
  otherwise run bf16 by default; ``bf16`` for bf16, refused where the CPU lacks it);
* ``ENABLE_CPU_PINNING`` off, as the other runtimes leave their threads to the scheduler (a pinned thread keeps
  its core even while another process runs there).

The compiled model's own reading of these properties is kept in each record (``runtime_info``), with the seconds spent
reading, compiling and running it once (``compile_s``, outside the samples). A workload OpenVINO cannot read or
compile (an operator it lacks) is refused in one line, recorded as that workload's error; the run goes on.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ...errors import DeviceError
from ...portable.sessions import OPENVINO_DEVICE, OPENVINO_PRECISIONS, openvino_compile, openvino_read_back
from ...portable.sessions import openvino_config as _config
from ..timing import CpuTimer
from .base import BackendSettings, Prepared, WorkloadUnsupported, one_line
from ...models.onnx_export import export_onnx

__all__ = ["OpenVINOBackend", "PRECISIONS", "openvino_config"]

#: dsprof dtype -> OpenVINO inference precision (`dsprof.portable.sessions`, which the bundle runner reads too).
PRECISIONS = OPENVINO_PRECISIONS


def openvino_config(threads: int, dtype: str = "fp32", profiling: bool = False) -> dict[str, Any]:
    """The properties every model is compiled with (see the module docstring; `sessions.openvino_config`);
    ``profiling`` adds the per-layer performance counters (`dsprof explain`, never while timing)."""
    import openvino as ov

    return _config(ov, threads, dtype, profiling)


class OpenVINOBackend:
    """Exports to ONNX, compiles it for OpenVINO's CPU plugin (see the module docstring), times ``infer``."""

    name = "openvino"
    device = OPENVINO_DEVICE

    def __init__(self, settings: BackendSettings) -> None:
        import openvino as ov

        self.settings = settings
        self.core = ov.Core()
        self.threads = settings.threads or torch.get_num_threads()  # explicit, so the recorded count is the one used
        if settings.dtype == "bf16" and "BF16" not in self.core.get_property(self.device, "OPTIMIZATION_CAPABILITIES"):
            raise DeviceError(f"`backend='openvino', dtype='bf16'`: this CPU ({self.device_name()}) has no bf16 "
                              "support in OpenVINO's CPU plugin; use `dtype='fp32'`")

    def device_name(self) -> str:
        """The CPU plugin's name for this CPU (``FULL_DEVICE_NAME``)."""
        return str(self.core.get_property(self.device, "FULL_DEVICE_NAME"))

    def describe(self) -> dict[str, Any]:
        """The fingerprint's ``runtime`` entry: OpenVINO's version, the plugin's device and its name, the settings."""
        import openvino as ov

        return {"runtime": "openvino", "openvino": ov.get_version(), "device": self.device,
                "device_name": self.device_name(), "performance_hint": "LATENCY",
                "inference_precision": PRECISIONS[self.settings.dtype], "inference_num_threads": self.threads,
                "cpu_pinning": False}

    def compile(self, onnx_path: Path, profiling: bool = False) -> Any:
        """The compiled model of an ONNX file with `openvino_config`; an unreadable or uncompilable model raises
        `WorkloadUnsupported` in one line."""
        import openvino as ov

        try:
            return openvino_compile(ov, self.core, onnx_path, self.threads, self.settings.dtype, profiling)
        except Exception as exc:  # noqa: BLE001 - OpenVINO raises RuntimeError or its own types, pages long
            raise WorkloadUnsupported(f"OpenVINO cannot run it: {one_line(exc)}") from None

    def prepare(self, module: nn.Module, input_shape: tuple[int, int, int, int], workdir: Path) -> Prepared:
        import openvino as ov

        start = time.perf_counter()
        try:
            path = export_onnx(copy.deepcopy(module), input_shape, Path(workdir) / "model.onnx")
        except Exception as exc:  # noqa: BLE001 - an operator the ONNX exporter lacks
            raise WorkloadUnsupported(f"cannot export it to ONNX for OpenVINO: {one_line(exc)}") from None
        compiled = self.compile(path)
        request = compiled.create_infer_request()
        x = np.random.default_rng(0).standard_normal(input_shape).astype(np.float32)
        request.set_input_tensor(ov.Tensor(x))  # a copy: the request owns its input
        try:
            request.infer()
        except Exception as exc:  # noqa: BLE001
            raise WorkloadUnsupported(f"OpenVINO cannot run it: {one_line(exc)}") from None
        info: dict[str, Any] = {"compile_s": round(time.perf_counter() - start, 6), **openvino_read_back(compiled)}

        def run() -> object:
            return request.infer()

        def close() -> None:
            nonlocal request, compiled
            del request, compiled

        return Prepared(run, CpuTimer(), self.threads, close, info)
