"""Held-out architectures for `benchmarks/planner_vs_random.py` (issue #36): timm models, random weights.

Not a test, not used by any test or other benchmark: models the planner, its prices and its intervals were never
tuned on, loaded the way a user loads their own (``--model-file benchmarks/heldout_models.py:NAME``). Each factory
builds the timm model with random weights (nothing downloads). Blocks dsprof finds at 224 px (`dsprof blocks`):

==================================  ======  =========================================================
factory                             blocks  what they are
==================================  ======  =========================================================
spnasnet_100                          21    inverted residuals, kernels 3 and 5 (Single-Path NAS)
efficientnet_es                       18    EdgeTPU-S: full-conv "edge residual" chains, then inverted residuals
mnasnet_050                           17    MnasNet-B1 at width 0.5, kernels 3 and 5
tf_mobilenetv3_large_minimal_100      15    MobileNetV3-Large "minimal" (no SE, ReLU), TF 'SAME' padding
mobilenetv4_conv_small                14    MobileNetV4 conv-small: full-conv chains and inverted residuals
resnet18d                              6    ResNet-18-D: its deep stem as a chain and the basic blocks with an identity skip (the
                                            three whose skip path pools first are refused: they cannot merge)
==================================  ======  =========================================================
"""

from __future__ import annotations

import timm
from torch import nn

__all__ = ["HELDOUT_46", "HELDOUT_46B", "HELDOUT_46C", "MODELS"]

MODELS = ("spnasnet_100", "efficientnet_es", "mnasnet_050", "tf_mobilenetv3_large_minimal_100",
          "mobilenetv4_conv_small", "resnet18d")


def _timm(name: str, num_classes: int) -> nn.Module:
    return timm.create_model(name, pretrained=False, num_classes=num_classes)


def spnasnet_100(num_classes: int = 1000) -> nn.Module:
    return _timm("spnasnet_100", num_classes)


def efficientnet_es(num_classes: int = 1000) -> nn.Module:
    return _timm("efficientnet_es", num_classes)


def mnasnet_050(num_classes: int = 1000) -> nn.Module:
    return _timm("mnasnet_050", num_classes)


def tf_mobilenetv3_large_minimal_100(num_classes: int = 1000) -> nn.Module:
    return _timm("tf_mobilenetv3_large_minimal_100", num_classes)


def mobilenetv4_conv_small(num_classes: int = 1000) -> nn.Module:
    return _timm("mobilenetv4_conv_small", num_classes)


def resnet18d(num_classes: int = 1000) -> nn.Module:
    return _timm("resnet18d", num_classes)


# Issue #46's second held-out set: architectures no test or earlier benchmark uses, two of them small (at most 8
# blocks). Blocks dsprof finds at 96 px (`dsprof blocks`, 2026-11-28, with issue #47's squeeze-excitation chains):
# mobilenetv2_035 17 (MobileNetV2 at width 0.35, timm's build: inverted residuals), semnasnet_050 16 (MnasNet-A1 at
# width 0.5: inverted residuals, and the chains before its squeeze-excitation gates), test_efficientnet 5 (timm's
# smallest EfficientNet: the chains before its gates) and test_byobnet 3 (timm's smallest BYOB network: its
# convolution chains; its one gated block refused).
HELDOUT_46 = ("mobilenetv2_035", "semnasnet_050", "test_efficientnet", "test_byobnet")


def mobilenetv2_035(num_classes: int = 1000) -> nn.Module:
    return _timm("mobilenetv2_035", num_classes)


def semnasnet_050(num_classes: int = 1000) -> nn.Module:
    return _timm("semnasnet_050", num_classes)


def test_efficientnet(num_classes: int = 1000) -> nn.Module:
    return _timm("test_efficientnet", num_classes)


def test_byobnet(num_classes: int = 1000) -> nn.Module:
    return _timm("test_byobnet", num_classes)


# Issue #46's third held-out set, for the validation run after the timing loop's fix (one count of calls per sample
# for a group): architectures no test or earlier benchmark uses, chosen before any of them was timed. Blocks dsprof
# finds at 96 px (2026-11-28): mnasnet_small 15 (timm's small MnasNet: inverted residuals, depthwise-separable and
# convolution chains), mobilenetv3_small_050 11 (MobileNetV3-Small at width 0.5: inverted residuals, the chains before
# its squeeze-excitation gates), ghostnet_050 7 (GhostNet at width 0.5: depthwise-separable) and test_resnet 2 (timm's
# smallest ResNet: a basic block and a chain).
HELDOUT_46B = ("mnasnet_small", "mobilenetv3_small_050", "ghostnet_050", "test_resnet")


def mnasnet_small(num_classes: int = 1000) -> nn.Module:
    return _timm("mnasnet_small", num_classes)


def mobilenetv3_small_050(num_classes: int = 1000) -> nn.Module:
    return _timm("mobilenetv3_small_050", num_classes)


def ghostnet_050(num_classes: int = 1000) -> nn.Module:
    return _timm("ghostnet_050", num_classes)


def test_resnet(num_classes: int = 1000) -> nn.Module:
    return _timm("test_resnet", num_classes)


# The fourth held-out set (issue #46), for the first validation run with every check in a group of two: chosen
# 2026-11-28 before any of it was timed, none used by a test or another benchmark. Blocks dsprof finds at 64 px:
# hardcorenas_a 11 (HardCoRe-NAS A: inverted residuals, some with squeeze-excitation), tinynet_d 12 (a small
# EfficientNet: the chains before its gates) and resnet10t 2 (ResNet-10-T: basic blocks, deep stem).
HELDOUT_46C = ("hardcorenas_a", "tinynet_d", "resnet10t")


def hardcorenas_a(num_classes: int = 1000) -> nn.Module:
    return _timm("hardcorenas_a", num_classes)


def tinynet_d(num_classes: int = 1000) -> nn.Module:
    return _timm("tinynet_d", num_classes)


def resnet10t(num_classes: int = 1000) -> nn.Module:
    return _timm("resnet10t", num_classes)
