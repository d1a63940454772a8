"""dsprof: DepthShrinker on your own hardware — profile, search, merge, report."""

from .device_context import DeviceContext
from .errors import DsprofError
from .models import BlockSpec, count_macs, count_params, find_blocks, get_model, list_models, summarize_blocks

__version__ = "0.1.0"


def __getattr__(name: str):
    """`plan_front` and `plan_to_file` (`dsprof plan`), imported when first used: they pull in pandas."""
    if name in ("plan_front", "plan_to_file"):
        from . import plan

        return getattr(plan, name)
    raise AttributeError(f"module 'dsprof' has no attribute {name!r}")

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
