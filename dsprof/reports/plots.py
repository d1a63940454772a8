"""The paper's figures; each function returns a matplotlib Figure (the caller saves or shows it).

* `block_latency_figure` (paper Fig. 1 and Fig. 5): latency of each original block (solid) and of
  its merged dense replacement (dashed), one line pair per model and device, with a marker on
  every block whose activations a plan keeps.
* `memory_figure` (Fig. 6): per block, weights and peak activation before and after merging.
* `accuracy_fps_figure` (Fig. 7): accuracy against FPS.
* `prediction_figure`: predicted against measured latency with the +-10 % band.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import matplotlib
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..errors import UsageError

__all__ = ["accuracy_fps_figure", "block_latency_figure", "memory_figure", "prediction_figure"]

_PLAN_MARKERS = "o^sDvP*X"

# Figures are made with `matplotlib.figure.Figure` directly, not through pyplot: no backend is chosen
# and no global figure state is touched (a notebook keeps its backend; `fig.savefig` works headless).


def block_latency_figure(
    blocks: pd.DataFrame,
    plans: Mapping[str, Sequence[int]] | None = None,
    counterpart: str = "merged",
    annotations: Mapping[str, str] | None = None,
) -> Figure:
    """Block-wise latency from a `block_table`: per (device, model) a solid line of the original
    blocks and a dashed line of their replacements (ms, against the block's position): ``merged``
    (paper Fig. 5) or ``flops_matched`` (the dense conv of equal MACs, paper Fig. 1);
    ``plans`` maps a plan name to its keep list (1 = activations kept), marked on the solid line;
    ``annotations`` maps a block name (``features.2``) to a short note drawn at that block's
    original latency (e.g. what `dsprof explain` found)."""
    if counterpart not in ("merged", "flops_matched"):
        raise UsageError(f"counterpart is 'merged' or 'flops_matched', got {counterpart!r}")
    dense = "merged" if counterpart == "merged" else "FLOPs-matched"
    fig = Figure(figsize=(8, 4.5))
    ax = fig.subplots()
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, ((device, model), rows) in enumerate(blocks.groupby(["device", "model"], sort=True)):
        rows = rows.sort_values("index")
        x = rows["index"].to_numpy() + 1
        color = colors[i % len(colors)]
        ax.plot(x, rows["original_ms"], "-", color=color, label=f"{model} original ({device})")
        ax.plot(x, rows[f"{counterpart}_ms"], "--", color=color, label=f"{model} {dense} ({device})")
        for j, (plan_name, keep) in enumerate((plans or {}).items()):
            kept = [k for k, flag in zip(range(len(keep)), keep) if flag and k < len(rows)]
            if kept:
                ax.plot(x[kept], rows["original_ms"].to_numpy()[kept], _PLAN_MARKERS[j % len(_PLAN_MARKERS)],
                        linestyle="none", color=color, markerfacecolor="none", label=f"{plan_name}: activations kept")
        for block_name, note in (annotations or {}).items():
            hit = rows[rows["block"] == block_name] if "block" in rows else rows.iloc[0:0]
            if len(hit):
                xy = (int(hit["index"].iloc[0]) + 1, float(hit["original_ms"].iloc[0]))
                ax.annotate(note, xy, xytext=(12, 8), textcoords="offset points", fontsize=7, color=color,
                            arrowprops={"arrowstyle": "->", "color": color, "linewidth": 0.8})
    ax.set_xlabel("block")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"Block-wise latency: original (solid) vs {dense} dense conv (dashed)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def memory_figure(memory: pd.DataFrame, title: str = "Block-wise memory footprint (16 bits)") -> Figure:
    """Per block, weights and peak activation (KiB) before and after merging, from a frame with
    columns index, weight_bytes_before, weight_bytes_after, peak_activation_bytes_before,
    peak_activation_bytes_after (see `dsprof.reports.memory_table`)."""
    fig = Figure(figsize=(8, 5.5))
    top, bottom = fig.subplots(2, 1, sharex=True)
    x = memory["index"].to_numpy() + 1
    width = 0.4
    for ax, what in ((top, "weight"), (bottom, "peak_activation")):
        ax.bar(x - width / 2, memory[f"{what}_bytes_before"] / 1024, width, label="before merging")
        ax.bar(x + width / 2, memory[f"{what}_bytes_after"] / 1024, width, label="after merging")
        ax.set_ylabel(f"{what.replace('_', ' ')} (KiB)")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=7)
    bottom.set_xlabel("block")
    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    top.set_title(title)
    fig.tight_layout()
    return fig


def accuracy_fps_figure(variants: pd.DataFrame, fps_column: str) -> Figure:
    """Accuracy (%) against FPS of the rows of a `variant_table` that have an accuracy."""
    rows = variants.dropna(subset=["accuracy", fps_column])
    fig = Figure(figsize=(6, 4.5))
    ax = fig.subplots()
    ax.plot(rows[fps_column], rows["accuracy"], "o", label=fps_column.split(":")[0])
    for _, row in rows.iterrows():
        ax.annotate(str(row["model"]), (row[fps_column], row["accuracy"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("FPS")
    ax.set_ylabel("accuracy (%)")
    ax.set_title("Accuracy vs throughput")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def prediction_figure(validation: pd.DataFrame) -> Figure:
    """Predicted against measured latency (ms) from a `lut_validation_table`, with y = x and +-10 %."""
    fig = Figure(figsize=(5, 5))
    ax = fig.subplots()
    lo = 0.9 * min(validation["measured_ms"].min(), validation["predicted_ms"].min())
    hi = 1.1 * max(validation["measured_ms"].max(), validation["predicted_ms"].max())
    ax.fill_between([lo, hi], [0.9 * lo, 0.9 * hi], [1.1 * lo, 1.1 * hi], alpha=0.2, label="+-10 %")
    ax.plot([lo, hi], [lo, hi], "k-", linewidth=0.8, label="predicted = measured")
    ax.plot(validation["measured_ms"], validation["predicted_ms"], "o", label="models")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured latency (ms)")
    ax.set_ylabel("predicted latency (ms)")
    ax.set_title("LUT prediction vs measurement")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def close(figures: Iterable[Figure]) -> None:
    """Free the figures' artists now (they are not registered with pyplot, so nothing else holds them)."""
    for fig in figures:
        fig.clear()
