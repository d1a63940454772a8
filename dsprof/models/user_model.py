"""A user's own model from a Python file (``path.py:factory``), without editing dsprof.

`load_model_file` imports the file by its path, calls the factory and checks that it returns an
``nn.Module``. `register_model_file` puts the factory in the model registry under the label
``file:<stem>:<factory>``, so that everything that takes a model name (measure, search, merge,
plans, records) takes the user's model too; ``dsprof ... --model-file path.py:factory`` does that.

The factory is called with no arguments, plus ``resolution=`` (input height and width in pixels)
and ``num_classes=`` when its signature has those parameters and a value is asked for.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType
from typing import Callable

from torch import nn

from ..errors import ModelFileError  # noqa: F401  (defined once, in dsprof.errors)
from .registry import LIBRARIES, MODEL_FILE_FORM, list_models, model_file_parts, register_model
from ..io import read_text

__all__ = ["ModelFileError", "load_model_file", "model_file_label", "register_model_file"]

# The resolution a user model gets when its factory has no ``resolution`` default (ImageNet's).
_DEFAULT_RESOLUTION = 224
# label -> resolved file path, for the models `register_model_file` registered in this process.
_REGISTERED: dict[str, Path] = {}


def _split(spec: str) -> tuple[Path, str]:
    parts = model_file_parts(spec)
    if parts is None:
        raise ModelFileError(f"a model file takes the form {MODEL_FILE_FORM}, got {spec!r}{_library_meant(spec)}")
    return Path(parts[0]), parts[1]


def _library_meant(spec: str) -> str:
    """Where ``spec`` holds a library's name after a prefix (``zoo:timm:resnet14t``, as the benchmarks label their
    models): the library model it likely means, as a model name takes it; else ""."""
    pieces = str(spec).split(":")
    for library in pieces[1:-1]:
        if library in LIBRARIES and pieces[-1].isidentifier():
            return f"; a {library} model is named {library}:NAME (here {library}:{pieces[-1]})"
    return ""


def model_file_label(spec: str) -> str:
    """The name a model from ``path.py:factory`` has in records, plans and files: ``file:<stem>:<factory>``."""
    path, factory = _split(spec)
    return f"file:{path.stem}:{factory}"


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise ModelFileError(f"model file {path} does not exist; give the path of a .py file that defines the factory")

    read_text(path, "Python file", "give the .py file that defines the factory", error=ModelFileError)  # its bytes
    module_name = f"dsprof_user_model_{path.stem}_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ModelFileError(f"cannot import {path} as Python; give a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses (and typing) in the user's file look their module up here
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's code may raise anything
        del sys.modules[module_name]
        raise ModelFileError(f"importing {path} failed: {exc.__class__.__name__}: {exc}") from exc
    return module


def _factory(spec: str) -> tuple[Path, str, Callable[..., object]]:
    path, name = _split(spec)
    module = _import_file(path)
    factory = getattr(module, name, None)
    if not callable(factory):
        public = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                        and getattr(v, "__module__", None) == module.__name__)
        raise ModelFileError(
            f"{path} has no function {name!r}; callables defined there: {', '.join(public) or 'none'}"
        )
    return path, name, factory


def _parameters(factory: Callable[..., object]) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(factory).parameters)
    except (TypeError, ValueError):  # a builtin or C extension: call it bare
        return {}


def _call(path: Path, name: str, factory: Callable[..., object], resolution: int | None,
          num_classes: int | None) -> nn.Module:
    params = _parameters(factory)
    kwargs: dict[str, int] = {}
    if resolution is not None and "resolution" in params:
        kwargs["resolution"] = resolution
    if num_classes is not None:
        if "num_classes" not in params:
            raise ModelFileError(f"{path}:{name} takes no num_classes; add a num_classes parameter to the factory")
        kwargs["num_classes"] = num_classes
    try:
        model = factory(**kwargs)
    except Exception as exc:  # noqa: BLE001 - the user's code may raise anything
        raise ModelFileError(f"{path}:{name}({', '.join(f'{k}={v}' for k, v in kwargs.items())}) raised "
                             f"{exc.__class__.__name__}: {exc}") from exc
    if not isinstance(model, nn.Module):
        raise ModelFileError(f"{path}:{name} returned an object of type {type(model).__name__}, not a torch.nn.Module")
    return model


def load_model_file(spec: str, *, resolution: int | None = None, num_classes: int | None = None) -> nn.Module:
    """The module that ``factory`` in ``path.py`` builds (``spec`` is ``"path.py:factory"``), in eval mode.

    ``resolution`` (pixels) and ``num_classes`` are passed when the factory accepts them; a
    ``num_classes`` the factory cannot take is an error. Problems raise `ModelFileError`.
    """
    path, name, factory = _factory(spec)
    return _call(path, name, factory, resolution, num_classes).eval()


def register_model_file(spec: str) -> str:
    """Register the factory of ``"path.py:factory"`` as a model and return its name, ``file:<stem>:<factory>``.

    The file is imported here (a bad path or factory name fails now); `get_model` with the returned
    name then calls the factory, with any ``resolution`` and ``num_classes``, and checks what it
    returns. Registering the same file again returns the same name; another file with the same stem
    and factory name is refused.
    """
    label = model_file_label(spec)
    path, name, factory = _factory(spec)
    resolved = path.resolve()
    if label in _REGISTERED:
        if _REGISTERED[label] != resolved:
            raise ModelFileError(f"{label} is already the model from {_REGISTERED[label]}; rename {path} or its factory")
        return label
    if label in list_models():
        raise ModelFileError(f"a model named {label!r} is already registered; rename {path} or its factory")
    default = _parameters(factory).get("resolution")
    resolution = default.default if default is not None and isinstance(default.default, int) else _DEFAULT_RESOLUTION

    def build(resolution: int | None = None, num_classes: int | None = None, pretrained: bool = False) -> nn.Module:
        if pretrained:
            raise ModelFileError(f"{label} has no published weights; pass the path of a state-dict checkpoint instead")
        return _call(path, name, factory, resolution, num_classes)

    build.__name__ = name
    # how messages suggest commands for it: the resolved path, which runs from any folder (and whichever spelling
    # of the path registered it first)
    build.dsprof_model_file = f"{resolved}:{name}"  # type: ignore[attr-defined]
    register_model(label, default_resolution=resolution, family="file", description=f"{name} from {resolved}")(build)
    _REGISTERED[label] = resolved
    return label
