"""A network written flat, the way most hand-written CNNs are: every layer an attribute of the model and one
``forward``, no block modules at all. Not a test: the module that `tests/test_graph_merge.py` and
`tests/test_any_cnn_merge.py` load (``--model-file tests/models/flat.py:factory``). Nothing here knows dsprof.

What block discovery should find, by reading ``forward`` with the rules of docs/any-cnn.md (chains of
conv-BN-activation units whose intermediate tensors each have one consumer), in execution order:

- ``conv1`` (3x3 stride 2, the stem) with ``bn1`` and ReLU: its output is read twice (by ``conv2`` and by
  the addition after ``bn3``), so it is a single convolution, no block.
- ``conv2`` (depthwise 3x3) -> ``bn2`` -> ReLU6 -> ``conv3`` (1x1) -> ``bn3``, closed by adding its input
  back, then ``F.relu``: a depthwise-separable chain with an identity skip, owned by no module:
  ``conv2..conv3``, kind ``depthwise_separable``, residual.
- max pooling breaks the chain.
- ``conv4`` (1x1 expansion) -> ``bn4`` -> ``F.relu6`` -> dropout -> ``conv5`` (depthwise 3x3 stride 2) ->
  ``bn5`` -> ``torch.relu`` -> ``conv6`` (1x1 projection) -> ``bn6``: its output is read twice (by ``conv7``
  and by the projection shortcut ``sc_conv``), which ends it: ``conv4..conv6``, ``inverted_residual``,
  no skip (stride 2).
- ``conv7`` (1x1) -> ``bn7`` -> ``F.silu`` -> ``conv8`` (3x3) -> ``bn8``, plus ``sc_bn(sc_conv(input))``,
  then ReLU: ``conv7..conv8``, kind ``chain`` (1x1 then 3x3 is none of the named kinds), residual with a
  projection.
- the head (adaptive pool, flatten, Linear): no convolution.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class FlatNet(nn.Module):
    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 2, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(16, 16, 3, 1, 1, groups=16, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.relu6 = nn.ReLU6()
        self.conv3 = nn.Conv2d(16, 16, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.conv4 = nn.Conv2d(16, 48, 1, bias=False)
        self.bn4 = nn.BatchNorm2d(48)
        self.drop = nn.Dropout(0.1)
        self.conv5 = nn.Conv2d(48, 48, 3, 2, 1, groups=48, bias=False)
        self.bn5 = nn.BatchNorm2d(48)
        self.conv6 = nn.Conv2d(48, 24, 1, bias=False)
        self.bn6 = nn.BatchNorm2d(24)
        self.conv7 = nn.Conv2d(24, 32, 1, bias=False)
        self.bn7 = nn.BatchNorm2d(32)
        self.conv8 = nn.Conv2d(32, 32, 3, 1, 1, bias=False)
        self.bn8 = nn.BatchNorm2d(32)
        self.sc_conv = nn.Conv2d(24, 32, 1, bias=False)
        self.sc_bn = nn.BatchNorm2d(32)
        self.head = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        y = self.relu6(self.bn2(self.conv2(x)))
        y = self.bn3(self.conv3(y))
        x = F.relu(x + y)
        x = self.pool(x)
        x = F.relu6(self.bn4(self.conv4(x)))
        x = self.drop(x)
        x = torch.relu(self.bn5(self.conv5(x)))
        x = self.bn6(self.conv6(x))
        y = F.silu(self.bn7(self.conv7(x)))
        y = self.bn8(self.conv8(y))
        x = self.relu(y + self.sc_bn(self.sc_conv(x)))
        return self.fc(torch.flatten(self.head(x), 1))


def factory(num_classes: int = 10) -> nn.Module:
    """The model that ``--model-file tests/models/flat.py:factory`` builds."""
    return FlatNet(num_classes=num_classes)
