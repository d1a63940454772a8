"""The planner's front in the report: what `dsprof plan --out front.json` predicts for every k
(blocks that keep their activations), the paper's presets placed against it, and every plan of
that model measured in the front's context, at its measured speed-up over the original, paired (the
what-if figure, before any training, and how it held up once plans were measured); and the answer the
report opens with (`dsprof.reports.summary`).

The front file (``"format": "dsprof.front"``, version 1) holds ``model`` (the LUT's label of the
model: name and options), ``name`` (its registered name), ``device`` (the LUT context), ``method``,
``max_span``, ``original_s``, ``points`` (``k``, ``keep``, ``merge``, ``spans``, ``latency_s``,
``low_s``, ``high_s``, ``speedup``, ``importance``; ``speedup_low``, ``speedup_high`` where written, else
from ``high_s`` and ``low_s``) and ``presets`` (``name``, ``k``, ``latency_s``, ``low_s``, ``high_s``,
``front_latency_s``, ``gap``; ``speedup`` where written, else ``original_s / latency_s``), and ``uncounted`` (where
written: the blocks without a removable activation, which k does not count); seconds inside, ms when shown. The
report reads these fields only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from ..device_context import DeviceContext
from ..errors import BadFileError, DsprofError
from ..fields import (MAX_BATCH, MAX_COUNT, MAX_THREADS, FieldError, check_count, check_model_options, check_number,
                      check_text, check_token, shown)
from ..io import read_json
from ..models.spans_text import format_spans
from ..records.measurement import Measurement, paired_with_original
from . import plots
from .page import Plot, Section
from .summary import WRITE_FRONT, Answer, device_line, front_answer
from .tables import device_labels, latest_records, model_title
from ..lut.schema import model_label
from ..records.plan import Plan

__all__ = ["FrontReport", "check_front", "front_report", "front_tables", "joint_table", "load_front"]

FRONT_FORMAT = "dsprof.front"


def load_front(path: str | Path) -> dict[str, Any]:
    """A front file written by `dsprof plan --out`, checked for its format and the fields the report reads."""
    path = Path(path)
    front = read_json(path, "planner's front (JSON)", f"write one with {WRITE_FRONT}", kind="front")
    return check_front(front, path)


def check_front(front: Any, path: Path) -> dict[str, Any]:
    """A front read from ``path`` (alone, or one of a file over several contexts), checked as `load_front` says."""
    if not isinstance(front, dict) or front.get("format") != FRONT_FORMAT:
        raise BadFileError(f"{path} is not a planner's front (no \"format\": \"{FRONT_FORMAT}\"); "
                           f"write one with {WRITE_FRONT}")
    if front.get("version") != 1:
        raise BadFileError(f"{path}: front format version {shown(front.get('version'))}; this dsprof reads version 1")
    if not isinstance(front.get("points", []), list) or not all(isinstance(p, dict) for p in front.get("points", [])):
        raise BadFileError(f"{path}: 'points' must be a list of objects; write it again with {WRITE_FRONT}")
    missing = [k for k in ("model", "device", "original_s", "points") if k not in front]
    missing += sorted({k for p in front["points"] for k in ("k", "keep", "latency_s", "low_s", "high_s") if k not in p})
    if missing:
        raise BadFileError(f"{path}: the front lacks {', '.join(missing)}; write it again with {WRITE_FRONT}")
    try:  # what a front from someone else may carry into pages, tables and commands: `dsprof.fields`
        for name in ("model", "name", "method"):
            check_text(front.get(name), name, none=name != "model")
        check_model_options(front.get("options") or {}, "options")
        if not isinstance(front["device"], str):
            raise FieldError(f"field 'device' must be a device key (text), got {type(front['device']).__name__}")
        try:
            device = DeviceContext.from_str(front["device"])
        except DsprofError as exc:
            raise FieldError(f"field 'device': {exc}") from None
        for name in ("env_id", "device", "backend", "dtype", "layout"):
            check_token(getattr(device, name), f"device ({name})")
        check_token(device.compile, "device (compile)", empty=True)
        check_count(device.batch, "device (batch)", 1, MAX_BATCH)
        check_count(device.threads, "device (threads)", 0, MAX_THREADS)
        for i, preset in enumerate(front.get("presets") or []):
            check_text(preset.get("name") if isinstance(preset, dict) else preset, f"presets[{i}].name")
        _check_numbers(front)
    except FieldError as exc:
        raise BadFileError(f"{path}: {exc}; write it again with {WRITE_FRONT}") from None
    front["path"] = str(path)
    return front


def _check_numbers(front: dict[str, Any]) -> None:
    """The numbers of a front that its tables, answer and figure compute with (`dsprof.fields`): the original's
    latency; each point's k, keep, merge, spans and latencies (speed-ups may be infinite: a bound at zero); each
    preset an object with its name, k and latency; the fastest k. A bad one raises `FieldError` naming it."""
    check_number(front["original_s"], "original_s", 0)
    check_count(front.get("fastest_k"), "fastest_k", 0, MAX_COUNT, none=True)
    uncounted = front.get("uncounted") or []
    if not isinstance(uncounted, list):
        raise FieldError("field 'uncounted' must be a list of block indices")
    for i, index in enumerate(uncounted):
        check_count(index, f"uncounted[{i}]", 0, MAX_COUNT)
    presets = front.get("presets") or []
    if not isinstance(presets, list) or not all(isinstance(p, dict) for p in presets):
        raise FieldError("field 'presets' must be a list of objects")
    for where, point in [*((f"points[{i}]", p) for i, p in enumerate(front["points"])),
                         *((f"presets[{i}]", p) for i, p in enumerate(presets))]:
        check_count(point.get("k"), f"{where}.k", 0, MAX_COUNT)
        check_number(point.get("latency_s"), f"{where}.latency_s", finite=False)
        for name in ("low_s", "high_s", "speedup", "speedup_low", "speedup_high", "importance", "front_latency_s",
                     "gap"):
            check_number(point.get(name), f"{where}.{name}", finite=False, none=True)
    for i, point in enumerate(front["points"]):
        for name, value in (("keep", point["keep"]), ("merge", point.get("merge") or [])):
            if not isinstance(value, list) or not all(v in (0, 1) and not isinstance(v, float) for v in value):
                raise FieldError(f"field 'points[{i}].{name}' must be a list of 0s and 1s (or booleans)")
        spans = point.get("spans") or []
        if not isinstance(spans, list) or not all(
                isinstance(s, list) and len(s) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in s)
                for s in spans):
            raise FieldError(f"field 'points[{i}].spans' must be a list of [start, stop] block indices")


def _same_model(record: Measurement, front: Mapping[str, Any]) -> bool:
    """Whether ``record`` times the front's model: its LUT label (name and options, as `dsprof plan` writes
    ``model``) or, in a front without options, its registered name."""
    return front["model"] in (model_label(record.model, record.model_options), record.model)


def _over(original_s: float, latency_s: float) -> float:
    """The speed-up of a latency bound: infinite for a bound at 0 (an interval that reaches zero latency)."""
    return original_s / latency_s if latency_s > 0 else float("inf") if latency_s == 0 else float("nan")


def front_tables(front: Mapping[str, Any], records: list[Measurement], plans: Mapping[str, Any]) -> tuple[pd.DataFrame, ...]:
    """The front's points, its presets, and the plans measured in its context, as tables (ms; speed-ups over the
    original, > 1 faster, with their 95 % intervals).

    A plan counts as measured where a whole-model record of the front's context carries its name
    (`dsprof measure --plan`): a plan given in ``plans`` or one of the front's presets; the original
    model's record is its k = n point. A measured plan's speed-up is paired: over the original timed in its
    group (`dsprof.records.measurement.paired_with_original`; NaN where its group has none); ``predicted``: its
    predicted speed-up where the front prices it (the front's plan of its k, a preset, or the front's plan for
    several contexts, `joint_table`), else NaN. ``records``: all records read (the last of each workload is shown;
    pairing needs each one's group). A run named as the front's plan for several contexts (`joint_table`) counts
    as that plan, given or not: the file holds its keep list and spans."""
    original_s = float(front["original_s"])
    nan = float("nan")
    points = pd.DataFrame([{
        "k": int(p["k"]), "keep": "".join(str(int(v)) for v in p["keep"]), "spans": format_spans(p.get("spans"), "none"),
        "speedup": p.get("speedup", original_s / p["latency_s"]),
        "speedup_low": p.get("speedup_low", _over(original_s, p["high_s"])),
        "speedup_high": p.get("speedup_high", _over(original_s, p["low_s"])),
        "latency_ms": p["latency_s"] * 1e3, "low_ms": p["low_s"] * 1e3, "high_ms": p["high_s"] * 1e3,
        "importance": p.get("importance"),
    } for p in front["points"]]).sort_values("k").reset_index(drop=True)
    presets = pd.DataFrame([{"name": p["name"], "k": int(p["k"]),
                             "speedup": p.get("speedup", original_s / p["latency_s"]),
                             "speedup_low": p.get("speedup_low", _over(original_s, p.get("high_s", nan))),
                             "speedup_high": p.get("speedup_high", _over(original_s, p.get("low_s", nan))),
                             "latency_ms": p["latency_s"] * 1e3,
                             "front_latency_ms": p.get("front_latency_s", nan) * 1e3, "gap": p.get("gap", nan)}
                            for p in front.get("presets", [])],
                           columns=["name", "k", "speedup", "speedup_low", "speedup_high", "latency_ms",
                                    "front_latency_ms", "gap"])
    try:
        context = DeviceContext.from_str(str(front["device"]))
    except DsprofError:
        context = None
    latest = latest_records(records)
    label = device_labels(latest)
    known = dict(plans)
    for name in presets["name"]:
        known.setdefault(name, name)
    measured = []
    n = len(front["points"][0]["keep"]) if front["points"] else 0
    uncounted = set(front.get("uncounted") or ())  # blocks without a removable activation: k does not count them
    joint = joint_table(front)  # the plan for several contexts, in this context: known by name from the file itself
    joint_plans = {str(p.name): (str(p.keep), str(p.spans)) for p in joint.itertuples()}
    priced = {(p.keep, p.spans): p.speedup for p in joint.itertuples()}
    priced.update({(p.keep, p.spans): p.speedup for p in points.itertuples()})  # the front's own plans
    for r in latest:
        if r.scope != "model" or not _same_model(r, front) or (context is not None and r.context != context):
            continue
        if r.variant == "original":
            name, bits, text, up = "original", "1" * n, "none", (1.0, 1.0, 1.0)
        elif r.variant == "custom" and (r.name in known or r.name in joint_plans):
            if r.name in known:
                try:
                    plan = Plan.coerce(known[r.name])
                except (DsprofError, KeyError, ValueError):
                    continue
                bits, text = "".join(map(str, plan.keep)), format_spans(plan.spans, "none")
            else:  # a plan for several contexts measured here, not given: its keep list and spans are the file's
                bits, text = joint_plans[r.name]
            name = r.name
            paired = paired_with_original(r, records)
            up = (paired.ratio, paired.low, paired.high) if paired is not None else (nan, nan, nan)
        else:
            continue
        keep = tuple(int(b) for b in bits)
        predicted = (presets.loc[presets["name"] == name, "speedup"].iloc[0] if name in set(presets["name"])
                     else priced.get((bits, text), nan))
        k = sum(v for i, v in enumerate(keep) if i not in uncounted)  # as the front counts: blocks with activations
        measured.append({"name": name, "k": k, "keep": bits, "spans": text,
                         "speedup": up[0], "speedup_low": up[1], "speedup_high": up[2], "predicted": predicted,
                         "measured_ms": r.median_s * 1e3, "device": label[r.context]})
    columns = ["name", "k", "keep", "spans", "speedup", "speedup_low", "speedup_high", "predicted", "measured_ms",
               "device"]
    return points, presets, pd.DataFrame(measured, columns=columns)


def joint_table(front: Mapping[str, Any]) -> pd.DataFrame:
    """The plan for several contexts (`dsprof plan --for`) in this front's context, where the front comes from a file
    over several contexts that holds one (`dsprof.reports.devices.load_front_file` puts it in ``front["joint"]``):
    for each k its predicted speed-up over this context's original with the 95 % interval, its plan and name.
    Empty (with the columns) otherwise."""
    columns = ["k", "speedup", "speedup_low", "speedup_high", "keep", "spans", "name"]
    joint = front.get("joint") or {}
    return pd.DataFrame(joint.get("points", []), columns=columns)


@dataclass
class FrontReport:
    """What the report shows of one front: the answer (`dsprof.reports.summary.Answer`), its figure (first on the
    page) and the section of its tables (with the tables, further down)."""

    answer: Answer
    figure: Plot
    tables: Section


def front_report(front: Mapping[str, Any], records: list[Measurement], plans: Mapping[str, Any], write) -> FrontReport:
    """One front in the report: the answer, the figure (its data as CSV beside it), the front, the presets and the
    measured plans as tables. ``records``: all records read (pairing needs each one's group)."""
    points, presets, measured = front_tables(front, records, plans)
    stem = front.get("stem") or Path(front["path"]).name.removesuffix(".json").replace(".", "-")  # several in one file: its own
    context = str(front["device"])
    mine = [r for r in latest_records(records) if str(r.context) == context]
    where = device_labels(mine)[mine[0].context] if mine else context
    name = front.get("name", front["model"])
    original = next((r for r in mine if r.scope == "model" and r.variant == "original" and _same_model(r, front)), None)
    answer = front_answer(points, presets, measured, device_line(mine) if mine else context,
                          model_title(original) if original is not None else name)
    title = f"Planner's front: {name} on {where}"
    data = pd.concat([points.assign(set="front"), presets.assign(set="preset"), measured.assign(set="measured")],
                     ignore_index=True)
    joint = joint_table(front)
    if len(joint):
        data = pd.concat([data, joint.assign(set="joint")], ignore_index=True)
    figure = write.figure(plots.front_figure(points, presets, measured, title, joint if len(joint) else None,
                                              front.get("fastest_k")),
                          f"front_{stem}", "planner's front", data[["set"] + [c for c in data.columns if c != "set"]])
    parts = [
        f"The best plan for each k (blocks that keep their activations; method {front.get('method', '?')}, spans up "
        f"to {front.get('max_span', '?')} blocks) from `{front['path']}`, predicted; the paper's presets priced "
        "alike; the plans measured beside the original, paired (speed-up = the original's time over the plan's).",
        write.table(f"front_{stem}", points),
    ]
    # what the planner wrote beside its rows (`dsprof.planning.Front.notes`): where the front stops getting faster, and
    # which blocks buy nothing alone
    parts[1:1] = [note[0].upper() + note[1:] + "." for note in front.get("notes") or []]
    if len(presets):
        parts.append(write.table(f"front_{stem}_presets", presets))
    if len(measured):
        parts.append(write.table(f"front_{stem}_measured", measured))
    else:
        write.report.skipped.append(f"front {front['path']}: no plan of {name} measured in its context "
                                    f"{front['device']} (`dsprof.measure(plans=PLAN)` there, then report again)")
    return FrontReport(answer, figure, Section(title, parts))
