"""`dsprof measure` and `dsprof export` as Python functions.

`measure` times a model's blocks, their dense replacements and the whole model (`dsprof.profiler.runner`); the whole
models that plans merge (each plan's merges written by the one rule, `dsprof.planning.decide.merge_rule`) and merged-model
files are timed beside the original in its group, and each one's paired check is read from the run
(`dsprof.workflows.check.paired_check`). With ``calibrate`` the run ends with the groups it plans from its own
records (`dsprof.workflows.calibrate`); with ``remote`` it runs on another machine over ssh
(`dsprof.edge.remote`). `export` writes the same workloads as a bundle for a device without dsprof.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from torch import nn

from ..device_context import DeviceContext
from ..edge.export import ExportResult, export_bundle
from ..edge.host import RemoteHost
from ..edge.importer import ImportResult
from ..edge.remote import measure_remote
from ..errors import PlanError, UsageError
from ..lut.choice import MergeChoice
from ..planning.decide import merge_rule
from ..lut.table import LUT
from ..merging.artifact import load_merged
from ..merging.model import merge_model
from ..merging.rule import Merges, rule_kind
from ..models import ModelRef
from ..records.plan import load_plan, named_plans
from ..profiler.backends import BackendSettings
from ..profiler.runner import MeasureRequest, MeasureResult, check_measurement_out, default_batch, measure_request
from ..profiler.selection import Workloads
from ..profiler.timing import Clock, TimingConfig
from .calibrate import check_calibration_request, planned_groups
from .check import PairedCheck, paired_check

__all__ = ["Measured", "export", "measure", "plan_models", "remote_host", "request_objects"]


@dataclass(frozen=True)
class Measured:
    """What `measure` did: the run (``run``: its file, records and summary; None where it ran on a ``remote``
    machine, whose import is ``imported``), the merges each plan's model was built with (``merges``), and each
    model the plans and files added, paired with the original timed in its group (``checks``: None where the run
    has no such pair)."""

    run: MeasureResult | None
    merges: tuple[Merges, ...] = ()
    checks: Mapping[str, PairedCheck | None] = field(default_factory=dict)
    imported: ImportResult | None = None


#: The keywords that set the timing context one by one before `BackendSettings` carried it, and those that chose what
#: is timed before `Workloads` did (deprecated).
_SETTINGS_KEYWORDS = ("backend", "device", "dtype", "channels_last", "threads", "compile")
_WORKLOADS_KEYWORDS = ("variants", "model_variants", "blocks", "in_situ", "spans")
_MERGE_KEYWORDS = ("lut", "device_key", "merge_by", "accept_modified")


_REMOTE_KEYWORDS = {"ssh": "ssh", "remote_python": "python", "remote_dir": "dir"}


def remote_host(remote: str | RemoteHost | None, deprecated: dict[str, Any]) -> RemoteHost | None:
    """The machine a run times on (None: here), with the ``deprecated`` keywords of before (taken out of it: a
    `DeprecationWarning`) in place of its fields."""
    old = {_REMOTE_KEYWORDS[k]: deprecated.pop(k) for k in list(deprecated) if k in _REMOTE_KEYWORDS}
    if old:
        warnings.warn(f"dsprof.measure({'=, '.join(k for k in _REMOTE_KEYWORDS if _REMOTE_KEYWORDS[k] in old)}=) is "
                      "now dsprof.measure(remote=RemoteHost(...))", DeprecationWarning, stacklevel=3)
    if remote is None:
        return None
    host = remote if isinstance(remote, RemoteHost) else RemoteHost(str(remote))
    return replace(host, **old) if old else host


def request_objects(settings: BackendSettings | DeviceContext | None, batch: int | None, workloads: Workloads | None,
                    merge: MergeChoice | None, deprecated: Mapping[str, Any], verb: str = "measure"
                    ) -> tuple[BackendSettings, int | None, Workloads, MergeChoice]:
    """The one timing context of a call, its batch, what it times and what merges its plans: ``settings`` (a
    `BackendSettings`; a `DeviceContext`, whose batch is taken where ``batch`` is None; None: PyTorch on the CPU),
    ``workloads`` (None: `Workloads`' defaults) and ``merge`` (None: a plan's own list only), with the ``deprecated``
    keywords of before (a `DeprecationWarning`) in place of their fields."""
    unknown = sorted(set(deprecated) - set(_SETTINGS_KEYWORDS) - set(_WORKLOADS_KEYWORDS) - set(_MERGE_KEYWORDS))
    if unknown:
        raise TypeError(f"{verb}() got an unexpected keyword argument {unknown[0]!r}")
    if isinstance(settings, DeviceContext):
        given = settings.measure_options()
        context_batch = given.pop("batch")
        batch, settings = batch if batch is not None else context_batch, BackendSettings(**given)
    settings = settings if settings is not None else BackendSettings()
    objects = {"settings": settings, "workloads": workloads if workloads is not None else Workloads(),
               "merge": merge if merge is not None else MergeChoice()}
    for keywords, field_name in ((_SETTINGS_KEYWORDS, "settings"), (_WORKLOADS_KEYWORDS, "workloads"),
                                 (_MERGE_KEYWORDS, "merge")):
        old = {k: v for k, v in deprecated.items() if k in keywords}
        if old:
            kind = type(objects[field_name]).__name__
            warnings.warn(f"dsprof.{verb}({'=, '.join(old)}=) is now dsprof.{verb}({field_name}={kind}(...))",
                          DeprecationWarning, stacklevel=3)
            objects[field_name] = replace(objects[field_name], **old)
    return objects["settings"], batch, objects["workloads"], objects["merge"]


def plan_models(model: nn.Module, name: str, *, options: Mapping[str, Any] | None = None,
                plans: Sequence[Any] = (), merged_models: Sequence[str | Path] = (), lut: Any = None,
                device_key: Any = None, merge_by: str | None = None, accept_modified: bool = False,
                **context: Any) -> tuple[dict[str, nn.Module], tuple[Merges, ...]]:
    """The whole models that ``plans`` (presets, plan files or `Plan`\\ s, each named after its plan or file) and
    ``merged_models`` (files of `dsprof merge --out`, named after the file) add to a run of ``model``, and the
    merges each plan's model was built with: its own list, else ``lut``'s rule in the LUT context ``device_key`` (or
    the one that the run's ``context`` -- backend, dtype, batch -- picks), else MACs with ``merge_by="macs"``. A
    plan no rule can decide is refused before any model is merged."""
    if not plans and not merged_models:
        return {}, ()
    loaded = list(named_plans((source, load_plan(source)) for source in plans).items())  # one name, one plan
    if lut is not None and not isinstance(lut, LUT):
        lut = LUT.load(lut, accept_modified=accept_modified)
    for _, (_, plan) in loaded:  # refused before any model is merged
        rule_kind(plan, lut=lut is not None, merge_by=merge_by)
    taken = {named: str(source) for named, (source, _) in loaded}
    for path in merged_models:  # a merged model is named after its file
        if Path(path).stem in taken:
            raise PlanError(f"{taken[Path(path).stem]} and {path} are both named {Path(path).stem!r}; a record names "
                            "the model it timed, so give each its own name (rename the file, or the plan's 'name')")
        taken[Path(path).stem] = str(path)
    extra: dict[str, nn.Module] = {}
    merges = []
    if loaded:
        key = lut.resolve(device_key, **context) if lut is not None else None
        rule = merge_rule(model, lut=lut, device=key, merge_by=merge_by, name=name, options=options)
        for named, (_, plan) in loaded:
            decided = rule.decide(plan)
            extra[named] = merge_model(model, decided.plan)
            merges.append(decided)
    for path in merged_models:
        extra[Path(path).stem] = load_merged(path)
    return extra, tuple(merges)


def measure(
    model: str | nn.Module | ModelRef = "mobilenet_v2",
    *,
    name: str | None = None,
    options: Mapping[str, Any] | None = None,
    resolution: int | None = None,
    weights: bool | str | Path = False,
    settings: BackendSettings | DeviceContext | None = None,
    batch: int | None = None,
    workloads: Workloads | None = None,
    plans: Sequence[Any] = (),
    merged_models: Sequence[str | Path] = (),
    merge: MergeChoice | None = None,
    calibrate: bool = False,
    timing: TimingConfig = TimingConfig(),
    out: str | Path = "results",
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    clock: Clock = time.perf_counter_ns,
    remote: str | RemoteHost | None = None,
    say: Callable[[str], None] | None = None,
    **deprecated: Any,
) -> Measured:
    """Time ``model`` (anything `dsprof.models.ModelRef.of` takes: a registered name built with ``options`` at
    ``resolution`` from ``weights``, a model file, or a module named ``name``): what ``workloads`` chooses (a
    `dsprof.profiler.Workloads`: blocks and their variants, the whole model's variants, blocks in situ, spans; default
    its defaults), in the timing context ``settings`` (a `BackendSettings`: backend, device, dtype, layout, threads,
    torch.compile mode; or a `DeviceContext`, e.g. a LUT's key, whose batch is used where ``batch`` is None; default:
    PyTorch on the CPU) at ``batch`` (`dsprof.profiler.runner.measure` says what each setting does). The separate
    keywords of before (``backend=``, ``device=``, ``dtype=``, ``channels_last=``, ``threads=``, ``compile=``;
    ``variants=``, ``model_variants=``, ``blocks=``, ``in_situ=``, ``spans=``; ``lut=``, ``device_key=``,
    ``merge_by=``, ``accept_modified=``) still work for a release, with a `DeprecationWarning`. ``plans`` and
    ``merged_models`` add whole models timed beside the original (`plan_models`: ``merge``, a
    `dsprof.lut.MergeChoice` -- a LUT and its context, or MACs --, decides the merges of the plans without their own
    list); ``calibrate`` ends the run with the groups planned from its own records (`dsprof.workflows.calibrate`).
    ``remote`` (a `dsprof.edge.RemoteHost`, or its ``USER@HOST`` reached with plain ``ssh``) times fp32 bundles on
    that machine instead (`dsprof.edge.remote`), saying each step to ``say`` (``ssh=``, ``remote_python=`` and
    ``remote_dir=`` one by one still work for a release, with a `DeprecationWarning`). ``log`` gets the run's warnings.
    Records go to ``out`` (a folder, or a ``.jsonl`` file). Returns a `Measured`."""
    host = remote_host(remote, deprecated)  # takes its keywords of before out of ``deprecated``
    settings, batch, workloads, merge = request_objects(settings, batch, workloads, merge, deprecated)
    lut, device_key, merge_by, accept_modified = merge.lut, merge.device_key, merge.merge_by, merge.accept_modified
    remote, ssh, remote_python, remote_dir = (host.host, host.ssh, host.python, host.dir) if host else (None,) * 4
    backend, device, dtype, channels_last, threads, compile = (
        settings.backend, settings.device, settings.dtype, settings.channels_last, settings.threads, settings.compile)
    variants, model_variants, blocks, in_situ, spans = (
        workloads.variants, workloads.model_variants, workloads.blocks, workloads.in_situ, workloads.spans)
    if calibrate and remote:
        raise UsageError("`calibrate=True` times a plan built from the run's own entries, here: measure on the "
                         "device without it, or run dsprof there")
    if remote and (dtype != "fp32" or channels_last):
        raise UsageError("`remote=` times fp32 bundles: drop `dtype=` and `channels_last=True`")
    if not remote:
        check_measurement_out(out, resume, overwrite)  # before the model (and the plans' merged models) is built
    ref = ModelRef.of(model, name=name, options=options, resolution=resolution, weights=weights)
    name, options, resolution, net = ref.name, dict(ref.options), ref.resolution, ref.build()
    extra, merges = plan_models(net, name, options=options, plans=plans, merged_models=merged_models, lut=lut,
                                device_key=device_key, merge_by=merge_by, accept_modified=accept_modified,
                                backend=backend, dtype=dtype, batch=batch)
    if remote:
        imported = measure_remote(
            remote, net, backend=backend, device=device, threads=threads, ssh=tuple(ssh), python=remote_python,
            remote_dir=remote_dir, out=out, overwrite=overwrite, log=say, name=name, model_options=options,
            resolution=resolution, extra_models=extra, batch=batch or default_batch(device), variants=tuple(variants),
            model_variants=tuple(model_variants), blocks=blocks, timing=timing)
        return Measured(None, merges, {}, imported)
    if calibrate:
        check_calibration_request(net, variants, model_variants, blocks)
    request = MeasureRequest(net, name, options, resolution, extra, settings, batch, tuple(variants),
                             tuple(model_variants), blocks, tuple(in_situ), spans, timing, out, resume, overwrite,
                             planned=planned_groups if calibrate else None)
    run = measure_request(request, progress=progress, clock=clock, log=log)
    return Measured(run, merges, {n: paired_check(run.measurements, n) for n in extra})


def export(
    model: str | nn.Module = "mobilenet_v2",
    *,
    name: str | None = None,
    options: Mapping[str, Any] | None = None,
    resolution: int | None = None,
    weights: bool | str | Path = False,
    plans: Sequence[Any] = (),
    merged_models: Sequence[str | Path] = (),
    merge: MergeChoice | None = None,
    batch: int = 1,
    workloads: Workloads | None = None,
    out: str | Path = "bundle",
    **bundle: Any,
) -> tuple[ExportResult, tuple[Merges, ...]]:
    """`dsprof export`: the workloads `measure` would time, with the models ``plans`` and ``merged_models`` add
    (`plan_models`), written as a bundle for a device that cannot host dsprof (`dsprof.edge.export_bundle`, which
    takes the other keywords: formats, timing, overwrite, log, opset; and what ``workloads`` chooses, or its
    variants, model_variants, blocks and spans one by one). ``merge``: what merges the plans without their own list,
    as in `measure` (``lut=``, ``device_key=``, ``merge_by=``, ``accept_modified=`` one by one: a
    `DeprecationWarning`). Returns the bundle and the merges its plans' models were built with."""
    old = {k: bundle.pop(k) for k in _MERGE_KEYWORDS if k in bundle}
    merge = request_objects(None, None, None, merge, old, verb="export")[3]
    lut, device_key, merge_by, accept_modified = merge.lut, merge.device_key, merge.merge_by, merge.accept_modified
    if workloads is not None:  # a bundle times blocks alone: no in-situ variants
        if workloads.in_situ:
            raise UsageError("workloads.in_situ: a bundle times blocks alone, not inside the model; leave it empty")
        bundle.update({k: v for k, v in workloads.as_kwargs().items() if k != "in_situ"})
    ref = ModelRef.of(model, name=name, options=options, resolution=resolution, weights=weights)
    name, options, resolution, net = ref.name, dict(ref.options), ref.resolution, ref.build()
    extra, merges = plan_models(net, name, options=options, plans=plans, merged_models=merged_models, lut=lut,
                                device_key=device_key, merge_by=merge_by, accept_modified=accept_modified, batch=batch)
    result = export_bundle(net, name=name, model_options=options, resolution=resolution, extra_models=extra,
                           batch=batch, out=out, **bundle)
    return result, merges
