import pytest
import torch
import torchvision.models as tvm

from dsprof.models import count_macs, count_params, find_blocks, get_model, memory_footprint, summarize_blocks

# torchvision publishes GFLOPs (= GMACs in its convention) and parameter counts in each
# weights enum's metadata; reading the metadata downloads nothing.
PUBLISHED = {
    "mobilenet_v2": tvm.MobileNet_V2_Weights.IMAGENET1K_V1,
    "resnet18": tvm.ResNet18_Weights.IMAGENET1K_V1,
    "resnet50": tvm.ResNet50_Weights.IMAGENET1K_V1,
    "resnet152": tvm.ResNet152_Weights.IMAGENET1K_V1,
    "vgg11": tvm.VGG11_Weights.IMAGENET1K_V1,
    "vgg13_bn": tvm.VGG13_BN_Weights.IMAGENET1K_V1,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_macs_and_params_match_torchvision_metadata(name):
    meta = PUBLISHED[name].meta
    model = get_model(name)
    assert count_params(model) == meta["num_params"]
    assert count_macs(model) / 1e9 == pytest.approx(meta["_ops"], rel=0.005)


def test_figures_quoted_in_the_issue():
    assert count_params(get_model("mobilenet_v2")) == 3_504_872
    assert count_macs(get_model("mobilenet_v2")) / 1e9 == pytest.approx(0.301, rel=0.005)
    assert count_params(get_model("resnet50")) == 25_557_032
    assert count_macs(get_model("resnet50")) / 1e9 == pytest.approx(4.089, rel=0.005)


def test_block_macs_by_hand_and_blocks_plus_stem_and_head_add_up():
    model = get_model("mobilenet_v2")
    table = summarize_blocks(model)
    assert len(table) == 17
    # features.2: 16->96->24, stride 2 at 112x112 (output 56x56).
    pw, dw, pwl = 16 * 96 * 112 * 112, 96 * 9 * 56 * 56, 96 * 24 * 56 * 56
    assert table.loc[1, "macs"] == pw + dw + pwl == 29_202_432
    stem = 3 * 32 * 9 * 112 * 112
    head = 320 * 1280 * 7 * 7 + 1280 * 1000
    assert table["macs"].sum() + stem + head == count_macs(model)
    assert table["params"].sum() < count_params(model)


def test_block_macs_equal_count_macs_of_the_block_alone():
    model = get_model("efficientnet_lite0", resolution=96)
    table = summarize_blocks(model)
    for block, macs in zip(find_blocks(model), table["macs"]):
        spec = block.spec
        assert count_macs(block.module, (spec.in_h, spec.in_w), spec.in_channels) == macs


def test_memory_footprint_by_hand():
    blocks = find_blocks(get_model("mobilenet_v2"))
    # features.2: 16->96->24, stride 2, no skip. Deployed weights (BN folded into a bias):
    weights = (16 * 96 + 96) + (96 * 9 + 96) + (96 * 24 + 24)
    # Live maps per conv: pw 16x112x112 + 96x112x112; dw 96x112x112 + 96x56x56; pwl 96x56x56 + 24x56x56.
    peak = max(16 * 112 * 112 + 96 * 112 * 112, 96 * 112 * 112 + 96 * 56 * 56, 96 * 56 * 56 + 24 * 56 * 56)
    block = blocks[1]
    mem = memory_footprint(block.module, (16, 112, 112), residual=False)
    assert (mem.weight_bytes, mem.peak_activation_bytes) == (2 * weights, 2 * peak)
    assert 2 * peak == 3_010_560

    # features.3: 24->144->24 at 56x56 with a skip: the block input stays alive during dw and pwl.
    x, h = 24 * 56 * 56, 144 * 56 * 56
    peak_res = max(x + h, h + h + x, h + x + x)
    mem = memory_footprint(blocks[2].module, (24, 56, 56), residual=True, bytes_per_value=4)
    assert mem.peak_activation_bytes == 4 * peak_res


def test_summary_table_columns_and_memory():
    table = summarize_blocks(get_model("mobilenet_v2"))
    assert list(table.columns) == ["block", "kind", "spec", "macs", "params", "weight_bytes", "peak_activation_bytes"]
    assert table.loc[1, "peak_activation_bytes"] == 3_010_560
    assert table.loc[1, "weight_bytes"] == 9_840
    assert table.loc[0, "kind"] == "depthwise_separable"


def test_counting_keeps_the_training_mode_and_weights():
    model = get_model("mobilenet_v2", resolution=32).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    count_macs(model)
    summarize_blocks(model)
    assert model.training
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
