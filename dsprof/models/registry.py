"""A small model registry: names map to builders; unknown names list what exists.

The zoo's entries are plain data (`dsprof.models.catalog`): listing them, naming their options and spelling them as
command-line flags imports no PyTorch. Building a model is `dsprof.models.build.get_model` (a zoo model's builder,
`dsprof.models.zoo`, torchvision and timm, is imported then)."""

from __future__ import annotations

import fnmatch
import inspect
import re
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from ..errors import RegistryError, UsageError
from .catalog import ZOO

if TYPE_CHECKING:
    from torch import nn

__all__ = [
    "ModelEntry",
    "register_model",
    "list_models",
    "model_entry",
    "input_size_of",
    "input_size_or_own",
    "at_size",
    "sized_from",
    "is_library_name",
    "is_model_file_spec",
    "meant_as_model_file",
    "model_file_parts",
    "model_args",
    "model_identity",
    "normalized_options",
    "is_module_name",
    "module_name",
    "register_module_name",
    "registered_module",
]

_REGISTRY: dict[str, "ModelEntry"] = {}

# Attribute that get_model sets on every model it builds, so that block discovery and
# counting use the model's own resolution when the caller gives none.
INPUT_SIZE_ATTR = "dsprof_input_size"
# ... and the registered name and build options it was built from, so that a plan for another model is refused.
IDENTITY_ATTR = "dsprof_model"
#: The methods by which a module fuses its train-time branches (what timm's `reparameterize_model` calls): a model
#: with such a module offers the ``reparameterize`` option.
REPARAMETERIZE_METHODS = ("fuse", "reparameterize", "switch_to_deploy")
#: Options every model takes besides its builder's own, with their defaults: ``reparameterize`` fuses the model's
#: train-time branches into one convolution each (timm's MobileOne, RepVGG...) before anything else sees it
#: (`dsprof.models.build.get_model`).
COMMON_OPTIONS: dict[str, object] = {"reparameterize": False}
# The modules passed as objects (`module_name`), by name, held weakly: a plan for one is a plan for a known model in
# this process, and its name finds it again (`registered_module`) while the caller keeps it.
_MODULES: dict[str, weakref.ref] = {}
# The shallow copies that carry another input size than their module's (`at_size`), each to the module it copies.
_SIZED: "weakref.WeakKeyDictionary[nn.Module, nn.Module]" = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class ModelEntry:
    """One registered model: its builder (None for a zoo model: `dsprof.models.zoo.builder`, imported when
    built), default input resolution, family (the library that defines it, or ``file``), a one-line
    description, the keyword options its builder takes besides ``pretrained`` and ``resolution``, and (a zoo
    model's, from the catalog) their defaults."""

    name: str
    builder: Callable[..., nn.Module] | None
    default_resolution: int
    family: str
    description: str
    option_names: tuple[str, ...] = ()
    takes_resolution: bool = False  # the builder shapes the model by the input resolution
    defaults: dict[str, object] | None = None  # a zoo model's option defaults (the catalog's)

    def options(self) -> list[str]:
        """Keyword options the builder accepts (besides resolution and pretrained)."""
        return list(self.option_names)

    def option_defaults(self) -> dict[str, object]:
        """The default of each option that has one: a zoo model's from the catalog, else its builder's."""
        if self.defaults is not None:
            return dict(self.defaults)
        parameters = inspect.signature(self.builder).parameters
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


#: The libraries any of whose classification models a name ``LIBRARY:NAME`` builds (``timm:mobilenetv4_conv_small``,
#: ``torchvision:efficientnet_v2_s``), beside the zoo's own names: registered when first built or referred to
#: (`dsprof.models.build.library_entry`, which imports the library; this data layer does not).
LIBRARIES = ("timm", "torchvision")


#: How a library spells its models' names: letters, digits, ``_``, ``-`` and ``.`` (timm's pretrained tags,
#: ``resnet50.a1_in1k``). A plan file from someone else that names anything else is refused as an unknown model.
_LIBRARY_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def is_library_name(name: str) -> bool:
    """True for ``LIBRARY:NAME`` with LIBRARY one of `LIBRARIES` and NAME spelt as a library names a model (read
    without importing the library)."""
    library, sep, model = str(name).partition(":")
    return (bool(sep) and library in LIBRARIES and _LIBRARY_MODEL.fullmatch(model) is not None
            and not model.endswith(".py"))


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
                f"model {name!r} is a user's model from a file; pass `{model_args(name)}` "
                "(or call dsprof.models.user_model.register_model_file) first"
            ) from None
        close = [n for n in _REGISTRY if name.lower().replace("-", "_") in n] or list_models()
        raise RegistryError(
            f"unknown model {name!r}. Known models: {', '.join(close)}. "
            "List them all with `dsprof models` or dsprof.models.list_models(); any timm or torchvision "
            "classification model is named timm:NAME or torchvision:NAME (e.g. timm:mobilenetv4_conv_small)."
        ) from None


