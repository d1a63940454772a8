"""A small MobileNet-like network written the way a new user writes their own (issue #22).

Not a test: the module that `tests/test_own_model.py` loads as ``--model-file tests/models/mynet.py:build``.
Nothing here knows dsprof. Seven blocks, in order:

====  ============  ======  ========  ==========  =============================================
 #    where         stride  residual  activation  note
====  ============  ======  ========  ==========  =============================================
 0    blocks.0      1       yes       ReLU6       16 -> 16
 1    blocks.1      2       no        ReLU6       16 -> 32
 2    blocks.2      1       yes       SiLU        32 -> 32
 3    blocks.3      2       no        ReLU6       32 -> 32, no expansion, squeeze-excitation after the depthwise
 4    blocks.4      1       yes       SiLU        32 -> 32
 5    flat_*        2       no        ReLU6       32 -> 32, written out in ``MyNet.forward``
 6    blocks_tail   1       no        ReLU6       32 -> 64
====  ============  ======  ========  ==========  =============================================

What block discovery should find, by reading the forward passes: every ``Block`` without SE is a chain
of 1x1 expand -> 3x3 depthwise -> 1x1 project (BatchNorm after each, the activation after the first
two), closed by the input's addition where ``residual``: an inverted residual (blocks.0, 1, 2, 4 and
blocks_tail; three residual, one of stride 2, two with SiLU). Block 3 has no expansion (depthwise -> SE ->
project, as an MBConv of expansion 1); its depthwise output is read twice (by the SE's pooling and by the
multiplication), which breaks the chain, and no chain of two convolutions precedes the gate (issue #47 merges
an expansion and a depthwise before a gate): the module is refused, not a block. Block 5 is the same chain as a ``Block`` but owned by no module (``flat_expand``, ``flat_dw``,
``flat_project`` are children of ``MyNet`` between ``blocks`` and ``blocks_tail``): refused until
discovery merges chains that no module owns (issue #24), a block after.

Every block's input channels equal the previous block's output channels (32 around the refused
block 3 and the flat chain), so a whole-model rewrite that rescales channels from block to block
passes the channels through layers that are not blocks and cannot be rescaled.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def conv_bn(cin: int, cout: int, kernel: int = 1, stride: int = 1, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(cout))


class SqueezeExcite(nn.Module):
    """Channel attention (Hu et al.): global pool, 1x1 down, ReLU, 1x1 up, sigmoid, scale the input."""

    def __init__(self, channels: int, reduced: int) -> None:
        super().__init__()
        self.down = nn.Conv2d(channels, reduced, 1)
        self.up = nn.Conv2d(reduced, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = x.mean((2, 3), keepdim=True)
        return x * torch.sigmoid(self.up(torch.relu(self.down(w))))


class Block(nn.Module):
    """1x1 expand (none at expansion 1) -> 3x3 depthwise (stride) -> [SE] -> 1x1 project, plus the input where shapes
    allow."""

    def __init__(self, cin: int, cout: int, stride: int = 1, expand: int = 4, act: type[nn.Module] = nn.ReLU6,
                 se: bool = False) -> None:
        super().__init__()
        hidden = cin * expand
        self.expand = conv_bn(cin, hidden) if expand > 1 else nn.Identity()  # expansion 1: depthwise first
        self.act1 = act() if expand > 1 else nn.Identity()
        self.dw = conv_bn(hidden, hidden, 3, stride, groups=hidden)
        self.act2 = act()
        self.se = SqueezeExcite(hidden, max(8, cin // 4)) if se else nn.Identity()
        self.project = conv_bn(hidden, cout)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.project(self.se(self.act2(self.dw(self.act1(self.expand(x))))))
        return x + y if self.residual else y


class MyNet(nn.Module):
    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, 16, 3, 2), nn.ReLU6())
        self.blocks = nn.Sequential(
            Block(16, 16),
            Block(16, 32, stride=2),
            Block(32, 32, act=nn.SiLU),
            Block(32, 32, stride=2, expand=1, se=True),
            Block(32, 32, act=nn.SiLU),
        )
        # block 5, written out here instead of as a Block
        self.flat_expand = conv_bn(32, 128)
        self.flat_dw = conv_bn(128, 128, 3, 2, groups=128)
        self.flat_project = conv_bn(128, 32)
        self.blocks_tail = Block(32, 64)
        self.head = nn.Sequential(conv_bn(64, 128), nn.ReLU6(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Linear(128, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        x = F.relu6(self.flat_expand(x))
        x = F.relu6(self.flat_dw(x))
        x = self.flat_project(x)
        return self.classifier(self.head(self.blocks_tail(x)))


def build(num_classes: int = 1000) -> nn.Module:
    """The factory ``--model-file tests/models/mynet.py:build`` calls."""
    return MyNet(num_classes)
