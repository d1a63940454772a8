"""The importance file: per-block importance with what measured it, for `dsprof plan --importance`.

`dsprof importance` writes it (`write_importance`); `dsprof plan --importance` reads it (`read_importance`) and
refuses one measured for another model (`check_importance_model`). Plain JSON:

    {"format": "dsprof.importance", "version": 1,
     "model": {"name": "mobilenet_v2", "options": {"width": 0.35}, "blocks": ["features.1", ...], "num_classes": 10,
               "weights": "original.pt"},
     "data": {"name": "digits", "resolution": 32},
     "proxy": {"name": "zero-shot", "unit": "...", "settings": {"batches": 8, ...}},
     "cost": {"seconds": 1.9, "device": "cpu", "threads": 1, "torch": "2.x"},
     "base": {"loss": 0.21, "accuracy": 0.95},
     "importance": [0.12, 0.03, ...], "ranking": [0, 2, ...]}

``importance`` has one value per block in `find_blocks` order: higher means the block loses more without its
activations. Nothing here imports PyTorch.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ..errors import HINT, BadFileError, ImportanceHint, UsageError, WithHint
from ..fields import FieldError, check_model_options, check_plain, check_text, is_number, shown
from ..io import atomic_write_text, read_json, slug
from ..models.registry import model_args, normalized_options
from .plan import same_family

__all__ = ["IMPORTANCE_FORMAT", "ImportanceResolutionWarning", "check_importance_model", "importance_resolution_note",
           "is_importance_record", "read_importance", "write_importance"]

IMPORTANCE_FORMAT = "dsprof.importance"
IMPORTANCE_VERSION = 1
_GIVE = "give a file that `dsprof importance` wrote, or a JSON list with one loss per block"


class ImportanceResolutionWarning(WithHint, UserWarning):
    """An importance file scored at another input size than the plan it is used for prices (`dsprof plan` says so:
    one line, `importance_resolution_note`)."""


def write_importance(path: str | Path, record: dict[str, Any]) -> Path:
    """Write ``record`` (the fields above, without format and version) to ``path`` as an importance file."""
    return atomic_write_text(path, json.dumps({"format": IMPORTANCE_FORMAT, "version": IMPORTANCE_VERSION, **record},
                                              indent=1) + "\n")


def is_importance_record(data: Any) -> bool:
    """True for what `write_importance` writes (as opposed to a bare list or {block: loss} object)."""
    return isinstance(data, dict) and data.get("format") == IMPORTANCE_FORMAT


def read_importance(path: str | Path) -> dict[str, Any]:
    """The importance file at ``path``, checked: its version, one finite number per block, the model it is for."""
    path = Path(path)
    data = read_json(path, "importance file (JSON)", _GIVE)
    if not is_importance_record(data):
        raise BadFileError(f"{path} is not an importance file (no \"format\": \"{IMPORTANCE_FORMAT}\"); {_GIVE}")
    version = data.get("version")
    if not isinstance(version, int) or version > IMPORTANCE_VERSION:
        raise BadFileError(f"{path}: importance file version {shown(version)} is not one this dsprof reads "
                           f"(up to {IMPORTANCE_VERSION}); write it again with this dsprof's `dsprof importance`")
    values, model = data.get("importance"), data.get("model")
    if not isinstance(model, dict) or not isinstance(model.get("name"), str):
        raise BadFileError(f"{path}: the file does not say which model it is for (\"model\": {{\"name\": ...}}); {_GIVE}")
    if not isinstance(values, list) or not values or not all(
            is_number(v) and math.isfinite(v) for v in values):
        raise BadFileError(f"{path}: \"importance\" must be a list of finite numbers, one per block; {_GIVE}")
    try:  # what the file may carry into messages and commands: `dsprof.fields`
        check_text(model["name"], "model.name")
        check_model_options(model.get("options") or {}, "model.options")
        for name in ("data", "proxy"):  # what it was scored on, and how: shown, and put in the command to score it
            if not isinstance(data.get(name) or {}, dict):
                raise FieldError(f"field {name!r} must be an object, got {type(data[name]).__name__}")
            check_plain(data.get(name), name)
        check_plain(model, "model")
    except FieldError as exc:
        raise BadFileError(f"{path}: {exc}; {_GIVE}") from None
    blocks = model.get("blocks")
    if isinstance(blocks, list) and len(blocks) != len(values):
        raise BadFileError(f"{path}: {len(values)} importance values for {len(blocks)} blocks; {_GIVE}")
    return data


def check_importance_model(record: dict[str, Any], model: str, options: dict[str, Any] | None, path: str | Path,
                           weights: bool | str | Path | None = None) -> None:
    """Refuse (one line, `UsageError`) an importance ``record`` measured for another model or other build options
    than ``model`` with ``options`` (a TF-ported twin, ``tf_efficientnet_lite0`` for ``efficientnet_lite0``, is
    the same model); its hint is the `dsprof importance` that measures it for this one, from ``weights`` (True:
    pretrained; a checkpoint; None or False: not said)."""
    theirs = record["model"]
    name, their_options = theirs["name"], theirs.get("options") or {}
    ours = normalized_options(model, options)
    same = same_family(name, model) and normalized_options(name, their_options) == ours
    if same:
        return
    data = (record.get("data") or {}).get("name") or "DATA"
    proxy = (record.get("proxy") or {}).get("name") or "zero-shot"
    raise UsageError(
        f"importance file {path} is for {_named(name, their_options)}, not {_named(model, options)}: measure it for "
        f"this model, e.g. {HINT}", hint=ImportanceHint(model_args(model, options), str(data), proxy,
                                                        str(weights) if isinstance(weights, Path) else weights or None,
                                                        out=_own_file(model)))


def _own_file(model: str) -> str:
    """The file a hint scores ``model`` into: importance-MODEL.json, never the other model's file it was given."""
    return f"importance-{slug(model)}.json"  # the one way a name from data becomes a file name


def _named(name: str, options: dict[str, Any] | None) -> str:
    """A model as the API argument that builds it (`model_args`), in backquotes."""
    return f"`{model_args(name, options)}`"


def importance_resolution_note(record: dict[str, Any], model: str, options: dict[str, Any] | None, resolution: int,
                               path: str | Path) -> ImportanceResolutionWarning | None:
    """None where ``record`` was scored at ``resolution`` pixels (or does not say at which); else the warning, one
    line that says what differs, why the plan may still use it, and (its hint) the `dsprof importance` that scores
    it at ``resolution``."""
    data = record.get("data") or {}
    scored = data.get("resolution")
    if not isinstance(scored, int) or scored == resolution:
        return None
    proxy = (record.get("proxy") or {}).get("name") or "zero-shot"
    weights = (record.get("model") or {}).get("weights")
    where = data.get("name") or "the data"
    return ImportanceResolutionWarning(
        f"importance file {path} was scored at {scored} px, the LUT prices this plan at {resolution} px: used as "
        f"given, it ranks the blocks by the accuracy they lose at {scored} px on {where}, where it was scored (a "
        f"ranking that holds at {resolution} px as far as the model behaves alike at both sizes); to score them "
        f"at {resolution} px: {HINT}",
        hint=ImportanceHint(model_args(model, options), str(data.get("name") or "DATA"), proxy,
                            weights if weights is True or isinstance(weights, str) else None, resolution))
