import timm
import torch
import torchvision
import warnings

import pytest

from dsprof.models import BlockSpec, UnsupportedBlockWarning, find_blocks, get_model


def _specs(rows, padding_of=lambda stride: "symmetric"):
    """Expand (kind, cin, hidden, cout, k, s, res, hw) rows into BlockSpecs."""
    kinds = {"ds": "depthwise_separable", "ir": "inverted_residual", "bn": "bottleneck", "basic": "basic"}
    return [
        BlockSpec(kinds[kind], cin, hid, cout, k, s, padding_of(s), bool(res), hw, hw)
        for kind, cin, hid, cout, k, s, res, hw in rows
    ]


# Written out from the MobileNetV2 paper's Tab. 2 (channels rounded to multiples of 8 at width 1.4).
MBV2_10 = _specs([
    ("ds", 32, 32, 16, 3, 1, 0, 112),
    ("ir", 16, 96, 24, 3, 2, 0, 112), ("ir", 24, 144, 24, 3, 1, 1, 56),
    ("ir", 24, 144, 32, 3, 2, 0, 56), ("ir", 32, 192, 32, 3, 1, 1, 28), ("ir", 32, 192, 32, 3, 1, 1, 28),
    ("ir", 32, 192, 64, 3, 2, 0, 28), *[("ir", 64, 384, 64, 3, 1, 1, 14)] * 3,
    ("ir", 64, 384, 96, 3, 1, 0, 14), *[("ir", 96, 576, 96, 3, 1, 1, 14)] * 2,
    ("ir", 96, 576, 160, 3, 2, 0, 14), *[("ir", 160, 960, 160, 3, 1, 1, 7)] * 2,
    ("ir", 160, 960, 320, 3, 1, 0, 7),
])
MBV2_14 = _specs([
    ("ds", 48, 48, 24, 3, 1, 0, 112),
    ("ir", 24, 144, 32, 3, 2, 0, 112), ("ir", 32, 192, 32, 3, 1, 1, 56),
    ("ir", 32, 192, 48, 3, 2, 0, 56), ("ir", 48, 288, 48, 3, 1, 1, 28), ("ir", 48, 288, 48, 3, 1, 1, 28),
    ("ir", 48, 288, 88, 3, 2, 0, 28), *[("ir", 88, 528, 88, 3, 1, 1, 14)] * 3,
    ("ir", 88, 528, 136, 3, 1, 0, 14), *[("ir", 136, 816, 136, 3, 1, 1, 14)] * 2,
    ("ir", 136, 816, 224, 3, 2, 0, 14), *[("ir", 224, 1344, 224, 3, 1, 1, 7)] * 2,
    ("ir", 224, 1344, 448, 3, 1, 0, 7),
])
EFFLITE0_ROWS = [
    ("ds", 32, 32, 16, 3, 1, 0, 112),
    ("ir", 16, 96, 24, 3, 2, 0, 112), ("ir", 24, 144, 24, 3, 1, 1, 56),
    ("ir", 24, 144, 40, 5, 2, 0, 56), ("ir", 40, 240, 40, 5, 1, 1, 28),
    ("ir", 40, 240, 80, 3, 2, 0, 28), *[("ir", 80, 480, 80, 3, 1, 1, 14)] * 2,
    ("ir", 80, 480, 112, 5, 1, 0, 14), *[("ir", 112, 672, 112, 5, 1, 1, 14)] * 2,
    ("ir", 112, 672, 192, 5, 2, 0, 14), *[("ir", 192, 1152, 192, 5, 1, 1, 7)] * 3,
    ("ir", 192, 1152, 320, 3, 1, 0, 7),
]


def test_mobilenet_v2_10_specs():
    blocks = find_blocks(get_model("mobilenet_v2"))
    assert [b.spec for b in blocks] == MBV2_10
    assert [b.name for b in blocks] == [f"features.{i}" for i in range(1, 18)]


def test_mobilenet_v2_14_specs():
    blocks = find_blocks(get_model("mobilenet_v2", width=1.4))
    assert len(blocks) == 17
    assert [b.spec for b in blocks] == MBV2_14
    assert blocks[1].spec.to_str() == "inverted_residual(cin=24,hidden=144,cout=32,k=3,s=2,pad=symmetric,res=0,in=112x112)"


