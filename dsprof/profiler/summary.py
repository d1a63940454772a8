"""The closing summary of a measurement: one row per block and per whole model (a renderer: returns values)."""

from __future__ import annotations

import math
from typing import Iterable

import pandas as pd

from ..models.spans_text import format_span
from ..names import CROSSING_VARIANT
from ..records.measurement import CALIBRATION, IN_SITU_SCOPE, MODEL_ROW_SUFFIX, Measurement, is_session_pair, speedups

__all__ = ["SUMMARY_COLUMNS", "format_summary", "summary_table"]

SUMMARY_COLUMNS = [
    "scope", "name", "index", "span", "original_ms", "merged_ms", "flops_matched_ms", "linear_ms",
    "merged_speedup", "merged_speedup_low", "merged_speedup_high",
    "flops_matched_speedup", "flops_matched_speedup_low", "flops_matched_speedup_high",
    "linear_speedup", "linear_speedup_low", "linear_speedup_high",
    "noisy", "fps",
]


def summary_table(records: Iterable[Measurement]) -> pd.DataFrame:
    """Median latency in ms of each variant, paired speed-ups over the original with their 95 %
    intervals, a noise flag (any variant's IQR/median > 10 %) and, for whole models, the FPS
    (images per second: batch / median) of every variant (``fps`` is the original's). A ``custom``
    model (e.g. merged by a plan) gets its own row, its time in ``original_ms`` and its paired
    speed-up over the original model timed with it in the ``merged_speedup`` columns.

    A block's ``index`` is its place in the model's blocks (the digit plans give it); a span (`measure --spans N`,
    named ``first+last``) is written as its blocks' inclusive range in ``span`` (``0-1``, as plans write it) with
    ``index`` its first block, after the blocks.

    Milliseconds here because this is for display; the records keep seconds. The last record
    of a workload wins (a resumed file may hold an earlier failed attempt).
    """
    # the drift probe: `dsprof report`, predict; a crossing span shares its name with the span of its blocks and has
    # no column here (as a block's partial variants have none)
    records = [r for r in records if r.ok and r.scope != "probe" and r.variant != CROSSING_VARIANT]
    latest: dict[tuple[str, str, str], Measurement] = {}
    for r in records:
        latest[(r.scope, r.name, r.variant)] = r
    ups = speedups(records)  # every group: --calibrate times the whole model's original again in a group of its own
    rows: dict[tuple[str, str], dict] = {}
    for (scope, name, variant), r in latest.items():
        shown = name + MODEL_ROW_SUFFIX[variant] if variant == CALIBRATION else name  # its own row
        row = rows.setdefault((scope, shown), {"scope": scope, "name": shown, "_index": r.index, "noisy": False})
        stats = r.stats
        key = variant if variant in ("original", "merged", "flops_matched", "linear") else None
        if key:
            row[f"{key}_ms"] = stats.median * 1e3
            if scope == "model":
                row[f"{key}_fps"] = r.batch / stats.median
        elif scope == "model":  # custom models get their own row
            row["original_ms"] = stats.median * 1e3
            row["original_fps"] = r.batch / stats.median
        row["noisy"] = row["noisy"] or stats.noisy
        up = ups.get((scope, name, variant))
        column = key or "merged"  # a custom model (a merged one, usually) vs the original model of its group
        if up is not None:
            row[f"{column}_speedup"], row[f"{column}_speedup_low"], row[f"{column}_speedup_high"] = up.ratio, up.low, up.high
    where = {row["name"]: row["_index"] for row in rows.values() if row["scope"] == "block" and row["_index"] >= 0}
    for row in rows.values():
        row["index"], row["span"] = row["_index"], ""
        if row["scope"] == "block" and row["_index"] < 0 and "+" in row["name"]:  # a span: first+last
            first, last = (where.get(n) for n in row["name"].split("+", 1))
            if first is not None and last is not None and last > first:
                row["index"], row["span"] = first, format_span((first, last + 1))
    place = {"stem": 0, "block": 1, "head": 2, IN_SITU_SCOPE: 3}  # then whole models, in the order measured
    ordered = sorted(rows.values(), key=lambda row: (place.get(row["scope"], 4), row["span"] != "",
                                                     row["index"] if row["scope"] in ("block", IN_SITU_SCOPE) else 0))
    table = pd.DataFrame(ordered)
    for col in SUMMARY_COLUMNS:
        if col not in table.columns:
            table[col] = math.nan if col not in ("scope", "name") else None
    if "original_fps" in table.columns:
        table["fps"] = table["original_fps"]
    extra = [c for c in table.columns if c.endswith("_fps") and c not in SUMMARY_COLUMNS]
    return table[SUMMARY_COLUMNS + extra].reset_index(drop=True) if len(table) else pd.DataFrame(columns=SUMMARY_COLUMNS)


