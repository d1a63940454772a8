"""The device context: what a latency was timed on and how, defined once.

A `DeviceContext` is the environment id (a hash of hardware, drivers and library versions), the
device, the backend, dtype, memory layout, batch, CPU threads and the ``torch.compile`` mode (the
``torch-compile`` backend's Inductor mode; empty for every other backend).
Two latencies are comparable only when their contexts are equal (`torch.utils.benchmark`'s
``TaskSpec`` plays the same part there). Every place that groups or labels by device uses this
record: the measurement files (their settings), the LUT (its key columns and device keys), `dsprof
predict --device` and the report's column groups (`context_labels`), so two runs that differ only in
``--threads`` or ``--channels-last`` can never share a row, a key or a column.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable, Iterable

from .errors import LUTError

__all__ = ["COMPILE_BACKEND", "COMPILE_MODES", "CONTEXT_FIELDS", "DeviceContext", "compile_setting", "context_labels",
           "layout_of", "short_labels"]

#: The backend that times modules through ``torch.compile`` (Inductor): the one place a compile mode applies.
COMPILE_BACKEND = "torch-compile"
#: The ``torch.compile`` modes a context may carry (``--compile-mode``); the first is the default. CUDA graphs are
#: left out: a graph replayed by the timing loop would time the replay, not the kernels a deployment launches.
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")


def layout_of(backend: str, channels_last: bool) -> str:
    """The memory layout a backend runs in: TFLite is always NHWC; PyTorch (eager or compiled) NCHW or channels-last;
    ONNX Runtime and OpenVINO NCHW."""
    return "nhwc" if backend == "tflite" else ("channels_last" if channels_last else "nchw")


def compile_setting(backend: str, compile: Any) -> tuple[str, str]:
    """``(backend, compile mode)`` in the one form every record, key and setting uses: the ``torch-compile`` backend
    carries its Inductor mode (``default`` when none is given), every other backend an empty mode.

    Files and calls from before the ``torch-compile`` backend wrote ``backend torch`` with ``compile True`` (also
    ``"True"`` in a LUT's CSV) for the same thing: they read as ``torch-compile`` in mode ``default``. ``False``,
    ``None`` and ``""`` mean no compile. A mode on a backend that compiles nothing is kept, for `validate_settings`
    to refuse with the options that would work."""
    if compile is None or compile is False or (isinstance(compile, float) and compile != compile):  # NaN: empty cell
        mode = ""
    elif compile is True:
        mode = COMPILE_MODES[0]
    else:
        mode = str(compile).strip()
        mode = {"false": "", "true": COMPILE_MODES[0], "compiled": COMPILE_MODES[0]}.get(mode.lower(), mode)
    if backend == "torch" and mode:
        backend = COMPILE_BACKEND
    if backend == COMPILE_BACKEND and not mode:
        mode = COMPILE_MODES[0]
    return backend, mode


@dataclass(frozen=True)
class DeviceContext:
    """One measuring context. String form ``env_id/device/backend/dtype/layout/bBATCH/tTHREADS[/MODE]``,
    e.g. ``3f9a1c2b7d4e/cpu/onnxruntime/fp32/nchw/b1/t1`` or ``3f9a1c2b7d4e/cpu/torch-compile/fp32/nchw/b1/t1/default``;
    `from_str` parses it back exactly. ``threads`` is 0 where no CPU thread count applies (PyTorch on a GPU);
    ``compile`` is the ``torch-compile`` backend's mode, "" for the others (`compile_setting` reads older forms)."""

    env_id: str
    device: str
    backend: str
    dtype: str
    layout: str
    batch: int
    threads: int
    compile: str = ""

    def __post_init__(self) -> None:
        backend, mode = compile_setting(self.backend, self.compile)
        object.__setattr__(self, "backend", backend)
        object.__setattr__(self, "compile", mode)

    def to_str(self) -> str:
        tail = f"/{self.compile}" if self.compile else ""
        return f"{self.env_id}/{self.device}/{self.backend}/{self.dtype}/{self.layout}/b{self.batch}/t{self.threads}{tail}"

    __str__ = to_str

    @classmethod
    def from_str(cls, text: str) -> "DeviceContext":
        parts = text.strip().split("/")
        mode = parts.pop() if len(parts) == 8 else ""  # the compile mode ("compiled" in keys of older dsprof)
        if len(parts) != 7 or not parts[5].startswith("b") or not parts[6].startswith("t"):
            raise LUTError(
                f"not a device key: {text!r}; expected ENV_ID/DEVICE/BACKEND/DTYPE/LAYOUT/bBATCH/tTHREADS"
                "[/MODE], as `LUT.devices()` prints them"
            )
        try:
            batch, threads = int(parts[5][1:]), int(parts[6][1:])
        except ValueError:
            raise LUTError(f"not a device key: {text!r}; batch and threads must be integers") from None
        return cls(*parts[:5], batch, threads, mode)

    @classmethod
    def of(cls, record: Any) -> "DeviceContext":
        """The context of a `dsprof.profiler.Measurement` (its threads None, PyTorch on a GPU, become 0)."""
        return cls(record.env_id, record.device, record.backend, record.dtype, record.layout,
                   record.batch, record.threads or 0, record.compile)

    def measure_options(self) -> dict[str, Any]:
        """The fields of `dsprof.profiler.BackendSettings` and the batch that time in this context (on this machine;
        `dsprof.profiler.runner.timing_context` reads them)."""
        return {"backend": self.backend, "device": self.device, "dtype": self.dtype,
                "channels_last": self.layout == "channels_last", "batch": self.batch,
                "threads": self.threads or None, "compile": self.compile}

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in CONTEXT_FIELDS}

    def as_tuple(self) -> tuple:
        return tuple(getattr(self, name) for name in CONTEXT_FIELDS)


