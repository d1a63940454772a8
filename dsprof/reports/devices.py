"""Device-aware plans in the report: where the inputs hold fronts of one model in more than one device context, the
fronts overlaid (predicted speed-up against k, one colour per context) and, from a file of `dsprof plan` over several
contexts, the cross table as a heat map (what each context's plan loses on another, per k) and the plan for several
contexts (`--for`).

The file of `dsprof plan` over several contexts (``"format": "dsprof.fronts"``, version 1) holds ``model``,
``name``, ``max_span``, ``contexts`` (``key``, ``label``), ``fronts`` (each one a front as `dsprof.reports.front`
reads it, with its ``label``), ``cross`` (``chosen_for_label``, ``runs_on_label``, ``k``, ``keep``, ``spans``,
``loss``, ``loss_low``, ``loss_high``, ``speedup``, ``own_speedup``), ``unplanned`` (``label``, ``reason``) and
``joint`` (null, or ``contexts``, ``labels``, ``objective``, ``points`` and, with importance, ``least_loss``:
``k``, ``keep``, ``spans``, ``loss``, ``worst``, ``mean``, ``speedup``, ``speedup_low``, ``speedup_high``). The report
reads these fields only. Each figure's data is written beside it as CSV. A loss is relative in the files (0.12 = 12 %
slower) and shown, as `dsprof plan` prints it, in per cent with a sign (``+12.0 %``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import pandas as pd
from matplotlib.colors import Normalize, TwoSlopeNorm
from matplotlib.cm import ScalarMappable
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..device_context import DeviceContext, short_labels
from ..errors import BadFileError, DsprofError
from ..io import read_json, slug
from ..models.spans_text import format_spans
from ..units import percent
from ..records.measurement import Measurement, paired_with_original
from .front import FRONT_FORMAT, check_front
from .page import Section
from .plots import _colors, _points, k_axes, plain_text
from .summary import WRITE_FRONT, JointAnswer, PlanAnswer
from .svg import tip
from .tables import latest_records
from ..records.plan import Plan

__all__ = ["FRONTS_FORMAT", "attach_joint", "cross_figure", "devices_sections", "fronts_figure", "joint_answer",
           "load_front_file"]

FRONTS_FORMAT = "dsprof.fronts"


def load_front_file(path: str | Path) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The fronts in a file `dsprof plan --out` wrote: (its fronts, None) for one context; (each context's front,
    the whole file) for several. Each front is checked as `dsprof.reports.front.load_front` checks one."""
    path = Path(path)
    data = read_json(path, "planner's front (JSON)", f"write one with {WRITE_FRONT}", kind="front")
    if not isinstance(data, dict) or data.get("format") != FRONTS_FORMAT:
        return [check_front(data, path)], None
    if data.get("version") != 1:
        raise BadFileError(f"{path}: fronts format version {data.get('version')!r}; this dsprof reads version 1")
    fronts = data.get("fronts")
    if not isinstance(fronts, list) or not isinstance(data.get("cross", []), list):
        raise BadFileError(f"{path}: 'fronts' and 'cross' must be lists; write it again with {WRITE_FRONT}")
    checked = []
    for i, front in enumerate(fronts):
        if not isinstance(front, dict) or front.get("format") != FRONT_FORMAT:
            raise BadFileError(f"{path}: front {i} is not a planner's front; write it again with {WRITE_FRONT}")
        front = check_front(front, path)
        front["stem"] = f"{path.name.removesuffix('.json').replace('.', '-')}-{i}"
        joint = _joint_of(data.get("joint"), front)
        if joint is not None:
            front["joint"] = joint
        checked.append(front)
    missing = sorted({k for row in data.get("cross", []) for k in ("chosen_for_label", "runs_on_label", "k", "loss")
                      if k not in row})
    if missing:
        raise BadFileError(f"{path}: the cross table lacks {', '.join(missing)}; write it again with {WRITE_FRONT}")
    data["path"] = str(path)
    return checked, data



