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
