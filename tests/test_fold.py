import pytest
import torch
from torch import nn

from dsprof.merging.fold import fold_batchnorm, fold_bn_into_conv
from dsprof.models import get_model

from conftest import randomise_bn


def test_fold_arithmetic_against_batchnorm_module():
    torch.manual_seed(0)
    conv = nn.Conv2d(4, 6, 3, padding=1, bias=True).double()
    bn = randomise_bn(nn.Sequential(nn.BatchNorm2d(6, eps=1e-3))).double().eval()[0]
    w, b = fold_bn_into_conv(conv.weight, conv.bias, bn.running_mean, bn.running_var, bn.weight, bn.bias, bn.eps)
    x = torch.randn(2, 4, 9, 8, dtype=torch.float64)
    expected = bn(conv(x))
    got = nn.functional.conv2d(x, w, b, padding=1)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12 * expected.abs().max().item())


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mobilenet_v2", "tf_efficientnet_lite0", "resnet18"])
def test_fold_whole_model_keeps_outputs(name):
    model = randomise_bn(get_model(name, resolution=64, num_classes=10)).double().eval()
    x = torch.randn(2, 3, 64, 64, dtype=torch.float64)
    folded = fold_batchnorm(model, x)
    assert not any(isinstance(m, nn.BatchNorm2d) for m in folded.modules())
    assert any(isinstance(m, nn.BatchNorm2d) for m in model.modules())  # input untouched
    expected = model(x)
    torch.testing.assert_close(folded(x), expected, rtol=0, atol=1e-9 * expected.abs().max().item())


class _TwoReaders(nn.Module):
    """RepGhost's module in small: a convolution, its BatchNorm, then two readers of that output: a depthwise
    convolution and a BatchNorm of its own (the re-parameterisable identity branch), summed."""

    def __init__(self, inplace_act: bool = False):
        super().__init__()
        self.primary = nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4),
                                     nn.ReLU(inplace=True) if inplace_act else nn.Identity())
        self.cheap = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1, groups=4), nn.BatchNorm2d(4))
        self.fusion = nn.BatchNorm2d(4)

    def forward(self, x):
        x1 = self.primary(x)
        return self.cheap(x1) + self.fusion(x1)


def _batchnorms(model):
    return sorted(n for n, m in model.named_modules() if isinstance(m, nn.BatchNorm2d))


@pytest.mark.parametrize("inplace_act", [False, True])
def test_a_batchnorm_folds_only_into_a_convolution_it_alone_reads(inplace_act):
    # Folded once, the primary convolution's output is read by the depthwise convolution and by `fusion`, directly
    # (through Identity) or through an in-place ReLU that keeps the tensor's identity. Folding `fusion` into that
    # convolution would change what the depthwise convolution reads: a second fold must leave it, and the outputs.
    torch.manual_seed(0)
    model = randomise_bn(_TwoReaders(inplace_act)).double().eval()
    x = torch.randn(2, 3, 7, 6, dtype=torch.float64)
    expected = model(x).clone()
    once = fold_batchnorm(model, x)
    twice = fold_batchnorm(once, x)
    assert _batchnorms(once) == _batchnorms(twice) == ["fusion"]
    for folded in (once, twice):
        torch.testing.assert_close(folded(x), expected, rtol=0, atol=1e-12 * expected.abs().max().item())


def test_a_convolution_then_an_in_place_activation_then_batchnorm_does_not_fold():
    # conv -> ReLU(inplace) -> BN: the BatchNorm reads the convolution's tensor object, after the ReLU changed it.
    model = randomise_bn(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(inplace=True), nn.BatchNorm2d(4))).double().eval()
    x = torch.randn(1, 3, 8, 8, dtype=torch.float64)
    expected = model(x).clone()
    folded = fold_batchnorm(model, x)
    assert _batchnorms(folded) == ["2"]
    torch.testing.assert_close(folded(x), expected, rtol=0, atol=1e-12 * expected.abs().max().item())


def test_repghostnet_folds_the_same_however_often_and_keeps_its_identity_branches():
    # timm's RepGhostNet-0.5 (random weights): each of its 32 RepGhost modules (two in each of 16 bottlenecks) has a
    # `fusion_bn` identity branch that reads the primary convolution's output beside the cheap operation; the
    # BatchNorms that alone read a convolution fold, those branches do not, however often the model is folded.
    import timm

    model = randomise_bn(timm.create_model("repghostnet_050", num_classes=10)).double().eval()
    x = torch.randn(1, 3, 32, 32, dtype=torch.float64)
    expected = model(x).clone()
    branches = [n for n in _batchnorms(model) if ".fusion_bn." in n]
    assert len(branches) == 32
    once = fold_batchnorm(model, x)
    twice = fold_batchnorm(once, x)
    assert _batchnorms(once) == _batchnorms(twice) == branches
    for folded in (once, twice):
        torch.testing.assert_close(folded(x), expected, rtol=0, atol=1e-9 * expected.abs().max().item())


class _WritesInto(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4)

    def forward(self, x):
        y = self.conv(x)
        y[:, :2] = 0.5  # written in place: the BatchNorm below reads the written tensor
        return self.bn(y)


def test_a_convolution_written_into_before_its_batchnorm_does_not_fold():
    model = randomise_bn(_WritesInto()).double().eval()
    x = torch.randn(1, 3, 5, 5, dtype=torch.float64)
    expected = model(x).clone()
    folded = fold_batchnorm(model, x)
    assert _batchnorms(folded) == ["bn"]
    torch.testing.assert_close(folded(x), expected, rtol=0, atol=1e-12 * expected.abs().max().item())
