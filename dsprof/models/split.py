"""A model's stem and head: what runs before its first block and after its last.

Timed on their own they let a latency table predict a whole model as stem + blocks + head, without
having measured that model. Known for torchvision's MobileNetV2 and ResNets and timm's
EfficientNet class (EfficientNet-Lite, timm's MobileNetV2); for anything else `split_model`
returns None and a LUT falls back to the whole original model minus its blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn
from torchvision.models.mobilenetv2 import MobileNetV2
from torchvision.models.resnet import ResNet

__all__ = ["ModelSplit", "split_model"]


@dataclass(frozen=True)
class ModelSplit:
    """``head(blocks(stem(x)))`` is the model's forward (eval mode), the blocks applied in order."""

    stem: nn.Module
    head: nn.Module


def split_model(model: nn.Module) -> ModelSplit | None:
    """The stem and head of ``model`` (sharing its modules), or None for an architecture we do not know."""
    if isinstance(model, MobileNetV2):  # features[0] stem, features[1:-1] blocks, features[-1] last 1x1 conv
        head = nn.Sequential(model.features[-1], nn.AdaptiveAvgPool2d(1), nn.Flatten(1), model.classifier)
        return ModelSplit(model.features[0], head)
    if isinstance(model, ResNet):
        stem = nn.Sequential(model.conv1, model.bn1, model.relu, model.maxpool)
        return ModelSplit(stem, nn.Sequential(model.avgpool, nn.Flatten(1), model.fc))
    if type(model).__name__ == "EfficientNet" and type(model).__module__.startswith("timm."):
        # forward_features: conv_stem, bn1, blocks, conv_head, bn2; forward_head: global_pool (flattens), classifier
        stem = nn.Sequential(model.conv_stem, model.bn1)
        return ModelSplit(stem, nn.Sequential(model.conv_head, model.bn2, model.global_pool, model.classifier))
    return None
