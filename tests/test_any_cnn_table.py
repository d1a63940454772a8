"""The any-CNN table of docs/any-cnn.md (issue #47): regenerated, it equals the doc's; and rows agree with counts
read from the architectures' sources (an independent reading, not dsprof's output).

Building and tracing the 31 models at 64 px takes 30-60 s on a busy 2-core machine (measured 2026-11-28: 29 s as a
script, 58 s in pytest beside other work), so the whole table is a `slow` test; the rows read by hand are quick.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "any_cnn_table.py"


def _script():
    spec = importlib.util.spec_from_file_location("any_cnn_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["any_cnn_table"] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


TABLE = _script()
ENTRY = {(source, name): (label, source, name, fuse) for label, source, name, fuse in TABLE.MODELS}

# (source, name): (blocks, {kind: count}, {short reason: count}), each read from the architecture.
READINGS = {
    # timm/models/regnet.py regnetx_002: RegNetCfg depth=13 over 4 stages (1, 1, 4, 7), every block 1x1 -> grouped 3x3
    # (group width 8) -> 1x1 with its input added back (an nn.Identity downsample, or a 1x1 projection first in a stage)
    ("timm", "regnetx_002"): (13, {"chain": 13}, {}),
    # timm/models/resnet.py resnet18d: deep stem (3x3 s2, 3x3, 3x3 in `conv1`, one chain), BasicBlocks [2, 2, 2, 2]; the
    # first block of layers 2-4 average-pools on its skip path (avg_down): 3 refused, 5 basic blocks left
    ("timm", "resnet18d"): (6, {"basic": 5, "chain": 1}, {"skip path AvgPool2d -> Conv2d -> BatchNorm2d": 3}),
    # torchvision/models/vgg.py cfg "D": runs of 2, 2, 3, 3, 3 convolutions between max-pools, one block each
    ("torchvision", "vgg16"): (5, {"chain": 5}, {}),
    # timm/models/byobnet.py repvgg_a0: d=(2, 4, 14, 1), each block one 3x3 conv + ReLU once re-parameterised, every
    # stage a Sequential: stage 0 one pair, stage 1 two pairs, stage 2 seven pairs, stage 3 a single convolution
    ("timm", "repvgg_a0"): (10, {"chain": 10}, {}),
    # byobnet mobileone_s0: d=(2, 8, 10, 1), each block a depthwise 3x3 unit then a pointwise 1x1 unit: 21 pairs
    ("timm", "mobileone_s0"): (21, {"depthwise_separable": 21}, {}),
    # torchvision/models/squeezenet.py 1_1: 8 Fire modules whose squeeze output feeds both expand convolutions
    ("torchvision", "squeezenet1_1"): (0, {}, {"a tensor read 2 times": 8}),
    # timm/models/efficientnet.py _gen_efficientnet: 16 blocks with a squeeze-excitation gate; before each gate of the
    # 15 'ir' blocks the chain conv_pw -> conv_dw, before the 'ds' block's the stem into its depthwise, and the last
    # projection into conv_head (no activation between): 17 chains, nothing refused (issue #47)
    ("timm", "efficientnet_b0"): (17, {"chain": 17}, {}),
    # timm/models/ghostnet.py ghostnet_100: 16 GhostBottlenecks; a Ghost module's cat([x1, cheap(x1)])[:, :n] is part
    # of a chain (issue #47). The 9 without SE are one ghost block each (with their skip: the input, or for 2 of them
    # a dw + 1x1 path that merges with them), the 7 with SE give two (ghost1 before the gate, ghost2 after it), and
    # the 3 dw + 1x1 skip paths beside an SE are depthwise-separable blocks: 9 + 14 + 3 = 26, nothing refused
    ("timm", "ghostnet_100"): (26, {"ghost": 23, "depthwise_separable": 3}, {}),
    # torchvision/models/resnet.py resnet50: Bottlenecks [3, 4, 6, 3], identity or projection skips, all blocks
    ("torchvision", "resnet50"): (16, {"bottleneck": 16}, {}),
}


@pytest.mark.parametrize("key", sorted(READINGS))
def test_rows_agree_with_the_architectures(key):
    blocks, kinds, refused = READINGS[key]
    got = TABLE.row(*ENTRY[key])
    assert got.blocks == blocks and dict(got.kinds) == kinds and dict(got.refused) == refused
    assert got.markdown() in TABLE.doc_table(TABLE.DOC.read_text(encoding="utf-8")).splitlines()


@pytest.mark.slow  # 30-60 s: 31 models built and traced
def test_the_table_regenerated_equals_the_docs():
    assert len(TABLE.MODELS) >= 25
    assert TABLE.table() == TABLE.doc_table(TABLE.DOC.read_text(encoding="utf-8"))
