"""ONNX Runtime: CPU execution provider, or CUDA with inputs and outputs bound on the GPU."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..timing import CpuTimer
from .base import BackendSettings, Prepared
from ...models.onnx_export import export_onnx

__all__ = ["OnnxRuntimeBackend"]


class OnnxRuntimeBackend:
    """Exports to ONNX, opens an InferenceSession with all graph optimisations, times ``run``."""

    name = "onnxruntime"

    def __init__(self, settings: BackendSettings) -> None:
        self.settings = settings

    def prepare(self, module: nn.Module, input_shape: tuple[int, int, int, int], workdir: Path) -> Prepared:
        import onnxruntime as ort

        s = self.settings
        dtype = torch.float16 if s.dtype == "fp16" else torch.float32
        path = export_onnx(copy.deepcopy(module), input_shape, workdir / "model.onnx", dtype)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        threads = s.threads or torch.get_num_threads()  # explicit, so the recorded count is the one used
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        x = np.random.default_rng(0).standard_normal(input_shape).astype(np.float16 if s.dtype == "fp16" else np.float32)
        if s.is_cuda:
            device_id = int(s.device.split(":")[1]) if ":" in s.device else 0
            providers = [("CUDAExecutionProvider", {"device_id": device_id}), "CPUExecutionProvider"]
            session = ort.InferenceSession(str(path), options, providers=providers)
            binding = session.io_binding()
            binding.bind_ortvalue_input("input", ort.OrtValue.ortvalue_from_numpy(x, "cuda", device_id))
            binding.bind_output("output", "cuda", device_id)

            def run() -> object:
                session.run_with_iobinding(binding)  # synchronises at its end

            sync = binding.synchronize_outputs
            timer = CpuTimer(sync=sync)
        else:
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            feed = {"input": x}

            def run() -> object:
                return session.run(None, feed)

            timer = CpuTimer()
        return Prepared(run, timer, threads)
