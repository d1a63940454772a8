"""The workflows a user runs, one module each, above the engines they combine: `measure` (timing, with the models
that plans merge and the calibration planned from the run), `few` (a new context from a few measurements),
`calibrate`, `check` (a plan's merged model timed against the original, paired), `plan` (the front and the files),
`predict` (with the paired check), `merge`, `report`, `importance`. `dsprof.api` offers the documented functions;
the command line (`dsprof.cli`) only wraps them.

The names below are imported on first use.
"""

from .._lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(("Exported", "Measured", "export", "measure", "plan_models"), ".measure"),
    **dict.fromkeys(("FewResult", "measure_few"), ".few"),
    **dict.fromkeys(("PairedCheck", "check_line", "measure_planned", "measure_planned_run", "paired_check",
                     "planned_name", "probe_now"), ".check"),
    **dict.fromkeys(("PlannedContexts", "Planned", "load_importance", "plan", "plan_contexts_to_file",
                     "plan_to_file"), ".plan"),
    **dict.fromkeys(("Checked", "Predicted", "predict"), ".predict"),
    **dict.fromkeys(("TieBreak", "TieBroken", "break_tie"), ".tiebreak"),
    **dict.fromkeys(("MergeOutcome", "checkpoint_facts", "format_cost_table", "merge"), ".merge"),
    **dict.fromkeys(("Report", "fingerprint_table", "memory_table", "read_accuracies", "report", "validation_rows"),
                    ".report"),
    **dict.fromkeys(("Importance", "importance"), ".importance"),
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
