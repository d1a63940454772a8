"""The re-parameterised model of `benchmarks/activation_front.py` (issue #47, item 6): timm's MobileOne-S0 with random
weights (nothing downloads), loaded as a user loads their own (``--model-file benchmarks/activation_models.py:NAME``)
and fused by dsprof's ``reparameterize`` option (``--reparameterize``), the form it is deployed in."""

from __future__ import annotations

from torch import nn


def mobileone_s0(num_classes: int = 1000) -> nn.Module:
    import timm

    return timm.create_model("mobileone_s0", pretrained=False, num_classes=num_classes)