CONTEXT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(DeviceContext))


def _part(context: DeviceContext, name: str) -> str:
    value = getattr(context, name)
    if name == "threads":
        return f"t{value}" if value else "threads n/a"
    if name == "batch":
        return f"b{value}"
    if name == "compile":
        return f"mode {value}" if value else "no compile"
    if name == "env_id":
        return f"env {value}"
    return str(value)


# Always in a label; the other fields only when they tell two contexts of the same report apart.
_ALWAYS = ("backend", "dtype", "batch")


def _distinct(contexts: list[DeviceContext], always: tuple[str, ...],
              render: Callable[[DeviceContext, list[str]], str]) -> dict[DeviceContext, str]:
    """``render(context, fields shown)`` for each context, the fields being ``always`` plus each other one (in the
    record's order; the environment id last, the least readable) that tells apart two contexts whose texts would
    otherwise be the same. Distinct contexts differ in at least one field, which is then added: the texts are
    distinct by construction."""
    shown = set(always)

    def order() -> list[str]:
        return [n for n in CONTEXT_FIELDS if n in shown and n != "env_id"] + (["env_id"] if "env_id" in shown else [])

    for extra in [n for n in CONTEXT_FIELDS if n not in always and n != "env_id"] + ["env_id"]:
        clashes: dict[str, set] = {}
        for c in contexts:
            clashes.setdefault(render(c, order()), set()).add(getattr(c, extra))
        if any(len(values) > 1 for values in clashes.values()):
            shown.add(extra)
    return {c: render(c, order()) for c in contexts}


def context_labels(contexts: Iterable[tuple[DeviceContext, str]]) -> dict[DeviceContext, str]:
    """Short, distinct column labels for the (context, device name) pairs of one report:
    ``device name / backend / dtype / bBATCH``, plus each other field (layout, threads, compile,
    device; the environment id last) that tells apart contexts whose labels would otherwise be the
    same. Distinct contexts differ in at least one field, which is then added: the labels are
    distinct by construction, and an environment hash appears only where nothing else separates two
    contexts."""
    named = dict(contexts)
    return _distinct(list(named), _ALWAYS, lambda c, shown: " / ".join([named[c]] + [_part(c, n) for n in shown]))


def short_labels(contexts: Iterable[DeviceContext]) -> dict[DeviceContext, str]:
    """The label of each context in tables that set contexts side by side (`dsprof plan` over several):
    ``BACKEND/DEVICE tTHREADS`` (``onnxruntime/cpu t1``; no thread count where none applies), plus each other
    field (dtype, layout, batch, compile; the environment id last) that tells two of them apart, e.g.
    ``torch/cuda:0 fp16 b128``. Distinct by construction."""

    def render(c: DeviceContext, shown: list[str]) -> str:
        extra = [_part(c, n) for n in shown if n not in ("backend", "device", "threads")]
        head = f"{c.backend}/{c.device}" + (f" t{c.threads}" if c.threads else "")
        return " ".join([head] + extra)

    return _distinct(list(dict.fromkeys(contexts)), ("backend", "device", "threads"), render)


def contexts_named(name: "str | DeviceContext", contexts: Iterable[DeviceContext]) -> list[DeviceContext]:
    """The contexts among ``contexts`` that ``name`` names: a key (a `DeviceContext`, or its text), a label
    (`short_labels` of ``contexts``, as `dsprof plan` prints them: ``onnxruntime/cpu t1``), else a backend. The one
    reading of a context's name (``device_key=``, ``joint=``); none or several are the caller's to refuse."""
    contexts = list(dict.fromkeys(contexts))
    text = str(name).strip()
    labels = short_labels(contexts)
    found = [c for c in contexts if text in (str(c), labels[c])]
    return found or [c for c in contexts if c.backend == text]
