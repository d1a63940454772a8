"""What every backend provides, the settings they share, and their validation."""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from torch import nn

from ...device_context import COMPILE_BACKEND, COMPILE_MODES, compile_setting
from ...errors import DeviceError
from ...runtimes import BACKENDS, load_backend_class
from ..timing import Timer

__all__ = ["DTYPES", "Backend", "BackendSettings", "Prepared", "WorkloadUnsupported", "get_backend",
           "one_line", "validate_settings"]

DTYPES = ("fp32", "fp16", "bf16")
#: The backends that run PyTorch modules in this process (eager, or compiled by ``torch.compile``).
TORCH_BACKENDS = ("torch", COMPILE_BACKEND)


@dataclass(frozen=True)
class BackendSettings:
    """Where and how to run: ``device`` ``cpu`` or ``cuda``/``cuda:N``; ``dtype`` fp32/fp16/bf16;
    ``channels_last`` (torch, torch-compile); ``threads`` for CPU inference (None: the library's default);
    ``compile`` the ``torch.compile`` mode of the ``torch-compile`` backend (`dsprof.device_context.COMPILE_MODES`;
    "" for the other backends; ``True`` with backend ``torch``, the older spelling, is ``torch-compile`` in mode
    ``default``: `dsprof.device_context.compile_setting`)."""

    backend: str = "torch"
    device: str = "cpu"
    dtype: str = "fp32"
    channels_last: bool = False
    threads: int | None = None
    compile: str = ""

    def __post_init__(self) -> None:
        backend, mode = compile_setting(self.backend, self.compile)
        object.__setattr__(self, "backend", backend)
        object.__setattr__(self, "compile", mode)

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def uses_cpu_threads(self) -> bool:
        """Whether a CPU thread count applies: everything but PyTorch (eager or compiled) on a GPU (ONNX Runtime
        and TFLite are given one on every device)."""
        return not (self.backend in TORCH_BACKENDS and self.is_cuda)


@dataclass
class Prepared:
    """A ready-to-time workload: ``run()`` does one forward pass; ``timer`` times it; ``threads``
    the number of threads the backend uses (None where it does not say). The input's memory layout
    is the settings' (`dsprof.device_context.layout_of`). ``info``: what the runtime reported while preparing
    it (e.g. ``compile_s``, the seconds spent compiling and running it once, left out of the samples; the
    settings a compiled model runs with), kept in the workload's record (``runtime_info``)."""

    run: Callable[[], object]
    timer: Timer
    threads: int | None
    close: Callable[[], None] = lambda: None
    info: dict[str, Any] = field(default_factory=dict)


class Backend(Protocol):
    """A backend prepares a module for timing at a given input shape (N, C, H, W). It may also have
    ``describe() -> dict``: what the run's records say of the runtime (versions, the plugin's device, settings),
    recorded as the fingerprint's ``runtime`` entry."""

    name: str

    def prepare(self, module: nn.Module, input_shape: tuple[int, int, int, int], workdir: Path) -> Prepared: ...


class WorkloadUnsupported(RuntimeError):
    """A runtime cannot run one workload (a graph break torch.compile refuses, an operator OpenVINO lacks): the
    message is one line; `dsprof.profiler.measure` records it as that workload's error and goes on with the rest."""


#: Lines of a runtime's message that say where in its sources it failed, not what failed (OpenVINO's
#: ``Exception from src/...:84:``, ``Check 'false' failed at src/...``), and headings without content.
_WHERE = re.compile(r"^(Exception from |Check '.*' failed at |Summary:?$|Traceback )")