def attach_joint(fronts: list[dict[str, Any]], several: list[Mapping[str, Any]]) -> None:
    """Give each front read from a file of one context (`dsprof plan --backend B --out`) the plan for several contexts
    of a file of `dsprof plan --for` that covers its model and context (``front["joint"]``, as `load_front_file`
    gives the fronts of that file): its answer then counts that plan where it was measured, and its figure draws it."""
    for front in fronts:
        if "joint" in front:
            continue
        for data in several:
            joint = _joint_of(data.get("joint"), front) if data.get("model") == front.get("model") else None
            if joint is not None:
                front["joint"] = joint
                break


def _joint_set(joint: Mapping[str, Any]) -> tuple[str, list]:
    """The plans of a file's ``joint`` that ``--keep K`` writes: the least-loss ones where importance was given, else
    the least worst (or mean) loss ones; with the objective they were chosen by."""
    if joint.get("least_loss"):
        return f"least-loss-{joint.get('objective', 'worst')}", joint["least_loss"]
    return str(joint.get("objective", "worst")), joint.get("points") or []


def _joint_of(joint: Mapping[str, Any] | None, front: Mapping[str, Any]) -> dict[str, Any] | None:
    """The plan for several contexts in ``front``'s context (its k, predicted speed-up with the interval, plan), from
    the file's ``joint``; None where the file has none or it does not cover that context. A file that predates the
    speed-ups gives the original's latency over the plan's, without an interval."""
    if not joint or str(front["device"]) not in (joint.get("contexts") or []):
        return None
    c = list(joint["contexts"]).index(str(front["device"]))
    objective, points = _joint_set(joint)
    nan = float("nan")
    rows = []
    for p in points:
        def at(field: str, default: float = nan) -> float:
            values = p.get(field) or []
            return float(values[c]) if len(values) > c and values[c] is not None else default

        rows.append({"k": int(p["k"]), "speedup": at("speedup", float(front["original_s"]) / at("latency_s")),
                     "speedup_low": at("speedup_low"), "speedup_high": at("speedup_high"), "keep": _bits(p["keep"]),
                     "spans": format_spans(p.get("spans"), "none"), "name": f"joint-{objective}-k{int(p['k'])}"})
    return {"objective": objective, "labels": list(joint.get("labels") or []), "points": rows}


