"""A tiny MobileNetV2-like network whose first block has an inert activation (issue #30's proxy tests).

Not a test: `tests/test_importance_proxies.py` loads it as ``--model-file tests/models/inert.py:build``.

Block 0 (depthwise 3x3 -> ReLU6 -> pointwise 1x1, no BatchNorm, no skip) reads the stem's ReLU6 output, which lies
in [0, 6]. Its weights start non-negative: each depthwise kernel 1/2 at its centre and 0 elsewhere, the pointwise
weights 1/2 times the identity, both biases 1. So the depthwise output lies in [1, 1 + 6 / 2] = [1, 4] and the
block's output in [1 + 1 / 2, 1 + 4 / 2] = [1.5, 3]: the ReLU6 inside the block,
and the free ReLU6 that linearising puts after it, are the identity on every input the network can see, as long
as those weights stay as they are (the tests train the network with them frozen). The other four blocks are
ordinary inverted residuals with BatchNorm.
"""

from __future__ import annotations

import torch
from torch import nn


def conv_bn_act(cin: int, cout: int, kernel: int = 1, stride: int = 1, groups: int = 1, act: bool = True) -> nn.Sequential:
    layers = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, *([nn.ReLU6()] if act else []))


class Inverted(nn.Module):
    """1x1 expand (x4) -> 3x3 depthwise -> 1x1 project, plus the input where the shapes allow."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        hidden = 4 * cin
        self.conv = nn.Sequential(conv_bn_act(cin, hidden), conv_bn_act(hidden, hidden, 3, stride, hidden),
                                  conv_bn_act(hidden, cout, act=False))
        self.skip = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.skip else self.conv(x)


class InertFirst(nn.Module):
    """Depthwise 3x3 (bias) -> ReLU6 -> pointwise 1x1 (bias), with the non-negative weights described above."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(channels, channels, 3, 1, 1, groups=channels, bias=True)
        self.act = nn.ReLU6()
        self.pw = nn.Conv2d(channels, channels, 1, bias=True)
        with torch.no_grad():
            self.dw.weight.zero_()
            self.dw.weight[:, :, 1, 1] = 0.5
            self.dw.bias.fill_(1.0)
            self.pw.weight.copy_(0.5 * torch.eye(channels).view(channels, channels, 1, 1))
            self.pw.bias.fill_(1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pw(self.act(self.dw(x)))


class InertNet(nn.Module):
    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.stem = conv_bn_act(3, 16, 3, 2)
        self.blocks = nn.Sequential(InertFirst(16), Inverted(16, 24, 2), Inverted(24, 24, 1), Inverted(24, 32, 2),
                                    Inverted(32, 32, 1))
        self.head = conv_bn_act(32, 64)
        self.classifier = nn.Linear(64, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.head(self.blocks(self.stem(x)))
        return self.classifier(x.mean((2, 3)))


def build(num_classes: int = 10) -> nn.Module:
    return InertNet(num_classes)
