"""Timing of blocks, dense replacements and whole models on CPU, CUDA, ONNX Runtime and TFLite (issue #3).

``measure(...)`` times (`dsprof.measure` runs its `MeasureSession`, with the models plans merge and the calibration). The parts: `workloads` (what is timed),
`backends` (how it runs), `timing` (its settings and timers over `timing_loop`: warm-up, interleaved rounds,
adaptive stopping, in one standard-library file that export bundles carry), `fingerprint` (the environment),
`summary` (the closing table), `insitu` (blocks timed in situ: inside the
whole model, issue #14), `explain` (one block against its operators, issue #14) and `probe` (the drift
probe, and timing it now). What combines them with LUTs, plans and merges is `dsprof.workflows`.

The measurement file (`dsprof.records.measurement`) and its statistics (`dsprof.records.stats`) live in
`dsprof.records`, below every engine, re-exported here; they import no PyTorch, so the LUT reads measurement files
without loading the timing code. The names below are imported on first use.
"""

from .._lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(("DTYPES", "BackendSettings"), ".backends"),
    "in_situ_workloads": ".insitu",
    **dict.fromkeys(("BlockExplanation", "explain_block", "format_explanation", "load_explanation"), ".explain"),
    **dict.fromkeys(("device_state", "environment", "environment_id"), ".fingerprint"),
    **dict.fromkeys(("SCHEMA", "Measurement", "MeasurementFileError", "MeasurementWriter", "read_measurements",
                     "speedups"), "..records.measurement"),
    **dict.fromkeys(("DEFAULT_CPU_THREADS", "MeasureRequest", "MeasureResult", "MeasureSession", "contention_message",
                     "default_batch", "measure", "measure_request", "measurement_path", "open_session"), ".runner"),
    **dict.fromkeys(("NOISE_THRESHOLD", "Estimate", "SampleStats", "Speedup", "median_ci", "median_relative_halfwidth",
                     "paired_speedup", "summarize"), "..records.stats"),
    **dict.fromkeys(("format_summary", "summary_table"), ".summary"),
    **dict.fromkeys(("CpuTimer", "CudaEventTimer", "TimingConfig", "TimingResult", "time_interleaved"), ".timing"),
    **dict.fromkeys(("BLOCK_VARIANTS", "MODEL_VARIANTS", "Workload", "block_workloads", "dense_conv",
                     "dense_counterpart_model", "deployed_linear", "flops_matched_channels", "model_workload",
                     "model_workloads", "stem_head_workloads"), ".workloads"),
    "probe_now": ".probe",
    "Workloads": ".selection",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
