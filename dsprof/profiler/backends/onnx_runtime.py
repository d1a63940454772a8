"""ONNX Runtime: CPU execution provider, or CUDA with inputs and outputs bound on the GPU."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ...portable.sessions import onnxruntime_run, onnxruntime_session
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
        threads = s.threads or torch.get_num_threads()  # explicit, so the recorded count is the one used
        x = np.random.default_rng(0).standard_normal(input_shape).astype(np.float16 if s.dtype == "fp16" else np.float32)
        session = onnxruntime_session(ort, path, threads, s.device)
        run, sync = onnxruntime_run(ort, session, x, s.device)
        return Prepared(run, CpuTimer(sync=sync), threads)
