"""dsprof: DepthShrinker on your own hardware — profile, search, merge, report.

The Python API (`dsprof.api`, docs/api.md) is here too: ``dsprof.measure``, ``dsprof.build_lut``, ``dsprof.plan``,
``dsprof.predict``, ``dsprof.merge``, ``dsprof.report`` and ``dsprof.importance``: plain functions. The engines
are the packages below (`dsprof.planning`, `dsprof.merging`, ...); the records every engine reads are `dsprof.records`.
"""

from . import _moved
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
# What the commands run (`dsprof.api`).
_API = ("build_lut", "export", "importance", "measure", "measure_few", "merge", "plan", "predict", "report")
__getattr__, __dir__ = lazy_exports(__name__, {**{name: ".models" for name in _MODEL_API},
                                               **{name: ".api" for name in _API}, "plan_front": ".planning"})
_moved.install()  # the old homes of moved names (`dsprof.merge.Plan`, ...), for one release
