"""Graph discovery keeps what existing files hold, and says clearly what it cannot trace."""

from pathlib import Path

import pytest
import torch
from torch import nn

from dsprof.lut import LUT
from dsprof.models import GraphTraceError, discover_blocks, get_model
from dsprof.records.measurement import read_measurements

PAPER = Path(__file__).resolve().parent.parent / "benchmarks" / "paper"


@pytest.mark.parametrize(
    "file",
    ["mobilenet_v2_width1.4_224px_torch_cpu_fp32_b1.jsonl", "efficientnet_lite0_224px_torch_cpu_fp32_b1.jsonl",
     "resnet18_width1.535_224px_torch_cpu_fp32_b1.jsonl", "resnet50_224px_torch_cpu_fp32_b1.jsonl",
     "mobilenet_v2_depths-1-3-4-6-5-5-1-_width0.85_224px_torch_cpu_fp32_b1.jsonl"],
)
def test_measurement_files_measured_before_graph_discovery_keep_their_keys(file):
    """Every block record of a file the class-based discovery wrote names a block the graph finds, by module
    path and BlockSpec string: old files and LUTs stay valid."""
    records = [r for r in read_measurements(PAPER / "cpu" / "measurements" / file) if r.scope == "block" and r.index >= 0]
    assert records
    options = {k: v for k, v in records[0].model_options.items() if k != "resolution"}
    model = get_model(records[0].model, resolution=records[0].model_options["resolution"], **options)
    found = {(b.name, b.spec.to_str()) for b in discover_blocks(model).blocks}
    assert {(r.name, r.spec) for r in records} <= found
    assert len({r.name for r in records}) == len(found)  # and nothing new appears in these models


def test_the_paper_luts_still_load():
    for device in ("cpu", "h100"):
        assert len(LUT.load(PAPER / device / "lut.csv")) > 100


class _DataDependent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:  # Python control flow on a tensor value: torch.fx cannot trace it
            return self.conv(x)
        return x


def test_an_untraceable_module_is_named_with_what_to_do():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.Sequential(_DataDependent()))
    with pytest.raises(GraphTraceError) as info:
        discover_blocks(model, (16, 16))
    message = str(info.value)
    assert "1.0 (_DataDependent)" in message and "register_leaf_module" in message
    # marked opaque, the rest of the model traces (the leaf ends any chain it touches)
    from dsprof.models import register_leaf_module

    register_leaf_module(_DataDependent)
    assert discover_blocks(model, (16, 16)).blocks == []
