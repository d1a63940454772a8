"""`import_results`: a runner's (or a phone run's) results file -> ordinary dsprof measurement records.

Every result line is checked against the bundle's manifest (same bundle id, a workload the bundle
holds, this dsprof version), the file against truncation and missing workloads; then each line becomes
one `dsprof.profiler.Measurement` with the workload fields of the manifest, the device's fingerprint and
its environment id (hashed by the profiler's `environment_id`, so one device keeps one id). The file is
written where `dsprof measure` would write its own, and `build-lut`, `predict`, `search` and `report`
read it unchanged: the edge device is one more column.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DsprofError, InputFileError, OutputPathError
from ..fields import FieldError, shown
from ..io import atomic_output, read_text
from ..profiler.backends import BackendSettings
from ..profiler.fingerprint import environment_id
from ..records.measurement import Measurement, MeasurementWriter, check_fields
from ..profiler.runner import measurement_path
from .manifest import EdgeError, read_manifest
from ..runtimes import RUNTIMES
from .runner import RunnerError, read_results

__all__ = ["ImportResult", "import_results"]

_SETTINGS = ("runtime", "device", "threads")


@dataclass
class ImportResult:
    """What `import_results` wrote: the measurement file and its records."""

    path: Path
    measurements: list[Measurement]


def _device_name(env: dict[str, Any], device: str) -> str:
    if device.startswith("cuda") and env.get("jetson"):
        return str(env["jetson"]["model"])
    cpu = env.get("cpu", {})
    return str(cpu.get("board") or cpu.get("model") or device)


def _check_lines(lines: list[dict[str, Any]], manifest: dict[str, Any], path: Path) -> None:
    known = {w["id"] for w in manifest["workloads"]}
    first = lines[0]
    for number, line in enumerate(lines, 1):
        if line.get("bundle_id") != manifest["bundle_id"]:
            raise EdgeError(
                f"{path}, result {number}: it belongs to bundle {shown(line.get('bundle_id'))}, not to this bundle "
                f"({manifest['bundle_id']}); import it with the bundle it was timed from"
            )
        if not isinstance(line.get("workload"), str) or line["workload"] not in known:  # a list would not hash
            raise EdgeError(
                f"{path}, result {number}: workload {shown(line.get('workload'))} is not in the bundle's manifest "
                f"(it has w0..w{len(known) - 1}); the file was edited or mixed with another run"
            )
        if not isinstance(line.get("runtime"), str) or line["runtime"] not in RUNTIMES:
            raise EdgeError(f"{path}, result {number}: unknown runtime {shown(line.get('runtime'))}")
        diff = [k for k in _SETTINGS if line.get(k) != first.get(k)]
        if diff:
            raise EdgeError(f"{path} mixes runs with different {', '.join(diff)}; keep one results file per run")


def _records(manifest: dict[str, Any], lines: list[dict[str, Any]], out: str | Path,
             results: Path) -> tuple[list[Measurement], Path]:
    """The measurement records of the result ``lines`` (of the file ``results``) and the file they go to. Each
    record's fields are checked by the rules every reader of records applies (`check_fields`): a bad one (a device
    name with shell characters, a negative sample) raises `EdgeError` naming the file, the result and the field."""
    by_id = {w["id"]: w for w in manifest["workloads"]}
    first = lines[0]
    env_id = environment_id(first["environment"])
    device = first["device"]
    runtime = RUNTIMES[first["runtime"]]
    backend, layout = runtime.records_backend, runtime.layout
    options = manifest["model_options"]
    records = []
    for number, line in enumerate(lines, 1):
        w = by_id[line["workload"]]
        fields = dict(
            model=manifest["model"], model_options=options, scope=w["scope"], name=w["name"], index=w["index"],
            spec=w["spec"], variant=w["variant"], input_shape=w["input_shape"], macs=w["macs"],
            params=w["params"], channels=tuple(w["channels"]) if w["channels"] else None, backend=backend,
            device=line["device"], device_name=_device_name(line["environment"], str(line["device"])),
            dtype=manifest["dtype"], layout=layout, batch=manifest["batch"], threads=line["threads"], compile="",
            samples_s=line["samples_s"], iterations_per_sample=line["iterations_per_sample"],
            warmup_iterations=line["warmup_iterations"], stop_reason=line["stop_reason"],
            target_precision=line["target_precision"], budget_s=line["budget_s"], group=line["group"],
            env_id=environment_id(line["environment"]), environment=line["environment"],
            state_before=line["state_before"], state_after=line["state_after"], time_utc=line["time_utc"],
            error=line["error"], runtime_info=dict(line.get("runtime_info") or {}),
        )
        try:
            records.append(Measurement(**check_fields(fields)))
        except FieldError as exc:
            raise EdgeError(f"{results}, result {number}: {exc}; import the file the runner wrote, unchanged") from None
        records[-1].to_json()  # a value JSON cannot hold (NaN) raises here, before anything is written
    label = manifest["model"] + "".join(f"_{k}{v}" for k, v in sorted(options.items()) if k != "resolution")
    settings = BackendSettings(backend, device, manifest["dtype"], False, first["threads"])
    path = measurement_path(out, f"{label}_edge-{env_id}", settings, manifest["batch"], options["resolution"])
    return records, path


def import_results(
    bundle: str | Path,
    results: str | Path,
    out: str | Path = "results",
    overwrite: bool = False,
    allow_partial: bool = False,
) -> ImportResult:
    """Turn the runner's ``results`` (JSON Lines) for ``bundle`` into a dsprof measurement file.

    ``out`` is a folder (the file is named after the settings and the device's environment id) or a
    ``.jsonl`` path. A workload of the bundle without a successful result is an error unless
    ``allow_partial``. Raises `EdgeError` (a ValueError) with what to do, or FileExistsError.
    """
    manifest = read_manifest(bundle)
    results = Path(results)
    if not results.is_file():
        raise InputFileError(f"{results} does not exist; give the results file the runner wrote (BUNDLE/results/*.jsonl)")
    read_text(results, "bundle runner's results file (JSON Lines)",  # its bytes, before the runner's reader
              "give the results file the runner wrote (BUNDLE/results/*.jsonl)", kind="results", error=EdgeError)
    try:
        lines = read_results(str(results))
    except RunnerError as exc:
        raise EdgeError(str(exc)) from None
    if not lines:
        raise EdgeError(f"{results} holds no results; run the bundle's runner first")
    _check_lines(lines, manifest, results)
    ok = {line["workload"] for line in lines if line.get("error") is None and line.get("samples_s")}
    missing = [w for w in manifest["workloads"] if w["id"] not in ok]
    if missing and not allow_partial:
        shown = ", ".join(w["label"] for w in missing[:3]) + (", ..." if len(missing) > 3 else "")
        raise EdgeError(
            f"{results} has results for {len(manifest['workloads']) - len(missing)} of {len(manifest['workloads'])} "
            f"workloads (none for {shown}): the run stopped early or failed there. Run the runner again with the same "
            "out folder to finish, or pass `allow_partial=True` to import what is there"
        )

    try:
        records, path = _records(manifest, lines, out, results)
    except DsprofError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise EdgeError(f"{results} or {Path(bundle) / 'manifest.json'}: a field is missing or has the wrong type "
                        f"({type(exc).__name__}: {exc}); import the files the runner and `dsprof export` wrote, "
                        "unchanged") from None
    if path.exists() and not overwrite:
        raise OutputPathError(f"{path} exists; pass `overwrite=True` to replace it, or choose another `out=`")
    with atomic_output(path) as tmp, MeasurementWriter(tmp) as writer:  # a fresh temporary file (mkstemp), renamed
        writer.write(records)
    return ImportResult(path, records)