def one_line(exc: BaseException, limit: int = 240) -> str:
    """An exception's message as one line (compilers and runtimes write pages): its lines that say what failed,
    joined with "; ", cut to ``limit`` characters."""
    lines = [line.strip().lstrip("-").strip().rstrip(" :.") for line in str(exc).splitlines()]
    said = [line for line in lines if line and not _WHERE.match(line)] or [type(exc).__name__]
    text = "; ".join(said)
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
        raise DeviceError(f"`settings=BackendSettings(threads={settings.threads})`: give 1 or more")
    if settings.is_cuda:
        if settings.backend in ("tflite", "openvino"):
            raise DeviceError(f"the {settings.backend} backend runs on the CPU only here; use "
                              "`settings=BackendSettings(device='cpu')` (or `settings=BackendSettings(backend=)` "
                              "torch, torch-compile or onnxruntime for CUDA)")
        if settings.backend in TORCH_BACKENDS and not _cuda_available():
            raise DeviceError(
                "`settings=BackendSettings(device='cuda')` was requested but PyTorch sees no CUDA GPU here "
                "(torch.cuda.is_available() is False); use `settings=BackendSettings(device='cpu')`, or run on a "
                "machine with an NVIDIA GPU"
            )
        if settings.backend in TORCH_BACKENDS and ":" in device:
            import torch

            if int(device[5:]) >= torch.cuda.device_count():
                raise DeviceError(f"`settings=BackendSettings(device={device!r})`: PyTorch sees "
                                  f"{torch.cuda.device_count()} GPU(s), numbered from 0")
        if settings.backend == "onnxruntime":
            import onnxruntime

            if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
                raise DeviceError(
                    "`settings=BackendSettings(device='cuda', backend='onnxruntime')` needs onnxruntime's "
                    "CUDAExecutionProvider, "
                    f"which this installation lacks (it has {', '.join(onnxruntime.get_available_providers())}); "
                    "install onnxruntime-gpu, or use `settings=BackendSettings(device='cpu')`"
                )
    else:
        if settings.dtype == "fp16":
            raise DeviceError("fp16 on the CPU is not supported (CPU kernels are slow or missing); use "
                              "`settings=BackendSettings(dtype=)` fp32 or bf16 on the CPU, or "
                              "`settings=BackendSettings(device='cuda')`")
    if settings.backend in ("onnxruntime", "tflite") and settings.dtype != "fp32" and not (
        settings.backend == "onnxruntime" and settings.is_cuda and settings.dtype == "fp16"
    ):
        raise DeviceError(
            f"`settings=BackendSettings(backend={settings.backend!r})` supports fp32 (and onnxruntime fp16 on CUDA); "
            f"got {settings.dtype}; "
            "use `settings=BackendSettings(backend='torch')` for other dtypes"
        )
    if settings.backend == "openvino" and settings.dtype not in ("fp32", "bf16"):
        raise DeviceError(f"`settings=BackendSettings(backend='openvino')` times fp32 or bf16 (its inference "
                          f"precision); got {settings.dtype}")
    if settings.channels_last and settings.backend not in TORCH_BACKENDS:
        raise DeviceError("`settings=BackendSettings(channels_last=True)` applies to "
                          "`settings=BackendSettings(backend=)` torch and torch-compile only (TFLite is always NHWC)")
    if settings.compile and settings.backend != COMPILE_BACKEND:
        raise DeviceError(f"a torch.compile mode applies to `settings=BackendSettings(backend={COMPILE_BACKEND!r})` "
                          "only; got "
                          f"`settings=BackendSettings(backend={settings.backend!r})` with mode {settings.compile!r}")
    if settings.backend == COMPILE_BACKEND and settings.compile not in COMPILE_MODES:
        raise DeviceError(f"unknown torch.compile mode {settings.compile!r}; `settings=BackendSettings(compile=)` "
                          f"takes {', '.join(COMPILE_MODES)}")
    if settings.backend == "openvino" and importlib.util.find_spec("openvino") is None:
        raise DeviceError("the openvino backend needs the 'openvino' extra: pip install 'dsprof[openvino]'")
    if settings.backend == "tflite" and (
        importlib.util.find_spec("onnx2tf") is None or importlib.util.find_spec("ai_edge_litert") is None
    ):
        raise DeviceError("the tflite backend needs the 'tflite' extra: pip install 'dsprof[tflite]'")


def get_backend(settings: BackendSettings) -> Backend:
    """The backend named by ``settings.backend``, after `validate_settings`."""
    validate_settings(settings)
    return load_backend_class(settings.backend)(settings)
