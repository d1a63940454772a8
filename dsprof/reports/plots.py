"""The paper's figures; each function returns a matplotlib Figure (the caller saves or shows it).

* `block_latency_figure` (paper Fig. 1 and Fig. 5): latency of each original block (solid) and of
  its merged dense replacement (dashed), one line pair per model and device, with a marker on
  every block whose activations a plan keeps; the blocks named on the axis.
* `memory_figure` (Fig. 6): per block, weights and peak activation before and after merging.
* `accuracy_fps_figure` (Fig. 7): accuracy against FPS, one series per device.
* `prediction_figure`: predicted against measured speed-up (or latency) with the +-10 % band.
* `front_figure`: the planner's front (predicted speed-up against k), presets and measured plans.

Every data point carries a hover text (`dsprof.reports.svg.tip`), which the SVG written by
`dsprof.reports.svg.figure_svg` shows as a tooltip.
"""

from __future__ import annotations

import functools
from typing import Callable, Iterable, Mapping, Sequence

import matplotlib
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import MaxNLocator

from ..errors import UsageError
from ..models.spans_text import parse_spans
from ..units import percent
from .svg import tip

__all__ = ["accuracy_fps_figure", "block_latency_figure", "front_figure", "memory_figure", "prediction_figure"]

_PLAN_MARKERS = "o^sDvP*X"

# Figures are made with `matplotlib.figure.Figure` directly, not through pyplot: no backend is chosen
# and no global figure state is touched (a notebook keeps its backend; `fig.savefig` works headless).

_PLAIN = {"text.parse_math": False, "text.usetex": False}


def plain_text(make: Callable[..., Figure]) -> Callable[..., Figure]:
    """A figure function whose text shows as it is: names, devices and notes come from files (docs/security.md), and
    matplotlib would read ``$...$`` in them as mathtext (``$\\undefinedmacro$`` raised a parse error) or hand them to
    LaTeX (``text.usetex``). Every figure of the report is made through it: its text is made with mathtext and usetex
    off, and every text artist of the figure it returns is set so."""
    @functools.wraps(make)
    def made(*args, **kwargs) -> Figure:
        with matplotlib.rc_context(_PLAIN):
            fig = make(*args, **kwargs)
        for text in fig.findobj(Text):
            text.set_parse_math(False)
            text.set_usetex(False)
        return fig

    return made


def _colors() -> list[str]:
    return matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]


def _points(ax, xs: Sequence[float], ys: Sequence[float], texts: Sequence[str], size: float = 9) -> None:
    """Hover targets: over each drawn point an invisible marker of its own with its text (a line's
    markers would share one text). Transparent, not absent: an SVG shape with a fill takes the hover."""
    for x, y, text in zip(xs, ys, texts):
        (point,) = ax.plot([x], [y], linestyle="none", marker="o", markersize=size, alpha=0, label="_hover")
        tip(point, text)


def _block_axis(ax, blocks: pd.DataFrame) -> None:
    """Block names on the x axis at their indices (as in the tables), where every model agrees on them."""
    names = blocks.groupby("index")["block"].agg(lambda s: sorted(set(s))) if "block" in blocks else None
    if names is not None and all(len(n) == 1 for n in names):
        # the index first: plans and their bit strings number the blocks, and a part refused as a block makes
        # index and module name part ways
        ax.set_xticks(list(names.index), [f"{i} {n[0]}" for i, n in names.items()], rotation=45, ha="right", fontsize=7)
        ax.set_xlabel("block")
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("block index")


