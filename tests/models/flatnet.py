"""A MobileNet-like network written flat, the way a new user wrote theirs (issue #31): six inverted-residual
blocks with ReLU6 -- one at stride 2, three with a residual -- every layer an attribute of the model and the
whole network in one ``forward``, no block modules. Not a test: the module that `tests/test_new_user.py` loads
as ``--model-file tests/models/flatnet.py:build`` (named ``file:flatnet:build``). Nothing here knows dsprof.

It adds what `flat.py` (chains separated by pooling and activations after the additions) and `mynet.py`
(blocks that are modules) lack: consecutive blocks owned by no module with nothing between them, so that
runs of them merge as one convolution (spans) by rewriting the traced graph.

What block discovery should find, by reading ``forward``: the stem (``stem``, 3x3 stride 2, its output read by
``e0`` and by the first addition) is a single convolution; then six chains 1x1 expand -> 3x3 depthwise ->
1x1 project, BatchNorm after each, ReLU6 after the first two, named ``e{i}..p{i}``, kind ``inverted_residual``:

====  ======  ======  ========
 #    cin     stride  residual
====  ======  ======  ========
 0    16      1       yes
 1    16      2       no (16 -> 24)
 2    24      1       yes
 3    24      1       no (24 -> 32)
 4    32      1       yes
 5    32      1       no (32 -> 48)
====  ======  ======  ========

then pooling to 4 x 4 and the classifier (a Linear layer over the 48 x 4 x 4 features: what runs outside the
blocks takes a measurable time, as in any real network). A block without a residual ends where the next one's input is read
twice (by its expansion and its addition) or at the pooling: with a convolution after block 5, or two blocks
without a residual in a row, the chain rule would read them as one longer chain. Nothing sits between two
blocks: every run of consecutive linearised blocks can merge as one convolution.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

_CHANNELS = [(16, 16, 1), (16, 24, 2), (24, 24, 1), (24, 32, 1), (32, 32, 1), (32, 48, 1)]  # cin, cout, stride


class FlatNet(nn.Module):
    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, 2, 1, bias=False)
        self.stem_bn = nn.BatchNorm2d(16)
        for i, (cin, cout, stride) in enumerate(_CHANNELS):
            hidden = 4 * cin
            setattr(self, f"e{i}", nn.Conv2d(cin, hidden, 1, bias=False))
            setattr(self, f"e{i}_bn", nn.BatchNorm2d(hidden))
            setattr(self, f"d{i}", nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False))
            setattr(self, f"d{i}_bn", nn.BatchNorm2d(hidden))
            setattr(self, f"p{i}", nn.Conv2d(hidden, cout, 1, bias=False))
            setattr(self, f"p{i}_bn", nn.BatchNorm2d(cout))
        self.fc = nn.Linear(48 * 4 * 4, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu6(self.stem_bn(self.stem(x)))
        y = F.relu6(self.e0_bn(self.e0(x)))
        y = F.relu6(self.d0_bn(self.d0(y)))
        x = x + self.p0_bn(self.p0(y))
        y = F.relu6(self.e1_bn(self.e1(x)))
        y = F.relu6(self.d1_bn(self.d1(y)))
        x = self.p1_bn(self.p1(y))
        y = F.relu6(self.e2_bn(self.e2(x)))
        y = F.relu6(self.d2_bn(self.d2(y)))
        x = x + self.p2_bn(self.p2(y))
        y = F.relu6(self.e3_bn(self.e3(x)))
        y = F.relu6(self.d3_bn(self.d3(y)))
        x = self.p3_bn(self.p3(y))
        y = F.relu6(self.e4_bn(self.e4(x)))
        y = F.relu6(self.d4_bn(self.d4(y)))
        x = x + self.p4_bn(self.p4(y))
        y = F.relu6(self.e5_bn(self.e5(x)))
        y = F.relu6(self.d5_bn(self.d5(y)))
        x = self.p5_bn(self.p5(y))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 4), 1))


def build(num_classes: int = 1000) -> nn.Module:
    """The factory ``--model-file tests/models/flatnet.py:build`` calls."""
    return FlatNet(num_classes)
