"""Latency lookup tables: build from measurement files, load, look up, predict (issue #5).

The names below are imported on first use (pandas and PyTorch only then)."""

from .._lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(("build_lut", "measurement_files"), ".build"),
    **dict.fromkeys(("CalibrationFallbackWarning", "MethodFallbackWarning", "Prediction", "predict_latency",
                      "predict_plan", "predict_ratio", "prices_of", "with_probe"), ".predict"),
    **dict.fromkeys(("Price", "Pricer"), ".pricer"),
    **dict.fromkeys(("MergeChoice", "Pricing"), ".choice"),
    **dict.fromkeys(("Estimate", "lut_probe", "plan_bounds", "probe_ratio", "ratio_bounds"), ".interval"),
    "DeviceContext": "..device_context",
    **dict.fromkeys(("COLUMNS", "SCHEMA", "model_label"), ".schema"),
    **dict.fromkeys(("LUT", "LUTEntry", "LUTError", "LUTMissError", "LUTMissWarning"), ".table"),
    **dict.fromkeys(("PredictionAccuracy", "accuracy_table", "prediction_accuracy"), ".validate"),
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
