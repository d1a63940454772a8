"""Export a module to an ONNX file at a fixed input shape (shared by the onnxruntime and tflite backends)."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from pathlib import Path
from typing import Iterator

import torch
from torch import nn

from ..io import atomic_output

__all__ = ["export_onnx", "OPSET"]

OPSET = 17


def export_onnx(
    module: nn.Module, input_shape: tuple[int, int, int, int], path: Path, dtype: torch.dtype = torch.float32,
    opset: int = OPSET,
) -> Path:
    """Write ``module`` (eval mode) as ONNX with one input ``input`` of ``input_shape`` and one output ``output``.

    Uses the TorchScript-based exporter (no extra dependencies, static shapes). ``opset``: the ONNX
    operator set (lower for old runtimes, e.g. 13 for ONNX Runtime 1.10 on Python 3.6).
    """
    module = module.eval().to(dtype)
    x = torch.zeros(input_shape, dtype=dtype)
    with warnings.catch_warnings(), _quiet_stdout(), atomic_output(path) as tmp:  # a failed export leaves no file
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module, (x,), str(tmp), dynamo=False, opset_version=opset, input_names=["input"], output_names=["output"]
        )
    return Path(path)


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """Standard output silenced at its file descriptor while the exporter runs: torch's TorchScript exporter turns
    its own log on (`setup_onnx_logging` tests the function that reads the setting, not its result) and, where an
    export fails, prints the whole graph from C++, thousands of lines before dsprof's one line on the failure."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
