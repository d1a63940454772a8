"""Linearise -> merge is exact on networks nobody tuned dsprof for, and the merged model exports to ONNX.

For each model: random weights with randomised BatchNorm statistics (defaults hide bias bugs), float64;
a plan that removes the activations of every discovered block (padding in front) and merges every one
of them; the merged model must compute what the linearised model computes, to 1e-9 of max|y|, at an
even and an odd input size, batch 2. Then the merged model in float32, exported to ONNX, must agree
with ONNX Runtime to 1e-4 of max|y|. Widths and resolutions are small so that this stays quick; each
family of the zoo is represented once (deeper members repeat the same blocks).
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import timm
import torch
import torchvision.models as tvm
from torch import nn

from conftest import randomise_bn
from dsprof.merging import export_onnx, linearize_model, merge_model, merge_report
from dsprof.records.plan import Plan
from dsprof.models import discover_blocks, get_model, list_models, register_model
from models.csp import CSPClassifier
from models.flat import FlatNet

SIZES = (48, 41)  # even, odd: the odd size gives odd maps after every stride-2 layer
BATCH = 2


class VGGSmallHead(nn.Module):
    """torchvision's VGG features (its own make_layers, on its cfgs) under a small head: the 4096-wide
    classifier is not what is tested, and its 7x7 adaptive pool does not export to ONNX from 1x1 maps.

    At a quarter of the channels (``width``): the same layers, kernels, paddings, pools and blocks (conv, BatchNorm,
    ReLU chains by graph surgery); what is checked is that merging them is exact, not how wide they are. At full width
    the float64 compositions of its 512-channel 3x3 pairs were most of this file's time."""

    def __init__(self, cfg: str, batch_norm: bool, num_classes: int, width: float = 1.0) -> None:
        super().__init__()
        layers = [v if v == "M" else int(v * width) for v in tvm.vgg.cfgs[cfg]]
        self.features = tvm.vgg.make_layers(layers, batch_norm=batch_norm)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(layers[-2], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


# Models outside the zoo are registered here (plans name a registered model), under a prefix that no
# pattern of the other tests matches.
OUTSIDE_ZOO = {
    "csp": lambda n: CSPClassifier(num_classes=n),  # its chains across C3 -> Conv are merged by graph surgery
    "flat": lambda n: FlatNet(num_classes=n),  # no block modules at all: every chain by graph surgery
    "vgg11_bn_small_head": lambda n: VGGSmallHead("A", True, n, width=0.25),  # 16..128 channels
}
PREFIX = "test_any_cnn."
# (registered name, options): one member of each zoo family, at small widths where the builder has one.
ZOO = {
    "mobilenet_v2-0.5": ("mobilenet_v2", {"width": 0.5, "depths": [1, 2, 2, 2, 2, 2, 1]}),
    "resnet18-0.25": ("resnet18", {"width": 0.25}),
    "resnet50-0.25": ("resnet50", {"width": 0.25}),
    "tf_efficientnet_lite0": ("tf_efficientnet_lite0", {}),
    "efficientnet_lite0": ("efficientnet_lite0", {}),
    "mobilenetv2_100": ("mobilenetv2_100", {}),
    # beyond the paper, in the zoo since graph discovery
    **{name: (name, {}) for name in ("mnasnet0_5", "mnasnet1_0", "mobilenet_v3_small", "mobilenet_v3_large",
                                     "shufflenet_v2_x1_0", "mnasnet_100", "fbnetc_100")},
    # squeeze-excitation: the chain before each gate merges, the gate and what it multiplies stay (issue #47)
    "efficientnet_b0": ("efficientnet_b0", {}),
    # Ghost modules: cat([x, cheap(x)])[:, :n] after the primary convolution merges as one convolution (issue #47)
    "ghostnet_100": ("ghostnet_100", {}),
}
CASES = {key: (PREFIX + key, {}) for key in OUTSIDE_ZOO} | ZOO
# ONNX Runtime against PyTorch, float32, relative to max|y|. EfficientNet-B0 linearised with random weights carries
# its features through 16 gates without an activation to bound them (max|y| ~ 1.7e4 at 48 px): PyTorch's own float32
# merged model is 1.0e-3 from its float64 one (measured 2026-11-28), so the two float32 runtimes are compared at 1e-2;
# an export that computed something else would be off by order 1.
ONNX_TOLERANCE = {"efficientnet_b0": 1e-2}


def _register_outside_zoo() -> None:
    for key, make in OUTSIDE_ZOO.items():
        if PREFIX + key in list_models():
            continue

        def build(num_classes: int = 10, pretrained: bool = False, make=make) -> nn.Module:
            assert not pretrained, "nothing is downloaded in the tests"
            return make(num_classes)

        register_model(PREFIX + key, default_resolution=SIZES[0], family="test", description=key)(build)


def _build(name: str, options: dict, size: int) -> nn.Module:
    torch.manual_seed(0)
    model = get_model(name, resolution=size, num_classes=10, **options)
    return randomise_bn(model).double().eval()


def _plan(name: str, options: dict, n_blocks: int) -> Plan:
    return Plan(name, (0,) * n_blocks, options, border="in_front").with_merge([True] * n_blocks)


def _max_rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("key", sorted(CASES))
def test_merging_every_block_is_exact_and_exports(key, one_thread, tmp_path):
    _register_outside_zoo()
    name, options = CASES[key]
    model = _build(name, options, SIZES[0])
    onnx_model = None
    for size in SIZES:
        n_blocks = len(discover_blocks(model, input_size=(size, size)).blocks)
        assert n_blocks > 0, f"{key}: no blocks found"
        plan = _plan(name, options, n_blocks)
        linear = linearize_model(model, plan, input_size=(size, size)).eval()
        merged = merge_model(linear, plan, input_size=(size, size)).eval()
        x = torch.randn(BATCH, 3, size, size, dtype=torch.float64, generator=torch.Generator().manual_seed(size))
        with torch.no_grad():
            y_linear, y_merged = linear(x), merged(x)
        assert y_merged.shape == (BATCH, 10)
        assert _max_rel(y_merged, y_linear) <= 1e-9, f"{key} at {size}px: merged differs from linearised"
        assert all(d.merged for d in merge_report(merged).decisions), f"{key}: a block was not merged"
        # Merging changed the model: every block is gone (fewer convolutions than the linearised model).
        n_convs = sum(isinstance(m, nn.Conv2d) for m in linear.modules())
        assert sum(isinstance(m, nn.Conv2d) for m in merged.modules()) < n_convs
        if onnx_model is None:
            onnx_model = merged

    # ONNX Runtime runs the float32 merged model of the even size (the model's resolution, which the export uses).
    merged32 = onnx_model.float().eval()
    path = export_onnx(merged32, tmp_path / f"{key}.onnx", batch=BATCH)
    options_ort = ort.SessionOptions()
    options_ort.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options_ort, providers=["CPUExecutionProvider"])
    x32 = torch.randn(BATCH, 3, SIZES[0], SIZES[0], generator=torch.Generator().manual_seed(1))
    (y_ort,) = session.run(None, {session.get_inputs()[0].name: x32.numpy()})
    with torch.no_grad():
        y_torch = merged32(x32)
    tolerance = ONNX_TOLERANCE.get(key, 1e-4)
    assert np.abs(y_ort - y_torch.numpy()).max() <= tolerance * np.abs(y_torch.numpy()).max(), f"{key}: ONNX Runtime differs"
