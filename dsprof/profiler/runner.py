"""`measure`: time a model's blocks in their variants and the whole model, write a measurement file.

Workloads are timed group by group (a block's variants together, then the whole-model variants
together), interleaved (`time_interleaved`); each group's records are appended to the JSON Lines
file as soon as the group is done. With ``resume=True`` the workloads already in the file are
skipped, after checking that the file was written with the same settings in the same environment; a group the
file holds in part (a run asked for fewer variants, or was cut short mid-group) has its ``original`` timed again
with what it lacks, so that every variant keeps a paired ratio over an original of its own group
(`dsprof.portable.timing_loop.left_to_time`).

A run is one `MeasureSession` (`open_session`): it opens the file, the backend, the timing context and the drift
probe once, and times the groups it is given (`MeasureSession.time`). `measure` and `measure_request` give it the
groups built from the request (`workload_groups`); `dsprof.workflows.measure` then gives it the groups it builds from
the run's own records (`dsprof.workflows.calibrate`), one at a time, in the same session and file. The profiler
only times what it is given: nothing here plans or calls back up into the workflows.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fnmatch
import statistics
import tempfile
import time
import uuid
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd
import torch
from torch import nn

from .._moved import as_request, moved_keywords
from ..device_context import COMPILE_MODES, DeviceContext, layout_of
from ..errors import Interrupted, OutputPathError, UsageError
from ..fields import shown
from ..io import check_output_path, make_parent_folders, output_path, slug
from ..models import NothingToMergeWarning, ModelRef, find_blocks, input_size_of, nothing_to_merge
from .allocator import steady_allocator
from .backends import BackendSettings, Prepared, get_backend
from .backends.base import TORCH_BACKENDS
from ..portable.cpu_share import CPU_SHARE_WARNING, CpuShare  # (recorded per group: ``state_after["process_cpu_share"]``)
from ..portable.timing_loop import left_to_time
from .fingerprint import device_name, device_state, environment, environment_id
from ..records.measurement import (
    Measurement,
    MeasurementFileError,
    MeasurementWriter,
    check_not_busy,
    read_measurements,
    repair_truncated_tail,
)
from .selection import Workloads
from .summary import summary_table
from .timing import Clock, CpuTimer, TimingConfig, time_interleaved
from .insitu import in_situ_workloads
from .probe import PROBE_NAME, probe_timing, probe_workload
from ..records.activations import is_partial_variant
from .workloads import (
    BLOCK_VARIANTS,
    MODEL_VARIANTS,
    Workload,
    block_workloads,
    model_workload,
    model_workloads,
    crossing_workloads,
    span_workloads,
    stem_head_workloads,
)

__all__ = [
    "CPU_SHARE_WARNING",
    "DEFAULT_CPU_THREADS",
    "SWITCHES_WARNING",
    "MODEL_KEYWORDS",
    "MOVED_KEYWORDS",
    "MeasureRequest",
    "MeasureResult",
    "MeasureSession",
    "check_measurement_out",
    "contention_message",
    "default_batch",
    "measure",
    "measure_request",
    "measurement_path",
    "old_clock",
    "open_session",
    "threads_note",
    "timed_model",
    "timing_context",
    "workload_groups",
]

#: ... together with more involuntary context switches per second than this.
SWITCHES_WARNING = 100.0
#: CPU threads when none are given: one. Single-threaded timings repeat on a shared machine (whole
#: MobileNetV2 within a few per cent from run to run); with every core, each parallel region waits
#: for threads that other processes preempt, and runs seconds apart differ by tens of per cent
#: (benchmarks/RESULTS.md, "Stable defaults"). nn-Meter and LitePred time single-threaded too.
DEFAULT_CPU_THREADS = 1


def threads_note(threads: int | None, given: bool) -> str:
    """One line for the summary: which CPU thread count was used and why."""
    if threads is None:
        return "CPU threads: not used (the workloads run on the GPU)"
    if not given:
        return (f"CPU threads: {threads} (the default: single-threaded timings repeat on a shared machine, "
                "multi-threaded ones drift by tens of per cent; `settings=BackendSettings(threads=N)` times with N "
                "threads)")
    return (f"CPU threads: {threads} (`settings=BackendSettings(threads=)`); the default is {DEFAULT_CPU_THREADS}, "
            "the setting that repeats best")


def contention_message(records: Sequence[Measurement], threads: int | None) -> str | None:
    """A warning when the groups of ``records`` show other processes competing for the cores, else None.

    The signals are recorded per group (``state_after``): the share of the CPU time the timed threads
    could use that the process got, and involuntary context switches per second. One thread below
    `CPU_SHARE_WARNING` is contended on its own; with several threads a low share can also mean
    serial code, so it takes more than `SWITCHES_WARNING` preemptions a second as well.
    """
    after = [r.state_after for r in records if "process_cpu_share" in r.state_after]
    if not after:
        return None
    share = statistics.median(a["process_cpu_share"] for a in after)
    switches = statistics.median(a.get("involuntary_switches_per_s", 0.0) for a in after)
    loads = [r.state_after.get("load_avg_1m") for r in records if r.state_after.get("load_avg_1m") is not None]
    if share >= CPU_SHARE_WARNING or (threads != 1 and switches <= SWITCHES_WARNING):
        return None
    load = f", load average {max(loads):.1f}" if loads else ""
    return (
        f"the machine is contended: this process got only {share:.0%} of the CPU time its {threads} thread(s) "
        f"could use and was preempted {switches:.0f} times a second (medians over the groups{load}); other "
        "processes compete for the cores and the timings below are likely inflated. Measure on an idle machine"
        + (", or with `settings=BackendSettings(threads=1)`." if threads != 1 else ".")
    )


@dataclass
class MeasureResult:
    """What `measure` did: the file, every record in it (resumed ones included), the summary table."""

    path: Path
    measurements: list[Measurement]
    new: int
    skipped: int
    summary: pd.DataFrame
    threads: int | None = None
    threads_given: bool = False
    contention: str | None = None
    calibrated: int = 0  # of the ``new``, the workloads of groups given after the built ones (`calibrate=True`'s)
    failed: tuple[Measurement, ...] = ()  # of the ``new``, those the backend could not prepare or run (their errors)

    def failure_note(self) -> str | None:
        """One sentence on this run's failed workloads, None without: how many, the first one's error, and where the
        whole model failed, that a LUT of this file prices no plan of it (its time outside the blocks is missing),
        and that timing them again as they were will likely fail the same way."""
        if not self.failed:
            return None
        first = self.failed[0]
        whole = any(r.scope == "model" and r.variant == "original" for r in self.failed)
        then = (f"; without the whole model a LUT of this file prices no plan of {first.model} on {first.backend}: "
                "time it on a runtime that prepares it" if whole else "; a LUT of this file lacks them")
        error = first.error.splitlines()[0] if first.error else ""
        error = error if len(error) <= 160 else error[:157] + "..."  # an exporter's message runs to a graph dump
        return (f"{len(self.failed)} of them failed, e.g. {first.name} {first.variant}: {error}{then} "
                "(timed again with the same model and settings, they will likely fail the same way)")


def default_batch(device: str) -> int:
    """Batch size when none is given: 128 on a CUDA GPU, 1 on the CPU (paper Sec. 3.2)."""
    return 128 if device.startswith("cuda") else 1


def measurement_path(out: str | Path, label: str, settings: BackendSettings, batch: int, resolution: int) -> Path:
    """The file a run writes: ``out`` itself when it ends in ``.jsonl``, else a file named after the settings in folder
    ``out`` (`output_path`: each setting `slug`-ged, as an imported bundle's manifest gives them; never outside ``out``)."""
    out = Path(out)
    if _names_a_file(out):
        return out
    layout = "-cl" if settings.channels_last else ""
    mode = f"-{slug(settings.compile)}" if settings.compile not in ("", COMPILE_MODES[0]) else ""  # a torch.compile mode
    name = (f"{slug(label)}_{slug(resolution)}px_{slug(settings.backend)}{mode}_{slug(settings.device)}_"
            f"{slug(settings.dtype)}{layout}_b{slug(batch)}")
    return output_path(out, name, suffix=".jsonl", what="the measurement file")


def _names_a_file(out: Path) -> bool:
    return out.suffix == ".jsonl"


_OUT_INSTEAD = "choose another `out=` folder (or a .jsonl file)"
#: Suffixes of files that are not measurement files: an `out=` ending so is refused, not made a folder of that name.
_OTHER_FILES = (".csv", ".json", ".txt", ".md", ".html", ".pt", ".pth", ".onnx", ".png", ".svg", ".pdf")


def check_measurement_out(out: str | Path, resume: bool = False, overwrite: bool = False) -> None:
    """Raise `OutputPathError` where ``out`` (a ``.jsonl`` file or a folder, as `measurement_path` reads it)
    cannot be written, or is a file that exists without ``resume`` or ``overwrite``; creates nothing.
    `measure` calls it before it builds anything."""
    out = Path(out)
    if resume and overwrite:
        raise UsageError("`resume=True` continues the file and `overwrite=True` starts it over: give one of them")
    if out.suffix.lower() in _OTHER_FILES and not out.exists():  # a typo for .jsonl, not a folder to make
        raise OutputPathError(f"cannot write the measurement file {out}: measurements are JSON Lines; give a .jsonl "
                              "file or a folder")
    if _names_a_file(out):
        check_output_path(out, "the measurement file ", _OUT_INSTEAD)
        if out.exists() and not (resume or overwrite):
            raise _exists_error(out)
        check_not_busy(out)
    else:
        check_output_path(out, "the measurement file in ", _OUT_INSTEAD, folder=True)


def _exists_error(path: Path) -> OutputPathError:
    return OutputPathError(
        f"{path} exists; pass `resume=True` to continue it (skipping what is measured) or `overwrite=True` to start over"
    )


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return True
    text = str(exc).lower()
    return "out of memory" in text or "failed to allocate" in text or "cudaerrormemoryallocation" in text


def _check_resume(existing: list[Measurement], settings: dict[str, Any], path: Path) -> None:
    for record in existing:
        theirs = record.settings()
        diff = {k: (theirs[k], settings[k]) for k in settings if theirs[k] != settings[k]}
        if diff:
            shown = "; ".join(f"{k}: file has {a!r}, this run {b!r}" for k, (a, b) in diff.items())
            raise MeasurementFileError(
                f"cannot resume {path}: it was measured with other settings ({shown}). "
                "Use the same options, or another `out=` file."
            )


def _open_output(path: Path, resume: bool, overwrite: bool) -> tuple[MeasurementWriter, list[Measurement]]:
    """The file's writer, holding its lock (a second run on the file is refused), and the records it holds."""
    try:
        make_parent_folders(path, "the measurement file ", _OUT_INSTEAD)
        exists = path.exists()
        if exists and not (resume or overwrite):  # a file named after the settings, in a folder
            raise _exists_error(path)
        writer = MeasurementWriter(path)
    except (PermissionError, IsADirectoryError, NotADirectoryError) as exc:
        raise OutputPathError(f"cannot write the measurement file {path} ({exc.strerror or exc}); choose another `out=` folder") from None
    except OSError as exc:
        if isinstance(exc, OutputPathError):
            raise
        raise OutputPathError(f"cannot write the measurement file {path} ({exc}); choose another `out=` folder") from None
    try:
        if exists and overwrite:
            writer.truncate()
            exists = False
        if not exists:
            return writer, []
        if repair_truncated_tail(path):  # under the lock: no other run is midway through a line
            warnings.warn(f"{path}: dropped a last line cut short by an interrupted run", stacklevel=3)
        return writer, read_measurements(path)
    except BaseException:
        writer.close()
        raise


def _select_blocks(groups: list[list[Workload]], pattern: str | Sequence[str] | None) -> list[list[Workload]]:
    if pattern is None:
        return []
    patterns = [pattern] if isinstance(pattern, str) else list(pattern)
    chosen = [g for g in groups if any(fnmatch.fnmatch(g[0].name, p) for p in patterns)]
    if groups and not chosen:
        names = ", ".join(g[0].name for g in groups)
        raise UsageError(f"no block matches {patterns}; the model's blocks are: {names}")
    return chosen


@dataclass(frozen=True)
class MeasureRequest:
    """What a `measure` run times and where it writes: `measure`'s parameters as one record (see `measure` for each).
    ``model``: anything `ModelRef.of` takes; ``settings`` holds backend, device, dtype, layout, threads and compile;
    ``workloads`` what is timed (`Workloads`)."""

    model: str | nn.Module | ModelRef = "mobilenet_v2"
    extra_models: Mapping[str, nn.Module] = field(default_factory=dict)
    settings: BackendSettings = BackendSettings()
    batch: int | None = None
    workloads: Workloads = Workloads()
    timing: TimingConfig = TimingConfig()
    out: str | Path = "results"
    resume: bool = False
    overwrite: bool = False
    select: Callable[[list[list[Workload]]], list[list[Workload]]] | None = None


#: The keywords that `measure` (and `dsprof.edge.export_bundle`) took beside the model before its `ModelRef` held
#: them (deprecated): each one's parameter, that parameter's object and its field there (`dsprof._moved.moved_keywords`).
MODEL_KEYWORDS = {
    "name": ("model", "ModelRef.of", "name"), "model_options": ("model", "ModelRef.of", "options"),
    "resolution": ("model", "ModelRef.of", "resolution"),
}
#: All the keywords `measure` took one by one before its objects held them (deprecated), as `MODEL_KEYWORDS`.
MOVED_KEYWORDS = {
    **MODEL_KEYWORDS,
    **{k: ("settings", "BackendSettings", k)
       for k in ("backend", "device", "dtype", "channels_last", "threads", "compile")},
    **{k: ("workloads", "Workloads", k) for k in ("variants", "model_variants", "blocks", "in_situ", "spans")},
}


def timed_model(model: str | nn.Module | ModelRef) -> tuple[str, dict[str, Any], nn.Module, tuple[int, int]]:
    """What a run times of ``model`` (anything `ModelRef.of` takes), and an export bundle carries: its label in the
    records, its options as the records give them (with ``resolution``, and ``resolution_w`` where the input is not
    square), the module in eval mode and its input (height, width) in pixels."""
    ref = ModelRef.of(model)
    options, net = dict(ref.options), ref.build().eval()
    input_size = (ref.resolution, ref.resolution) if ref.resolution else input_size_of(net)
    options["resolution"] = input_size[0]
    if input_size[0] != input_size[1]:
        options["resolution_w"] = input_size[1]
    return ref.name, options, net, input_size


def timing_context(settings: BackendSettings | DeviceContext | None, batch: int | None
                   ) -> tuple[BackendSettings, int | None]:
    """The settings and batch a run times with: ``settings`` (a `BackendSettings`; a `DeviceContext`, e.g. a LUT's
    key, whose batch is taken where ``batch`` is None; None: PyTorch on the CPU) and ``batch``."""
    if isinstance(settings, DeviceContext):
        given = settings.measure_options()
        context_batch = given.pop("batch")
        return BackendSettings(**given), batch if batch is not None else context_batch
    if settings is not None and not isinstance(settings, BackendSettings):
        raise UsageError(f"`settings=` takes a dsprof.profiler.BackendSettings (or a dsprof.DeviceContext), not "
                         f"{type(settings).__name__} {shown(settings)}")
    return (settings if settings is not None else BackendSettings()), batch


def measure(
    model: str | nn.Module | ModelRef = "mobilenet_v2",
    *,
    settings: BackendSettings | DeviceContext | None = None,
    batch: int | None = None,
    workloads: Workloads | None = None,
    extra_models: Mapping[str, nn.Module] | None = None,
    timing: TimingConfig = TimingConfig(),
    out: str | Path = "results",
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    select: Callable[[list[list[Workload]]], list[list[Workload]]] | None = None,
    **old: Any,
) -> MeasureResult:
    """Measure a model's blocks and the whole model in the variants ``workloads`` chooses.

    ``model`` is anything `ModelRef.of` takes: a registered name, a ``path.py:factory`` model file, an ``nn.Module``
    (named by its class name, or a `ModelRef` of it with ``name``; its input size is its reference's ``resolution``
    or the one `get_model` set), or a `ModelRef` (``ModelRef.of("mobilenet_v2", options=..., resolution=32)``).
    ``settings`` (`BackendSettings`, or a `DeviceContext` whose batch is used where ``batch`` is None: e.g. a LUT's
    key, to time in that context again; default PyTorch on the CPU): ``backend`` one of `dsprof.runtimes.BACKENDS`,
    ``device``, ``dtype``, ``channels_last``, ``threads`` (CPU inference threads; default `DEFAULT_CPU_THREADS`, one,
    the setting that repeats on a shared machine) and ``compile``, the ``torch-compile`` backend's mode
    (`dsprof.device_context.COMPILE_MODES`; ``default`` when not given). ``batch`` defaults to 1 on the CPU and 128
    on CUDA. ``workloads`` (`Workloads`; default its defaults): ``blocks``, an fnmatch pattern (or several) of block
    names to time, None for none, each in ``variants``; the whole model in ``model_variants`` (``()`` skips it);
    ``in_situ`` (``merged``, ``linear``) also times, for each chosen block, the whole model with that block swapped
    for the variant against the whole model, in one interleaved group (scope `IN_SITU_SCOPE`,
    `dsprof.profiler.insitu`): the saving in situ, and the device's drift from group to group; ``spans`` > 1 also
    times the dense convolution every run of up to that many consecutive blocks merges into
    (`dsprof.merging.spans`). ``extra_models`` are more whole models (e.g. a merged model) timed in the whole-model
    group, variant ``custom``, named by their keys. Times are seconds everywhere. Returns a `MeasureResult`; the
    records are in ``out`` (a ``.jsonl`` file, or a folder where a file named after the settings is written),
    appended as they are measured. ``select`` takes the interleaved groups of workloads and returns those to time
    (`dsprof measure --few` times a few chosen entries). The keywords of before (``name=``, ``model_options=``,
    ``resolution=``; ``backend=``, ``device=``, ``dtype=``, ``channels_last=``, ``threads=``, ``compile=``;
    ``variants=``, ``model_variants=``, ``blocks=``, ``in_situ=``, ``spans=``) still work for a release, with a
    `DeprecationWarning`. `measure_request` takes the same as a `MeasureRequest`; `open_session` times groups
    given one at a time (what `dsprof.measure(calibrate=True)` does after the built ones). Both take the clock that
    times CPU workloads (``clock=``: hardware-free tests), which ``measure(clock=)`` took before.
    """
    clock = old_clock(old, "dsprof.profiler.measure")
    moved = moved_keywords("dsprof.profiler.measure", old, MOVED_KEYWORDS)
    if "model" in moved:
        given = moved["model"]
        model = ModelRef.of(model, name=given.get("name"), options=given.get("options"),
                            resolution=given.get("resolution"))
    settings, batch = timing_context(settings, batch)
    settings = as_request(settings, BackendSettings, "settings", moved)
    workloads = as_request(workloads, Workloads, "workloads", moved)
    request = MeasureRequest(model, dict(extra_models or {}), settings, batch, workloads, timing, out, resume,
                             overwrite, select)
    return measure_request(request, progress=progress, clock=clock, log=log)


def old_clock(old: dict[str, Any], verb: str) -> Clock:
    """The ``clock=`` a call of ``verb`` was given (taken out of ``old``), with a `DeprecationWarning`; else the
    default clock."""
    if "clock" not in old:
        return time.perf_counter_ns
    warnings.warn(f"{verb}(clock=) goes in dsprof 0.2: the clock that times CPU workloads is "
                  "dsprof.profiler.measure_request(clock=)'s and open_session(clock=)'s", DeprecationWarning,
                  stacklevel=3)
    return old.pop("clock")


def measure_request(
    request: MeasureRequest,
    *,
    progress: bool = True,
    clock: Clock = time.perf_counter_ns,
    log: Callable[[str], None] | None = None,
) -> MeasureResult:
    """Run a `MeasureRequest` (what `measure` does with its parameters): its groups timed in one `MeasureSession`.
    ``Workloads(calibrate=True)`` is refused here, not ignored: calibration is a step of the measure workflow
    (`dsprof.measure`), which plans its groups from the run's own records."""
    if request.workloads.calibrate:
        raise UsageError("`workloads=Workloads(calibrate=True)` is a step of `dsprof.measure`, which plans the groups "
                         "from the run's own records: call `dsprof.measure` with the same arguments")
    with open_session(request, progress=progress, clock=clock, log=log) as session:
        try:
            session.time(session.todo)
        except KeyboardInterrupt:
            raise session.interrupted() from None
    return session.result()


def _checked(request: MeasureRequest) -> tuple[MeasureRequest, Any]:
    """The request with its device, batch and threads resolved, and its backend; raises on what cannot run."""
    settings = request.settings
    if settings.device == "cuda":
        settings = replace(settings, device="cuda:0")
    if settings.threads is None and settings.uses_cpu_threads:
        settings = replace(settings, threads=DEFAULT_CPU_THREADS)
    # from the resolved settings: the backend times with the thread count the records carry
    backend_impl = get_backend(settings)  # validates: unknown backend/dtype, fp16 on CPU, CUDA without CUDA
    batch = request.batch if request.batch is not None else default_batch(settings.device)
    timing = as_request(request.timing, TimingConfig, "timing")  # None: the defaults, as elsewhere
    if batch < 1:
        raise UsageError(f"`batch={batch}`: give 1 or more images")
    workloads = request.workloads.for_backend(settings.backend)
    bad = [v for v in workloads.variants if v not in BLOCK_VARIANTS]
    if bad:
        raise UsageError(f"unknown block variant(s) {bad}; known: {', '.join(BLOCK_VARIANTS)}")
    bad = [v for v in workloads.model_variants if v not in MODEL_VARIANTS]
    if bad:
        raise UsageError(f"unknown model variant(s) {bad}; known: {', '.join(MODEL_VARIANTS)}")
    return replace(request, settings=settings, batch=batch, timing=timing, workloads=workloads), backend_impl


def open_session(
    request: MeasureRequest,
    *,
    progress: bool = True,
    clock: Clock = time.perf_counter_ns,
    log: Callable[[str], None] | None = None,
) -> "MeasureSession":
    """Open a measuring run (`MeasureSession`: use it in a ``with`` block): checks the request, builds the model and
    its workload groups, opens the output file (resuming it where asked, after checking its settings), the backend,
    the timing context and the drift probe. Nothing is timed until `MeasureSession.time`."""
    saved_threads = torch.get_num_threads()  # the torch backend sets the process's count; restored on close
    try:
        return MeasureSession(request, progress, clock, log, saved_threads)
    except BaseException:
        torch.set_num_threads(saved_threads)
        raise


class MeasureSession:
    """One open measuring run (`open_session`): one output file, one backend, one timing context, one drift probe.

    ``todo``: the groups built from the request that the file does not hold yet (``groups``: all of them; ``existing``:
    the file's records before the run). `time` times groups -- these, or any built later from the run's records
    (``records``), as `dsprof.workflows.calibrate` builds them -- appending each group's records to the file as it
    ends. `result` says what the run did; `interrupted` is the one-line error for Ctrl-C. ``net``, ``label``,
    ``input_size``, ``context`` and ``spans`` describe the model and context timed, for whoever builds more groups."""

    def __init__(self, request: MeasureRequest, progress: bool, clock: Clock, log: Callable[[str], None] | None,
                 saved_threads: int) -> None:
        self._saved_threads, self._threads_given = saved_threads, request.settings.threads is not None
        request, backend_impl = _checked(request)
        # before the model and its workloads are built (they take a while)
        check_measurement_out(request.out, request.resume, request.overwrite)
        settings, batch, chosen = request.settings, request.batch, request.workloads
        label, options, net, input_size = timed_model(request.model)
        suffix = "".join(f"_{k}{v}" for k, v in sorted(options.items()) if k != "resolution")
        self.path = path = measurement_path(request.out, label + suffix, settings, batch, input_size[0])

        # The workloads, grouped for interleaving. Built on one thread: folding and MAC counting run small
        # convolutions, which OpenMP threads slow down tenfold when other processes share the cores.
        timed_threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            groups = workload_groups(net, label, chosen.variants, chosen.model_variants, chosen.blocks,
                                     request.extra_models, input_size, chosen.in_situ, chosen.spans)
            if request.select is not None:
                groups = [g for g in request.select(groups) if g]
        finally:
            torch.set_num_threads(timed_threads)
        if not groups and request.select is None and not chosen.calibrate:  # as `export` says it; no empty file left
            none = ("no block variant was asked for (`workloads=Workloads(variants=)`)" if chosen.blocks is not None
                    and not chosen.variants else "no block matched")
            raise UsageError(f"nothing to measure: {none}, and no whole-model variant or plan was asked for")
        # after the workloads: a bad `workloads=Workloads(blocks=)` leaves no file behind
        writer, existing = _open_output(path, request.resume, request.overwrite)
        self._stack = contextlib.ExitStack()
        try:
            self._writer = self._stack.enter_context(writer)
            env = environment()
            if settings.backend in TORCH_BACKENDS and not settings.is_cuda:
                env["allocator"] = steady_allocator()  # set by the backend; recorded, not part of the environment id
            if hasattr(backend_impl, "describe"):  # the runtime's versions, device and settings; not hashed either (the
                env["runtime"] = backend_impl.describe()  # versions are, in `versions`; the settings are the context's)
            threads = (settings.threads or torch.get_num_threads()) if settings.uses_cpu_threads else None
            context = DeviceContext(environment_id(env), settings.device, settings.backend, settings.dtype,
                                    layout_of(settings.backend, settings.channels_last), batch, threads or 0,
                                    settings.compile)
            run_settings = {"model": label, "model_options": options, **context.as_dict(), "threads": threads}
            _check_resume(existing, run_settings, path)
            done = {r.workload_key for r in existing if r.ok}
            todo = (left_to_time(g, lambda w: _workload_key(w) in done, lambda w: w.variant == "original")
                    for g in groups)
            self.todo = [g for g in todo if g]
            self.groups, self.existing, self.new_records = groups, existing, []
            self.net, self.label, self.input_size, self.context = net, label, input_size, context
            self.spans = chosen.spans
            self.threads, self._log, self._clock = threads, log, clock
            self._backend, self._settings, self._batch, self._timing = backend_impl, settings, batch, request.timing
            self._common = dict(run_settings, device_name=device_name(env, settings.device), environment=env)
            self._run_id, self._index = uuid.uuid4().hex[:8], 0
            self._desc = f"measure {label} ({settings.backend}, {settings.device})"
            self._bar = self._stack.enter_context(_progress_bar(len(self.todo), self._desc, progress))
            self._tmp = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="dsprof-measure-")))
            self._probe = self._stack.enter_context(_Probe(backend_impl, settings, batch, request.timing, clock,
                                                           self._tmp / "probe", self._common, log))
        except BaseException:
            self._stack.close()
            raise

    def __enter__(self) -> "MeasureSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file, the probe and the progress bar; restore the process's thread count."""
        try:
            self._stack.close()
        finally:
            torch.set_num_threads(self._saved_threads)

    @property
    def records(self) -> list[Measurement]:
        """Every record of the file: those it held before the run, then the run's, as they are written."""
        return self.existing + self.new_records

    def expect(self, groups: int, then: str = "") -> None:
        """Say that ``groups`` more groups will follow (for the progress bar; groups built one at a time), and what
        they are (``then``: shown after the bar's name from now on)."""
        self._bar.total += groups
        if then:
            self._bar.set_description(f"{self._desc}, {then}", refresh=False)
        self._bar.refresh()

    def time(self, groups: Iterable[list[Workload]]) -> list[Measurement]:
        """Time ``groups`` one after the other (each taken from the iterable only once the one before is timed, so it
        can be built from the records before it), each interleaved and followed by the drift probe, appending each
        group's records to the file as it ends and to ``new_records`` once written (what an interrupted run has
        saved). Returns their records."""
        timed: list[Measurement] = []
        for group in groups:
            if self._bar.n >= self._bar.total:  # a group built from the records: known one at a time
                self.expect(1)
            # The first group also pays for thread-pool start-up and allocator growth: warm it longer.
            timing = self._timing.first_group() if self._index == 0 else self._timing
            records = _measure_group(group, self._backend, self._settings, self._batch, timing, self._clock,
                                     self._tmp / str(self._index),
                                     dict(self._common, group=f"{self._run_id}:{self._index}"))
            # the machine's speed, right after the group
            records += self._probe.time(f"{self._run_id}:probe{self._index}")
            self._index += 1
            self._write(records)
            timed += records
            for r in records:
                if self._log and r.error:
                    self._log(f"{r.name} {r.variant}: {r.error}")
            self._bar.update(1)
        return timed

    def _write(self, records: list[Measurement]) -> None:
        self._writer.write(records)
        self.new_records += records

    def interrupted(self, then: str = "") -> Interrupted:
        """The one-line error for Ctrl-C: how many of the built groups' workloads the file holds, where, and that
        ``resume=True`` continues (``then``: what else the run does after them, said in between)."""
        saved = _saved(self.path, self.groups, len(self.records))
        total = sum(len(g) for g in self.groups)
        return Interrupted(f"interrupted: {saved} of {total} workloads saved in {self.path}{then}; "
                           "`resume=True` continues")

    def result(self) -> MeasureResult:
        """What the run did: every record of the file, how many workloads it timed (``calibrated``: of those, the
        workloads of groups given beyond ``todo``) and skipped, the summary and the contention warning (also to
        ``log``)."""
        contention = contention_message(self.new_records, self.threads)
        if self._log and contention:
            self._log(contention)
        measurements = self.records
        new = sum(r.scope != "probe" for r in self.new_records)  # workloads; the drift probe is not one
        skipped = sum(len(g) for g in self.groups) - sum(len(g) for g in self.todo)
        calibrated = new - sum(len(g) for g in self.todo)  # groups built later come last (calibration)
        failed = tuple(r for r in self.new_records if r.scope != "probe" and not r.ok)
        return MeasureResult(self.path, measurements, new, skipped, summary_table(measurements), self.threads,
                             self._threads_given, contention=contention, calibrated=calibrated, failed=failed)