def joint_answer(data: Mapping[str, Any], records: list[Measurement], plans: Mapping[str, Any],
                 near: int | None = None) -> JointAnswer | None:
    """The answer for the plan for several contexts of a file of `dsprof plan --for` (None without one): at the k of
    a plan measured beside the original (paired) in most of its contexts -- a plan of ``plans`` whose keep list and
    spans are the joint plan's of its k, or a run named as the file names that plan (given or not) --, else at
    ``near`` (e.g. the k the contexts' answers compare), else the middle k; predicted (the file's speed-ups) and
    measured on each context."""
    joint = data.get("joint")
    if not joint:
        return None
    objective, points = _joint_set(joint)
    if not points:
        return None
    by_k = {int(p["k"]): p for p in points}
    keys = list(joint.get("contexts") or [])
    labels = list(joint.get("labels") or keys)
    latest = latest_records(records)
    named = {f"joint-{objective}-k{k}": k for k in by_k}  # the names `dsprof plan --for` gives them
    found: dict[int, dict[str, tuple[str, Any]]] = {}  # k -> context -> (run name, paired ratio)
    for r in latest:
        if r.scope != "model" or r.variant != "custom" or str(r.context) not in keys:
            continue
        if r.name in plans:
            try:
                plan = Plan.coerce(plans[r.name])
            except (DsprofError, KeyError, ValueError):
                continue
            shape = (_bits(plan.keep), format_spans(plan.spans, "none"))
            # the k of the joint plan it is (k counts only blocks with a removable activation: not ``sum(keep)``)
            k = next((kk for kk, p in by_k.items()
                      if shape == (_bits(p["keep"]), format_spans(p.get("spans"), "none"))), None)
        elif r.name in named:  # measured, its plan file not given: the file holds the plan under that name
            k = named[r.name]
            shape = (_bits(by_k[k]["keep"]), format_spans(by_k[k].get("spans"), "none"))
        else:
            continue
        point = by_k.get(k)
        if point is None or shape != (_bits(point["keep"]), format_spans(point.get("spans"), "none")):
            continue
        paired = paired_with_original(r, records)
        if paired is not None:
            found.setdefault(k, {})[str(r.context)] = (r.name, paired)
    if found:
        k = max(found, key=lambda kk: (len(found[kk]), -kk))
    elif near is not None and near in by_k:
        k = near
    else:
        k = sorted(by_k)[len(by_k) // 2]
    point, runs = by_k[k], found.get(k, {})
    nan = float("nan")

    def column(field: str) -> tuple[float, ...]:
        values = point.get(field) or [nan] * len(keys)
        return tuple(float(v) if v is not None else nan for v in values)

    predicted = column("speedup")
    measured = tuple(_plan_answer(runs[key]) if key in runs else None for key in keys)
    name = next((runs[key][0] for key in keys if key in runs), None)
    return JointAnswer(tuple(labels), objective, k, predicted, column("speedup_low"), column("speedup_high"), measured,
                       name)


def _plan_answer(run: tuple[str, Any]) -> PlanAnswer:
    name, paired = run
    return PlanAnswer(name, None, paired.ratio, paired.low, paired.high)


def _bits(keep: Any) -> str:
    return "".join(str(int(v)) for v in keep)


def fronts_table(fronts: list[Mapping[str, Any]], labels: Mapping[str, str]) -> pd.DataFrame:
    """One row per context and k: its label (``labels`` by the front's ``device``), the predicted speed-up of its
    front plan over its original, the predicted latency (ms) and the plan."""
    rows = []
    for front in fronts:
        original_s = float(front["original_s"])
        for p in front["points"]:
            rows.append({"context": labels[str(front["device"])], "k": int(p["k"]),
                         "speedup": p.get("speedup", original_s / p["latency_s"]), "latency_ms": p["latency_s"] * 1e3,
                         "keep": _bits(p["keep"]), "spans": format_spans(p.get("spans"), "none")})
    return pd.DataFrame(rows, columns=["context", "k", "speedup", "latency_ms", "keep", "spans"])


def cross_table(data: Mapping[str, Any]) -> pd.DataFrame:
    """The cross table of a file over several contexts, one row per ordered pair of distinct contexts and k."""
    rows = [{"chosen for": r["chosen_for_label"], "runs on": r["runs_on_label"], "k": int(r["k"]), "loss": r["loss"],
             "loss_low": r.get("loss_low"), "loss_high": r.get("loss_high"), "speedup": r.get("speedup"),
             "own_speedup": r.get("own_speedup"), "keep": _bits(r.get("keep", ())), "spans": format_spans(r.get("spans"), "none"),
             "draft": str(r.get("draft") or "")}
            for r in data.get("cross", []) if r["chosen_for_label"] != r["runs_on_label"]]
    return pd.DataFrame(rows, columns=["chosen for", "runs on", "k", "loss", "loss_low", "loss_high", "speedup",
                                       "own_speedup", "keep", "spans", "draft"])


@plain_text
def fronts_figure(table: pd.DataFrame, title: str) -> Figure:
    """The fronts of one model overlaid: predicted speed-up of each context's fastest plan over its original against
    k (blocks that keep their activations), one colour per context; ``table`` as `fronts_table` makes it."""
    fig = Figure(figsize=(7.5, 4.8), layout="constrained")
    ax = fig.subplots()
    colors = _colors()
    for i, (context, rows) in enumerate(table.groupby("context", sort=True)):
        rows = rows.sort_values("k")
        ax.plot(rows["k"], rows["speedup"], "-o", markersize=4, color=colors[i % len(colors)], label=context)
        _points(ax, rows["k"], rows["speedup"],
                [f"{context}, k={k}: {s:.2f}x predicted ({ms:.4g} ms); keep {keep}; spans {spans}"
                 for k, s, ms, keep, spans in zip(rows["k"], rows["speedup"], rows["latency_ms"], rows["keep"],
                                                  rows["spans"])])
    ax.axhline(1.0, color="grey", linestyle=":", linewidth=1)
    return k_axes(fig, ax, title, "predicted speed-up over the original (x)")


@plain_text
def cross_figure(table: pd.DataFrame, title: str) -> Figure:
    """The cross table as a heat map: one row per ordered pair (the plan chosen for one context, run on another), one
    column per k, each cell the predicted loss against that context's own plan of that k (%; 0 white, slower red);
    ``table`` as `cross_table` makes it. Every cell has its hover text (interval, plan)."""
    pairs = list(dict.fromkeys(zip(table["chosen for"], table["runs on"])))
    ks = sorted(set(table["k"]))
    fig = Figure(figsize=(max(6.0, 0.5 * len(ks) + 3.5), 1.0 + 0.55 * len(pairs) + 1.2), layout="constrained")
    ax = fig.subplots()
    cmap, norm = _color_scale(float(table["loss"].min()) * 100, float(table["loss"].max()) * 100)
    for row, (a, b) in enumerate(pairs):
        mine = table[(table["chosen for"] == a) & (table["runs on"] == b)]
        for _, r in mine.iterrows():
            column = ks.index(int(r["k"]))
            value = float(r["loss"]) * 100
            face = cmap(norm(value))
            cell = Rectangle((column - 0.5, row - 0.5), 1, 1, facecolor=face, edgecolor="white")
            ax.add_patch(cell)
            interval = (f" (95 % {r['loss_low'] * 100:+.1f} to {r['loss_high'] * 100:+.1f} %)"
                        if pd.notna(r["loss_low"]) else "")
            tip(cell, f"plan chosen for {a}, run on {b}, k={int(r['k'])}: {value:+.1f} % against {b}'s own plan"
                      f"{interval}; keep {r['keep']}, spans {r['spans']}")
            ax.text(column, row, percent(value / 100), ha="center", va="center", fontsize=6.5,
                    color="white" if 0.299 * face[0] + 0.587 * face[1] + 0.114 * face[2] < 0.5 else "black")
    ax.set_xlim(-0.5, len(ks) - 0.5)
    ax.set_ylim(len(pairs) - 0.5, -0.5)
    ax.set_xticks(range(len(ks)), [str(k) for k in ks], fontsize=7)
    ax.set_yticks(range(len(pairs)), [f"{a} on {b}" for a, b in pairs], fontsize=7)
    ax.set_xlabel("k (blocks that keep their activations)")
    ax.set_title(title, fontsize=10)
    fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="predicted loss (%)", shrink=0.8)
    return fig


