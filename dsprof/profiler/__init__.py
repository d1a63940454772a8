"""Timing of blocks, dense replacements and whole models on CPU, CUDA, ONNX Runtime and TFLite (issue #3).

``measure(...)`` is what ``dsprof measure`` runs. The parts: `workloads` (what is timed),
`backends` (how it runs), `timing` (warm-up, interleaved rounds, adaptive stopping), `stats`
(statistics of raw samples, paired speed-ups), `fingerprint` (the environment), `records` (the
JSON Lines measurement file), `summary` (the closing table), `context` (blocks timed inside the
whole model, issue #14) and `explain` (one block against its operators, issue #14).
"""

from .backends import BACKENDS, DTYPES, BackendSettings
from .context import CONTEXT_VARIANTS, context_workloads
from .explain import BlockExplanation, explain_block, format_explanation, load_explanation
from .fingerprint import device_state, environment, environment_id
from .records import SCHEMA, Measurement, MeasurementFileError, MeasurementWriter, read_measurements, speedups
from .runner import (
    DEFAULT_CPU_THREADS,
    MeasureRequest,
    MeasureResult,
    contention_message,
    default_batch,
    measure,
    measure_request,
    measurement_path,
)
from .stats import NOISE_THRESHOLD, SampleStats, Speedup, median_ci, median_relative_halfwidth, paired_speedup, summarize
from .summary import format_summary, summary_table
from .timing import CpuTimer, CudaEventTimer, TimingConfig, TimingResult, time_interleaved
from .workloads import (
    BLOCK_VARIANTS,
    MODEL_VARIANTS,
    Workload,
    block_workloads,
    dense_conv,
    dense_counterpart_model,
    deployed_linear,
    flops_matched_channels,
    model_workload,
    model_workloads,
    stem_head_workloads,
)

__all__ = [
    "BACKENDS",
    "BLOCK_VARIANTS",
    "CONTEXT_VARIANTS",
    "DTYPES",
    "MODEL_VARIANTS",
    "MeasureRequest",
    "NOISE_THRESHOLD",
    "SCHEMA",
    "BackendSettings",
    "BlockExplanation",
    "CpuTimer",
    "DEFAULT_CPU_THREADS",
    "CudaEventTimer",
    "MeasureResult",
    "Measurement",
    "MeasurementFileError",
    "MeasurementWriter",
    "SampleStats",
    "Speedup",
    "TimingConfig",
    "TimingResult",
    "Workload",
    "block_workloads",
    "context_workloads",
    "contention_message",
    "default_batch",
    "dense_conv",
    "dense_counterpart_model",
    "deployed_linear",
    "device_state",
    "environment",
    "environment_id",
    "explain_block",
    "flops_matched_channels",
    "format_explanation",
    "format_summary",
    "load_explanation",
    "measure",
    "measure_request",
    "measurement_path",
    "median_ci",
    "median_relative_halfwidth",
    "model_workload",
    "model_workloads",
    "stem_head_workloads",
    "paired_speedup",
    "read_measurements",
    "speedups",
    "summarize",
    "summary_table",
    "time_interleaved",
]