def _progress_bar(total: int, desc: str, progress: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="group", disable=not progress, leave=False)


def _workload_key(w: Workload) -> tuple[str, str, str, str | None]:
    """The key its record will have (`Measurement.workload_key`)."""
    return (w.scope, w.name, w.variant, w.spec.to_str() if w.spec else None)


def _saved(path: Path, groups: list[list[Workload]], fallback: int) -> int:
    """How many of ``groups``' workloads ``path`` holds measured (what ``--resume`` skips); read back from the
    file, which an interrupt can leave one group ahead of the records this run counted."""
    try:
        done = {r.workload_key for r in read_measurements(path) if r.ok}
    except Exception:  # noqa: BLE001 - a count for the message only; the file itself is checked on --resume
        return fallback
    return sum(_workload_key(w) in done for g in groups for w in g)


def workload_groups(
    net: nn.Module,
    label: str,
    variants: Sequence[str],
    model_variants: Sequence[str],
    blocks: str | Sequence[str] | None,
    extra_models: Mapping[str, nn.Module] | None,
    input_size: tuple[int, int],
    in_situ: tuple[str, ...] = (),
    spans: int = 0,
) -> list[list[Workload]]:
    """The workloads `measure` times (and `dsprof export` bundles), in the groups that are timed interleaved:
    each block's variants, each block in situ, each span, then the whole-model variants (with stem and head where
    blocks are timed) with ``extra_models`` (plans' models; the stem and head then in a group of their own, and the
    other whole-model variants with the original in another: the plans are timed against a second copy of it)."""
    groups: list[list[Workload]] = []
    found = find_blocks(net, input_size) if (variants or in_situ) and blocks is not None else []
    if not found and (variants or in_situ or set(model_variants) - {"original"}):
        nothing = nothing_to_merge(net, input_size)
        if nothing is not None:  # said once, here; the whole-model variants that replace blocks are left out
            warnings.warn(f"{label}: {nothing}; measured as a whole model", NothingToMergeWarning, stacklevel=2)
            model_variants = tuple(v for v in model_variants if v == "original")
    if variants and blocks is not None:
        groups += _select_blocks(block_workloads(net, tuple(variants), input_size, found), blocks)
    if in_situ and blocks is not None:
        groups += _select_blocks(in_situ_workloads(net, in_situ, input_size, found), blocks)
    if spans > 1:
        spanned = span_workloads(net, spans, input_size)
        if not spanned:  # e.g. LCNet, every block ending with its activation: said, not timed as nothing in silence
            warnings.warn(f"{label}: no run of blocks merges as one span (a span needs blocks that follow one "
                          "another with no activation after their outputs but the last, symmetric padding and no skip "
                          "but the identity): no span is timed", UserWarning, stacklevel=2)
        groups += [[w] for w in spanned]
    if spans > 1 and any(map(is_partial_variant, variants)) and blocks is not None:  # measured for activation plans
        groups += [[w] for w in crossing_workloads(net, spans, input_size)]
    model_group: list[Workload] = list(model_workloads(net, label, tuple(model_variants), input_size)) if model_variants else []
    if "original" in model_variants and blocks is not None:  # stem and head: with the blocks, a LUT then predicts
        model_group += stem_head_workloads(net, label, input_size)  # the model without its measurement
    checks = [model_workload(extra, extra_name, "custom", input_size) for extra_name, extra in (extra_models or {}).items()]
    parts = [w for w in model_group if w.scope in ("stem", "head")]
    if checks and parts:
        # a plan's check is not timed beside the stem and head: rotated with them round by round, each workload always
        # after the same other, a plan read 1.4 % slower to 6.1 % faster than paired with the original alone, as
        # `predict(check=)` times it (benchmarks/RESULTS.md, "A check beside the stem and head"). They get a group of
        # their own; the original stays with the plans.
        groups.append(parts)
        model_group = [w for w in model_group if w.scope not in ("stem", "head")]
    if checks and "original" in model_variants and any(w.variant != "original" for w in model_group):
        # nor beside another whole model (``merged``, ``flops_matched``): a group's other members move a plan's ratio
        # by 1-3 % (benchmarks/RESULTS.md, "Why a large group read plans faster"). Those keep their group with the
        # original; the plans are timed against a second copy of it, as `predict(check=)` times them.
        groups.append(model_group)
        model_group = [model_workload(net, label, "original", input_size)]
    model_group += checks
    if model_group:
        groups.append(model_group)
    return groups


