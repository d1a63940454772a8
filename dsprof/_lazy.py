"""Lazy re-exports for package ``__init__`` modules, so that ``import dsprof`` and the command line's
``--help`` do not import PyTorch, timm or pandas (PEP 562 module ``__getattr__``); and packages that share their name
with an API function and call it (``dsprof.plan(...)``, ``dsprof.merge(...)``: `calls`)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any, Callable

__all__ = ["calls", "lazy_exports"]


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for ``package`` that import ``exports`` (public name ->
    submodule, e.g. ``{"find_blocks": ".blocks"}``) on first access and keep the value on the package.
    A subpackage's name imports it, as an eager ``__init__`` that imported it would have provided it."""

    def __getattr__(name: str) -> object:
        if name in exports:
            value = getattr(importlib.import_module(exports[name], package), name)
        elif not name.startswith("_") and importlib.util.find_spec(f"{package}.{name}") is not None:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    __getattr__.exports = dict(exports)  # type: ignore[attr-defined]  # what tests/test_layers.py resolves
    return __getattr__, __dir__


def calls(package: str, target: str) -> None:
    """Make the package ``package`` callable: calling it calls ``target`` (``"module:function"``, imported on the
    first call), so that ``dsprof.plan(...)`` is `dsprof.api.plan` while ``dsprof.plan.Plan`` stays the planner's."""
    module_name, function = target.split(":")

    class CallablePackage(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return getattr(importlib.import_module(module_name), function)(*args, **kwargs)

    CallablePackage.__call__.__doc__ = f"Call `{module_name}.{function}` (see its docstring)."
    sys.modules[package].__class__ = CallablePackage
