"""The backends in one registry: each profiler backend, the runtime that runs its model files on another
device (`dsprof export`, `measure --remote`), and the file formats of bundles, as plain data.

The command line, `dsprof.edge.export`, `dsprof.edge.importer` and `dsprof.edge.remote` read these tables;
`load_backend_class` imports a backend's implementation only when it is used. The bundle runner
(`dsprof.edge.runner`) runs without dsprof on the device and keeps its own copy of `RUNTIMES`' format and
layout (tests/test_runtimes.py checks that the two agree).
"""

from __future__ import annotations

import importlib
from typing import Any, NamedTuple

from .names import DEFAULT_BLOCK_VARIANTS

__all__ = ["BACKENDS", "FOLDED_ACTIVATIONS", "FORMATS", "RUNTIMES", "BackendEntry", "Runtime", "bundle_block_variants",
           "default_block_variants", "folds_activations", "load_backend_class", "runtime_of_format"]


class BackendEntry(NamedTuple):
    """A profiler backend (``dsprof measure --backend``): its implementation (``module:Class`` under
    `dsprof.profiler.backends`) and the runtime that times its models on a remote device (None: none can;
    ``no_remote`` says why in one line). ``separate_activations``: it runs each activation as a kernel of its own
    (PyTorch eager, and the TorchScript its bundles carry), so removing one saves time even where the block is not
    merged; the compiling runtimes fuse it into the convolution before it (`default_block_variants`).
    ``process_spread``: how far (relative standard deviation) a plan's paired speed-up moves from one process to the
    next beyond its own rounds' noise, where that was measured (`dsprof.lut.interval`'s check term adds it: the LUT is
    timed in one process, a later check in another)."""

    name: str
    implementation: str
    remote_runtime: str | None
    no_remote: str = ""
    separate_activations: bool = False
    process_spread: float = 0.0


class Runtime(NamedTuple):
    """What runs a bundle's model files (the runner's ``--runtime``): the file format it reads, the input's
    memory layout as run, and the backend named in the measurement records imported from it."""

    name: str
    format: str
    layout: str
    records_backend: str


#: The activations that the runtimes fusing activations fold into the convolution before them at no measurable cost, so
#: that a block of these alone, linearised and left unmerged, runs as built there: MobileOne-S0's ReLU blocks 0.97-1.02x
#: each on ONNX Runtime, MobileNetV1-1.25's plan of six such blocks 1.01x on OpenVINO. Another may cost time there:
#: SiLU blocks run 1.18-1.22x faster linearised on OpenVINO (medians over TinyNet-B's and EfficientNet-B1's), hardswish
#: blocks 0.99-1.07x (benchmarks/RESULTS.md, "Activations the runtime does not fold"). So `dsprof.profiler.workloads`
#: times ``linear`` for a block holding any other wherever it times ``merged``.
FOLDED_ACTIVATIONS = frozenset({"relu", "relu6"})


def folds_activations(block: Any) -> bool:
    """Whether every removable activation of ``block`` (a `dsprof.models.Block`) is one the fusing runtimes fold
    away (`FOLDED_ACTIVATIONS`), so that its ``original`` entry prices it linearised and left unmerged there."""
    return all(u.act_name in FOLDED_ACTIVATIONS for u in block.units if u.act is not None)


#: Bundle model file format -> file suffix.
FORMATS = {"onnx": ".onnx", "tflite": ".tflite", "torchscript": ".pt"}

