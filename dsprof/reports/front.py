"""The planner's front in the report: what `dsprof plan --out front.json` predicts for every k
(blocks that keep their activations), the paper's presets placed against it, and every plan of
that model measured in the front's context, at its measured latency (the what-if figure, before
any training, and how it held up once plans were measured).

The front file (``"format": "dsprof.front"``, version 1) holds ``model`` (the LUT's label of the
model: name and options), ``name`` (its registered name), ``device`` (the LUT context), ``method``,
``max_span``, ``original_s``, ``points`` (``k``, ``keep``, ``merge``, ``spans``, ``latency_s``,
``low_s``, ``high_s``, ``speedup``, ``importance``) and ``presets`` (``name``, ``k``, ``latency_s``,
``front_latency_s``, ``gap``); seconds inside, ms when shown. The report reads these fields only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from ..device_context import DeviceContext
from ..errors import BadFileError, DsprofError
from ..io import read_json
from ..profiler.records import Measurement
from . import plots
from .page import Section
from .tables import device_labels

__all__ = ["check_front", "front_section", "front_tables", "load_front"]

FRONT_FORMAT = "dsprof.front"


def load_front(path: str | Path) -> dict[str, Any]:
    """A front file written by `dsprof plan --out`, checked for its format and the fields the report reads."""
    path = Path(path)
    front = read_json(path, "planner's front (JSON)", "write one with `dsprof plan --out FRONT.json`", kind="front")
    return check_front(front, path)


def check_front(front: Any, path: Path) -> dict[str, Any]:
    """A front read from ``path`` (alone, or one of a file over several contexts), checked as `load_front` says."""
    if not isinstance(front, dict) or front.get("format") != FRONT_FORMAT:
        raise BadFileError(f"{path} is not a planner's front (no \"format\": \"{FRONT_FORMAT}\"); "
                           "write one with `dsprof plan --out FRONT.json`")
    if front.get("version") != 1:
        raise BadFileError(f"{path}: front format version {front.get('version')!r}; this dsprof reads version 1")
    if not isinstance(front.get("points", []), list) or not all(isinstance(p, dict) for p in front.get("points", [])):
        raise BadFileError(f"{path}: 'points' must be a list of objects; write it again with `dsprof plan --out`")
    missing = [k for k in ("model", "device", "original_s", "points") if k not in front]
    missing += sorted({k for p in front["points"] for k in ("k", "keep", "latency_s", "low_s", "high_s") if k not in p})
    if missing:
        raise BadFileError(f"{path}: the front lacks {', '.join(missing)}; write it again with `dsprof plan --out`")
    front["path"] = str(path)
    return front


def _same_model(record: Measurement, front: Mapping[str, Any]) -> bool:
    """Whether ``record`` times the front's model: its LUT label (name and options, as `dsprof plan` writes
    ``model``) or, in a front without options, its registered name."""
    from ..lut.schema import model_label

    return front["model"] in (model_label(record.model, record.model_options), record.model)


def _spans(spans: Any) -> str:
    return ", ".join(f"{a}-{b}" for a, b in spans) if spans else "none"


def front_tables(front: Mapping[str, Any], records: list[Measurement], plans: Mapping[str, Any]) -> tuple[pd.DataFrame, ...]:
    """The front's points, its presets, and the plans measured in its context (ms), as tables.

    A plan counts as measured where a whole-model record of the front's context carries its name
    (`dsprof measure --plan`): a plan given in ``plans`` or one of the front's presets; the original
    model's record is its k = n point."""
    from ..merge.plan import Plan

    original_s = float(front["original_s"])
    points = pd.DataFrame([{
        "k": int(p["k"]), "keep": "".join(str(int(v)) for v in p["keep"]), "spans": _spans(p.get("spans")),
        "latency_ms": p["latency_s"] * 1e3, "low_ms": p["low_s"] * 1e3, "high_ms": p["high_s"] * 1e3,
        "speedup": p.get("speedup", original_s / p["latency_s"]), "importance": p.get("importance"),
    } for p in front["points"]]).sort_values("k").reset_index(drop=True)
    presets = pd.DataFrame([{"name": p["name"], "k": int(p["k"]), "latency_ms": p["latency_s"] * 1e3,
                             "front_latency_ms": p.get("front_latency_s", float("nan")) * 1e3, "gap": p.get("gap", float("nan"))}
                            for p in front.get("presets", [])], columns=["name", "k", "latency_ms", "front_latency_ms", "gap"])
    try:
        context = DeviceContext.from_str(str(front["device"]))
    except DsprofError:
        context = None
    label = device_labels(records)
    known = dict(plans)
    for name in presets["name"]:
        known.setdefault(name, name)
    measured = []
    n = len(front["points"][0]["keep"]) if front["points"] else 0
    for r in records:
        if r.scope != "model" or not _same_model(r, front) or (context is not None and r.context != context):
            continue
        if r.variant == "original":
            k, name = n, "original"
        elif r.variant == "custom" and r.name in known:
            try:
                k, name = sum(Plan.coerce(known[r.name]).keep), r.name
            except (DsprofError, KeyError, ValueError):
                continue
        else:
            continue
        measured.append({"name": name, "k": k, "measured_ms": r.median_s * 1e3, "device": label[r.context]})
    return points, presets, pd.DataFrame(measured, columns=["name", "k", "measured_ms", "device"])


def front_section(front: Mapping[str, Any], records: list[Measurement], plans: Mapping[str, Any], write) -> Section:
    """The report's section of one front: the figure, the front and the presets as tables."""
    points, presets, measured = front_tables(front, records, plans)
    stem = front.get("stem") or Path(front["path"]).name.removesuffix(".json").replace(".", "-")  # several in one file: its own
    where = next((label for c, label in device_labels(records).items() if str(c) == str(front["device"])), front["device"])
    title = f"Planner's front: {front.get('name', front['model'])} on {where}"
    figure = plots.front_figure(points, presets, measured, front["original_s"] * 1e3, title)
    parts = [
        f"Predicted latency of the best plan for each k (blocks that keep their activations; method "
        f"{front.get('method', '?')}, spans up to {front.get('max_span', '?')} blocks), from `{front['path']}`; "
        f"presets at their predicted latency, measured plans at their measured latency.",
        write.figure(figure, f"front_{stem}", "planner's front"),
        write.table(f"front_{stem}", points),
    ]
    if len(presets):
        parts.append(write.table(f"front_{stem}_presets", presets))
    if len(measured):
        parts.append(write.table(f"front_{stem}_measured", measured))
    else:
        write.report.skipped.append(f"front {front['path']}: no plan of {front.get('name', front['model'])} measured in its context "
                                    f"{front['device']} (`dsprof measure --plan PLAN` there, then report again)")
    return Section(title, parts)