def register_module_name(name: str, module: "nn.Module") -> None:
    """Know ``name`` as the name of ``module``, passed as an object (not built from the registry), so that a plan made
    for it (``Plan(model=name)``) is a plan for a known model and the name finds the module (`registered_module`); a
    registered name needs nothing."""
    if name not in _REGISTRY:
        _MODULES[name] = weakref.ref(module)


def is_module_name(name: str) -> bool:
    """True for the name of a module passed as an object in this process (`register_module_name`)."""
    return registered_module(name) is not None


def registered_module(name: str) -> "nn.Module | None":
    """The module passed as an object under ``name`` in this process, while it exists; None otherwise."""
    found = _MODULES.get(name)
    return found() if found is not None else None


def module_name(model: "nn.Module", name: str | None = None, options: dict | None = None) -> str:
    """The name of a module in records, tables and plans: ``name`` where given, else the registered name `get_model`
    built it under, else its class name. A module from elsewhere carries the name (and the ``options`` it is recorded
    with, where given) it was last given here, so that a plan made for it is checked against it as against a
    registered model's."""
    model = sized_from(model)  # a copy at another size (`at_size`): named as its module is
    identity = model_identity(model)
    label = name or (identity[0] if identity is not None else type(model).__name__)
    register_module_name(label, model)  # nothing for a registered name
    if identity is None or identity[0] in _MODULES:  # not built by `get_model`: the name (and options) it has now
        kept = identity[1] if identity is not None and identity[0] == label else {}
        setattr(model, IDENTITY_ATTR, (label, dict(options) if options is not None else kept))
    return label


def input_size_of(model: nn.Module, default: tuple[int, int] = (224, 224)) -> tuple[int, int]:
    """The (height, width) a model was built for by `get_model`, else ``default``."""
    return tuple(getattr(model, INPUT_SIZE_ATTR, default))  # type: ignore[return-value]


def input_size_or_own(model: nn.Module, input_size: object = None) -> tuple[int, int]:
    """``input_size`` where given -- an image's (height, width) in pixels --, else the model's own (`input_size_of`);
    anything else, an input tensor's whole shape ``(1, 3, 224, 224)`` among them, is one line naming the parameter."""
    if input_size is None:
        return input_size_of(model)
    size = tuple(input_size) if isinstance(input_size, (tuple, list)) else ()
    if len(size) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in size):
        shape = " (not the input tensor's whole shape)" if len(size) == 4 else ""
        raise UsageError(f"`input_size={input_size!r}`: give the image's (height, width) in pixels{shape}, e.g. "
                         f"({size[-2] if len(size) == 4 else 224}, {size[-1] if len(size) == 4 else 224})")
    return size  # type: ignore[return-value]


def at_size(model: nn.Module, size: tuple[int, int]) -> nn.Module:
    """``model`` traced, counted and timed at ``size`` (height, width) without touching it: itself where that is its
    own size (`input_size_of`), else a shallow copy of it -- its attributes, submodules, parameters and buffers
    shared -- that carries the size (`sized_from` finds the module again)."""
    model = sized_from(model)
    if input_size_of(model) == tuple(size):
        return model
    view = type(model).__new__(type(model))
    view.__dict__.update(model.__dict__)
    setattr(view, INPUT_SIZE_ATTR, tuple(size))
    _SIZED[view] = model
    return view


def sized_from(model: nn.Module) -> nn.Module:
    """The module a copy made by `at_size` shares everything with; any other module itself."""
    return _SIZED.get(model, model)


def model_identity(model: nn.Module) -> tuple[str, dict] | None:
    """(registered name, build options) of a model built by `get_model`; None for any other module."""
    identity = getattr(model, IDENTITY_ATTR, None)
    return (identity[0], dict(identity[1])) if identity is not None else None