@plain_text
def block_latency_figure(
    blocks: pd.DataFrame,
    plans: Mapping[str, Sequence[int]] | None = None,
    counterpart: str = "merged",
    annotations: Mapping[tuple[str, str, str], str] | None = None,
) -> Figure:
    """Block-wise latency from a `block_table`: per (device, model) a solid line of the original
    blocks and a dashed line of their replacements (ms, against the block, named on the axis):
    ``merged`` (paper Fig. 5) or ``flops_matched`` (the dense conv of equal MACs, paper Fig. 1);
    with ``merged``, each span the table holds as a bar over its blocks at its own latency;
    ``plans`` maps a plan name to its keep list (1 = activations kept), marked on the solid line at
    the blocks of those indices;
    ``annotations`` maps (device, model, block) -- as in the table's columns -- to a short note drawn
    at that block's original latency on that curve only (e.g. what `dsprof explain` found)."""
    if counterpart not in ("merged", "flops_matched"):
        raise UsageError(f"counterpart is 'merged' or 'flops_matched', got {counterpart!r}")
    dense = "merged" if counterpart == "merged" else "FLOPs-matched"
    fig = Figure(figsize=(8, 5.5), layout="constrained")
    ax = fig.subplots()
    colors = _colors()
    models = sorted(set(blocks["model"]))
    is_span = blocks["span"] != "" if "span" in blocks else pd.Series(False, index=blocks.index)
    spans, blocks = blocks[is_span], blocks[~is_span]
    for i, ((device, model), rows) in enumerate(blocks.groupby(["device", "model"], sort=True)):
        rows = rows.sort_values("index")
        x = rows["index"].to_numpy()
        color = colors[i % len(colors)]
        for column, style, what in (("original_ms", "-", "original"), (f"{counterpart}_ms", "--", dense)):
            name = f"{model} {what}" if len(models) > 1 else what  # one model: named in the title instead
            ax.plot(x, rows[column], style, marker=".", color=color, label=f"{name} ({device})")
            _points(ax, x, rows[column], [f"{b}, {what} ({device}): {v:.4g} ms" for b, v in zip(rows["block"], rows[column])])
        if counterpart == "merged":
            _span_bars(ax, spans[(spans["device"] == device) & (spans["model"] == model)], color, device)
        for j, (plan_name, keep) in enumerate((plans or {}).items()):
            kept = rows[rows["index"].isin([k for k, flag in enumerate(keep) if flag])]  # by block index, not row
            if len(kept):
                xk, y = kept["index"].to_numpy(), kept["original_ms"].to_numpy()
                ax.plot(xk, y, _PLAN_MARKERS[j % len(_PLAN_MARKERS)],
                        linestyle="none", color=color, markerfacecolor="none", markersize=9,
                        label=f"{plan_name}: activations kept" if i == 0 else "_same plan, another curve")
                _points(ax, xk, y, [f"{plan_name} keeps the activations of {b}" for b in kept["block"]], 11)
        for (note_device, note_model, block_name), note in (annotations or {}).items():
            hit = rows[rows["block"] == block_name]
            if note_device == device and note_model == model and len(hit):
                xy = (int(hit["index"].iloc[0]), float(hit["original_ms"].iloc[0]))
                ax.annotate(note, xy, xytext=(12, 8), textcoords="offset points", fontsize=7, color=color,
                            arrowprops={"arrowstyle": "->", "color": color, "linewidth": 0.8})
    _block_axis(ax, blocks)
    scale = _latency_scale(blocks, spans, counterpart)
    ax.set_yscale(scale)
    ax.set_ylabel("latency (ms, log scale: the spans run far above the blocks)" if scale == "log" else "latency (ms)")
    model_note = f"{models[0]}: " if len(models) == 1 else ""
    ax.set_title(f"{model_note}block-wise latency, original (solid) vs {dense} dense conv (dashed)", fontsize=10)
    ax.grid(alpha=0.3)
    fig.legend(fontsize=7, loc="outside lower center", ncol=2)
    return fig


#: Spans above this many times the blocks' highest latency would squash the blocks' lines (linear axis): log axis.
SPAN_SQUASH = 2.0


def _latency_scale(blocks: pd.DataFrame, spans: pd.DataFrame, counterpart: str) -> str:
    """``log`` where a span's latency exceeds `SPAN_SQUASH` times the highest of the blocks' lines (a linear axis
    would press the per-block lines into the bottom of the plot), else ``linear``."""
    if counterpart != "merged" or spans.empty or blocks.empty:
        return "linear"
    top = pd.concat([blocks["original_ms"], blocks[f"{counterpart}_ms"]]).max()
    return "log" if pd.notna(top) and top > 0 and spans["merged_ms"].max() > SPAN_SQUASH * top else "linear"


