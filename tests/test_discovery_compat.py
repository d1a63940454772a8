"""Graph discovery keeps what existing files hold, and says clearly what it cannot trace."""

from pathlib import Path

import pytest
import torch
from torch import nn

from dsprof.lut import LUT
from dsprof.models import GraphTraceError, ModelRef, discover_blocks, get_model
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
    """A skip taken or not by the sign of the input's mean: Python control flow on a tensor value, which torch.fx
    cannot trace (as in timm's EfficientViT and MobileViT attention)."""

    def __init__(self, c: int = 8) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.mean() > 0:
            return x + self.conv(x)
        return x


def _unit(cin: int, cout: int, k: int = 1, stride: int = 1, groups: int = 1, act: bool = True) -> nn.Sequential:
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, *[nn.ReLU6()] * act)


class _Block(nn.Module):
    """An inverted residual without a skip: expand 1x1, depthwise 3x3, project 1x1 (three convolutions, one block)."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.body = nn.Sequential(_unit(cin, 4 * cin), _unit(4 * cin, 4 * cin, 3, groups=4 * cin),
                                  _unit(4 * cin, cout, act=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class _NetWithUntraceableParts(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = _unit(3, 8, 3, 2)
        self.b1, self.g1 = _Block(8, 8), _DataDependent(8)
        self.b2, self.g2 = _Block(8, 16), _DataDependent(16)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.g2(self.b2(self.g1(self.b1(self.stem(x))))))


def test_modules_torch_fx_cannot_trace_are_kept_whole_and_the_rest_merges_exactly():
    """The two blocks of the architecture (b1, b2) are found around the two untraceable modules, which stay whole (one
    refusal for their class, naming the first and why); merging both blocks computes what the linearised model does
    (float64, BatchNorm statistics random)."""
    from dsprof.merging import linearize_model, merge_model, merge_report
    from dsprof.records.plan import Plan

    torch.manual_seed(0)
    model = _NetWithUntraceableParts()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5), m.running_var.uniform_(0.5, 2.0)
    model = model.double().eval()
    found = discover_blocks(model, (32, 32))
    assert [b.name for b in found.blocks] == ["b1", "b2"]
    assert [(r.name, r.type_name) for r in found.refusals] == [("g1", "_DataDependent")]
    assert found.refusals[0].reason.startswith("torch.fx cannot trace it (")
    kept = {n.target for n in found.graph_module.graph.nodes if n.op == "call_module"}
    assert {"g1", "g2"} <= kept  # both of its class, whole
    ModelRef.of(model, name="untraceable")  # a module's plan names it
    plan = Plan("untraceable", (0, 0), {}, border="in_front").with_merge([True, True])
    linear = linearize_model(model, plan, input_size=(32, 32)).eval()
    merged = merge_model(linear, plan, input_size=(32, 32)).eval()
    assert all(d.merged for d in merge_report(merged).decisions)
    for sign in (1.0, -1.0):  # two inputs
        x = sign * torch.rand(2, 3, 32, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            y_linear, y_merged = linear(x), merged(x)
        assert float((y_merged - y_linear).abs().max() / y_linear.abs().max()) <= 1e-9


def test_a_model_whose_own_forward_cannot_be_traced_is_named_with_what_to_do():
    model = _DataDependent(3)
    with pytest.raises(GraphTraceError) as info:
        discover_blocks(model, (16, 16))
    message = str(info.value)
    assert "cannot trace the model (_DataDependent)" in message and "register_leaf_module" in message