class _Probe:
    """The drift probe (`dsprof.profiler.probe`), prepared once per run in the run's backend and timed
    after each group; a probe that cannot be prepared is said once and left out, the run goes on."""

    def __init__(self, backend: Any, settings: BackendSettings, batch: int, timing: TimingConfig, clock: Clock,
                 workdir: Path, common: dict[str, Any], log: Callable[[str], None] | None) -> None:
        self.workload = probe_workload()
        self.timing = probe_timing(timing)
        self.common, self.batch, self.clock, self.is_cuda = common, batch, clock, settings.is_cuda
        self.backend, self.workdir, self.log = backend, workdir, log
        self.prepared: Prepared | None = None

    def __enter__(self) -> "_Probe":
        try:
            self.prepared = self.backend.prepare(self.workload.module, (self.batch, *self.workload.input_shape), self.workdir)
        except RuntimeError as exc:  # recorded nowhere else: say it, time the groups without it
            if self.log:
                self.log(f"drift probe {PROBE_NAME}: not timed ({type(exc).__name__}: {str(exc)[:200]})")
        if self.prepared is not None and isinstance(self.prepared.timer, CpuTimer):
            self.prepared.timer.clock = self.clock
        return self

    def __exit__(self, *exc: object) -> None:
        if self.prepared is not None:
            self.prepared.close()

    def time(self, group: str) -> list[Measurement]:
        """One probe record (scope ``probe``), or none where the probe could not be prepared."""
        if self.prepared is None:
            return []
        p, w = self.prepared, self.workload
        with torch.inference_mode():
            r = time_interleaved({"probe": p.run}, self.timing, p.timer, self.clock)["probe"]
        return [Measurement(
            **dict(self.common, group=group), scope=w.scope, name=w.name, index=-1, spec=None, variant=w.variant,
            input_shape=(self.batch, *w.input_shape), macs=w.macs, params=w.params, channels=None,
            samples_s=r.samples_s, iterations_per_sample=r.iterations_per_sample, warmup_iterations=r.warmup_iterations,
            stop_reason=r.stop_reason, target_precision=self.timing.target_precision, budget_s=self.timing.budget_s,
            state_before={}, state_after={}, time_utc=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            runtime_info=dict(p.info),
        )]


