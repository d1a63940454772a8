"""`export_bundle`: write the workloads `dsprof measure` would time as a self-contained bundle folder.

    BUNDLE/
      manifest.json      what is in it (`dsprof.edge.manifest`)
      run_bundle.py      the runner: standard library + NumPy + the runtime it times, Python >= 3.6
      timing_loop.py     the profiler's timing loop, this very file (`dsprof.portable.timing_loop`): the runner imports it
      hardware.py        how the profiler reads the machine (CPU, Jetson; the environment record), this very file
      cpu_share.py       how the profiler reads the CPU share a timed group got, this very file
      sessions.py        how the profiler opens ONNX Runtime, OpenVINO and TFLite, this very file: the runner imports
                         these three too
      models/w0.onnx     one file per workload and format (onnx, tflite, torchscript)
      results/           where the runner writes its JSON Lines (created by the runner)

The workloads come from the profiler's own enumeration (blocks in their variants, the whole model in
its variants, stem and head, extra models such as a plan's merged model), so an imported file has the
same workload keys as one `dsprof measure` writes, and builds the same LUT keys.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import tempfile
import uuid
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch
from torch import nn

from .. import __version__
from ..errors import OutputPathError, UsageError
from ..fields import plain
from ..io import atomic_write_text, make_parent_folders
from .._moved import as_request, moved_keywords
from ..models import ModelRef
from ..profiler.runner import MODEL_KEYWORDS, timed_model, workload_groups
from ..runtimes import FORMATS, bundle_block_variants  # FORMATS: model file formats a bundle can hold, and each suffix
from ..portable import cpu_share, hardware, sessions, timing_loop
from ..profiler.timing import TimingConfig
from ..profiler.workloads import Workload
from .manifest import BUNDLE_FORMAT, MANIFEST, write_manifest
from .runner import RESULTS_FORMAT
from ..models.onnx_export import export_onnx
from ..names import DEFAULT_MODEL_VARIANTS
from ..profiler.backends.tflite import convert_onnx_to_tflite

__all__ = ["EDGE_OPSET", "FORMATS", "ExportResult", "copy_runner", "export_bundle"]

#: ONNX operator set of bundle files: ONNX Runtime 1.10 (the last for Python 3.6, JetPack 4.6) reads up to 15.
EDGE_OPSET = 13
RUNNER_NAME = "run_bundle.py"
#: The profiler's standard-library modules a bundle carries verbatim beside its runner, which imports them by these
#: names: the timing loop, the machine's description (part of the environment id), the CPU-share reading and the
#: runtimes' sessions.
CARRIED = (timing_loop, hardware, cpu_share, sessions)


@dataclass
class ExportResult:
    """What `export_bundle` wrote: the bundle folder and its manifest."""

    path: Path
    manifest: dict[str, Any]

    @property
    def workloads(self) -> int:
        return len(self.manifest["workloads"])


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_model(w: Workload, fmt: str, batch: int, path: Path, opset: int) -> None:
    shape = (batch, *w.input_shape)
    if fmt == "onnx":
        export_onnx(copy.deepcopy(w.module), shape, path, opset=opset)
    elif fmt == "torchscript":
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TorchScript is deprecated in PyTorch 2.x; old boards have only it
            traced = torch.jit.trace(copy.deepcopy(w.module).eval(), torch.zeros(shape), check_trace=False)
            torch.jit.save(traced, str(path))
    else:
        with tempfile.TemporaryDirectory(prefix="dsprof-export-") as tmp:
            onnx = export_onnx(copy.deepcopy(w.module), shape, Path(tmp) / "model.onnx", opset=opset)
            shutil.copyfile(convert_onnx_to_tflite(onnx, Path(tmp)), path)


#: The file `export_bundle` writes into every bundle, holding the bundle's id (as its manifest does): what shows a
#: folder to be a bundle dsprof wrote, which ``overwrite`` may delete.
MARKER = ".dsprof-bundle"
#: What a bundle folder holds: what `export_bundle` writes, the runner's results folder, Python's bytecode cache.
_BUNDLE_ENTRIES = {MANIFEST, RUNNER_NAME, MARKER, "models", "results", "__pycache__",
                   *(Path(m.__file__).name for m in CARRIED)}


def _check_out(out: Path, overwrite: bool) -> None:
    """Refuse ``out`` where it exists, unless ``overwrite`` and it is a bundle dsprof wrote (`_not_a_bundle`) that holds
    no results."""
    if not out.exists() and not out.is_symlink():
        return
    if not overwrite:
        raise OutputPathError(f"{out} exists; pass `overwrite=True` to replace the bundle, or choose another `out=`")
    why = _not_a_bundle(out)
    if why:
        raise OutputPathError(f"{out} exists and is not a bundle that dsprof wrote ({why}), so it is not replaced; "
                              "choose another output folder")
    results = sorted((out / "results").glob("*.jsonl")) if (out / "results").is_dir() else []
    if results:
        raise OutputPathError(
            f"{out} holds results ({plain(results[0].name)}), which replacing the bundle would delete: move them out of "
            f"{out / 'results'} first (`dsprof import` copies them, it does not move them), or choose another `out=`"
        )


def _not_a_bundle(out: Path) -> str:
    """Why ``out`` is not a bundle folder `export_bundle` wrote (empty: it is one): it is a link or not a folder, it
    lacks the `MARKER` or its id differs from the manifest's, or it holds anything a bundle does not."""
    if out.is_symlink() or not out.is_dir():
        return "a link" if out.is_symlink() else "not a folder"
    try:
        marker = (out / MARKER).read_text(encoding="utf-8").strip()
        manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"no {MARKER} and {MANIFEST} of dsprof's"
    if not isinstance(manifest, dict) or not marker or manifest.get("bundle_id") != marker:
        return f"its {MARKER} does not match its {MANIFEST}"
    foreign = sorted(p.name for p in out.iterdir() if p.name not in _BUNDLE_ENTRIES or p.is_symlink())
    models = out / "models"
    if models.is_dir():  # the model files `_write_bundle` names, and nothing else
        suffixes = tuple(FORMATS.values())
        foreign += sorted(f"models/{p.name}" for p in models.iterdir() if p.is_symlink() or not p.is_file()
                          or not (p.name.startswith("w") and p.name.endswith(suffixes)
                                  and p.name[1:].split(".", 1)[0].isdigit()))
    if foreign:
        return f"it holds {plain(', '.join(foreign[:3]))}{', ...' if len(foreign) > 3 else ''}"
    return ""


