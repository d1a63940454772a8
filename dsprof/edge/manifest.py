"""The bundle's ``manifest.json``: what was exported, read back and checked.

A manifest holds the bundle's format and id, the dsprof version that wrote it, the model (label and
options, as `dsprof measure` records them), batch and dtype, the timing settings, the groups that are
timed together (interleaved) and one entry per workload: its id, the fields a measurement record
needs (scope, name, index, BlockSpec string, variant, input shape, MACs, params, channels) and its
model file per format with the file's SHA-256.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import EdgeError  # noqa: F401  (defined once, in dsprof.errors)
from ..fields import (MAX_BATCH, MAX_RESOLUTION, FieldError, check_count, check_model_options, check_shape,
                      check_text, check_token)
from ..io import atomic_write_text, read_json
from .runner import BUNDLE_FORMAT

__all__ = ["BUNDLE_FORMAT", "EdgeError", "MANIFEST", "read_manifest", "write_manifest"]

MANIFEST = "manifest.json"

_WORKLOAD_FIELDS = ("id", "label", "scope", "name", "index", "spec", "variant", "input_shape", "macs", "params",
                    "channels", "files", "sha256")
_TOP_FIELDS = ("format", "bundle_id", "dsprof_version", "model", "model_options", "batch", "dtype", "formats",
               "timing", "groups", "workloads")


def write_manifest(bundle: str | Path, manifest: dict[str, Any]) -> Path:
    """Write ``manifest`` as ``BUNDLE/manifest.json`` (indented JSON, atomically)."""
    return atomic_write_text(Path(bundle) / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def read_manifest(bundle: str | Path) -> dict[str, Any]:
    """The manifest of the bundle folder ``bundle``, checked: format, this dsprof version, every field."""
    path = Path(bundle) / MANIFEST
    if not path.is_file():
        raise EdgeError(f"{path} does not exist; give the bundle folder that `dsprof export` wrote")
    manifest = read_json(path, "bundle manifest", "export the bundle again", kind="manifest", error=EdgeError)
    if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT:
        raise EdgeError(f"{path} is not a {BUNDLE_FORMAT} manifest; give the bundle folder that `dsprof export` wrote")
    missing = [k for k in _TOP_FIELDS if k not in manifest]
    workloads = manifest.get("workloads")
    if not isinstance(workloads, list) or not all(isinstance(w, dict) for w in workloads):
        raise EdgeError(f"{path}: 'workloads' must be a list of objects; export the bundle again")
    missing += sorted({k for w in workloads for k in _WORKLOAD_FIELDS if k not in w})
    if missing:
        raise EdgeError(f"{path} lacks field(s) {', '.join(missing)}; export the bundle again")
    try:  # what a received bundle may carry into records and file names: `dsprof.fields`
        check_text(manifest["model"], "model")
        check_model_options(manifest["model_options"], "model_options")
        check_count(manifest["batch"], "batch", 1, MAX_BATCH)
        check_token(manifest["dtype"], "dtype")
        check_count(manifest["model_options"].get("resolution"), "model_options.resolution", 8, MAX_RESOLUTION)
        for i, w in enumerate(workloads):
            for name in ("id", "scope", "variant"):
                check_token(w[name], f"workloads[{i}].{name}")
            for name in ("label", "name"):
                check_text(w[name], f"workloads[{i}].{name}")
            check_shape(w["input_shape"], f"workloads[{i}].input_shape")
    except FieldError as exc:
        raise EdgeError(f"{path}: {exc}; export the bundle again") from None
    if manifest["dsprof_version"] != __version__:
        raise EdgeError(
            f"{path} was written by dsprof {manifest['dsprof_version']}, this is dsprof {__version__}: workload keys "
            f"may differ between versions. Import with dsprof {manifest['dsprof_version']}, or export the bundle "
            "again with this version and time it again"
        )
    return manifest
