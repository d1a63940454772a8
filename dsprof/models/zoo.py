"""The models of the paper and a few more, registered by name (see `dsprof.models.list_models`).

torchvision supplies MobileNetV2 (any width, any number of blocks per stage), ResNet and VGG;
timm supplies EfficientNet-Lite0..4 (``efficientnet_lite*`` with PyTorch padding and
``tf_efficientnet_lite*`` with TensorFlow 'SAME' padding) and its own MobileNetV2 definitions
(``mobilenetv2_100``/``mobilenetv2_140``), whose pretrained weights cover width 1.4.
"""

from __future__ import annotations

from typing import Sequence

import timm
import torchvision.models as tvm
from torch import nn
from torchvision.models.mobilenetv2 import MobileNetV2

from ..errors import UsageError
from .registry import register_model

__all__ = ["MBV2_DEFAULT_DEPTHS", "mobilenet_v2"]

# (expansion t, channels c, blocks n, stride s) per stage of MobileNetV2 (Sandler et al., Tab. 2).
_MBV2_STAGES = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
MBV2_DEFAULT_DEPTHS = tuple(n for _, _, n, _ in _MBV2_STAGES)


@register_model(
    "mobilenet_v2",
    default_resolution=224,
    family="torchvision",
    description="MobileNetV2, any width (1.0, 1.4, ...) and blocks per stage (depths, 7 ints)",
)
def mobilenet_v2(
    width: float = 1.0,
    depths: Sequence[int] = MBV2_DEFAULT_DEPTHS,
    num_classes: int = 1000,
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
        if (width, depths, num_classes) != (1.0, MBV2_DEFAULT_DEPTHS, 1000):
            raise UsageError(
                "torchvision publishes MobileNetV2 weights for width 1.0 with the default depths only; "
                "use model 'mobilenetv2_140' (timm weights) for width 1.4, or pass a local checkpoint"
            )
        return tvm.mobilenet_v2(weights="DEFAULT")
    setting = [[t, c, n, s] for (t, c, _, s), n in zip(_MBV2_STAGES, depths)]
    return MobileNetV2(num_classes=num_classes, width_mult=width, inverted_residual_setting=setting)


def _register_torchvision(name: str, family_desc: str) -> None:
    builder = getattr(tvm, name)

    def build(num_classes: int = 1000, pretrained: bool = False) -> nn.Module:
        if pretrained:
            if num_classes != 1000:
                raise UsageError("pretrained weights have 1000 classes; pass num_classes=1000 or a local checkpoint")
            return builder(weights="DEFAULT")
        return builder(num_classes=num_classes)

    build.__name__ = name
    register_model(name, default_resolution=224, family="torchvision", description=family_desc)(build)


def _register_timm(name: str, resolution: int, desc: str) -> None:
    def build(num_classes: int = 1000, pretrained: bool = False) -> nn.Module:
        return timm.create_model(name, pretrained=pretrained, num_classes=num_classes)

    build.__name__ = name
    register_model(name, default_resolution=resolution, family="timm", description=desc)(build)


def _scaled(channels: int, width: float) -> int:
    """``channels * width`` rounded to a multiple of 8 (as MobileNetV2 rounds its widths), at least 8."""
    return max(8, int(channels * width / 8 + 0.5) * 8)


def _register_resnet(depth: int) -> None:
    builder = getattr(tvm, f"resnet{depth}")

    def build(width: float = 1.0, num_classes: int = 1000, pretrained: bool = False) -> nn.Module:
        if width <= 0:
            raise UsageError(f"width must be positive, got {width}")
        if pretrained:
            if (width, num_classes) != (1.0, 1000):
                raise UsageError("pretrained ResNet weights are for width 1.0 and 1000 classes; pass a local checkpoint")
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

    build.__name__ = f"resnet{depth}"
    desc = f"ResNet-{depth}, any width (all channels scaled, rounded to multiples of 8)"
    register_model(f"resnet{depth}", default_resolution=224, family="torchvision", description=desc)(build)


for _depth in (18, 34, 50, 101, 152):
    _register_resnet(_depth)
for _depth in (11, 13):
    _register_torchvision(f"vgg{_depth}", f"VGG-{_depth} without BatchNorm")
    _register_torchvision(f"vgg{_depth}_bn", f"VGG-{_depth} with BatchNorm")

# EfficientNet-Lite resolutions from the reference implementation: 224, 240, 260, 280, 300.
for _i, _res in enumerate((224, 240, 260, 280, 300)):
    _register_timm(f"efficientnet_lite{_i}", _res, f"EfficientNet-Lite{_i} (timm, PyTorch padding)")
    _register_timm(f"tf_efficientnet_lite{_i}", _res, f"EfficientNet-Lite{_i} (timm, TensorFlow 'SAME' padding)")

_register_timm("mobilenetv2_100", 224, "MobileNetV2-1.0 (timm definition and weights)")
_register_timm("mobilenetv2_140", 224, "MobileNetV2-1.4 (timm definition and weights)")

# Beyond the paper: networks whose blocks dsprof finds in the traced graph (docs/any-cnn.md).
for _name, _desc in (
    ("mnasnet0_5", "MnasNet-0.5 (torchvision)"),
    ("mnasnet1_0", "MnasNet-1.0 (torchvision)"),
    ("mobilenet_v3_small", "MobileNetV3-Small (torchvision; squeeze-excitation blocks stay)"),
    ("mobilenet_v3_large", "MobileNetV3-Large (torchvision; squeeze-excitation blocks stay)"),
    ("shufflenet_v2_x1_0", "ShuffleNetV2 1.0x (torchvision; each branch is a block)"),
):
    _register_torchvision(_name, _desc)
_register_timm("mnasnet_100", 224, "MnasNet-B1 1.0 (timm)")
_register_timm("fbnetc_100", 224, "FBNet-C 1.0 (timm)")
_register_timm("efficientnet_b0", 224, "EfficientNet-B0 (timm; all blocks have squeeze-excitation: none merge)")
