"""Small models with nothing for DepthShrinker to merge (issue #47, item 5), each saying why in its own words.

Not a test: `tests/test_nothing_to_merge.py` loads them as ``--model-file tests/models/nothing.py:FACTORY``.

* ``mlp``: Flatten -> Linear -> ReLU -> Linear; no convolution at all.
* ``one_conv``: one 3x3 convolution (BatchNorm, ReLU), pooling and a Linear classifier: one convolution, no pair.
* ``pooled``: a VGG-style stack in which a max-pool follows every convolution: three convolutions, none followed
  by another.
* ``PooledSkip``: two convolutions closed by a skip path that pools first (ResNet-D's form): the one candidate,
  refused (used as an object by tests/test_nothing_to_merge.py and tests/test_plain_chains.py).
"""

from __future__ import annotations

from torch import nn


def mlp(num_classes: int = 10, resolution: int = 32) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * resolution * resolution, 64), nn.ReLU(), nn.Linear(64, num_classes))


def one_conv(num_classes: int = 10) -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(8, num_classes))


def pooled(num_classes: int = 10) -> nn.Module:
    layers: list[nn.Module] = []
    for cin, cout in ((3, 8), (8, 16), (16, 32)):
        layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2)]
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, num_classes))


class PooledSkip(nn.Module):
    """conv 3x3 stride 2 -> ReLU -> conv 3x3, plus a skip path of 2x2 average pooling then a 1x1 convolution
    (8 channels)."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(8, 8, 3, 2, 1), nn.Conv2d(8, 8, 3, 1, 1)
        self.down = nn.Sequential(nn.AvgPool2d(2, 2), nn.Conv2d(8, 8, 1))

    def forward(self, x):
        return self.conv2(self.conv1(x).relu()) + self.down(x)