def _span_bars(ax, spans: pd.DataFrame, color: str, device: str) -> None:
    """Each span of a `block_table` (one device and model) as a bar from its first to its last block at its
    merged latency, with its hover text; one legend entry for them all."""
    first = True
    for row in spans.itertuples():
        if row.span == "?" or pd.isna(row.merged_ms):
            continue  # its blocks are not in the table: no position to draw it at
        ((start, stop),) = parse_spans(row.span)
        last = stop - 1
        ax.plot([start, last], [row.merged_ms, row.merged_ms], "-", color=color, linewidth=3, alpha=0.45,
                solid_capstyle="butt", label=f"span merged as one conv ({device})" if first else "_span")
        first = False
        _points(ax, [(start + last) / 2], [row.merged_ms],
                [f"span {row.span} ({row.block}), merged ({device}): {row.merged_ms:.4g} ms"])


@plain_text
def memory_figure(memory: pd.DataFrame, title: str = "Block-wise memory footprint (16 bits)") -> Figure:
    """Per block, weights and peak activation (KiB) before and after merging, from a frame with
    columns index, block, weight_bytes_before, weight_bytes_after, peak_activation_bytes_before,
    peak_activation_bytes_after and optionally span (see `dsprof.reports.memory_table`). A span's one convolution is
    drawn at its first block ("after" holds the whole span); the span's other blocks have no "after" bar of their
    own and say so ("in span 0-1") where the bar would be."""
    fig = Figure(figsize=(8, 6), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    x = memory["index"].to_numpy()
    width = 0.4
    spans = list(memory["span"]) if "span" in memory else [""] * len(memory)
    first = [bool(sp) and int(sp.split("-")[0]) == i for sp, i in zip(spans, x)]
    for ax, what in ((top, "weight"), (bottom, "peak_activation")):
        for shift, when in ((-width / 2, "before"), (width / 2, "after")):
            kib = memory[f"{what}_bytes_{when}"] / 1024
            bars = ax.bar(x + shift, kib, width, label=f"{when} merging")
            for bar, block, value, span, lead in zip(bars, memory["block"], kib, spans, first):
                text = f"{block}, {what.replace('_', ' ')} {when} merging: {value:.1f} KiB"
                if span and when == "after":
                    text += (f" (span {span} merged as one convolution, counted here)" if lead else
                             f" (in span {span}: its convolution is counted at block {span.split('-')[0]})")
                tip(bar, text)
        for xi, span, lead in zip(x, spans, first):
            if span and not lead:
                ax.annotate(f"in span {span}", (xi + width / 2, 0), xytext=(0, 3), textcoords="offset points",
                            rotation=90, ha="center", va="bottom", fontsize=6, color="grey")
        ax.set_ylabel(f"{what.replace('_', ' ')} (KiB)")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=7, loc="upper left")
    _block_axis(bottom, memory)
    top.set_title(title)
    return fig


def accuracy_scale(values: Iterable[float]) -> str:
    """'fraction' where every accuracy given is at most 1 (0.72), else 'percent' (72.0)."""
    finite = [v for v in values if pd.notna(v)]
    return "fraction" if finite and max(finite) <= 1.0 else "percent"


