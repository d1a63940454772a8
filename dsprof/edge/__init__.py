"""Edge devices that cannot host dsprof (issue #16): export a bundle, time it there, import the results.

`export_bundle` writes the workloads `dsprof measure` would time as model files (ONNX at an old opset,
TFLite, TorchScript), a manifest and a runner (`runner`: one file, standard library + NumPy + the runtime,
Python >= 3.6; it also drives TFLite's ``benchmark_model`` on a phone over adb and parses its output).
`import_results` turns the runner's JSON Lines into ordinary measurement records.
"""

from .._lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(('EDGE_OPSET', 'ExportResult', 'FORMATS', 'export_bundle'), ".export"),
    **dict.fromkeys(('ImportResult', 'import_results'), ".importer"),
    'RemoteHost': ".host",
    **dict.fromkeys(('BUNDLE_FORMAT', 'EdgeError', 'read_manifest'), ".manifest"),
    **dict.fromkeys(('BENCHMARK_MODEL_FLAGS', 'BenchmarkModelError', 'RESULTS_FORMAT', 'benchmark_model_args', 'check_benchmark_model_output', 'parse_benchmark_model_output'), ".runner"),
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