def _color_scale(low: float, high: float):
    """(colormap, norm): white at 0, red for slower. A loss is at least 0 where the pieces' savings decide the merges
    (every method but ``context``); a negative one, possible only there, is blue."""
    import matplotlib

    if low >= 0:
        return matplotlib.colormaps["Reds"], Normalize(vmin=0.0, vmax=max(high, 1e-9))
    return matplotlib.colormaps["RdBu_r"], TwoSlopeNorm(vcenter=0.0, vmin=low, vmax=max(high, 1e-9))


def _figure_part(write, table: pd.DataFrame, figure: Figure, name: str, alt: str) -> list:
    """The figure, its data as CSV beside it (``plots/NAME.csv``) and as a table of the report."""
    return [write.figure(figure, name, alt, table), write.table(name, table, 3)]


def _labels_of(fronts: list[Mapping[str, Any]]) -> dict[str, str]:
    """Short labels (`short_labels`) of the fronts' contexts, by key; a key that does not parse is its own label."""
    keys = {str(f["device"]) for f in fronts}
    parsed = {}
    for key in keys:
        try:
            parsed[key] = DeviceContext.from_str(key)
        except DsprofError:
            pass
    labels = short_labels(parsed.values())
    return {key: labels[parsed[key]] if key in parsed else key for key in keys}


