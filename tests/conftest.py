import pytest
import torch
from torch import nn


def randomise_bn(model: nn.Module, seed: int = 0) -> nn.Module:
    """Non-default BatchNorm statistics and affine parameters: defaults hide bias bugs."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=g) * 0.5)
            m.running_var.copy_(torch.rand(n, generator=g) * 2 + 0.1)
            m.weight.data.copy_(torch.randn(n, generator=g))
            m.bias.data.copy_(torch.randn(n, generator=g))
    return model


@pytest.fixture(scope="module")
def one_thread():
    """Run a module's small-tensor numerics on one thread: on a busy 2-core machine OpenMP threads
    spin against other processes and small float64 convolutions get 10x slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
