"""``torch.compile`` (Inductor) on the CPU or CUDA: PyTorch 2's compiler, what its users turn on first.

Each workload is compiled whole (``fullgraph=True``) in the context's mode (`dsprof.device_context.COMPILE_MODES`)
and run twice while it is prepared, under ``torch.inference_mode`` as the runner times it: the first call compiles
(Dynamo traces, Inductor generates and builds the kernels; C++ with the machine's compiler on the CPU, Triton on
CUDA), the second shows that nothing compiles again. Those seconds, ``compile_s``, are kept in the workload's record
and never enter its samples; the timing loop then warms the compiled module up as any other.

A workload that Dynamo cannot capture as one graph is refused, in one line that counts its graph breaks (a graph
break runs part of the workload eagerly: its time would be neither eager's nor the compiler's). A workload Inductor
cannot compile is refused in one line too. Either is that workload's error in the measurement file; the run goes on.

Every workload gets a ``forward`` of its own (`own_frame`): Dynamo keeps compiled graphs per code object and stops
compiling one after ``recompile_limit`` (8) graphs, falling back to eager without an error, while a run times dozens
of blocks of one class (17 inverted residuals in MobileNetV2).
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import time
import types
from functools import lru_cache
from typing import Any, Callable

import torch
from torch import nn

from ...errors import DeviceError
from .base import BackendSettings, WorkloadUnsupported, one_line
from .torch_eager import TorchBackend

__all__ = ["TorchCompileBackend", "compiler_facts", "own_frame"]

_frames = itertools.count()
#: Calls of a compiled workload before it counts as settled: the first compiles, and may fill a cache that its guards
#: read (timm's EfficientViT keeps its attention biases in a dict on its first call), so the second compiles once more.
SETTLING_CALLS = 2


def _forward(self: nn.Module, x: torch.Tensor) -> Any:
    return self.workload(x)


def own_frame(module: nn.Module) -> nn.Module:
    """``module`` behind a wrapper whose ``forward`` is a code object of its own (see the module docstring); the
    wrapper computes exactly what ``module`` does and holds it as ``workload``."""
    n = next(_frames)
    code = _forward.__code__.replace(co_name=f"forward_{n}", co_qualname=f"Workload{n}.forward")
    forward = types.FunctionType(code, _forward.__globals__, f"forward_{n}")
    wrapper = type(f"Workload{n}", (nn.Module,), {"forward": forward, "__module__": __name__})()
    wrapper.workload = module
    return wrapper


@lru_cache(maxsize=1)
def _cxx() -> tuple[str | None, str | None]:
    """(the C++ compiler Inductor builds CPU kernels with, the first line of its ``--version``), None where missing."""
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler

        cxx = get_cpp_compiler()
    except Exception:  # noqa: BLE001 - no compiler found, or an Inductor without this helper
        cxx = shutil.which("g++") or shutil.which("c++")
    if not cxx or not shutil.which(cxx):
        return None, None
    try:
        done = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30)
        first = done.stdout.strip().splitlines()[0] if done.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        first = None
    return cxx, first


def compiler_facts(mode: str, cuda: bool) -> dict[str, Any]:
    """What a run's fingerprint says of the compiler (its ``runtime`` entry): torch and Inductor versions (Inductor
    ships inside torch), the mode and the Inductor options it sets, ``fullgraph``, Inductor's global options that
    change the kernels (freezing, C++ wrapper), and the C++ compiler (CPU) or Triton version (CUDA)."""
    from importlib import metadata

    from torch._inductor import config as inductor_config
    from torch._inductor import list_mode_options

    facts: dict[str, Any] = {
        "runtime": "torch.compile", "torch": torch.__version__, "inductor": f"torch {torch.__version__}",
        "mode": mode, "mode_options": {k: v for k, v in sorted(list_mode_options(mode).items())}, "fullgraph": True,
        "freezing": bool(inductor_config.freezing), "cpp_wrapper": bool(inductor_config.cpp_wrapper),
    }
    if cuda:
        for name in ("triton", "pytorch-triton"):
            try:
                facts["triton"] = metadata.version(name)
                break
            except metadata.PackageNotFoundError:
                continue
    else:
        facts["cxx"], facts["cxx_version"] = _cxx()
    return facts


def _graph_breaks(module: nn.Module, x: torch.Tensor) -> tuple[int, str]:
    """(graph breaks, the first one's reason) of ``module(x)`` as Dynamo's ``explain`` counts them."""
    import torch._dynamo

    try:
        with torch.inference_mode():
            report = torch._dynamo.explain(module)(x)
    except Exception as exc:  # noqa: BLE001 - explain itself failed: say what the compile said
        return -1, one_line(exc)
    reasons = [one_line(getattr(r, "reason", r)) for r in report.break_reasons]
    # a break explain cannot split around (data-dependent control flow) is a reason without a counted break
    return max(report.graph_break_count, len(reasons)), (reasons[0] if reasons else "")


class TorchCompileBackend(TorchBackend):
    """``torch.compile(module, mode=..., fullgraph=True)`` on the eager backend's module and input (dtype,
    channels-last, device, threads as there); compiled while prepared, see the module docstring."""

    name = "torch-compile"

    def __init__(self, settings: BackendSettings) -> None:
        super().__init__(settings)
        if not settings.is_cuda and _cxx()[0] is None:
            raise DeviceError("`backend='torch-compile'` on the CPU needs a C++ compiler for Inductor's kernels (g++ "
                              "or clang++ on the PATH, or CXX set); install one, or use `backend='torch'`")
        self.mode = settings.compile

    def describe(self) -> dict[str, Any]:
        """The fingerprint's ``runtime`` entry (`compiler_facts`)."""
        return compiler_facts(self.mode, self.settings.is_cuda)

    def ready(self, module: nn.Module, x: torch.Tensor) -> tuple[Callable[[torch.Tensor], Any], dict[str, Any]]:
        """``module`` compiled (``fullgraph=True``) and called until settled: `SETTLING_CALLS` calls, after which one
        more must not compile again (a module whose guards fail on every call is refused: it cannot be timed
        compiled)."""
        import torch._dynamo
        from torch._dynamo.utils import counters

        wrapper = own_frame(module)
        compiled = torch.compile(wrapper, mode=self.mode, fullgraph=True)
        sync = (lambda: torch.cuda.synchronize(x.device)) if x.is_cuda else (lambda: None)
        start = time.perf_counter()
        try:
            with torch.inference_mode():
                for _ in range(SETTLING_CALLS):  # the first may fill a cache its guards read (timm's EfficientViT)
                    compiled(x)
                    sync()
                graphs = counters["stats"]["unique_graphs"]
                compiled(x)  # settled: the next call must not compile again
                sync()
        except torch.cuda.OutOfMemoryError:
            raise
        except torch._dynamo.exc.Unsupported as exc:
            breaks, reason = _graph_breaks(wrapper, x)
            count = f"{breaks} graph break{'s' if breaks != 1 else ''}" if breaks >= 0 else "a graph break"
            raise WorkloadUnsupported(
                f"torch.compile ({self.mode}) refused it: {count} (fullgraph=True; a break would run part of it "
                f"eagerly): {reason or one_line(exc)}"
            ) from None
        except Exception as exc:  # noqa: BLE001 - Inductor's lowering or its C++/Triton build failed
            raise WorkloadUnsupported(
                f"torch.compile ({self.mode}) cannot compile it: {type(exc).__name__}: {one_line(exc)}") from None
        compile_s = time.perf_counter() - start
        if counters["stats"]["unique_graphs"] != graphs:
            raise WorkloadUnsupported(f"torch.compile ({self.mode}) compiled it again on call {SETTLING_CALLS + 1} "
                                      "(its guards keep failing); it cannot be timed compiled")
        return compiled, {"compile_s": round(compile_s, 6), "graph_breaks": 0, "mode": self.mode}
