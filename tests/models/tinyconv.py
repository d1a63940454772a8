"""A tiny convolutional network passed to dsprof as an object (issue #44): a stem, three inverted-residual blocks
written as a class of its own, pooling and a classifier. Not a test: the module `tests/test_model_ref.py` builds
(and, as ``tests/models/tinyconv.py:build``, a model file). Nothing here knows dsprof.

What block discovery should find, by reading the code: the stem (3x3 stride 2, 3 -> 8 channels) is a single
convolution; then three blocks ``blocks.0`` .. ``blocks.2`` (1x1 expand by 4 -> 3x3 depthwise -> 1x1 project,
BatchNorm after each, ReLU6 after the first two):

====  ===  ====  ======  ========
 #    cin  cout  stride  residual
====  ===  ====  ======  ========
 0    8    8     1       yes
 1    8    16    2       no
 2    16   16    1       yes
====  ===  ====  ======  ========

Multiply-accumulates at 32 px (one image), counted by hand: the stem 16*16 * 8*3*9 = 55 296; block 0 at 16x16
(hidden 32) 256*(8*32 + 32*9 + 32*8) = 204 800; block 1, expand at 16x16 and the rest at 8x8 (hidden 32)
256*8*32 + 64*(32*9 + 32*16) = 116 736; block 2 at 8x8 (hidden 64) 64*(16*64 + 64*9 + 64*16) = 167 936; the
classifier 16*10 = 160. In all 544 928.
"""

from __future__ import annotations

from torch import nn

BLOCK_MACS_32 = (204_800, 116_736, 167_936)  # each block's MACs at 32 px, by hand (above)
MACS_32 = 55_296 + sum(BLOCK_MACS_32) + 160  # the whole model's


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int = 4) -> None:
        super().__init__()
        hidden = cin * expand
        self.conv = nn.Sequential(
            nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(),
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(),
            nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout),
        )
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.conv(x)
        return x + y if self.residual else y


class TinyConv(nn.Module):
    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6())
        self.blocks = nn.Sequential(InvertedResidual(8, 8, 1), InvertedResidual(8, 16, 2), InvertedResidual(16, 16, 1))
        self.head = nn.Linear(16, num_classes)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


def build(num_classes: int = 10) -> TinyConv:
    return TinyConv(num_classes)
