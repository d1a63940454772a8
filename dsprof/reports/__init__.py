"""Tables and plots of measurements, LUTs and merged models (paper Tab. 1-4, Fig. 1, 5, 6, 7), the pages that show
them (`page`) and the answer they open with (`summary`). The report that puts them together (``index.md`` and a
self-contained ``report.html``) is `dsprof.report` (`dsprof.workflows.report`).

The names below are imported on first use."""

from .._lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(('front_tables', 'load_front'), ".front"),
    **dict.fromkeys(('accuracy_fps_figure', 'block_latency_figure', 'front_figure', 'memory_figure', 'prediction_figure'), ".plots"),
    **dict.fromkeys(('memory_table', 'validation_rows'), ".plans"),
    **dict.fromkeys(('Answer', 'front_answer', 'measured_answer'), ".summary"),
    **dict.fromkeys(('figure_svg',), ".svg"),
    **dict.fromkeys(('block_table', 'device_labels', 'display_units', 'explain_table', 'fingerprint_table', 'latest_records', 'lut_validation_table', 'model_title', 'profiling_table', 'read_accuracies', 'render', 'variant_table'), ".tables"),
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