BACKENDS = {b.name: b for b in (
    BackendEntry("torch", "torch_eager:TorchBackend", "torchscript", separate_activations=True),
    BackendEntry("torch-compile", "torch_compile:TorchCompileBackend", None,
            "torch.compile builds its kernels with PyTorch and a C++ compiler (or Triton) on the machine that runs "
            "them, which a bundle's runner does not carry: run "
            "`dsprof.measure(settings=BackendSettings(backend='torch-compile'))` on the device"),
    BackendEntry("onnxruntime", "onnx_runtime:OnnxRuntimeBackend", "onnxruntime"),
    # the same plan checked in fresh processes: ResNet-AA-34-D (96 px) 9 times, LambdaResNet-26t and ECA-ResNeXt-26ts
    # (160 px) 7 times each read 0.7-1.8 % apart (s.d.), 1.2 % pooled (robust); each check's own interval +-0.3-1.5 %
    # (benchmarks/RESULTS.md, "OpenVINO's spread from process to process"). ONNX Runtime and PyTorch: not seen.
    BackendEntry("openvino", "openvino:OpenVINOBackend", "openvino", process_spread=0.012),
    BackendEntry("tflite", "tflite:TFLiteBackend", "tflite"),
)}

# TorchScript records keep their own backend name: a traced module is timed apart from PyTorch eager.
RUNTIMES = {r.name: r for r in (
    Runtime("onnxruntime", "onnx", "nchw", "onnxruntime"),
    Runtime("openvino", "onnx", "nchw", "openvino"),  # OpenVINO reads the bundle's ONNX files (docs/devices/)
    Runtime("tflite", "tflite", "nhwc", "tflite"),
    Runtime("torchscript", "torchscript", "nchw", "torchscript"),
    Runtime("benchmark_model", "tflite", "nhwc", "tflite"),  # TensorFlow Lite's benchmark binary
)}


def default_block_variants(backend: str) -> tuple[str, ...]:
    """What `dsprof measure` times of each block on ``backend`` unless told (`dsprof.names.DEFAULT_BLOCK_VARIANTS`),
    with ``linear`` (its activations removed, not merged) where the backend runs activations apart: there a plan's
    unmerged blocks save time the LUT must see (MobileOne-S0's blocks at 64 px on one CPU thread: 1.05-1.10x each,
    where merging them is slower), while the compiling runtimes fuse a ReLU into the convolution (ONNX Runtime: the
    same blocks 0.97-1.02x; benchmarks/RESULTS.md, "Activations apart"). Whatever the variants, a block that deploys
    unmerged in a larger form than built, or holds an activation not in `FOLDED_ACTIVATIONS`, is timed ``linear``
    wherever ``merged`` is (`dsprof.profiler.workloads.block_workloads`)."""
    entry = BACKENDS.get(backend)
    if entry is not None and entry.separate_activations:
        return (*DEFAULT_BLOCK_VARIANTS, "linear")
    return DEFAULT_BLOCK_VARIANTS


def bundle_block_variants(formats: "tuple[str, ...] | list[str]") -> tuple[str, ...]:
    """What `dsprof export` bundles of each block unless told: `default_block_variants` of the backends whose
    remote runtime reads one of ``formats``, together (a bundle's workloads are the same in each of its formats). With
    ``torchscript`` among them, ``linear`` too: PyTorch eager's remote runtime runs each activation apart, and
    `dsprof.edge.measure_remote` with ``backend='torch'`` times it."""
    readers = [b.name for b in BACKENDS.values()
               if b.remote_runtime is not None and RUNTIMES[b.remote_runtime].format in formats]
    variants = [v for name in readers for v in default_block_variants(name)]
    return tuple(dict.fromkeys(variants)) or DEFAULT_BLOCK_VARIANTS


def load_backend_class(name: str) -> type:
    """Import backend ``name``'s implementation (PyTorch, ONNX Runtime, OpenVINO or LiteRT load here, not before)."""
    module, cls = BACKENDS[name].implementation.split(":")
    return getattr(importlib.import_module(f"dsprof.profiler.backends.{module}"), cls)


def runtime_of_format(fmt: str) -> str:
    """The runner runtime that reads bundle files of format ``fmt`` (the first listed: onnxruntime for onnx)."""
    return next(r.name for r in RUNTIMES.values() if r.format == fmt)
