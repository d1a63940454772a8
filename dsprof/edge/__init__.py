"""Edge devices that cannot host dsprof (issue #16): export a bundle, time it there, import the results.

`export_bundle` writes the workloads `dsprof measure` would time as model files (ONNX at an old opset,
TFLite, TorchScript), a manifest and a runner (`runner`: one file, standard library + NumPy + the runtime,
Python >= 3.6; it also drives TFLite's ``benchmark_model`` on a phone over adb and parses its output).
`import_results` turns the runner's JSON Lines into ordinary measurement records.
"""

from .export import EDGE_OPSET, FORMATS, ExportResult, export_bundle
from .importer import ImportResult, import_results
from .manifest import BUNDLE_FORMAT, EdgeError, read_manifest
from .runner import (
    BENCHMARK_MODEL_FLAGS,
    RESULTS_FORMAT,
    BenchmarkModelError,
    benchmark_model_args,
    check_benchmark_model_output,
    parse_benchmark_model_output,
)

__all__ = [
    "BENCHMARK_MODEL_FLAGS",
    "BUNDLE_FORMAT",
    "EDGE_OPSET",
    "FORMATS",
    "RESULTS_FORMAT",
    "RUNTIMES",
    "BenchmarkModelError",
    "EdgeError",
    "ExportResult",
    "ImportResult",
    "benchmark_model_args",
    "check_benchmark_model_output",
    "export_bundle",
    "import_results",
    "parse_benchmark_model_output",
    "read_manifest",
]
