"""The paper's tables from measurement records; each function returns a pandas DataFrame with raw
numbers, and `render` turns one into text, Markdown, CSV or LaTeX (booktabs).

* `profiling_table` (paper Tab. 1): models x devices -- GMACs, original FPS, FPS of the FLOPs-matched
  dense counterpart, and their ratio.
* `variant_table` (Tab. 2/3): every whole model measured (original, merged, plans) -- MMACs,
  accuracy where known, FPS per device and speed-up over the original.
* `block_table` (Fig. 1/5 in numbers): per block -- spec, original / merged / flops-matched latency
  in ms, the saving and the merged speed-up.
* `lut_validation_table`: predicted against measured latency, with the error.

Tables hold latencies in ms (columns ``*_ms``, full precision in CSV); `display_units` shows a
table's latencies in µs where its typical latency is under 1 ms (two decimals of ms would round
small blocks to zero), the same unit for the whole table.

Devices appear side by side as column groups named by `device_labels`: distinct device contexts
(`dsprof.device_context`) always get distinct columns.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import pandas as pd

from ..errors import BadFileError, UsageError
from ..io import csv_frame, read_csv
from .escape import latex_escape, markdown_safe
from ..device_context import DeviceContext, context_labels
from ..models.spans_text import format_span
from ..units import percent
from ..records.measurement import MODEL_ROW_SUFFIX, Measurement

__all__ = [
    "block_table",
    "device_labels",
    "display_units",
    "explain_table",
    "fingerprint_table",
    "latest_records",
    "lut_validation_table",
    "model_title",
    "profiling_table",
    "read_accuracies",
    "render",
    "variant_table",
]


def device_labels(records: Iterable[Measurement]) -> dict[DeviceContext, str]:
    """The column label of each device context among ``records``: device name, backend, dtype,
    batch, and whatever else tells two of them apart (threads, layout, ...; `context_labels`)."""
    return context_labels((r.context, r.device_name) for r in records)


def model_title(record: Measurement) -> str:
    """The model a record belongs to: name and its options, e.g. ``mobilenet_v2 (width=1.4) 224px``."""
    opts = record.build_options
    extra = f" ({', '.join(f'{k}={v}' for k, v in sorted(opts.items()))})" if opts else ""
    return f"{record.model}{extra} {record.model_options.get('resolution', '?')}px"


def latest_records(records: Iterable[Measurement]) -> list[Measurement]:
    """Successful records, the last one per (context, model, scope, name, variant) winning."""
    latest: dict[tuple, Measurement] = {}
    for r in records:
        if r.ok:
            latest[(r.context, model_title(r), r.scope, r.name, r.variant)] = r
    return list(latest.values())


def _fps(r: Measurement) -> float:
    return r.batch / r.median_s


def profiling_table(records: Iterable[Measurement]) -> pd.DataFrame:
    """Paper Tab. 1: per model, GMACs and, per device, original FPS, dense-counterpart FPS, ratio."""
    rows: dict[str, dict] = {}
    latest = latest_records(records)
    label = device_labels(latest)
    for r in latest:
        if r.scope != "model" or r.variant not in ("original", "flops_matched"):
            continue
        row = rows.setdefault(model_title(r), {"model": model_title(r)})
        if r.variant == "original":
            row["GMACs"] = r.macs / 1e9
        key = "original FPS" if r.variant == "original" else "dense FPS"
        row[(label[r.context], key)] = _fps(r)
        row[(label[r.context], "noisy")] = row.get((label[r.context], "noisy"), False) or r.stats.noisy
    table = pd.DataFrame(list(rows.values()))
    if table.empty:
        return table
    devices = sorted({c[0] for c in table.columns if isinstance(c, tuple)})
    for d in devices:
        if (d, "original FPS") in table and (d, "dense FPS") in table:
            table[(d, "ratio")] = table[(d, "dense FPS")] / table[(d, "original FPS")]
    ordered = ["model", "GMACs"] + [(d, k) for d in devices for k in ("original FPS", "dense FPS", "ratio", "noisy")]
    return _flatten(table[[c for c in ordered if c in table]])


def variant_table(records: Iterable[Measurement], accuracies: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Paper Tab. 2/3: every whole model measured -- MMACs, accuracy (from ``accuracies``, keyed by
    the row's name), and per device its FPS and speed-up over the original of the same model."""
    accuracies = dict(accuracies or {})
    rows: dict[str, dict] = {}
    originals: dict[tuple[str, str], float] = {}
    latest = latest_records(records)
    label = device_labels(latest)
    recs = [r for r in latest if r.scope == "model" and r.variant != "flops_matched"]
    for r in recs:
        if r.variant == "original":
            originals[(model_title(r), label[r.context])] = _fps(r)
    for r in recs:
        name = r.name + MODEL_ROW_SUFFIX.get(r.variant, "")
        row = rows.setdefault(name, {"model": name, "base": model_title(r), "MMACs": r.macs / 1e6,
                                     "accuracy": accuracies.get(name, math.nan)})
        row[(label[r.context], "FPS")] = _fps(r)
        base = originals.get((model_title(r), label[r.context]))
        row[(label[r.context], "speed-up")] = _fps(r) / base if base else math.nan
        row[(label[r.context], "noisy")] = row.get((label[r.context], "noisy"), False) or r.stats.noisy
    table = pd.DataFrame(list(rows.values()))
    return _flatten(table) if not table.empty else table


