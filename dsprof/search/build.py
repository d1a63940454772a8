"""Building the model to train: registry name and options, class count, starting weights."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

from torch import nn

from ..constants import IMAGENET_CLASSES
from ..errors import UsageError
from ..merging.partial import with_acts
from ..models import ClassCountError, ModelRef, find_blocks, get_model, load_checkpoint
from .data import DIGITS, SHAPES

__all__ = ["block_acts", "block_count", "build_model", "default_training_resolution", "replace_classifier",
           "trainable_model", "training_model"]

BUILTIN_DATA_RESOLUTION = 32


def default_training_resolution(model: str | nn.Module | ModelRef, data: str | Path) -> int:
    """The resolution `search` and `finetune` train ``model`` at when given none (the CLI's default too):
    32 px on the built-in data sets (``digits`` are 8x8 images upsampled, ``shapes`` are drawn small), else
    the model's default resolution (an ImageFolder tree is resized to it; a module's: the size it was built for)."""
    if str(data) in (DIGITS, SHAPES):
        return BUILTIN_DATA_RESOLUTION
    return ModelRef.of(model).input_size[0]


def training_model(model: str | nn.Module | ModelRef, data: str | Path, options: dict[str, Any] | None = None,
                   resolution: int | None = None, weights: bool | str | Path | None = None
                   ) -> tuple[ModelRef, bool | str | Path | None]:
    """The model a training verb (`search`, `importance`) trains, as one reference, and the weights it starts from.

    The reference is ``model`` (anything `ModelRef.of` takes, with the ``options`` and ``resolution`` given here in
    place of its own) at the training resolution (None: `default_training_resolution` on ``data``): a registered
    model by its registered name, the one its plans record (a model file: the name it is registered by), or a module
    passed as an object. The weights are ``weights``, else the reference's own (None: random). They travel beside the
    reference, not in it: `build_model` loads a checkpoint into a copy of a module passed as an object, whose
    `ModelRef` holds no weights, and into a registered model built for the data's classes, known once the data is
    read."""
    ref = ModelRef.of(model, options=options, resolution=resolution)
    weights = weights if weights is not None else (ref.weights or None)
    if not ref.is_module:  # by its registered name, without weights (they are beside it)
        ref = ModelRef.of(ref.entry, options=ref.options, resolution=ref.resolution)
    if ref.resolution is None:
        ref = ModelRef.of(ref, resolution=default_training_resolution(ref, data))
    return ref, weights


def replace_classifier(model: nn.Module, num_classes: int) -> nn.Module:
    """Give the model's last Linear layer ``num_classes`` outputs (freshly initialised), in place."""
    names = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    if not names:
        raise UsageError("the model has no Linear classifier to resize")
    parent_name, _, child = names[-1].rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    old = getattr(parent, child)
    if old.out_features != num_classes:
        setattr(parent, child, nn.Linear(old.in_features, num_classes, bias=old.bias is not None))
    return model


def build_model(
    model: str | nn.Module | ModelRef,
    *,
    num_classes: int = IMAGENET_CLASSES,
    weights: bool | str | Path | None = None,
) -> nn.Module:
    """``model`` (anything `ModelRef.of` takes; a `ModelRef` carries its options, resolution and weights) built with
    ``num_classes`` outputs and starting ``weights`` (None: the reference's): None/False (random),
    True or ``"pretrained"`` (torchvision/timm weights; the classifier is re-initialised when
    ``num_classes`` is not ImageNet's `IMAGENET_CLASSES`), or the path of a local state dict or dsprof training checkpoint.
    A module passed as an object is copied (training never changes it), ``weights`` (a checkpoint) loaded into the
    copy and its classifier given ``num_classes`` outputs."""
    ref = ModelRef.of(model)
    if ref.is_module:
        if weights is True or weights == "pretrained":
            raise UsageError("weights: a module passed as an object has no published weights; give a checkpoint's path")
        net = copy.deepcopy(ref.sized)  # at the reference's size
        if weights:
            load_checkpoint(net, weights)
        return replace_classifier(net, num_classes).eval()
    name, options, resolution = ref.entry, dict(ref.options), ref.resolution
    weights = weights if weights is not None else ref.weights
    if weights is True or weights == "pretrained":  # published weights: their own classes, then the data's
        options.pop("num_classes", None)
        model = get_model(name, resolution=resolution, pretrained=True, **options)
        if num_classes != IMAGENET_CLASSES:
            replace_classifier(model, num_classes)
        return model.eval()
    model = get_model(name, resolution=resolution, **{**options, "num_classes": num_classes})
    if weights:
        load_checkpoint(model, weights)
    return model


def trainable_model(model: str | nn.Module | ModelRef, *, num_classes: int,
                    weights: bool | str | Path | None = None) -> nn.Module:
    """`build_model` for training on data of ``num_classes`` classes: a checkpoint for another number of classes keeps
    its features and gets a classifier for the data's, made afresh, as published weights and a module passed as an
    object do (a fine-tune or a search from a user's 1000-class checkpoint on their own data)."""
    try:
        return build_model(model, num_classes=num_classes, weights=weights)
    except ClassCountError as exc:
        return replace_classifier(build_model(model, num_classes=exc.num_classes, weights=weights), num_classes).eval()


def block_count(model: str | nn.Module | ModelRef) -> int:
    """The number of blocks (`find_blocks`) of ``model`` (anything `ModelRef.of` takes; a `ModelRef` carries its
    options and resolution) at its input size, for callers that have no model built: a registered model is counted
    once per process on the model with its own classifier (a head of another size changes no block); a module passed
    as an object (or its `ModelRef`) is counted as it is."""
    return len(block_acts(model))


def block_acts(model: str | nn.Module | ModelRef) -> tuple[bool, ...]:
    """Per block of ``model`` (as `block_count` finds them), whether it has a removable activation
    (`dsprof.merging.partial.with_acts`): the blocks a search's k counts, as the planner's."""
    ref = ModelRef.of(model)
    size = ref.input_size
    if ref.is_module:
        return with_acts(find_blocks(ref.module, size))
    return _block_acts(ref.entry, json.dumps(ref.options, sort_keys=True), size[0])


@functools.lru_cache(maxsize=16)
def _block_acts(model: str, options_json: str, resolution: int) -> tuple[bool, ...]:
    net = get_model(model, resolution=resolution, **json.loads(options_json))
    return with_acts(find_blocks(net, (resolution, resolution)))
