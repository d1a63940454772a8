"""Tables and plots of measurements, LUTs and merged models (paper Tab. 1-4, Fig. 1, 5, 6, 7)."""

from .plots import accuracy_fps_figure, block_latency_figure, memory_figure, prediction_figure
from .report import Report, memory_table, validation_rows, write_report
from .tables import (
    block_table,
    device_labels,
    explain_table,
    latest_records,
    lut_validation_table,
    model_title,
    profiling_table,
    render,
    variant_table,
)

__all__ = [
    "Report",
    "accuracy_fps_figure",
    "block_latency_figure",
    "block_table",
    "device_labels",
    "explain_table",
    "latest_records",
    "lut_validation_table",
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