def block_table(records: Iterable[Measurement]) -> pd.DataFrame:
    """Per block of each model and device: spec, original / merged / flops-matched latency (ms),
    the saving of merging (ms) and the merged speed-up; ``noisy`` when any variant is.

    Where the records hold spans (`dsprof measure --spans N`: the one convolution consecutive blocks merge
    into, named ``first+last``), each span is a row of its own after the blocks, in block order: ``index`` its
    first block, ``span`` its blocks as an inclusive range (``3-4``, `dsprof.models.format_span`; empty for a
    block; ``?`` where its blocks are not among the records), ``merged_ms`` its own median, ``original_ms`` the sum of its blocks' (what it replaces), so that its
    saving reads as a block's does. Without span records there is no ``span`` column."""
    latest = [r for r in latest_records(records) if r.scope == "block"]
    label = device_labels(latest)
    where = {(label[r.context], model_title(r), r.name): r.index for r in latest if r.index >= 0}
    rows: dict[tuple, dict] = {}
    for r in latest:
        device, model = label[r.context], model_title(r)
        span = _span_range(r, where, device, model)
        key = (device, model, r.index) if r.index >= 0 else (device, model, r.name)  # a span: by its name
        text = format_span(span) if span is not None else ("" if r.index >= 0 else "?")
        row = rows.setdefault(key, {"device": device, "model": model, "index": r.index if span is None else span[0],
                                    "block": r.name, "span": text,
                                    "spec": r.spec, "noisy": False, "_stop": -1 if span is None else span[1]})
        row[f"{r.variant}_ms"] = r.median_s * 1e3
        row["noisy"] = row["noisy"] or r.stats.noisy
    for row in rows.values():  # a span replaces its blocks: its original is theirs, summed
        if row["span"] and row["_stop"] > row["index"] >= 0:
            parts = [rows.get((row["device"], row["model"], i), {}).get("original_ms") for i in range(row["index"], row["_stop"])]
            row["original_ms"] = sum(parts) if all(v is not None for v in parts) else math.nan
    table = pd.DataFrame(list(rows.values()))
    if table.empty:
        return table
    for col in ("original_ms", "merged_ms", "flops_matched_ms"):
        if col not in table:
            table[col] = math.nan
    table["saving_ms"] = table["original_ms"] - table["merged_ms"]
    table["merged_speedup"] = table["original_ms"] / table["merged_ms"]
    spans = (table["span"] != "").any()
    table["_is_span"] = table["span"] != ""
    cols = ["device", "model", "index", "block", *(["span"] if spans else []), "spec", "original_ms", "merged_ms",
            "flops_matched_ms", "saving_ms", "merged_speedup", "noisy"]
    return table.sort_values(["device", "model", "_is_span", "index", "_stop"])[cols].reset_index(drop=True)


def _span_range(record: Measurement, where: Mapping[tuple, int], device: str, model: str) -> tuple[int, int] | None:
    """(start, stop) of the blocks a span record (``first+last``, no index of its own) merges, found by its end
    blocks' names among the model's block records; None for a block record (or a span whose blocks are not
    among them)."""
    if record.index >= 0 or "+" not in record.name:
        return None
    first, last = record.name.split("+", 1)
    start, end = where.get((device, model, first)), where.get((device, model, last))
    return None if start is None or end is None or end < start else (start, end + 1)


