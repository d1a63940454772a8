"""Latency lookup tables: build from measurement files, load, look up, predict (issue #5)."""

from .build import build_lut, measurement_files
from .drift import probe_now, with_probe
from .predict import MethodFallbackWarning, Prediction, predict_latency
from ..device_context import DeviceContext
from .schema import COLUMNS, SCHEMA, model_label
from .table import LUT, LUTEntry, LUTError, LUTMissError, LUTMissWarning
from .validate import PredictionAccuracy, accuracy_table, prediction_accuracy

__all__ = [
    "COLUMNS",
    "LUT",
    "SCHEMA",
    "DeviceContext",
    "LUTEntry",
    "LUTError",
    "LUTMissError",
    "LUTMissWarning",
    "MethodFallbackWarning",
    "Prediction",
    "PredictionAccuracy",
    "accuracy_table",
    "build_lut",
    "measurement_files",
    "model_label",
    "predict_latency",
    "prediction_accuracy",
    "probe_now",
    "with_probe",
]