def _measure_group(
    group: list[Workload],
    backend: Any,
    settings: BackendSettings,
    batch: int,
    timing: TimingConfig,
    clock: Clock,
    workdir: Path,
    common: dict[str, Any],
) -> list[Measurement]:
    state_before = device_state(settings.device)
    prepared: dict[int, Prepared] = {}
    errors: dict[int, str] = {}
    for i, w in enumerate(group):
        try:
            prepared[i] = backend.prepare(w.module, (batch, *w.input_shape), workdir / f"{i}_{w.variant}")
        except Exception as exc:  # noqa: BLE001 - recorded, and the run goes on with the next workload
            if not _is_oom(exc) and not isinstance(exc, RuntimeError):
                raise
            errors[i] = f"{'out of memory' if _is_oom(exc) else 'failed to prepare'}: {type(exc).__name__}: {str(exc)[:300]}"
            if settings.is_cuda:
                torch.cuda.empty_cache()
    for p in prepared.values():
        if p.threads and common["threads"] and p.threads != common["threads"]:  # the records would say otherwise
            raise RuntimeError(f"the {settings.backend} backend prepared {p.threads} CPU threads where this run's "
                               f"records say {common['threads']}")
        if isinstance(p.timer, CpuTimer):
            p.timer.clock = clock  # the injectable clock times CPU workloads and keeps the budget
    results = {}
    # CPU time this process got / CPU time its threads asked for, and how often the kernel took the CPU away: signs
    # of other processes competing for the cores (then every parallel region waits for descheduled threads)
    share = CpuShare(common["threads"] or 1)
    if prepared:
        try:
            with torch.inference_mode(), share:
                timed = time_interleaved({str(i): p.run for i, p in prepared.items()}, timing, _GroupTimer(prepared), clock)
            results = {int(k): v for k, v in timed.items()}
        except Exception as exc:  # noqa: BLE001
            if not _is_oom(exc):
                raise
            for i in prepared:
                errors[i] = f"out of memory: {type(exc).__name__}: {str(exc)[:300]}"
    for p in prepared.values():
        p.close()
    state_after = device_state(settings.device)
    if results and not settings.is_cuda and common["threads"]:
        state_after.update(share.reading())
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    records = []
    for i, w in enumerate(group):
        r = results.get(i)
        p = prepared.get(i)
        records.append(
            Measurement(
                **common, scope=w.scope, name=w.name, index=w.index, spec=w.spec.to_str() if w.spec else None,
                variant=w.variant, input_shape=(batch, *w.input_shape), macs=w.macs, params=w.params, channels=w.channels,
                samples_s=r.samples_s if r else (), iterations_per_sample=r.iterations_per_sample if r else 0,
                warmup_iterations=r.warmup_iterations if r else 0, stop_reason=r.stop_reason if r else None,
                target_precision=timing.target_precision, budget_s=timing.budget_s, state_before=state_before,
                state_after=state_after, time_utc=now, error=errors.get(i),
                runtime_info=dict(p.info) if p else {},
            )
        )
    return records


class _GroupTimer:
    """Dispatches to each prepared workload's own timer (CPU clock or CUDA events)."""

    def __init__(self, prepared: Mapping[int, Prepared]) -> None:
        self._by_fn = {id(p.run): p.timer for p in prepared.values()}

    def __call__(self, fn: Callable[[], object], number: int) -> float:
        return self._by_fn[id(fn)](fn, number)