def explain_table(explanation) -> pd.DataFrame:
    """A `dsprof.profiler.BlockExplanation` as a table (ms): one row per operator (profiled self
    time and time alone), then the sums and the block timed as a unit."""
    ops = explanation.operators
    rows = [{"operator": r["operator"], "input_shape": r["shape"], "calls": r["calls"],
             "profiled_ms": r["profiled_s"] * 1e3 if pd.notna(r["profiled_s"]) else math.nan,
             "alone_ms": r["alone_s"] * 1e3 if r["alone_s"] is not None and pd.notna(r["alone_s"]) else math.nan}
            for _, r in ops.iterrows()]
    sums = [("sum of the operators", explanation.profiled_sum_s, explanation.alone_sum_s),
            ("the block timed as a unit", explanation.block_s, None)]
    if explanation.single_thread_s is not None:
        sums.append(("the block on 1 thread", explanation.single_thread_s, None))
    for label, profiled, alone in sums:
        rows.append({"operator": f"**{label}**", "input_shape": "", "calls": math.nan, "profiled_ms": profiled * 1e3,
                     "alone_ms": alone * 1e3 if alone is not None else math.nan})
    return pd.DataFrame(rows, columns=["operator", "input_shape", "calls", "profiled_ms", "alone_ms"])


def lut_validation_table(names: Sequence[str], predicted_s: Sequence[float], measured_s: Sequence[float],
                         speedups: Sequence[tuple[float, ...]] | None = None,
                         devices: Sequence[str] | None = None) -> pd.DataFrame:
    """Per model: the speed-up first -- measured (paired with the original in its group: median of the per-round
    ratios, 95 % interval), predicted with its interval, the error and whether the measurement is inside -- then
    predicted and measured latency (ms) and the relative error (predicted / measured - 1), and the device context
    it was measured in (``devices``, its column label; the figure's colour). ``speedups``: per model
    (measured, low, high, predicted, low, high), NaN where the model was not timed beside the original."""
    nan = float("nan")
    rows = list(speedups) if speedups is not None else [(nan,) * 6] * len(names)
    table = pd.DataFrame(rows, columns=["measured_speedup", "measured_low", "measured_high", "predicted_speedup",
                                       "predicted_low", "predicted_high"])
    table.insert(0, "model", list(names))
    table["speedup_error"] = table["predicted_speedup"] / table["measured_speedup"] - 1
    table["inside"] = (table["predicted_low"] <= table["measured_speedup"]) & (
        table["measured_speedup"] <= table["predicted_high"])
    table["predicted_ms"] = [p * 1e3 for p in predicted_s]
    table["measured_ms"] = [m * 1e3 for m in measured_s]
    table["error"] = table["predicted_ms"] / table["measured_ms"] - 1
    if devices is not None:
        table["device"] = list(devices)
    return table


def _flatten(table: pd.DataFrame) -> pd.DataFrame:
    """Column tuples (device, metric) become 'device: metric' strings."""
    table.columns = [f"{c[0]}: {c[1]}" if isinstance(c, tuple) else c for c in table.columns]
    return table.reset_index(drop=True)


def display_units(table: pd.DataFrame, digits: int = 2) -> pd.DataFrame:
    """``table`` as shown: its latency columns (``*_ms``) in µs (renamed ``*_µs``) where the table's
    typical latency (the median of its nonzero values) is under 1 ms -- where ``digits`` decimals of
    ms would show small blocks and their savings as 0.00 -- else unchanged. One unit for the whole
    table, so that its columns compare at a glance."""
    latency = [c for c in table.columns if isinstance(c, str) and c.endswith("_ms")]
    values = pd.concat([pd.to_numeric(table[c], errors="coerce") for c in latency]) if latency else pd.Series(dtype=float)
    values = values[(values != 0) & values.notna()].abs()
    if values.empty or values.median() >= 1.0:
        return table
    shown = table.copy()
    for c in latency:
        shown[c] = pd.to_numeric(shown[c], errors="coerce") * 1e3
    return shown.rename(columns={c: c[: -len("_ms")] + "_µs" for c in latency})


_RELATIVE = re.compile(r"(^|[ _])(error|gap|loss)(_low|_high)?$")


