"""Lazy re-exports for package ``__init__`` modules, so that ``import dsprof`` and the command line's
``--help`` do not import PyTorch, timm or pandas (PEP 562 module ``__getattr__``)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Callable

__all__ = ["lazy_exports"]


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