def test_timm_mobilenet_v2_definition_gives_the_same_specs():
    assert [b.spec for b in find_blocks(get_model("mobilenetv2_140"))] == MBV2_14


def test_efficientnet_lite0_specs_pytorch_padding():
    assert [b.spec for b in find_blocks(get_model("efficientnet_lite0"))] == _specs(EFFLITE0_ROWS)


def test_efficientnet_lite0_specs_tf_same_padding():
    # TF 'SAME' equals symmetric padding at stride 1; at stride 2 it pads bottom/right only.
    expected = _specs(EFFLITE0_ROWS, padding_of=lambda s: "tf_same" if s == 2 else "symmetric")
    assert [b.spec for b in find_blocks(get_model("tf_efficientnet_lite0"))] == expected


def test_resnets():
    blocks = find_blocks(get_model("resnet50"))
    assert len(blocks) == 16
    assert blocks[0].spec == BlockSpec("bottleneck", 64, 64, 256, 3, 1, "symmetric", True, 56, 56)
    assert blocks[3].spec == BlockSpec("bottleneck", 256, 128, 512, 3, 2, "symmetric", True, 56, 56)
    basic = find_blocks(get_model("resnet18"))
    assert len(basic) == 8
    assert basic[2].spec == BlockSpec("basic", 64, 128, 128, 3, 2, "symmetric", True, 56, 56)


def test_vgg_chains_are_runs_of_its_sequential(recwarn):
    # torchvision's VGG-11 (config "A": 64, M, 128, M, 256, 256, M, 512, 512, M, 512, 512, M) is one flat
    # nn.Sequential; the three stages with two 3x3 convolutions are chains (conv-ReLU-conv-ReLU, the last ReLU
    # kept after the merge); the single-conv stages are no blocks.
    blocks = find_blocks(get_model("vgg11", resolution=32))
    assert [b.name for b in blocks] == ["features[6:10]", "features[11:15]", "features[16:20]"]
    assert [b.spec.kind for b in blocks] == ["chain"] * 3
    assert [(b.spec.in_channels, b.spec.out_channels, b.spec.merged_kernel) for b in blocks] == [
        (128, 256, 5), (256, 512, 5), (512, 512, 5)
    ]
    assert all(isinstance(b.tail, torch.nn.ReLU) and not b.residual for b in blocks)
    assert not [w for w in recwarn if issubclass(w.category, UnsupportedBlockWarning)]


def test_squeeze_excitation_blocks_are_reported_not_skipped():
    """timm's MixNet-S (timm/models/efficientnet.py _gen_mixnet_s): its 13 squeeze-excitation blocks (stages 2-5:
    4, 3, 3, 3) mix depthwise kernels (split, one convolution per kernel, concatenation), so no chain of convolutions
    precedes any gate: all 13 are reported. EfficientNet-B0, whose every block has a chain before its gate, has 17
    blocks and nothing to report (issue #47)."""
    model = timm.create_model("mixnet_s").eval()  # definition only, no weights
    with pytest.warns(UnsupportedBlockWarning, match="squeeze-excitation") as record:
        find_blocks(model, (64, 64))
    assert str(record[0].message).count("squeeze-excitation") == 13
    with pytest.raises(ValueError, match="squeeze-excitation"):
        find_blocks(model, (64, 64), strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnsupportedBlockWarning)
        assert len(find_blocks(timm.create_model("efficientnet_b0").eval(), (64, 64), strict=True)) == 17


def test_unknown_block_types_are_reported():
    model = torchvision.models.convnext_tiny().eval()
    with pytest.warns(UnsupportedBlockWarning, match="CNBlock"):
        find_blocks(model, (64, 64))


def test_find_blocks_keeps_the_training_mode():
    model = get_model("mobilenet_v2", resolution=32).train()
    find_blocks(model)
    assert model.training
    assert all(m.training for m in model.modules())


def test_find_blocks_on_a_plain_torchvision_model():
    model = torchvision.models.mobilenet_v2().eval()
    assert [b.spec for b in find_blocks(model, (224, 224))] == MBV2_10
    assert find_blocks(model, (64, 64))[0].spec.in_h == 32