def export_bundle(
    model: str | nn.Module | ModelRef = "mobilenet_v2",
    *,
    extra_models: Mapping[str, nn.Module] | None = None,
    formats: Sequence[str] = ("onnx",),
    batch: int = 1,
    variants: Sequence[str] | None = None,
    model_variants: Sequence[str] = DEFAULT_MODEL_VARIANTS,
    blocks: str | Sequence[str] | None = "*",
    spans: int = 0,
    timing: TimingConfig = TimingConfig(),
    out: str | Path = "bundle",
    overwrite: bool = False,
    opset: int = EDGE_OPSET,
    log: Callable[[str], None] | None = None,
    **old: Any,
) -> ExportResult:
    """Write a bundle folder ``out`` with the workloads `dsprof.profiler.measure` would time for the same
    arguments (``model``: anything `ModelRef.of` takes, e.g. ``ModelRef.of("mobilenet_v2", options=...,
    resolution=32)``; extra models, variants, blocks, spans), each as a model file in every format of ``formats``
    (``onnx``, ``tflite``, ``torchscript``) at batch ``batch``, fp32; the manifest; and the runner. ``variants``
    None: what the runtimes of ``formats`` time by default (`dsprof.runtimes.bundle_block_variants`: ``linear`` too
    with ``torchscript``). ``timing`` is the
    runner's timing protocol (seconds). Returns an `ExportResult`. The keywords of before (``name=``,
    ``model_options=``, ``resolution=``) still work for a release, with a `DeprecationWarning`."""
    moved = moved_keywords("dsprof.edge.export_bundle", old, MODEL_KEYWORDS)
    timing = as_request(timing, TimingConfig, "timing")  # None: the defaults, as `measure` takes it
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise UsageError(f"unknown format(s) {bad or formats}; known: {', '.join(FORMATS)}")
    if batch < 1:
        raise UsageError(f"`batch={batch}`: give 1 or more images")
    out = Path(out)
    _check_out(out, overwrite)
    label, options, net, input_size = timed_model(ModelRef.of(model, **moved.get("model", {})))

    saved_threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small convolutions while folding and counting: one thread is fastest on a shared CPU
    try:
        variants = bundle_block_variants(formats) if variants is None else variants
        groups = workload_groups(net, label, tuple(variants), tuple(model_variants), blocks, extra_models, input_size, spans=spans)
        if not groups:
            raise UsageError("nothing to export: no block matched and no whole-model variant was asked for")
        if not out.exists():  # else `_check_out` found a bundle of dsprof's there to replace
            make_parent_folders(out)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        try:
            manifest = _write_bundle(staging, label, options, groups, tuple(formats), batch, timing, opset, log)
            if out.exists():
                shutil.rmtree(out)
            staging.rename(out)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    finally:
        torch.set_num_threads(saved_threads)
    return ExportResult(out, manifest)


