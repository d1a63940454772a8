import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
from torch import nn

#: What a marker needs, and the reason shown when a test is skipped for lack of it (see pyproject.toml).
_NEEDS = {
    "cuda": (torch.cuda.is_available, "needs a CUDA GPU (benchmarks/gpu/check_cuda.sh runs these on one)"),
    "tflite": (
        lambda: all(importlib.util.find_spec(m) is not None for m in ("onnx2tf", "ai_edge_litert", "tensorflow")),
        "needs the tflite extra: pip install -e '.[tflite]' (make test installs it)",
    ),
    "openvino": (
        lambda: importlib.util.find_spec("openvino") is not None,
        "needs the openvino extra: pip install -e '.[openvino]' (make test installs it)",
    ),
}


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (`make test` runs a worker per core) each worker computes on one thread, and so do
    the processes it starts: two workers with a thread per core each would oversubscribe the CPU (so would their
    Inductor compile pools).

    One Inductor compile cache for the whole session (torch.compile tests, `--backend torch-compile`): set here, in
    the process that starts the workers, before any of them compiles, so that both workers and the processes they
    start share it (Inductor writes its cache entries atomically and builds each kernel under a file lock), and so
    that a kernel one test compiled is not compiled again by the next. It lies under pytest's cache folder
    (``.pytest_cache/d/inductor``), never in the user's ``/tmp/torchinductor_USER``; a TORCHINDUCTOR_CACHE_DIR the
    caller set is kept."""
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        cache = getattr(config, "cache", None)
        if cache is not None:
            folder = cache.mkdir("inductor")
        else:  # pytest's cache is off (-p no:cacheprovider): a folder of this session's, removed at its end
            folder = Path(tempfile.mkdtemp(prefix="dsprof-inductor-"))
            config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        torch.set_num_threads(1)
        os.environ["OMP_NUM_THREADS"] = "1"
        # and Inductor compiles in the process that asks (read when torch._inductor is first imported, after this):
        # a pool of compile workers per process costs each worker and each process it starts an import of torch
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test marked `cuda`, `tflite` or `openvino` where its hardware or extra is missing, saying which."""
    for marker, (available, reason) in _NEEDS.items():
        if item.get_closest_marker(marker) is not None and not available():
            pytest.skip(reason)


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


@pytest.fixture(autouse=True)
def _fresh_block_warnings():
    """find_blocks warns once per process about a model's refusals; each test starts afresh."""
    from dsprof.models import blocks

    blocks._warned.clear()
