"""The builders of the zoo's models (their names, options and descriptions: `dsprof.models.catalog`);
imported when a zoo model is built, not to list the zoo.

torchvision supplies MobileNetV2 (any width, any number of blocks per stage), ResNet and VGG;
timm supplies EfficientNet-Lite0..4 (``efficientnet_lite*`` with PyTorch padding and
``tf_efficientnet_lite*`` with TensorFlow 'SAME' padding) and its own MobileNetV2 definitions
(``mobilenetv2_100``/``mobilenetv2_140``), whose pretrained weights cover width 1.4.
"""

from __future__ import annotations

import difflib
from functools import partial
from typing import Callable, Sequence

import torchvision.models as tvm
from torch import nn
from torchvision.models.mobilenetv2 import MobileNetV2

from ..constants import IMAGENET_CLASSES
from ..errors import RegistryError, UsageError
from .catalog import MBV2_DEFAULT_DEPTHS, ZOO

__all__ = ["MBV2_DEFAULT_DEPTHS", "builder", "library_model", "mobilenet_v2"]

# (expansion t, channels c, blocks n, stride s) per stage of MobileNetV2 (Sandler et al., Tab. 2).
_MBV2_STAGES = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def mobilenet_v2(
    width: float = 1.0,
    depths: Sequence[int] = MBV2_DEFAULT_DEPTHS,
    num_classes: int = IMAGENET_CLASSES,
    pretrained: bool = False,
) -> nn.Module:
    """torchvision's MobileNetV2; ``depths`` sets the number of blocks of each of the 7 stages."""
    depths = tuple(int(d) for d in (depths or MBV2_DEFAULT_DEPTHS))
    if len(depths) != len(_MBV2_STAGES) or min(depths) < 1:
        raise UsageError(
            f"depths must be {len(_MBV2_STAGES)} positive ints (blocks per stage), got {list(depths)}; "
            f"the default is {list(MBV2_DEFAULT_DEPTHS)}"
        )
    if width <= 0:
        raise UsageError(f"width must be positive, got {width}")
    if pretrained:
        if (width, depths, num_classes) != (1.0, MBV2_DEFAULT_DEPTHS, IMAGENET_CLASSES):
            raise UsageError(
                "torchvision publishes MobileNetV2 weights for width 1.0 with the default depths only; "
                "use model 'mobilenetv2_140' (timm weights) for width 1.4, or pass a local checkpoint"
            )
        return tvm.mobilenet_v2(weights="DEFAULT")
    setting = [[t, c, n, s] for (t, c, _, s), n in zip(_MBV2_STAGES, depths)]
    return MobileNetV2(num_classes=num_classes, width_mult=width, inverted_residual_setting=setting)


def _torchvision(name: str, num_classes: int = IMAGENET_CLASSES, pretrained: bool = False) -> nn.Module:
    builder = getattr(tvm, name)
    if pretrained:
        if num_classes != IMAGENET_CLASSES:
            raise UsageError(f"pretrained weights have {IMAGENET_CLASSES} classes; pass num_classes={IMAGENET_CLASSES} "
                             "or a local checkpoint")
        return builder(weights="DEFAULT")
    return builder(num_classes=num_classes)


def _timm(name: str, num_classes: int = IMAGENET_CLASSES, pretrained: bool = False) -> nn.Module:
    import timm  # 1-2 s to import: only for timm's models

    return timm.create_model(name, pretrained=pretrained, num_classes=num_classes)


def _scaled(channels: int, width: float) -> int:
    """``channels * width`` rounded to a multiple of 8 (as MobileNetV2 rounds its widths), at least 8."""
    return max(8, int(channels * width / 8 + 0.5) * 8)


def _resnet(name: str, width: float = 1.0, num_classes: int = IMAGENET_CLASSES, pretrained: bool = False) -> nn.Module:
    """torchvision's ResNet ``name`` (resnet18 ...) with every stage's channels scaled by ``width``."""
    builder = getattr(tvm, name)
    if width <= 0:
        raise UsageError(f"width must be positive, got {width}")
    if pretrained:
        if (width, num_classes) != (1.0, IMAGENET_CLASSES):
            raise UsageError(f"pretrained ResNet weights are for width 1.0 and {IMAGENET_CLASSES} classes; pass a local checkpoint")
        return builder(weights="DEFAULT")
    model = builder(num_classes=num_classes)
    if width == 1.0:
        return model
    # Paper Tab. 9 scales every stage's channels uniformly. torchvision's ResNet fixes 64 stem
    # channels, so the stem and the four stages are rebuilt with its own layer factory.
    block = type(model.layer1[0])
    layers = [len(model.layer1), len(model.layer2), len(model.layer3), len(model.layer4)]
    stem = _scaled(64, width)
    model.conv1 = nn.Conv2d(3, stem, kernel_size=7, stride=2, padding=3, bias=False)
    model.bn1 = nn.BatchNorm2d(stem)
    model.inplanes = stem
    for i, (planes, n) in enumerate(zip((64, 128, 256, 512), layers)):
        setattr(model, f"layer{i + 1}", model._make_layer(block, _scaled(planes, width), n, stride=1 if i == 0 else 2))
    model.fc = nn.Linear(model.inplanes, num_classes)
    for m in model.modules():  # torchvision's initialisation of the rebuilt layers
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
    return model


def library_model(library: str, model: str) -> tuple[Callable[..., nn.Module], int]:
    """(builder, default resolution) of any classification model of ``library`` (timm or torchvision) by its own name,
    for names ``LIBRARY:NAME`` (`dsprof.models.registry.library_entry`): the resolution its published weights were
    trained at (timm's pretrained config, torchvision's weights' crop size; 224 where neither says). An unknown name
    raises `RegistryError` with the library's names closest to it."""
    if library == "timm":
        import timm  # 1-2 s to import: only for timm's models

        if not timm.is_model(model):
            _unknown(library, model, timm.list_models())
        config = timm.get_pretrained_cfg(model)
        size = config.input_size[-1] if config is not None and config.input_size else 224
        return partial(_timm, model), int(size)
    names = tvm.list_models(module=tvm)  # the classification models only
    if model not in names:
        _unknown(library, model, names)
    weights = tvm.get_model_weights(model).DEFAULT
    size = getattr(weights.transforms, "keywords", {}).get("crop_size", 224)
    return partial(_torchvision, model), int(size)


#: How each library lists its models, for the message that names none close.
LISTS = {"timm": "timm.list_models()", "torchvision": "torchvision.models.list_models()"}


def _unknown(library: str, model: str, names: Sequence[str]) -> None:
    close = difflib.get_close_matches(model, names, n=6, cutoff=0.6)
    shown = ", ".join(f"{library}:{n}" for n in close)
    raise RegistryError(f"{library} has no classification model {model!r}"
                        + (f"; close: {shown}" if shown else f"; list them with {LISTS[library]}"))


def builder(name: str) -> Callable[..., nn.Module]:
    """The builder of the zoo model ``name``: called with its options and ``pretrained``."""
    source = {z.name: z.source for z in ZOO}[name]
    if name == "mobilenet_v2":
        return mobilenet_v2
    if name.startswith("resnet"):
        return partial(_resnet, name)
    return partial(_timm if source == "timm" else _torchvision, name)
