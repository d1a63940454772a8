"""dsprof: DepthShrinker on your own hardware — profile, search, merge, report."""

from .device_context import DeviceContext
from .errors import DsprofError
from .models import BlockSpec, count_macs, count_params, find_blocks, get_model, list_models, summarize_blocks

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
    "summarize_blocks",
]
