"""A YOLOv5-style CSP/C3 backbone with a classifier head, written the way a user writes their own model.

Not a test: the module that `tests/test_discovery.py`, `tests/test_any_cnn_merge.py` and
`tests/test_model_file.py` (``--model-file tests/models/csp.py:factory``) load. The layers follow
ultralytics/yolov5 ``models/common.py`` (Conv, Bottleneck, C3, SPPF) at a quarter of YOLOv5s's widths
and its depth multiple 0.33 (C3 repeats 1, 2, 3, 1); the stem is YOLOv8's 3x3 stride-2 Conv instead
of YOLOv5's 6x6 one. Nothing here knows dsprof.

What block discovery should find, by reading the forward passes below (chains of conv-BN-SiLU units
whose intermediate tensors each have one consumer; see docs/any-cnn.md):

- ``backbone[0:2]``: the stem Conv (3x3 s2) feeds only the next Conv (3x3 s2); that Conv's output is
  read twice (by the C3's cv1 and cv2), which ends the chain. Two consecutive children of the
  ``backbone`` Sequential, 2 convolutions, no residual: a block of kind ``chain``.
- every ``Bottleneck`` with its residual (``backbone.{2,4,6,8}.m.N``): cv1 (1x1) -> cv2 (3x3), closed
  by the identity addition of its input: a block of kind ``chain`` (1x1 then 3x3 is none of the named
  kinds), residual. 1 + 2 + 3 + 1 = 7 of them.
- a C3's cv1 (its output is read twice: by the first Bottleneck and that Bottleneck's residual add)
  and cv2 (feeds the concatenation): single convolutions, no block. C3 modules hold blocks (their
  Bottlenecks), so they are not refused.
- a C3's cv3 reads the concatenation and alone feeds the next downsampling Conv ``backbone.{3,5,7}``
  (or SPPF's cv1 after ``backbone.8``), whose output is read twice: a chain of 2 convolutions, but
  split between two children of ``backbone`` of which the first (the C3) also owns cv1, cv2, m and the
  cat, so no module owns it exactly and it is no run of whole Sequential children. Not a block, and
  not skipped silently: refused, on ``backbone`` (the deepest module holding both). 4 such chains with
  SPPF, 3 without.
- ``SPPF`` (``backbone.9``, with ``sppf=True``): cv1's output is read by the max-pool and by the
  concatenation, cv2 reads the concatenation: a module with 2 convolutions left without a block,
  refused, naming the breaking node.
- the head (adaptive pool, flatten, Linear): no convolution.
"""

from __future__ import annotations

import torch
from torch import nn


class Conv(nn.Module):
    """Conv2d (no bias, 'same' padding for odd kernels) -> BatchNorm -> SiLU: YOLOv5's unit."""

    def __init__(self, c1: int, c2: int, k: int = 1, s: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    """cv1 (1x1) -> cv2 (3x3), plus the input when ``shortcut`` and the channels match."""

    def __init__(self, c1: int, c2: int, shortcut: bool = True, e: float = 1.0) -> None:
        super().__init__()
        hidden = int(c2 * e)
        self.cv1 = Conv(c1, hidden, 1, 1)
        self.cv2 = Conv(hidden, c2, 3, 1)
        self.add = shortcut and c1 == c2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.cv2(self.cv1(x)) if self.add else self.cv2(self.cv1(x))


class C3(nn.Module):
    """CSP bottleneck with three convolutions: cat(m(cv1(x)), cv2(x)) -> cv3."""

    def __init__(self, c1: int, c2: int, n: int = 1, shortcut: bool = True, e: float = 0.5) -> None:
        super().__init__()
        hidden = int(c2 * e)
        self.cv1 = Conv(c1, hidden, 1, 1)
        self.cv2 = Conv(c1, hidden, 1, 1)
        self.cv3 = Conv(2 * hidden, c2, 1)
        self.m = nn.Sequential(*(Bottleneck(hidden, hidden, shortcut, e=1.0) for _ in range(n)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class SPPF(nn.Module):
    """Spatial pyramid pooling, fast: cv1, three chained 5x5 max-pools, cat of all four, cv2."""

    def __init__(self, c1: int, c2: int, k: int = 5) -> None:
        super().__init__()
        hidden = c1 // 2
        self.cv1 = Conv(c1, hidden, 1, 1)
        self.cv2 = Conv(hidden * 4, c2, 1, 1)
        self.m = nn.MaxPool2d(kernel_size=k, stride=1, padding=k // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))


class CSPClassifier(nn.Module):
    """YOLOv5s's backbone at ``width`` of its channels, then global pooling and a linear classifier."""

    def __init__(self, num_classes: int = 10, width: float = 0.25, sppf: bool = True) -> None:
        super().__init__()
        c = [max(8, int(v * width)) for v in (64, 128, 256, 512, 1024)]
        layers: list[nn.Module] = [
            Conv(3, c[0], 3, 2),  # 0: stem
            Conv(c[0], c[1], 3, 2),  # 1
            C3(c[1], c[1], n=1),  # 2
            Conv(c[1], c[2], 3, 2),  # 3
            C3(c[2], c[2], n=2),  # 4
            Conv(c[2], c[3], 3, 2),  # 5
            C3(c[3], c[3], n=3),  # 6
            Conv(c[3], c[4], 3, 2),  # 7
            C3(c[4], c[4], n=1),  # 8
        ]
        if sppf:
            layers.append(SPPF(c[4], c[4], 5))  # 9
        self.backbone = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c[4], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.backbone(x)), 1))


def factory(num_classes: int = 10) -> nn.Module:
    """The model that ``--model-file tests/models/csp.py:factory`` builds: widths 16..256, with SPPF."""
    return CSPClassifier(num_classes=num_classes)
