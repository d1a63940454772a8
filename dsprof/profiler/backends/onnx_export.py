"""Export a module to an ONNX file at a fixed input shape (shared by the onnxruntime and tflite backends)."""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch import nn

__all__ = ["export_onnx", "OPSET"]

OPSET = 17


def export_onnx(module: nn.Module, input_shape: tuple[int, int, int, int], path: Path, dtype: torch.dtype = torch.float32) -> Path:
    """Write ``module`` (eval mode) as ONNX with one input ``input`` of ``input_shape`` and one output ``output``.

    Uses the TorchScript-based exporter (no extra dependencies, static shapes).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    module = module.eval().to(dtype)
    x = torch.zeros(input_shape, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module, (x,), str(path), dynamo=False, opset_version=OPSET, input_names=["input"], output_names=["output"]
        )
    return path
