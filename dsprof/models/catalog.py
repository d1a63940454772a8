"""The model zoo as plain data: names, sources, default resolutions, options with their defaults, and descriptions.

`dsprof.models.registry` registers these entries without importing PyTorch, torchvision or timm (so that
`dsprof models` answers at once); `dsprof.models.zoo` holds their builders, imported when a model is built.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

from ..constants import IMAGENET_CLASSES

__all__ = ["MBV2_DEFAULT_DEPTHS", "ZOO", "ZooModel"]

#: Blocks per stage of MobileNetV2 (Sandler et al., Tab. 2): the ``depths`` option's default.
MBV2_DEFAULT_DEPTHS = (1, 2, 3, 4, 3, 3, 1)


class ZooModel(NamedTuple):
    """One zoo model: ``source`` is the library that defines it (torchvision or timm); ``options`` are the
    keyword options its builder takes besides ``pretrained``, ``defaults`` their defaults (tests check both against
    the builder)."""

    name: str
    source: str
    default_resolution: int
    options: tuple[str, ...]
    description: str
    defaults: Mapping[str, Any] = {"num_classes": IMAGENET_CLASSES}


_PLAIN = ("num_classes",)
_WIDTH = ("width", "num_classes")
_WIDTH_DEFAULTS = {"width": 1.0, "num_classes": IMAGENET_CLASSES}

ZOO: tuple[ZooModel, ...] = (
    ZooModel("mobilenet_v2", "torchvision", 224, ("width", "depths", "num_classes"),
             "MobileNetV2, any width (1.0, 1.4, ...) and blocks per stage (depths, 7 ints)",
             {"width": 1.0, "depths": MBV2_DEFAULT_DEPTHS, "num_classes": IMAGENET_CLASSES}),
    *(ZooModel(f"resnet{d}", "torchvision", 224, _WIDTH,
               f"ResNet-{d}, any width (all channels scaled, rounded to multiples of 8)", _WIDTH_DEFAULTS)
      for d in (18, 34, 50, 101, 152)),
    *(ZooModel(f"vgg{d}{bn}", "torchvision", 224, _PLAIN, f"VGG-{d} {'with' if bn else 'without'} BatchNorm")
      for d in (11, 13) for bn in ("", "_bn")),
    # EfficientNet-Lite resolutions from the reference implementation: 224, 240, 260, 280, 300.
    *(ZooModel(f"{prefix}efficientnet_lite{i}", "timm", res, _PLAIN, f"EfficientNet-Lite{i} (timm, {padding} padding)")
      for i, res in enumerate((224, 240, 260, 280, 300))
      for prefix, padding in (("", "PyTorch"), ("tf_", "TensorFlow 'SAME'"))),
    ZooModel("mobilenetv2_100", "timm", 224, _PLAIN, "MobileNetV2-1.0 (timm definition and weights)"),
    ZooModel("mobilenetv2_140", "timm", 224, _PLAIN, "MobileNetV2-1.4 (timm definition and weights)"),
    # Beyond the paper: networks whose blocks dsprof finds in the traced graph (docs/any-cnn.md).
    ZooModel("mnasnet0_5", "torchvision", 224, _PLAIN, "MnasNet-0.5 (torchvision)"),
    ZooModel("mnasnet1_0", "torchvision", 224, _PLAIN, "MnasNet-1.0 (torchvision)"),
    ZooModel("mobilenet_v3_small", "torchvision", 224, _PLAIN,
             "MobileNetV3-Small (torchvision; squeeze-excitation gates stay, the chains before them merge)"),
    ZooModel("mobilenet_v3_large", "torchvision", 224, _PLAIN,
             "MobileNetV3-Large (torchvision; squeeze-excitation gates stay, the chains before them merge)"),
    ZooModel("shufflenet_v2_x1_0", "torchvision", 224, _PLAIN, "ShuffleNetV2 1.0x (torchvision; each branch is a block)"),
    ZooModel("mnasnet_100", "timm", 224, _PLAIN, "MnasNet-B1 1.0 (timm)"),
    ZooModel("fbnetc_100", "timm", 224, _PLAIN, "FBNet-C 1.0 (timm)"),
    ZooModel("efficientnet_b0", "timm", 224, _PLAIN,
             "EfficientNet-B0 (timm; squeeze-excitation gates stay, the chains before them merge)"),
    ZooModel("ghostnet_100", "timm", 224, _PLAIN,
             "GhostNet-1.0 (timm; each Ghost module's concatenation merges, squeeze-excitation gates stay)"),
)
