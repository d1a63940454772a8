"""Stem and head: with the blocks between them they are exactly the model's forward."""

import pytest
import torch
from torch import nn

from dsprof.models import find_blocks, get_model, split_model


@pytest.mark.parametrize(
    "name, options",
    [("mobilenet_v2", {}), ("mobilenet_v2", {"width": 1.4, "depths": [1, 1, 1, 1, 1, 1, 1]}), ("resnet18", {"width": 0.5}),
     ("resnet50", {}), ("efficientnet_lite0", {}), ("tf_efficientnet_lite0", {}), ("mobilenetv2_100", {})],
)
def test_stem_blocks_head_is_the_forward(name, options):
    model = get_model(name, resolution=64, **options).eval()
    parts = split_model(model)
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        h = parts.stem(x)
        for block in find_blocks(model, (64, 64)):
            h = block.module(h)
        assert torch.equal(parts.head(h), model(x))


def test_unknown_architecture_has_no_split():
    assert split_model(get_model("vgg11", resolution=32)) is None
    assert split_model(nn.Sequential(nn.Conv2d(3, 8, 3))) is None
