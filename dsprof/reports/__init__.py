"""Tables and plots of measurements, LUTs and merged models (paper Tab. 1-4, Fig. 1, 5, 6, 7), and
the report (`write_report`: ``index.md`` and a self-contained ``report.html``)."""

from .front import front_tables, load_front
from .plots import accuracy_fps_figure, block_latency_figure, front_figure, memory_figure, prediction_figure
from .report import Report, fingerprint_table, memory_table, validation_rows, write_report
from .summary import Answer, front_answer, measured_answer
from .svg import figure_svg
from .tables import (
    block_table,
    device_labels,
    display_units,
    explain_table,
    latest_records,
    lut_validation_table,
    model_title,
    profiling_table,
    render,
    variant_table,
)

__all__ = [
    "Answer",
    "Report",
    "accuracy_fps_figure",
    "block_latency_figure",
    "block_table",
    "device_labels",
    "display_units",
    "explain_table",
    "figure_svg",
    "fingerprint_table",
    "front_answer",
    "front_figure",
    "front_tables",
    "latest_records",
    "load_front",
    "lut_validation_table",
    "measured_answer",
    "memory_figure",
    "memory_table",
    "model_title",
    "prediction_figure",
    "profiling_table",
    "render",
    "validation_rows",
    "variant_table",
    "write_report",
]
