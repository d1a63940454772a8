"""What every backend provides, the settings they share, and their validation."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from torch import nn

from ...errors import DeviceError
from ...runtimes import BACKENDS as BACKEND_REGISTRY, load_backend_class
from ..timing import Timer

__all__ = ["BACKENDS", "DTYPES", "Backend", "BackendSettings", "Prepared", "get_backend", "validate_settings"]

BACKENDS = tuple(BACKEND_REGISTRY)
DTYPES = ("fp32", "fp16", "bf16")


@dataclass(frozen=True)
class BackendSettings:
    """Where and how to run: ``device`` ``cpu`` or ``cuda``/``cuda:N``; ``dtype`` fp32/fp16/bf16;
    ``channels_last`` (torch); ``threads`` for CPU inference (None: the library's default);
    ``compile`` wraps torch modules in ``torch.compile``."""

    backend: str = "torch"
    device: str = "cpu"
    dtype: str = "fp32"
    channels_last: bool = False
    threads: int | None = None
    compile: bool = False

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def uses_cpu_threads(self) -> bool:
        """Whether a CPU thread count applies: everything but PyTorch on a GPU (ONNX Runtime and TFLite
        are given one on every device)."""
        return not (self.backend == "torch" and self.is_cuda)


@dataclass
class Prepared:
    """A ready-to-time workload: ``run()`` does one forward pass; ``timer`` times it; ``threads``
    the number of threads the backend uses (None where it does not say). The input's memory layout
    is the settings' (`dsprof.device_context.layout_of`)."""

    run: Callable[[], object]
    timer: Timer
    threads: int | None
    close: Callable[[], None] = lambda: None


class Backend(Protocol):
    """A backend prepares a module for timing at a given input shape (N, C, H, W)."""

    name: str

    def prepare(self, module: nn.Module, input_shape: tuple[int, int, int, int], workdir: Path) -> Prepared: ...


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def validate_settings(settings: BackendSettings) -> None:
    """Raise a ValueError, saying what to do instead, for settings that cannot run here."""
    if settings.backend not in BACKENDS:
        raise DeviceError(f"unknown backend {settings.backend!r}; known backends: {', '.join(BACKENDS)}")
    if settings.dtype not in DTYPES:
        raise DeviceError(f"unknown dtype {settings.dtype!r}; known dtypes: {', '.join(DTYPES)}")
    device = settings.device
    if not (device == "cpu" or device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit())):
        raise DeviceError(f"unknown device {device!r}; use 'cpu', 'cuda' or 'cuda:N'")
    if settings.threads is not None and settings.threads < 1:
        raise DeviceError(f"threads must be >= 1, got {settings.threads}")
    if settings.is_cuda:
        if settings.backend == "tflite":
            raise DeviceError("the tflite backend runs on the CPU only; use --device cpu (or --backend torch/onnxruntime for CUDA)")
        if settings.backend == "torch" and not _cuda_available():
            raise DeviceError(
                "--device cuda was requested but PyTorch sees no CUDA GPU here "
                "(torch.cuda.is_available() is False); use --device cpu, or run on a machine with an NVIDIA GPU"
            )
        if settings.backend == "torch" and ":" in device:
            import torch

            if int(device[5:]) >= torch.cuda.device_count():
                raise DeviceError(f"--device {device}: PyTorch sees {torch.cuda.device_count()} GPU(s), numbered from 0")
        if settings.backend == "onnxruntime":
            import onnxruntime

            if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
                raise DeviceError(
                    "--device cuda with --backend onnxruntime needs onnxruntime's CUDAExecutionProvider, "
                    f"which this installation lacks (it has {', '.join(onnxruntime.get_available_providers())}); "
                    "install onnxruntime-gpu, or use --device cpu"
                )
    else:
        if settings.dtype == "fp16":
            raise DeviceError("fp16 on the CPU is not supported (CPU kernels are slow or missing); use --dtype fp32 or bf16 on the CPU, or --device cuda")
    if settings.backend in ("onnxruntime", "tflite") and settings.dtype != "fp32" and not (
        settings.backend == "onnxruntime" and settings.is_cuda and settings.dtype == "fp16"
    ):
        raise DeviceError(
            f"--backend {settings.backend} supports fp32 (and onnxruntime fp16 on CUDA); got {settings.dtype}; "
            "use --backend torch for other dtypes"
        )
    if settings.channels_last and settings.backend != "torch":
        raise DeviceError("--channels-last applies to --backend torch only (TFLite is always NHWC)")
    if settings.compile and settings.backend != "torch":
        raise DeviceError("--compile applies to --backend torch only")
    if settings.backend == "tflite" and (
        importlib.util.find_spec("onnx2tf") is None or importlib.util.find_spec("ai_edge_litert") is None
    ):
        raise DeviceError("the tflite backend needs the 'tflite' extra: pip install 'dsprof[tflite]'")


def get_backend(settings: BackendSettings) -> Backend:
    """The backend named by ``settings.backend``, after `validate_settings`."""
    validate_settings(settings)
    return load_backend_class(settings.backend)(settings)