def _ms(v: float) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"


def _up(row: pd.Series, key: str) -> str:
    v = row.get(f"{key}_speedup")
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return f"{v:.2f}x [{row[f'{key}_speedup_low']:.2f}, {row[f'{key}_speedup_high']:.2f}]"


def _name(row: pd.Series) -> str:
    """A block as the plans number it (``3 blocks.4``), a span as its range (``span 0-1``)."""
    if row.get("span"):
        return f"span {row['span']}"
    index = row.get("index")
    return f"{int(index)} {row['name']}" if index is not None and index == index and index >= 0 else row["name"]


def _label(row: pd.Series) -> str:
    """A row as the summary names it: a block or span (`_name`), a piece swapped into the model, the model against
    itself (a session pair), or a scope and its name."""
    if row["scope"] == "block":
        return _name(row)
    if row["scope"] != IN_SITU_SCOPE:
        return f"{row['scope']}: {row['name']}"
    return f"model against itself {row['name']}" if is_session_pair(row["name"]) else f"model with {row['name']} swapped"


def format_summary(table: pd.DataFrame) -> str:
    """The summary as text: block, original / merged / flops-matched ms, speed-ups with 95 % intervals, FPS; the
    linear variant's ms and speed-up too where it was timed (`workloads=Workloads(variants=(..., 'linear'))`)."""
    if table.empty:
        return "(nothing measured)"
    linear = "linear_ms" in table and bool(table["linear_ms"].notna().any())
    lines = []
    header = ["block", "original ms", "merged ms", "flops-matched ms", *["linear ms"] * linear, "merged speed-up",
              "flops-matched speed-up", *["linear speed-up"] * linear, "FPS", ""]
    body = []
    for _, row in table.iterrows():
        fps = ""
        if row["scope"] == "model":
            parts = []
            for key in ("original", "merged", "flops_matched"):
                v = row.get(f"{key}_fps")
                if v is not None and not (isinstance(v, float) and math.isnan(v)):
                    parts.append(f"{v:.1f}")
            fps = " / ".join(parts)
        body.append([
            _label(row),
            _ms(row["original_ms"]), _ms(row["merged_ms"]), _ms(row["flops_matched_ms"]),
            *[_ms(row["linear_ms"])] * linear,
            _up(row, "merged"), _up(row, "flops_matched"), *[_up(row, "linear")] * linear,
            fps, "noisy" if row["noisy"] else "",
        ])
    widths = [max(len(r[i]) for r in body + [header]) for i in range(len(header))]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()  # noqa: E731
    lines.append(fmt(header))
    lines += [fmt(r) for r in body]
    lines.append(
        "medians; speed-up = original / variant time, median of paired rounds [95 % interval]; "
        "FPS = batch / median (original / merged / flops-matched); noisy: IQR/median > 10 %; BatchNorm folded everywhere"
        + ("; linear: activations removed, not merged" if linear else "")
    )
    return "\n".join(lines)
