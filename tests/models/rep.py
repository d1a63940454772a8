"""timm's MobileOne-S0 with random weights, for `--model-file tests/models/rep.py:mobileone --reparameterize`
(issue #47, item 4). Not a test: tests/test_plain_chains.py loads it."""

from __future__ import annotations

from torch import nn


def mobileone(num_classes: int = 10) -> nn.Module:
    import timm

    return timm.create_model("mobileone_s0", pretrained=False, num_classes=num_classes)


def plain(num_classes: int = 10) -> nn.Module:
    """Nothing to re-parameterise: a convolution and a classifier."""
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, num_classes))