@plain_text
def accuracy_fps_figure(variants: pd.DataFrame, fps_columns: str | Sequence[str] | None = None) -> Figure:
    """Accuracy against FPS of the rows of a `variant_table` that have an accuracy: one series per
    device (``fps_columns``, default every ``DEVICE: FPS`` column). The accuracy axis says its scale
    (fraction or %), detected from the values."""
    if fps_columns is None:
        fps_columns = [c for c in variants.columns if str(c).endswith(": FPS")]
    elif isinstance(fps_columns, str):
        fps_columns = [fps_columns]
    scale = accuracy_scale(variants["accuracy"])
    fig = Figure(figsize=(6.5, 4.8), layout="constrained")
    ax = fig.subplots()
    for j, column in enumerate(fps_columns):
        rows = variants.dropna(subset=["accuracy", column])
        device = str(column)[: -len(": FPS")] if str(column).endswith(": FPS") else str(column)
        ax.plot(rows[column], rows["accuracy"], _PLAN_MARKERS[j % len(_PLAN_MARKERS)], label=device)
        _points(ax, rows[column], rows["accuracy"],
                [f"{m} ({device}): {f:.1f} FPS, accuracy {a:.4g}" for m, f, a in zip(rows["model"], rows[column], rows["accuracy"])])
        for _, row in rows.iterrows():
            ax.annotate(str(row["model"]), (row[column], row["accuracy"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("FPS (images per second)")
    ax.set_ylabel("accuracy (fraction)" if scale == "fraction" else "accuracy (%)")
    ax.set_title("Accuracy vs throughput")
    ax.grid(alpha=0.3)
    fig.legend(fontsize=7, loc="outside lower center")
    return fig


@plain_text
def prediction_figure(validation: pd.DataFrame) -> Figure:
    """Predicted against measured, from a `lut_validation_table`, with y = x and +-10 %: the speed-up over the
    original (with both intervals) where every model was timed beside the original, else the latency (ms); one colour
    and marker per device context (its ``device`` column), named in the legend."""
    speedup = "measured_speedup" in validation and validation["measured_speedup"].notna().all() and len(validation)
    x_col, y_col, unit = ("measured_speedup", "predicted_speedup", "x") if speedup else ("measured_ms", "predicted_ms", " ms")
    fig = Figure(figsize=(5.5, 5.5), layout="constrained")
    ax = fig.subplots()
    lo = 0.9 * min(validation[x_col].min(), validation[y_col].min())
    hi = 1.1 * max(validation[x_col].max(), validation[y_col].max())
    ax.fill_between([lo, hi], [0.9 * lo, 0.9 * hi], [1.1 * lo, 1.1 * hi], alpha=0.2, label="+-10 %")
    ax.plot([lo, hi], [lo, hi], "k-", linewidth=0.8, label="predicted = measured")
    if speedup:  # both 95 % intervals
        ax.errorbar(validation[x_col], validation[y_col], linestyle="none", color="grey", linewidth=0.8,
                    xerr=[validation[x_col] - validation["measured_low"], validation["measured_high"] - validation[x_col]],
                    yerr=[validation[y_col] - validation["predicted_low"], validation["predicted_high"] - validation[y_col]])
    colors = _colors()
    groups = validation.groupby("device", sort=True) if "device" in validation else [("models", validation)]
    for j, (device, rows) in enumerate(groups):
        ax.plot(rows[x_col], rows[y_col], _PLAN_MARKERS[j % len(_PLAN_MARKERS)], color=colors[(j + 1) % len(colors)],
                label=str(device))
        _points(ax, rows[x_col], rows[y_col],
                [f"{m}: measured {me:.4g}{unit}, predicted {p:.4g}{unit} ({percent(p / me - 1)})"
                 for m, me, p in zip(rows["model"], rows[x_col], rows[y_col])])
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    what = "speed-up over the original (paired)" if speedup else "latency (ms)"
    ax.set_xlabel(f"measured {what}")
    ax.set_ylabel(f"predicted {what.replace(' (paired)', '')}")
    ax.set_title("LUT prediction vs measurement")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    return fig


@plain_text
def front_figure(front: pd.DataFrame, presets: pd.DataFrame, measured: pd.DataFrame,
                 title: str = "Planner's front", joint: pd.DataFrame | None = None,
                 fastest_k: int | None = None) -> Figure:
    """The planner's front: the predicted speed-up over the original (with its 95 % interval) of the best plan for
    each k (blocks that keep their activations); the paper's presets at their predicted speed-up; every measured
    plan at its measured, paired speed-up with its interval. ``front``: columns k, speedup, speedup_low,
    speedup_high, latency_ms, keep, spans; ``presets``: name, k, speedup, gap; ``measured``: name, k, speedup,
    speedup_low, speedup_high, measured_ms, device (`dsprof.reports.front_tables`); ``joint``: the plan for several
    contexts (`dsprof plan --for`) in this context, k, speedup, speedup_low, speedup_high, keep, spans
    (`dsprof.reports.front.joint_table`), drawn at its predicted speed-up for each k; ``fastest_k``: the k of the
    fastest plan, marked where fewer blocks keeping their activations buy nothing more (`dsprof.planning.Front.fastest_k`)."""
    fig = Figure(figsize=(9, 4.4), layout="constrained")
    ax = fig.subplots()
    colors = _colors()
    front = front.sort_values("k")
    high = front["speedup_high"].where(front["speedup_high"] < float("inf"))  # unbounded (a latency bound at 0): not drawn
    ax.fill_between(front["k"], front["speedup_low"], high, alpha=0.2, color=colors[0], label="planner: 95 % interval")
    ax.plot(front["k"], front["speedup"], "-o", markersize=4, color=colors[0], label="planner's plan for each k (predicted)")
    _points(ax, front["k"], front["speedup"],
            [f"k={k}: predicted {s:.2f}x [{lo:.2f}, {hi:.2f}], {v:.4g} ms; keep {keep}; spans {spans}"
             for k, s, lo, hi, v, keep, spans in zip(front["k"], front["speedup"], front["speedup_low"],
                                                     front["speedup_high"], front["latency_ms"], front["keep"], front["spans"])])
    ax.axhline(1.0, color="grey", linestyle=":", linewidth=1, label="the original (1x)")
    if fastest_k is not None and len(front) and fastest_k > front["k"].min():
        ax.axvline(fastest_k, color=colors[0], linestyle="--", linewidth=1,
                   label=f"fastest plan: k = {fastest_k} (below it, no faster)")
    if joint is not None and len(joint):
        joint = joint.sort_values("k")
        ax.plot(joint["k"], joint["speedup"], "--x", markersize=6, color=colors[4 % len(colors)],
                label="one plan for all contexts, predicted here")
        _points(ax, joint["k"], joint["speedup"],
                [f"one plan for all contexts, k={k}: predicted {s:.2f}x here [{lo:.2f}, {hi:.2f}]; keep {keep}; "
                 f"spans {spans}" for k, s, lo, hi, keep, spans in zip(joint["k"], joint["speedup"],
                                                                       joint["speedup_low"], joint["speedup_high"],
                                                                       joint["keep"], joint["spans"])])
    if len(presets):
        ax.plot(presets["k"], presets["speedup"], "s", markerfacecolor="none", color=colors[1],
                label="paper's presets (predicted)")
        _points(ax, presets["k"], presets["speedup"],
                [f"{n} (k={k}): predicted {s:.2f}x, {percent(g)} latency against the planner's plan" for n, k, s, g in
                 zip(presets["name"], presets["k"], presets["speedup"], presets["gap"])])
        # names below their marker, one line each where several presets share a k
        for rank, (_, row) in zip(presets.groupby("k").cumcount(), presets.iterrows()):
            ax.annotate(str(row["name"]), (row["k"], row["speedup"]), fontsize=7, xytext=(4, -10 - 8 * rank),
                        textcoords="offset points")
    plans = measured[measured["name"] != "original"].dropna(subset=["speedup"]) if len(measured) else measured
    for j, (device, rows) in enumerate(plans.groupby("device", sort=True) if len(plans) else []):
        color = colors[(j + 2) % len(colors)]
        # plans measured at one k side by side (0.2 apart), so that their intervals do not hide each other
        rank, count = rows.groupby("k").cumcount(), rows.groupby("k")["k"].transform("size")
        x = rows["k"] + 0.2 * (rank - (count - 1) / 2)
        ax.errorbar(x, rows["speedup"], yerr=[rows["speedup"] - rows["speedup_low"], rows["speedup_high"] - rows["speedup"]],
                    fmt="D", color=color, capsize=3, label=f"measured, paired ({device})")
        _points(ax, x, rows["speedup"],
                [f"{n} (k={k}), measured on {device}: {s:.2f}x [{lo:.2f}, {hi:.2f}], {v:.4g} ms" for n, k, s, lo, hi, v in
                 zip(rows["name"], rows["k"], rows["speedup"], rows["speedup_low"], rows["speedup_high"], rows["measured_ms"])])
        for xi, r, (_, row) in zip(x, rank, rows.iterrows()):
            ax.annotate(str(row["name"]), (xi, row["speedup"]), fontsize=7, xytext=(6, 6 + 8 * r), textcoords="offset points",
                        color=color)
    return k_axes(fig, ax, title, "speed-up over the original (x)")


def k_axes(fig: Figure, ax, title: str, ylabel: str) -> Figure:
    """The axes of a figure against k (blocks that keep their activations): integer ticks, the labels, the title,
    a light grid, the legend below; returns ``fig``."""
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("k (blocks that keep their activations)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    fig.legend(fontsize=7, loc="outside lower center", ncol=3)
    return fig


def close(figures: Iterable[Figure]) -> None:
    """Free the figures' artists now (they are not registered with pyplot, so nothing else holds them)."""
    for fig in figures:
        fig.clear()
