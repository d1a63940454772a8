"""TFLite: torch -> ONNX -> TFLite converted offline with onnx2tf, timed with the LiteRT interpreter.

This is the paper's route to phones and the Raspberry Pi (Sec. 5.4). The conversion never touches
the network: onnx2tf downloads sample images from GitHub when a model's input has 3 channels
(to check its output against ONNX), unless a file of that name is in the working folder. We
convert inside a private folder holding a locally generated file of that name, and with sockets
blocked (`no_network`), so a conversion that would try to fetch anything fails loudly instead.

onnx2tf also writes a TensorFlow SavedModel of every conversion, which nothing here reads (the float32 ``.tflite``
is converted from the Keras model's concrete function, not from that folder) and which took four fifths of each
conversion's time (Keras serialising the model's config, 2026-11-28, onnx2tf 1.28.8): `convert_onnx_to_tflite` skips
that write (`_no_saved_model`).
"""

from __future__ import annotations

import contextlib
import copy
import os
import socket
from pathlib import Path
from typing import Iterator

import numpy as np
import torch
from torch import nn

from ...portable.sessions import tflite_interpreter
from ..timing import CpuTimer
from .base import BackendSettings, Prepared
from ...models.onnx_export import export_onnx

__all__ = ["NetworkBlocked", "TFLiteBackend", "convert_onnx_to_tflite", "no_network"]

# The sample-data file onnx2tf looks for in the working folder before it downloads it.
_ONNX2TF_SAMPLE = "calibration_image_sample_data_20x128x128x3_float32.npy"


class NetworkBlocked(RuntimeError):
    """Raised when code inside `no_network` tries to open a network connection."""


@contextlib.contextmanager
def no_network() -> Iterator[None]:
    """Block every socket connection (and name lookup) in this process while the block runs."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise NetworkBlocked(f"network access attempted during an offline step: {args[:2]!r}")

    saved = (socket.socket.connect, socket.socket.connect_ex, socket.create_connection, socket.getaddrinfo)
    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.socket.connect_ex = refuse  # type: ignore[method-assign]
    socket.create_connection = refuse  # type: ignore[assignment]
    socket.getaddrinfo = refuse  # type: ignore[assignment]
    try:
        yield
    finally:
        socket.socket.connect, socket.socket.connect_ex, socket.create_connection, socket.getaddrinfo = saved  # type: ignore[method-assign]


@contextlib.contextmanager
def _no_saved_model() -> Iterator[None]:
    """Make ``tf.saved_model.save`` write nothing while the block runs: onnx2tf saves a SavedModel it only reads back
    for integer quantisation or signature defs (neither asked for here), after taking the concrete function that the
    float32 ``.tflite`` is converted from."""
    import tensorflow as tf

    saved = tf.saved_model.save
    tf.saved_model.save = lambda *args, **kwargs: None
    try:
        yield
    finally:
        tf.saved_model.save = saved


def convert_onnx_to_tflite(onnx_path: Path, out_dir: Path) -> Path:
    """Convert an ONNX file to a float32 ``.tflite`` file in ``out_dir``, offline; return its path. No SavedModel is
    written beside it (`_no_saved_model`)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import onnx2tf

    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    sample = out_dir / _ONNX2TF_SAMPLE
    if not sample.exists():
        np.save(sample, np.random.default_rng(0).random((20, 128, 128, 3), dtype=np.float32))
    with no_network(), _no_saved_model(), contextlib.chdir(out_dir), open(os.devnull, "w") as devnull, \
            contextlib.redirect_stdout(devnull):
        onnx2tf.convert(
            input_onnx_file_path=str(Path(onnx_path).resolve()),
            output_folder_path=str(out_dir / "tf"),
            verbosity="error",
            output_signaturedefs=False,  # both read the SavedModel back; the default, said because of _no_saved_model
            output_integer_quantized_tflite=False,
        )
    tflite = out_dir / "tf" / f"{Path(onnx_path).stem}_float32.tflite"
    if not tflite.is_file():
        raise RuntimeError(f"onnx2tf wrote no {tflite.name} in {tflite.parent}")
    return tflite


class TFLiteBackend:
    """Converts each workload to TFLite (float32, NHWC input) and times ``Interpreter.invoke``."""

    name = "tflite"

    def __init__(self, settings: BackendSettings) -> None:
        self.settings = settings

    def prepare(self, module: nn.Module, input_shape: tuple[int, int, int, int], workdir: Path) -> Prepared:
        from ai_edge_litert.interpreter import Interpreter

        onnx_path = export_onnx(copy.deepcopy(module), input_shape, Path(workdir) / "model.onnx")
        tflite = convert_onnx_to_tflite(onnx_path, Path(workdir))
        threads = self.settings.threads or torch.get_num_threads()
        interpreter = tflite_interpreter(
            Interpreter, tflite, threads, lambda shape: np.random.default_rng(0).standard_normal(shape).astype(np.float32))
        return Prepared(interpreter.invoke, CpuTimer(), threads)
