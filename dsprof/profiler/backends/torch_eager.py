"""PyTorch eager on CPU or CUDA: dtype, channels-last, cudnn.benchmark (``torch.compile``: `torch_compile`)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from ..allocator import steady_allocator
from ..timing import CpuTimer, CudaEventTimer
from .base import BackendSettings, Prepared

__all__ = ["TorchBackend", "TORCH_DTYPES"]

TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


class TorchBackend:
    """Runs ``module(x)`` (the runner holds ``torch.inference_mode``); on CUDA timed with CUDA events."""

    name = "torch"

    def __init__(self, settings: BackendSettings) -> None:
        self.settings = settings
        if settings.threads is not None:
            torch.set_num_threads(settings.threads)
        if settings.is_cuda:
            torch.backends.cudnn.benchmark = True
        else:
            steady_allocator()  # activations from the heap: no page faults that depend on what ran before

    def prepare(self, module: nn.Module, input_shape: tuple[int, int, int, int], workdir: Path) -> Prepared:
        s = self.settings
        device = torch.device(s.device)
        dtype = TORCH_DTYPES[s.dtype]
        memory_format = torch.channels_last if s.channels_last else torch.contiguous_format
        module = copy.deepcopy(module).eval().to(device=device, dtype=dtype, memory_format=memory_format)
        # made on the device itself: a large CUDA batch never passes through host memory
        x = torch.randn(input_shape, generator=torch.Generator(device).manual_seed(0), device=device)
        x = x.to(dtype=dtype, memory_format=memory_format)
        call, info = self.ready(module, x)

        def run() -> torch.Tensor:  # the runner times inside torch.inference_mode()
            return call(x)

        if s.is_cuda:
            timer = CudaEventTimer(device)
            threads = None
        else:
            timer = CpuTimer()
            threads = torch.get_num_threads()

        def close() -> None:
            nonlocal module, x, call
            del module, x, call
            if s.is_cuda:
                torch.cuda.empty_cache()

        return Prepared(run, timer, threads, close, info)

    def ready(self, module: nn.Module, x: torch.Tensor) -> tuple[Callable[[torch.Tensor], Any], dict[str, Any]]:
        """What ``run`` calls on ``x`` (here the module itself), and what to record of preparing it."""
        return module, {}