def is_relative(column: object) -> bool:
    """Whether a table's column holds relative changes (0.12 = 12 % more): errors, gaps and losses (``loss``,
    ``loss_low``, ``worst loss``, ``device: loss``). The files keep them as fractions; every shown table (text,
    Markdown, LaTeX, the HTML page) writes them as `percent`."""
    return bool(_RELATIVE.search(str(column).rsplit(": ", 1)[-1]))


def render(table: pd.DataFrame, fmt: str = "text", digits: int = 2) -> str:
    """``table`` as ``text`` (terminal), ``markdown``, ``csv`` (full precision, latencies in ms) or
    ``latex`` (booktabs; 'device: metric' columns grouped under one spanning device header). Text,
    Markdown and LaTeX show latencies in the unit `display_units` chooses and relative changes (`is_relative`)
    as per cent with a sign. Text from files is made harmless where it lands: Markdown without raw HTML or links
    other than http(s) and relative ones (`markdown_safe`), CSV without formulas (`dsprof.io.csv_frame`), LaTeX
    escaped (`latex_escape`)."""
    if fmt == "csv":  # text cells and headers that a spreadsheet would run as a formula: as text (`csv_frame`)
        return csv_frame(table).to_csv(index=False)
    floatfmt = f".{digits}f"
    if fmt not in ("text", "markdown", "latex"):
        raise UsageError(f"unknown table format {fmt!r}; choose text, markdown, csv or latex")
    table = display_units(table, digits)
    relative = [c for c in table.columns if is_relative(c) and pd.api.types.is_numeric_dtype(table[c])]
    if relative:
        table = table.copy()
        for c in relative:
            table[c] = [percent(v) if pd.notna(v) else None for v in table[c]]
    if fmt == "text":
        return table.to_string(index=False, float_format=lambda v: format(v, floatfmt), na_rep="")
    if fmt == "markdown":
        return markdown_safe(table.astype(object).where(table.notna(), None).to_markdown(index=False, floatfmt=floatfmt,
                                                                                         missingval=""))
    escaped = table.map(lambda v: latex_escape(v) if isinstance(v, str) else v)
    headers = [_latex_header(c) for c in table.columns]
    if any(group for group, _ in headers):
        escaped.columns = pd.MultiIndex.from_tuples(headers)
    else:
        escaped.columns = [metric for _, metric in headers]
    return escaped.to_latex(index=False, float_format=lambda v: format(v, floatfmt), na_rep="--",
                            multicolumn=True, multicolumn_format="c")


def _latex_header(column: object) -> tuple[str, str]:
    """A column's two header rows: ('device', 'metric') for 'device: metric' columns, ('', name) else."""
    text = str(column)
    group, sep, metric = text.rpartition(": ")
    return (latex_escape(group), latex_escape(metric)) if sep else ("", latex_escape(text))


def fingerprint_table(records: Sequence[Measurement]) -> pd.DataFrame:
    """One row per device context: its column label, then what the records say about the machine."""
    rows = []
    label = device_labels(records)
    seen = set()
    for r in records:
        if r.context in seen:
            continue
        seen.add(r.context)
        env = r.environment
        cpu = env.get("cpu", {})
        rows.append({
            "device": label[r.context], "environment": r.env_id, "torch device": r.device, "layout": r.layout,
            "threads": r.threads or "default", "CPU": cpu.get("model", "?"), "logical cores": cpu.get("logical_cores", "?"),
            "GPU": ", ".join(g.get("name", "?") for g in env.get("gpu", [])) or "none",
            "versions": ", ".join(f"{k} {v}" for k, v in sorted(env.get("versions", {}).items())),
            "host": env.get("host", "?"), "allocator": env.get("allocator") or "",
        })
    return pd.DataFrame(rows).astype({"threads": str, "logical cores": str})


def read_accuracies(path: str | Path) -> dict[str, float]:
    """Top-1 accuracies (%) by model name from a CSV with the columns ``model,accuracy`` (others ignored)."""
    hint = "give a CSV with the columns model,accuracy (%), one row per model or plan name"
    frame = read_csv(path, "accuracies file", ("model", "accuracy"), hint)
    accuracies = {}
    for line, (model, value) in enumerate(zip(frame["model"], frame["accuracy"]), 2):
        try:
            accuracies[model] = float(value)
        except ValueError:
            raise BadFileError(f"{path}, line {line}: accuracy {value!r} of {model!r} is not a number; {hint}") from None
    return accuracies
