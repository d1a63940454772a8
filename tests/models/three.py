"""A model whose blocks have three removable activations (issue #47, item 2): a stem (3x3 stride 2, 3 -> 8), then
two blocks conv 1x1 8 -> 16, depthwise 3x3, conv 1x1 16 -> 16, conv 1x1 16 -> 8 (BatchNorm after each, ReLU after
the first three) with an identity skip, pooling and a classifier; ``plain``: the same without the skips. Not a
test: tests/test_three_acts.py reads it as ``tests/models/three.py:net`` and ``:plain``. Nothing here knows dsprof."""

import torch
from torch import nn
class Three(nn.Module):  # conv-act-conv-act-conv-act-conv with an identity skip: three removable activations
    def __init__(self, c=8, skip=True):
        super().__init__()
        self.skip = skip
        self.body = nn.Sequential(nn.Conv2d(c, 2*c, 1), nn.BatchNorm2d(2*c), nn.ReLU(),
                                  nn.Conv2d(2*c, 2*c, 3, padding=1, groups=2*c), nn.BatchNorm2d(2*c), nn.ReLU(),
                                  nn.Conv2d(2*c, 2*c, 1), nn.BatchNorm2d(2*c), nn.ReLU(),
                                  nn.Conv2d(2*c, c, 1), nn.BatchNorm2d(c))
    def forward(self, x): return x + self.body(x) if self.skip else self.body(x)
def net():
    return nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.BatchNorm2d(8), nn.ReLU(), Three(), Three(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
def plain():  # the same without skip connections: the blocks' runs may cross their border (crossing spans)
    return nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.BatchNorm2d(8), nn.ReLU(), Three(skip=False), Three(skip=False),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
