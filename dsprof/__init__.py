"""dsprof: DepthShrinker on your own hardware — profile, search, merge, report.

The Python API (`dsprof.api`, docs/api.md) is here too: ``dsprof.measure``, ``dsprof.build_lut``, ``dsprof.plan``,
``dsprof.predict``, ``dsprof.merge``, ``dsprof.report`` and ``dsprof.importance`` (``dsprof.plan`` and
``dsprof.merge`` are also the planner's and the merge's packages: calling them calls the API function).
"""

from ._lazy import lazy_exports
from .device_context import DeviceContext
from .errors import DsprofError

__version__ = "0.1.0"

__all__ = [
    "BlockSpec",
    "DeviceContext",
    "DsprofError",
    "ModelRef",
    "__version__",
    "build_lut",
    "count_macs",
    "count_params",
    "export",
    "find_blocks",
    "get_model",
    "importance",
    "list_models",
    "measure",
    "measure_few",
    "merge",
    "plan",
    "plan_front",
    "predict",
    "report",
    "summarize_blocks",
]

# The model API imports PyTorch: imported on first use (`dsprof --help` stays quick).
_MODEL_API = ("BlockSpec", "ModelRef", "count_macs", "count_params", "find_blocks", "get_model", "list_models",
              "summarize_blocks")
# What the commands run (`dsprof.api`); `plan` and `merge` are packages that call theirs (`dsprof._lazy`).
_API = ("build_lut", "export", "importance", "measure", "measure_few", "predict", "report")
__getattr__, __dir__ = lazy_exports(__name__, {**{name: ".models" for name in _MODEL_API},
                                               **{name: ".api" for name in _API}, "plan_front": ".plan"})