def normalized_options(name: str, options: dict | None) -> dict:
    """``options`` of the registered model ``name`` without those that only spell out a default (``width=1.0``
    for ``mobilenet_v2`` builds the model that no width does) and without ``num_classes`` (a classifier of
    other classes keeps the blocks): the options that make another model. Sequences come back as lists, so that
``depths=(1, 1)`` and ``[1, 1]`` (what a plan file reads back) compare equal."""
    entry = _REGISTRY.get(name)  # a user's model not registered in this process: only the common defaults known
    defaults = {**COMMON_OPTIONS, **(entry.option_defaults() if entry is not None else {})}
    plain = lambda v: list(v) if isinstance(v, (list, tuple)) else v  # noqa: E731
    return {
        k: plain(v) for k, v in (options or {}).items()
        if k != "num_classes" and not (k in defaults and plain(v) == plain(defaults[k]))
    }


#: What a model file is named by, as messages say it.
MODEL_FILE_FORM = "PATH.py:FACTORY (a .py file and the function in it that builds the model)"


def model_file_parts(text: str) -> tuple[str, str] | None:
    """(path, factory) of ``path.py:factory``, a model file and the function in it that builds the model; None for
    anything else. The one reading of that form (`is_model_file_spec`, `dsprof.models.user_model`)."""
    # Only a path ending in .py names a model file: Python imports a file by its path only with that suffix, and a
    # registered name may hold colons too (a user's model is registered as file:<stem>:<factory>).
    path, sep, factory = str(text).rpartition(":")
    return (path, factory) if sep and path.endswith(".py") and factory.isidentifier() else None


def is_model_file_spec(text: str) -> bool:
    """True for ``path.py:factory`` (a model file and the function in it that builds the model: `model_file_parts`)."""
    return model_file_parts(text) is not None


def meant_as_model_file(text: str) -> bool:
    """True where ``text`` names a model file rather than a registered model: ``path.py:factory``, or a text read as a
    file but not of that form (``net.py``, ``net.txt:build``), which `dsprof.models.user_model.register_model_file`
    refuses in one line naming the form (`MODEL_FILE_FORM`), whichever door it came through. False for a registered
    name and for a user's model's name (``file:<stem>:<factory>``, which `model_entry` explains)."""
    text = str(text)
    if is_model_file_spec(text):
        return True
    return (text not in _REGISTRY and not text.startswith("file:") and text.partition(":")[0] not in LIBRARIES
            and (":" in text or text.endswith(".py")))


def model_args(name: str, options: dict | None = None, resolution: int | None = None) -> str:
    """The one API argument that builds model ``name`` with ``options`` at ``resolution`` pixels, for messages that
    name a model, as every verb takes it (`dsprof.models.ModelRef`): ``model='mobilenet_v2'``, or with options (their
    defaults left out) or a resolution (the model's default left out)
    ``model=ModelRef.of('mobilenet_v2', options={'width': 1.4}, resolution=32)``; a user's model by its file,
    ``model='PATH.py:FACTORY'`` (``name`` may be that ``path.py:factory`` itself). The command line spells it as its
    options (`dsprof.cli.flags`)."""
    entry = _REGISTRY.get(name)
    spec = getattr(entry.builder, "dsprof_model_file", None) if entry is not None else None
    if spec is None and is_model_file_spec(name):
        spec = name
    elif spec is None and name.startswith("file:"):  # a user's model not registered here: its factory is known
        spec = f"PATH.py:{name.rsplit(':', 1)[-1]}"
    if entry is not None and resolution == entry.default_resolution:
        resolution = None
    shown = normalized_options(name, options)
    classes = (options or {}).get("num_classes")  # not the model's identity, but what builds it again
    if classes is not None and classes != (entry.option_defaults() if entry is not None else {}).get("num_classes"):
        shown["num_classes"] = classes
    given = [f"options={shown!r}"] * bool(shown) + [f"resolution={resolution!r}"] * (resolution is not None)
    model = spec or name
    return f"model=ModelRef.of({', '.join([repr(model), *given])})" if given else f"model={model!r}"


for _zoo_model in ZOO:
    _REGISTRY[_zoo_model.name] = ModelEntry(_zoo_model.name, None, _zoo_model.default_resolution, _zoo_model.source,
                                            _zoo_model.description, _zoo_model.options,
                                            defaults=dict(_zoo_model.defaults))
