import pickle
import socket

import pytest
import torch

from dsprof.models import count_macs, find_blocks, get_model, list_models, register_model
from dsprof.models.registry import input_size_of


def test_unknown_model_lists_known_names():
    with pytest.raises(KeyError) as info:
        get_model("mobilenet_v9")
    message = str(info.value)
    assert "mobilenet_v9" in message and "mobilenet_v2" in message


def test_unknown_name_without_close_match_lists_all():
    with pytest.raises(KeyError) as info:
        get_model("alexnet")
    for name in ("mobilenet_v2", "resnet50", "tf_efficientnet_lite4", "vgg13"):
        assert name in str(info.value)


def test_list_models_patterns():
    assert list_models("resnet*") == ["resnet101", "resnet152", "resnet18", "resnet34", "resnet50"]
    assert len(list_models("*efficientnet_lite*")) == 10
    assert list_models("vgg*") == ["vgg11", "vgg11_bn", "vgg13", "vgg13_bn"]
    assert "mobilenet_v2" in list_models("mobilenet*")
    assert list_models("nothing-like-this*") == []


def test_duplicate_registration_is_an_error():
    with pytest.raises(ValueError, match="already registered"):
        register_model("resnet50", default_resolution=224, family="x", description="x")(lambda: None)


def test_unknown_option_names_the_options():
    with pytest.raises(TypeError, match="width"):
        get_model("vgg11", width=2.0)


@pytest.mark.parametrize("depth, width", [(18, 1.535), (34, 1.07), (101, 0.73), (152, 0.60)])
def test_resnet_width_scales_every_stage_to_paper_tab9_flops(depth, width):
    # Tab. 9 scales ResNets to ResNet-50's FLOPs; rounding channels to multiples of 8 keeps them within 8 %
    model = get_model(f"resnet{depth}", width=width, resolution=64)
    assert model.conv1.out_channels == max(8, round(64 * width / 8) * 8)
    expansion = 4 if depth >= 50 else 1
    assert model.fc.in_features == round(512 * width / 8) * 8 * expansion
    assert model(torch.zeros(1, 3, 64, 64)).shape == (1, 1000)
    ratio = count_macs(model, (224, 224)) / count_macs(get_model("resnet50"), (224, 224))
    assert abs(ratio - 1) < 0.08, ratio


@pytest.mark.parametrize("depths", [[1, 2, 3], [1, 0, 1, 1, 1, 1, 1]])
def test_bad_depths(depths):
    with pytest.raises(ValueError, match="depths"):
        get_model("mobilenet_v2", depths=depths)


@pytest.mark.parametrize(
    "depths, blocks",
    [([1, 1, 1, 1, 1, 1, 1], 7), ([1, 2, 2, 2, 1, 1, 1], 10), ([1, 2, 3, 4, 3, 3, 1], 17), ([1, 3, 4, 6, 5, 5, 1], 25)],
)
def test_mobilenet_v2_depths_of_paper_table_9(depths, blocks):
    model = get_model("mobilenet_v2", depths=depths, resolution=32)
    assert len(find_blocks(model)) == blocks


def test_pretrained_width_without_published_weights_fails_before_downloading(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("a test tried to download")

    # Nothing may be fetched: the error must come from the width check, before any download starts
    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    with pytest.raises(ValueError, match="mobilenetv2_140"):
        get_model("mobilenet_v2", width=1.4, pretrained=True)


def test_resolution_is_used_by_block_discovery():
    model = get_model("mobilenet_v2", resolution=96)
    assert input_size_of(model) == (96, 96)
    assert (find_blocks(model)[0].spec.in_h, find_blocks(model)[0].spec.in_w) == (48, 48)
    assert input_size_of(get_model("efficientnet_lite3")) == (280, 280)


def test_local_checkpoint_round_trip(tmp_path):
    torch.manual_seed(0)
    source = get_model("mobilenet_v2", width=0.5, num_classes=10)
    path = tmp_path / "ckpt.pt"
    # A DDP-style checkpoint: nested under "state_dict", keys prefixed by "module.".
    torch.save({"state_dict": {f"module.{k}": v for k, v in source.state_dict().items()}, "epoch": 3}, path)
    loaded = get_model("mobilenet_v2", width=0.5, num_classes=10, pretrained=path)
    for (name, a), b in zip(source.state_dict().items(), loaded.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


def test_checkpoint_of_another_model_is_rejected(tmp_path):
    path = tmp_path / "resnet.pt"
    torch.save(get_model("resnet18", num_classes=10).state_dict(), path)
    with pytest.raises(ValueError, match="does not fit"):
        get_model("mobilenet_v2", num_classes=10, pretrained=path)


class _Payload:
    pass


def test_checkpoint_with_code_objects_is_refused(tmp_path):
    path = tmp_path / "evil.pt"
    with open(path, "wb") as f:
        pickle.dump({"x": _Payload()}, f)
    with pytest.raises(ValueError, match="plain tensors"):
        get_model("resnet18", pretrained=path)


def test_missing_checkpoint_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        get_model("resnet18", pretrained=tmp_path / "nope.pt")


def test_named_model_takes_a_name_or_a_module_with_or_without_its_name():
    from dsprof.models import ModelRef, named_model

    label, net = named_model(ModelRef.of("mobilenet_v2", resolution=32, options={"width": 0.5}))
    assert label == "mobilenet_v2" and input_size_of(net) == (32, 32)
    assert named_model(ModelRef.of(net, name="mine")) == ("mine", net)
    assert named_model(net) == ("mobilenet_v2", net)  # no name: the one get_model built it under (issue #44)
    other = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3))
    assert named_model(other) == ("Sequential", other)  # a module from elsewhere: its class name
