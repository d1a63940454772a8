"""`dsprof measure` and `dsprof export` as Python functions.

`measure` times a model's blocks, their dense replacements and the whole model (`dsprof.profiler.runner`); the whole
models that plans merge (each plan's merges written by the one rule, `dsprof.planning.decide.merge_rule`) and merged-model
files are timed beside the original in its group, and each one's paired check is read from the run
(`dsprof.workflows.check.paired_check`). With ``calibrate`` the run ends with the groups it plans from its own
records (`dsprof.workflows.calibrate.calibration_groups`), each built from the records timed before it and timed in
the run's one `dsprof.profiler.runner.MeasureSession` (one file; a resumed run does not time again a calibration
group the file holds; Ctrl-C keeps what is timed and says the calibration follows); with ``remote`` it runs on
another machine over ssh (`dsprof.edge.remote`). `export` writes the same workloads as a bundle for a device without dsprof.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from torch import nn

from .._moved import as_request, moved_keywords
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
from ..records.merges import Merges, rule_kind
from ..models import ModelRef
from ..records.plan import Plan, named_plans, plan_sources
from ..profiler.backends import BackendSettings
from ..profiler.runner import (MeasureRequest, MeasureResult, check_measurement_out, default_batch, old_clock,
                               open_session, threads_note, timing_context)
from ..profiler.selection import Workloads
from ..profiler.timing import TimingConfig
from .calibrate import calibration_groups, check_calibration_request
from ..profiler.summary import format_summary
from .check import PairedCheck, check_line, paired_check

__all__ = ["MOVED_KEYWORDS", "Exported", "Measured", "export", "measure", "plan_models", "remote_host"]


@dataclass(frozen=True)
class Measured:
    """What `measure` did: the run (``run``: its file, records and summary; None where it ran on the ``remote``
    machine, reached as that host, whose import is ``imported``), the merges each plan's model was built with
    (``merges``), and each model the plans and files added, paired with the original timed in its group (``checks``:
    None where the run has no such pair)."""

    run: MeasureResult | None
    merges: tuple[Merges, ...] = ()
    checks: Mapping[str, PairedCheck | None] = field(default_factory=dict)
    imported: ImportResult | None = None
    remote: str | None = None

    def text(self, words: Callable[[str], str] = str) -> str:
        """What `dsprof measure` prints after a run: the merges of the plans' models, the thread count and the summary
        table (a run here), each plan's speed-up paired with the original, and how many workloads were measured (on
        the ``remote`` host: its device, runtime and threads). ``words`` rewrites each sentence (the command line names
        its flags there); the table is data, left as it is."""
        lines = [words(m.describe()) for m in self.merges]
        if self.run is not None:
            lines += [words(threads_note(self.run.threads, self.run.threads_given)), format_summary(self.run.summary)]
        for name, check in self.checks.items():  # plans and merged models: the speed-up first
            lines.append(f"{name}: {check_line(check)}" if check is not None else words(
                f"{name}: not paired with the original model (time it in one group with "
                "`workloads=Workloads(model_variants=('original',))`)"))
        if self.run is not None:
            run = self.run
            then = (f" ({run.calibrated} of them in the groups `workloads=Workloads(calibrate=True)` planned from the "
                    "others)" if run.calibrated else "")
            lines.append(words(f"{run.new} workload{'' if run.new == 1 else 's'} measured{then}, {run.skipped} already "
                               f"in the file; records: ") + str(run.path))
            if run.failure_note():
                lines.append(words(run.failure_note()))
        elif self.imported is not None:
            records = self.imported.measurements
            ok = sum(r.ok for r in records)
            where = f" ({records[0].device_name}, {records[0].backend}, {_threads(records[0].threads)})" if records else ""
            lines.append(f"{ok} workload{'' if ok == 1 else 's'} measured on {self.remote}{where}; records: "
                         f"{self.imported.path}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


#: The keywords that `dsprof.measure` took one by one before its objects held them (deprecated): each one's parameter,
#: that parameter's object and its field there.
_MODEL_KEYWORDS = {k: ("model", "ModelRef.of", k) for k in ("name", "options", "resolution", "weights")}
_SETTINGS_KEYWORDS = {k: ("settings", "BackendSettings", k)
                      for k in ("backend", "device", "dtype", "channels_last", "threads", "compile")}
_WORKLOADS_KEYWORDS = {k: ("workloads", "Workloads", k)
                       for k in ("variants", "model_variants", "blocks", "in_situ", "spans", "calibrate")}
_MERGE_KEYWORDS = {k: ("merge", "MergeChoice", k) for k in ("lut", "device_key", "merge_by", "accept_modified")}
_REMOTE_KEYWORDS = {"ssh": ("remote", "RemoteHost", "ssh"), "remote_python": ("remote", "RemoteHost", "python"),
                    "remote_dir": ("remote", "RemoteHost", "dir")}
MOVED_KEYWORDS = {**_MODEL_KEYWORDS, **_SETTINGS_KEYWORDS, **_WORKLOADS_KEYWORDS, **_MERGE_KEYWORDS, **_REMOTE_KEYWORDS,
                  "say": ("progress", "", "say"), "merged_models": ("plans", "", "merged_models")}


def _threads(n: int | None) -> str:
    return "threads as the runtime chose" if not n else f"{n} thread{'' if n == 1 else 's'}"


def remote_host(remote: str | RemoteHost | None, deprecated: dict[str, Any]) -> RemoteHost | None:
    """The machine a run times on (None: here), with the ``deprecated`` keywords of before (taken out of it: a
    `DeprecationWarning`) in place of its fields."""
    old = moved_keywords("dsprof.measure", {k: deprecated.pop(k) for k in list(deprecated) if k in _REMOTE_KEYWORDS},
                         _REMOTE_KEYWORDS).get("remote", {})
    return _host(remote, old)


def _host(remote: str | RemoteHost | None, fields: Mapping[str, Any]) -> RemoteHost | None:
    if remote is None:
        return None
    host = remote if isinstance(remote, RemoteHost) else RemoteHost(str(remote))
    return replace(host, **fields) if fields else host


def _objects(settings: BackendSettings | DeviceContext | None, batch: int | None, workloads: Workloads | None,
             merge: MergeChoice | None, moved: Mapping[str, Mapping[str, Any]]
             ) -> tuple[BackendSettings, int | None, Workloads, MergeChoice]:
    """The one timing context of a call, its batch, what it times and what merges its plans: ``settings`` (a
    `BackendSettings`; a `DeviceContext`, whose batch is taken where ``batch`` is None; None: PyTorch on the CPU),
    ``workloads`` (None: `Workloads`' defaults; block variants None: the backend's) and ``merge`` (None: a plan's
    own list only), with the ``moved`` keywords of before (`moved_keywords`) in place of their fields."""
    settings, batch = timing_context(settings, batch)
    settings = as_request(settings, BackendSettings, "settings", moved)
    return (settings, batch, as_request(workloads, Workloads, "workloads", moved).for_backend(settings.backend),
            as_request(merge, MergeChoice, "merge", moved))


def is_merged_model(source: Any) -> bool:
    """Whether an entry of ``plans`` is a merged-model file (``.pt``, `dsprof.merge(out=)`) rather than a plan: as
    `dsprof.report` tells them apart."""
    return isinstance(source, (str, Path)) and str(source).endswith(".pt")


def plan_models(model: str | nn.Module | ModelRef, *, plans: Sequence[Any] = (), lut: Any = None,
                device_key: Any = None, merge_by: str | None = None, accept_modified: bool = False,
                **context: Any) -> tuple[dict[str, nn.Module], tuple[Merges, ...]]:
    """The whole models that ``plans`` add to a run of ``model`` (anything `ModelRef.of` takes; a `ModelRef` carries its
    name, options and resolution, and one that holds its module, `ModelRef.built`, is not built again): presets, plan
    files or `Plan`\\ s (each named after its plan or file), and merged-model files (``.pt``, `dsprof.merge(out=)`,
    named after the file); and the merges each plan's model was built with: its own list, else ``lut``'s rule in the
    LUT context ``device_key`` (or the one that the run's ``context`` -- backend, dtype, batch -- picks), else MACs
    with ``merge_by="macs"``. A plan no rule can decide is refused before any model is merged."""
    merged_models = [p for p in plans if is_merged_model(p)]
    plans = [p for p in plans if not is_merged_model(p)]
    if not plans and not merged_models:
        return {}, ()
    loaded = list(named_plans((source, Plan.coerce(source)) for source in plans).items())  # one name, one plan
    if lut is not None and not isinstance(lut, LUT):
        lut = LUT.load(lut, accept_modified=accept_modified)
    ref = ModelRef.of(model).built() if loaded else None
    net = ref.build() if ref is not None else None
    for _, (_, plan) in loaded:  # refused before any model is merged: a plan for other options, then one no rule decides
        plan.check_model(net)
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
        rule = merge_rule(ref, lut=lut, device=key, merge_by=merge_by)
        for named, (_, plan) in loaded:
            decided = rule.decide(plan)
            extra[named] = merge_model(ref.build(), decided.plan)
            merges.append(decided)
    for path in merged_models:
        extra[Path(path).stem] = load_merged(path)
    return extra, tuple(merges)


def measure(
    model: str | nn.Module | ModelRef = "mobilenet_v2",
    *,
    settings: BackendSettings | DeviceContext | None = None,
    batch: int | None = None,
    workloads: Workloads | None = None,
    plans: Sequence[Any] = (),
    merge: MergeChoice | None = None,
    timing: TimingConfig = TimingConfig(),
    out: str | Path = "results",
    resume: bool = False,
    overwrite: bool = False,
    progress: bool | Callable[[str], None] = True,
    log: Callable[[str], None] | None = None,
    remote: str | RemoteHost | None = None,
    **old: Any,
) -> Measured:
    """Time ``model`` -- anything `dsprof.models.ModelRef.of` takes: a registered name, a ``path.py:factory`` model
    file, an ``nn.Module``, or a `dsprof.ModelRef` that gives it a name, options, resolution or weights
    (``ModelRef.of("mobilenet_v2", options={"width": 1.4}, resolution=160)``) -- what ``workloads`` chooses (a
    `dsprof.profiler.Workloads`: blocks and their variants, the whole model's variants, blocks in situ, spans; default
    its defaults), in the timing context ``settings`` (a `BackendSettings`: backend, device, dtype, layout, threads,
    torch.compile mode; or a `DeviceContext`, e.g. a LUT's key, whose batch is used where ``batch`` is None; default:
    PyTorch on the CPU) at ``batch`` (`dsprof.profiler.runner.measure` says what each setting does). ``plans`` add
    whole models timed beside the original: plan files, presets or `Plan`\\ s, merged by their own list or as
    ``merge`` (a `dsprof.lut.MergeChoice` -- a LUT and its context, or MACs -- decides the plans without their own
    list), and merged-model files (``.pt``, `dsprof.merge(out=)`) as they are (`plan_models`). With
    ``Workloads(calibrate=True)`` the run ends with the groups planned from its own records, timed in the same run
    (`dsprof.workflows.calibrate`). ``remote`` (a `dsprof.edge.RemoteHost`, or its ``USER@HOST`` reached with plain
    ``ssh``) times fp32 bundles on that machine instead (`dsprof.edge.remote`). ``progress``: a progress bar here;
    a callable (e.g. ``print``) also gets each step of a ``remote`` run. ``log`` gets the run's warnings. Records go
    to ``out`` (a folder, or a ``.jsonl`` file; ``resume`` continues it, ``overwrite`` starts it over). Returns a
    `Measured`. The keywords of before (``name=``, ``options=``, ``resolution=``, ``weights=``; ``backend=``,
    ``device=``, ``dtype=``, ``channels_last=``, ``threads=``, ``compile=``; ``variants=``, ``model_variants=``,
    ``blocks=``, ``in_situ=``, ``spans=``, ``calibrate=``; ``merged_models=``; ``lut=``, ``device_key=``, ``merge_by=``,
    ``accept_modified=``; ``ssh=``, ``remote_python=``, ``remote_dir=``; ``say=``; ``clock=``) still work for a release, with a `DeprecationWarning`
    that names the parameter that holds each now."""
    clock = old_clock(old, "dsprof.measure")
    moved = moved_keywords("dsprof.measure", old, MOVED_KEYWORDS)
    settings, batch, workloads, merge = _objects(settings, batch, workloads, merge, moved)
    host = _host(remote, moved.get("remote", {}))
    say = moved["progress"]["say"] if "progress" in moved else (progress if callable(progress) else None)
    plans = [*plan_sources(plans), *moved.get("plans", {}).get("merged_models", ())]
    calibrate = workloads.calibrate
    if calibrate and host:
        raise UsageError("`workloads=Workloads(calibrate=True)` times a plan built from the run's own entries, here: measure on the "
                         "device without it, or run dsprof there")
    if host and (settings.dtype != "fp32" or settings.channels_last):
        raise UsageError("`remote=` times fp32 bundles: drop `settings=BackendSettings(dtype=, channels_last=True)`")
    if not host:
        check_measurement_out(out, resume, overwrite)  # before the model (and the plans' merged models) is built
    ref = ModelRef.of(model, **moved.get("model", {})).built()  # built once: its plans' models and the run
    extra, merges = plan_models(ref, plans=plans, lut=merge.lut, device_key=merge.device_key, merge_by=merge.merge_by,
                                accept_modified=merge.accept_modified, backend=settings.backend, dtype=settings.dtype,
                                batch=batch)
    if host:
        imported = measure_remote(
            host.host, ref, backend=settings.backend, device=settings.device, threads=settings.threads,
            ssh=tuple(host.ssh), python=host.python, remote_dir=host.dir, out=out, overwrite=overwrite, log=say,
            extra_models=extra, batch=batch or default_batch(settings.device), variants=workloads.variants,
            model_variants=workloads.model_variants, blocks=workloads.blocks, timing=timing)
        return Measured(None, merges, {n: paired_check(imported.measurements, n) for n in extra}, imported, host.host)
    if calibrate:
        check_calibration_request(ref.build(), workloads, ref.input_size)
    request = MeasureRequest(ref, extra, settings, batch, workloads, timing, out, resume, overwrite)
    with open_session(request, progress=bool(progress), clock=clock, log=log) as session:
        try:
            session.time(session.todo)
            if calibrate:  # then the groups built from what the run timed, one at a time, in the same session
                session.expect(0, "then the calibration's groups, planned from these")
                session.time(calibration_groups(session.net, session.label, session.input_size,
                                                lambda: session.records, session.context, session.spans,
                                                existing=session.existing, expect=session.expect))
        except KeyboardInterrupt:
            then = " (then the groups `workloads=Workloads(calibrate=True)` plans from them)" if calibrate else ""
            raise session.interrupted(then) from None
    run = session.result()
    return Measured(run, merges, {n: paired_check(run.measurements, n) for n in extra})


class Exported(NamedTuple):
    """What `export` wrote (``bundle``) and the merges its plans' models were built with; it unpacks as the pair
    `export` returned before (``bundle, merges = dsprof.export(...)``) and prints what `dsprof export` prints."""

    bundle: ExportResult
    merges: tuple[Merges, ...]

    def text(self, words: Callable[[str], str] = str) -> str:
        """What `dsprof export` prints before its next steps: each plan's merges and the bundle written; in the
        caller's words (``words``: `dsprof.cli.flags.command_line_text` gives the command line's options)."""
        formats = self.bundle.manifest["formats"]
        return "\n".join([*(words(m.describe()) for m in self.merges),
                          f"wrote {self.bundle.path}: {self.bundle.workloads} workloads ({', '.join(formats)}), "
                          "manifest.json and run_bundle.py"])

    def __str__(self) -> str:
        return self.text()


def export(
    model: str | nn.Module | ModelRef = "mobilenet_v2",
    *,
    plans: Sequence[Any] = (),
    merged_models: Sequence[str | Path] = (),
    merge: MergeChoice | None = None,
    batch: int = 1,
    workloads: Workloads | None = None,
    out: str | Path = "bundle",
    **bundle: Any,
) -> Exported:
    """`dsprof export`: the workloads `measure` would time of ``model`` (anything `dsprof.models.ModelRef.of` takes,
    as in `measure`), with the models ``plans`` and ``merged_models`` add (`plan_models`), written as a bundle for a
    device that cannot host dsprof (`dsprof.edge.export_bundle`, which takes the other keywords: formats, timing,
    overwrite, log, opset; and what ``workloads`` chooses, or its variants, model_variants, blocks and spans one by
    one). ``merge``: what merges the plans without their own list, as in `measure`. The keywords of before
    (``name=``, ``options=``, ``resolution=``, ``weights=``, the fields of ``model``'s `ModelRef`; ``lut=``,
    ``device_key=``, ``merge_by=``, ``accept_modified=``, those of ``merge``) still work for a release, with a
    `DeprecationWarning`. Returns the bundle and the merges its plans' models were built with (`Exported`, a pair)."""
    homes = {**_MODEL_KEYWORDS, **_MERGE_KEYWORDS}
    moved = moved_keywords("dsprof.export", {k: bundle.pop(k) for k in homes if k in bundle}, homes)
    merge = _objects(None, None, None, merge, moved)[3]
    lut, device_key, merge_by, accept_modified = merge.lut, merge.device_key, merge.merge_by, merge.accept_modified
    if workloads is not None:  # a bundle times blocks alone: no in-situ variants, nothing planned from its records
        if workloads.calibrate:
            raise UsageError("workloads.calibrate: a bundle times what it carries, not groups planned from its own "
                             "records; leave it False (measure with it where dsprof runs)")
        if workloads.in_situ:
            raise UsageError("workloads.in_situ: a bundle times blocks alone, not inside the model; leave it empty")
        bundle.update({k: v for k, v in workloads.as_kwargs().items() if k != "in_situ"})
    ref = ModelRef.of(model, **moved.get("model", {})).built()  # built once: its plans' models and the bundle
    extra, merges = plan_models(ref, plans=[*plan_sources(plans), *plan_sources(merged_models)], lut=lut, device_key=device_key,
                                merge_by=merge_by, accept_modified=accept_modified, batch=batch)
    return Exported(export_bundle(ref, extra_models=extra, batch=batch, out=out, **bundle), tuple(merges))
