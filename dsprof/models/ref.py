"""One model reference (`ModelRef`), resolved once at the door -- the API's and the command line's alike -- from what a
user names a model by: a registered (zoo) name with its options, resolution and weights; a model file
(``path.py:factory``, `dsprof.models.user_model`); or an ``nn.Module`` object with a name for it (the user's ``name``,
else its class name). It builds the module, says its name in records, tables and plans, its input size, and the
options that build it again; every workflow and engine that takes "a model" takes it (`named_model` reads it)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from torch import nn

from ..errors import UsageError
from .build import check_resolution, get_model, library_entry
from .user_model import register_model_file
from .registry import (at_size, input_size_of, is_model_file_spec, meant_as_model_file, model_args,
                       model_identity, module_name, registered_module, sized_from)

__all__ = ["ModelRef", "is_model_file_spec", "named_model"]


@dataclass(frozen=True)
class ModelRef:
    """A model as every command and API function takes it, resolved once (`ModelRef.of`).

    ``name``: the model's name in records, tables and plans. ``entry``: the registered name it is built from (a zoo
    name or ``file:<stem>:<factory>``); None for a module passed as an object (``module``). ``options`` (the
    builder's keyword options, e.g. ``width``, ``depths``), ``resolution`` (input height and width in pixels; None:
    the model's own) and ``weights`` (False, True for torchvision/timm weights, or a local checkpoint) build it;
    ``file``: the ``path.py:factory`` a model file was named by. ``sized``: the module passed as engines take it
    (`build`), at this reference's size without touching the caller's object (`registry.at_size`): the module itself
    where it is built for that size (or no resolution is given), else a shallow copy of it sharing its submodules,
    parameters and buffers that carries the size; passed to `ModelRef.of` again, that copy is its module at that
    size."""

    name: str
    entry: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    resolution: int | None = None
    weights: bool | str | Path = False
    file: str | None = None
    module: nn.Module | None = field(default=None, compare=False, repr=False)
    sized: nn.Module | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", dict(self.options))
        if (self.entry is None) == (self.module is None):
            raise UsageError("a ModelRef names a registered model (entry) or holds a module, not both or neither")
        if self.resolution is not None:
            check_resolution(self.resolution)
        if self.module is not None:
            size = (self.resolution,) * 2 if self.resolution is not None else input_size_of(self.module)
            object.__setattr__(self, "sized", at_size(self.module, size))

    @classmethod
    def of(
        cls,
        model: "str | nn.Module | ModelRef",
        *,
        name: str | None = None,
        options: Mapping[str, Any] | None = None,
        resolution: int | None = None,
        weights: bool | str | Path | None = None,
    ) -> "ModelRef":
        """The reference of ``model``: a registered name (built with ``options`` at ``resolution`` from ``weights``;
        named ``name`` in records where given), a ``path.py:factory`` model file (registered here), the name of a
        module passed as an object before in this process (while it exists: that module), an ``nn.Module``
        (named ``name``, else the registered name it was built by `get_model` under, else its class name; traced at
        ``resolution`` where given, else at the size it was built for or 224), or a `ModelRef` (returned with the
        settings given here in place of its own)."""
        if isinstance(model, ModelRef):  # what is given here replaces its own (no weights given: its own)
            changed = {k: v for k, v in (("name", name), ("resolution", resolution)) if v is not None}
            changed.update({"options": dict(options)} if options else {}, **({"weights": weights} if weights else {}))
            if not changed:
                return model
            if model.module is not None:  # the module carries its name: given it again, with the size
                given = {**{"name": model.name, "options": model.options, "resolution": model.resolution}, **changed}
                return cls._of_module(model.module, given["name"], given["options"], given["resolution"],
                                      given.get("weights"))
            return replace(model, **changed)
        if isinstance(model, nn.Module):
            return cls._of_module(model, name, options, resolution, weights)
        if not isinstance(model, (str, Path)):
            raise UsageError(f"model is a registered name, a path.py:factory file or an nn.Module, got "
                             f"{type(model).__name__}")
        module = registered_module(str(model))
        if module is not None:  # the name of a module passed as an object in this process: that module
            return cls._of_module(module, name or str(model), options, resolution, weights)
        spec = None
        if meant_as_model_file(str(model)):  # imports the user's file (refuses a file not named PATH.py:FACTORY)
            spec, model = str(model), register_model_file(str(model))
        entry = library_entry(str(model))  # an unknown name lists the known ones (or a library's closest)
        return cls(name or entry.name, entry.name, dict(options or {}), resolution, weights or False,
                   spec or _file_spec(entry))

    @classmethod
    def _of_module(cls, module: nn.Module, name: str | None, options: Mapping[str, Any] | None,
                   resolution: int | None, weights: Any) -> "ModelRef":
        if weights:
            raise UsageError("weights are for a model dsprof builds; load them into the module before passing it "
                             "(module.load_state_dict, or dsprof.models.load_checkpoint)")
        if sized_from(module) is not module:  # a reference's module at its size (`sized`): that module at that size
            module, resolution = sized_from(module), resolution or input_size_of(module)[0]
        identity = model_identity(module)
        if identity is not None and options is None and name is None:
            options = identity[1]  # its own: a model `get_model` built, or a module named here before
        label = module_name(module, name, options)  # a module from elsewhere carries them, for plans and proxies
        return cls(label, None, dict(options or {}), resolution, False, None, module)

    def __str__(self) -> str:
        return self.name

    @property
    def is_module(self) -> bool:
        """True for a module passed as an object (built already; `build` returns it)."""
        return self.module is not None

    @property
    def input_size(self) -> tuple[int, int]:
        """(height, width) in pixels that the model is traced, timed and priced at."""
        if self.resolution is not None:
            return (self.resolution, self.resolution)
        if self.module is not None:
            return input_size_of(self.module)
        size = library_entry(self.entry).default_resolution
        return (size, size)

    def build(self, *, num_classes: int | None = None) -> nn.Module:
        """The module, in eval mode: built from the registry with this reference's options, resolution and weights
        (with ``num_classes`` outputs where given), or the module passed as engines take it at this reference's size
        (``sized``: itself, or a shallow copy sharing its weights that carries the size; the caller's object keeps
        its own)."""
        if self.module is not None:
            if num_classes is not None:
                raise UsageError("num_classes: a model passed as a module is built already; build it with its classes")
            return self.sized.eval()
        extra = {"num_classes": num_classes} if num_classes is not None else {}  # in place of its options' own
        return get_model(self.entry, resolution=self.resolution, pretrained=self.weights, **{**self.options, **extra})

    def built(self) -> "ModelRef":
        """This reference holding its module, built here once (`build`), with its name, options and resolution: what
        several engines, or one engine in several LUT contexts, take without building the model again. A reference
        that holds a module already is itself."""
        if self.module is not None:
            return self
        return ModelRef._of_module(self.build(), self.name, self.options, self.resolution, None)

    def argument(self, resolution: int | None = None) -> str:
        """The API argument that builds this model again, at ``resolution`` pixels where given (else its own), for a
        message to name (`model_args`): ``model=ModelRef.of('mobilenet_v2', resolution=160)``. A module passed as an
        object is named by the name it was given in this process (`ModelRef.of` finds it by that name)."""
        size = resolution if resolution is not None else self.resolution
        return model_args(self.file or self.entry or self.name, dict(self.options), size)

    def replay(self) -> dict[str, Any]:
        """What builds this model again, as plain data: the registered name (or model file), options, resolution."""
        return {"model": self.file or self.entry or self.name, "options": dict(self.options),
                "resolution": self.input_size[0]}


def _file_spec(entry: Any) -> str | None:
    """The ``path.py:factory`` a model file was registered from (`register_model_file`), None for a zoo model."""
    return getattr(entry.builder, "dsprof_model_file", None) if entry.builder is not None else None


def named_model(model: "str | nn.Module | ModelRef") -> tuple[str, nn.Module]:
    """(name, module) of anything `ModelRef.of` takes (a `ModelRef` carries its name, options and resolution): what an
    engine that takes "a model" builds."""
    ref = ModelRef.of(model)
    return ref.name, ref.build()
