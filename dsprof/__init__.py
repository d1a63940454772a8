"""dsprof: DepthShrinker on your own hardware — profile, search, merge, report."""

from ._lazy import lazy_exports
from .device_context import DeviceContext
from .errors import DsprofError

__version__ = "0.1.0"

__all__ = [
    "BlockSpec",
    "DeviceContext",
    "DsprofError",
    "__version__",
    "count_macs",
    "count_params",
    "find_blocks",
    "get_model",
    "list_models",
    "plan_front",
    "plan_to_file",
    "summarize_blocks",
]

# The model API imports PyTorch: imported on first use (`dsprof --help` stays quick).
_MODEL_API = ("BlockSpec", "count_macs", "count_params", "find_blocks", "get_model", "list_models", "summarize_blocks")
# `dsprof plan` as Python (pandas and PyTorch on first use too).
_PLAN_API = ("plan_front", "plan_to_file")
__getattr__, __dir__ = lazy_exports(__name__, {**{name: ".models" for name in _MODEL_API},
                                               **{name: ".plan" for name in _PLAN_API}})