def _slug(text: str) -> str:
    """A name in the report's file names, ``-`` between its words (`dsprof.io.slug`, the one safe name)."""
    return slug(text).replace("_", "-").replace(".", "-")


def devices_sections(singles: list[Mapping[str, Any]], multis: list[Mapping[str, Any]], write) -> list[Section]:
    """One section per file over several contexts (fronts overlaid, the cross heat map, the plan for several), and
    one per model whose single-context front files cover more than one context (fronts overlaid)."""
    sections = []
    for data in multis:
        labels = {c["key"]: c["label"] for c in data.get("contexts", [])}
        labels.update({str(f["device"]): f.get("label", str(f["device"])) for f in data["fronts"]})
        model = data.get("name", data["model"])
        stem = _slug(Path(data["path"]).name.removesuffix(".json"))
        parts: list = [f"From `{data['path']}` (`dsprof plan` over {len(data['fronts'])} contexts, spans up to "
                       f"{data.get('max_span', '?')} blocks). Predicted: each context's fastest plan for each k, and "
                       "what the plan chosen for one context loses on another against that context's own plan of the "
                       "same k (its predicted latency there over the other's, minus 1)."]
        fronts = fronts_table(data["fronts"], labels)
        parts += _figure_part(write, fronts, fronts_figure(fronts, f"{model}: fronts per device context"),
                              f"devices_{stem}_fronts", "fronts per device context")
        cross = cross_table(data)
        if len(cross):
            drafts = "; ".join(dict.fromkeys(d for d in cross["draft"] if d))  # a contended LUT run's figures
            parts += _figure_part(write, cross, cross_figure(cross, f"{model}: what a plan chosen for one context "
                                                                    "loses on another (%)"
                                                                    + (f" ({drafts})" if drafts else "")),
                                  f"devices_{stem}_cross", "cross table heat map")
        joint = data.get("joint")
        if joint:
            objective, points = _joint_set(joint)
            rows = []
            for p in points:
                row = {"k": p["k"], "keep": _bits(p["keep"]), "spans": format_spans(p.get("spans"), "none"),
                       "worst loss": p["worst"], "mean loss": p["mean"]}
                if p.get("importance") is not None:
                    row["importance"] = p["importance"]
                for i, label in enumerate(joint["labels"]):
                    if p.get("speedup"):
                        row[f"{label}: speedup"] = p["speedup"][i]
                    row[f"{label}: loss"] = p["loss"][i]
                rows.append(row)
            what = (f"the least importance loss, then the least {joint['objective']} loss"
                    if objective.startswith("least-loss") else f"the least {joint['objective']} loss")
            parts += [f"One plan for {', '.join(joint['labels'])} (`joint=`): at each k {what} against each context's "
                      "own plan; its predicted speed-up over each context's original and that loss.",
                      write.table(f"devices_{stem}_joint", pd.DataFrame(rows), 3)]
        unplanned = data.get("unplanned") or []
        if unplanned:
            parts.append("\n".join(f"- not planned: {u['label']}: {u['reason']}" for u in unplanned))
        sections.append(Section(f"Device-aware plans: {model} on {len(data['fronts'])} contexts", parts))
    by_model: dict[str, list] = {}
    for front in singles:
        if "stem" not in front:  # fronts read from files over several contexts are drawn above
            by_model.setdefault(front["model"], []).append(front)
    for model, fronts in by_model.items():
        if len({str(f["device"]) for f in fronts}) < 2:
            continue
        table = fronts_table(fronts, _labels_of(fronts))
        name = fronts[0].get("name", model)
        parts = [f"The planner's fronts of {name} in {table['context'].nunique()} contexts, from "
                 + ", ".join(f"`{f['path']}`" for f in fronts) + "."]
        parts += _figure_part(write, table, fronts_figure(table, f"{name}: fronts per device context"),
                              f"devices_{_slug(model)}_fronts", "fronts per device context")
        sections.append(Section(f"Device-aware plans: {name} on {table['context'].nunique()} contexts", parts))
    return sections