def _write_bundle(
    folder: Path, label: str, options: dict[str, Any], groups: list[list[Workload]], formats: tuple[str, ...],
    batch: int, timing: TimingConfig, opset: int, log: Callable[[str], None] | None,
) -> dict[str, Any]:
    (folder / "models").mkdir()
    entries, group_ids = [], []
    total = sum(len(g) for g in groups)
    for group in groups:
        ids = []
        for w in group:
            wid = f"w{len(entries)}"
            files, digests = {}, {}
            for fmt in formats:
                rel = f"models/{wid}{FORMATS[fmt]}"
                _write_model(w, fmt, batch, folder / rel, opset)
                files[fmt], digests[fmt] = rel, _sha256(folder / rel)
            entries.append({
                "id": wid, "label": f"{w.scope} {w.name} {w.variant}", "scope": w.scope, "name": w.name,
                "index": w.index, "spec": w.spec.to_str() if w.spec else None, "variant": w.variant,
                "input_shape": [batch, *w.input_shape], "macs": w.macs, "params": w.params,
                "channels": list(w.channels) if w.channels else None, "files": files, "sha256": digests,
            })
            ids.append(wid)
            if log:
                log(f"exported {len(entries)}/{total}: {entries[-1]['label']}")
        group_ids.append(ids)
    manifest = {
        "format": BUNDLE_FORMAT, "bundle_id": uuid.uuid4().hex[:12], "dsprof_version": __version__,
        "results_format": RESULTS_FORMAT, "model": label, "model_options": options, "batch": batch, "dtype": "fp32",
        "formats": list(formats), "onnx_opset": opset, "timing": asdict(timing), "groups": group_ids,
        "workloads": entries,
    }
    write_manifest(folder, manifest)
    atomic_write_text(folder / MARKER, manifest["bundle_id"] + "\n")
    copy_runner(folder)
    return manifest


def copy_runner(folder: Path) -> Path:
    """Copy the runner (as ``run_bundle.py``, executable) and the profiler's modules it imports (`CARRIED`:
    ``timing_loop.py``, ``hardware.py``, ``cpu_share.py``, ``sessions.py``, verbatim) into ``folder``; return the
    runner's path."""
    for module in CARRIED:
        shutil.copyfile(Path(module.__file__), folder / Path(module.__file__).name)
    runner = folder / RUNNER_NAME
    shutil.copyfile(Path(__file__).with_name("runner.py"), runner)
    runner.chmod(0o755)
    return runner

