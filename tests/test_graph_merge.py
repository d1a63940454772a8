"""Chains no module owns, merged by rewriting the traced graph (issue #24).

The models: tests/models/flat.py (a network written flat in one forward: no block modules at all) and
tests/models/csp.py (YOLOv5-style; its four chains from a C3's cv3 into the next Conv are owned by no
module). Expected blocks come from reading their forward passes (the files' docstrings), expected outputs
from the models themselves: a rewritten graph must compute what the model computes, bit for bit.
Exactness of the merge at odd and even sizes and ONNX Runtime agreement are in test_any_cnn_merge.py
(both models are cases there); here: the names, the rewrite, TorchScript/torch.export, the merged-model
file, the VGG export with unmerged blocks, and the command line by name.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import torchvision.models as tvm
from torch import nn

from conftest import randomise_bn
from dsprof.errors import MergeError
from dsprof.lut.predict import predict_latency
from dsprof.merging import export_onnx, load_merged, merge_model, merge_report, save_merged
from dsprof.records.plan import Plan
from dsprof.models import ChainGraph, discover_blocks, get_model, list_models, own_chains, register_model
from dsprof.models.user_model import register_model_file
from dsprof.models import ModelRef
from models.csp import CSPClassifier
from models.flat import FlatNet
from cli_run import dsprof_here
from rule_lut import rule_lut

MODELS = Path(__file__).parent / "models"
FLAT = f"{MODELS / 'flat.py'}:factory"
CSP = f"{MODELS / 'csp.py'}:factory"
RES = (48, 48)

# tests/models/flat.py, read off its forward: (name, kind, residual).
FLAT_BLOCKS = [
    ("conv2..conv3", "depthwise_separable", True),  # dw 3x3 -> 1x1, + its input, then F.relu
    ("conv4..conv6", "inverted_residual", False),  # 1x1 -> dw 3x3 s2 -> 1x1 (dropout and functional acts between)
    ("conv7..conv8", "chain", True),  # 1x1 -> 3x3, + sc_bn(sc_conv(input)), then ReLU
]
# tests/models/csp.py: each C3's cv3 alone feeds the next downsampling Conv (SPPF's cv1 after the last C3).
CSP_CHAINS = ["backbone.2.cv3.conv..backbone.3.conv", "backbone.4.cv3.conv..backbone.5.conv",
              "backbone.6.cv3.conv..backbone.7.conv", "backbone.8.cv3.conv..backbone.9.cv1.conv"]


def _model(cls: type, dtype=torch.float64) -> nn.Module:
    torch.manual_seed(0)
    return randomise_bn(cls()).to(dtype).eval()


def test_a_flat_network_has_its_chains_as_blocks_named_after_their_convolutions():
    found = discover_blocks(FlatNet().eval(), RES)
    assert [(b.name, b.spec.kind, bool(b.spec.residual)) for b in found.blocks] == FLAT_BLOCKS
    assert found.refusals == []
    assert [b.name for b in discover_blocks(CSPClassifier().eval(), RES).blocks if ".." in b.name] == CSP_CHAINS
    # Stable across runs: a fresh model, traced again, gives the same names and LUT keys.
    again = discover_blocks(FlatNet().eval(), RES)
    assert [(b.name, b.spec.to_str()) for b in again.blocks] == [(b.name, b.spec.to_str()) for b in found.blocks]


@pytest.mark.parametrize("cls", [FlatNet, CSPClassifier])
def test_the_rewritten_graph_computes_what_the_model_computes_and_keeps_module_names(cls):
    model = _model(cls)
    blocks = discover_blocks(model, RES).blocks
    owned = own_chains(model, blocks)
    assert isinstance(owned, ChainGraph)
    x = torch.randn(2, 3, 41, 41, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(owned(x), model(x))  # the same operations in the same order
    # each chain is one module, running the model's own convolutions; blocks a module owns keep their names
    for block in blocks:
        if ".." in block.name:
            first = block.name.split("..")[0]
            assert owned.get_submodule(block.name.replace(".", "_")).body[0] is model.get_submodule(first)
        elif "[" not in block.name:
            assert owned.get_submodule(block.name) is model.get_submodule(block.name)
    assert own_chains(owned, blocks) is owned  # owning them again changes nothing


def _merged(cls: type, name: str) -> nn.Module:
    model = _model(cls, torch.float32)
    n = len(discover_blocks(model, RES).blocks)
    return merge_model(model, Plan(name, (0,) * n).with_merge([True] * n), input_size=RES)


@pytest.fixture(scope="module")
def registered() -> dict[str, str]:
    return {"flat": register_model_file(FLAT), "csp": register_model_file(CSP)}


@pytest.mark.parametrize("key,cls", [("flat", FlatNet), ("csp", CSPClassifier)])
def test_the_merged_graph_model_runs_under_torchscript_and_torch_export(key, cls, registered, one_thread):
    merged = _merged(cls, registered[key])
    report = merge_report(merged)
    assert all(d.merged for d in report.decisions)
    assert [d.name for d in report.decisions if ".." in d.name] == (
        [b for b, _, _ in FLAT_BLOCKS] if key == "flat" else CSP_CHAINS)
    x = torch.randn(2, 3, *RES, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        y = merged(x)
        scripted = torch.jit.script(merged)
        exported = torch.export.export(merged, (x,)).module()
        for other in (scripted(x), exported(x)):
            assert (other - y).abs().max() <= 1e-5 * y.abs().max()


def test_a_graph_rewritten_merged_model_saves_and_loads_with_its_graph_checked(registered, tmp_path, one_thread):
    merged = _merged(FlatNet, registered["flat"])
    path = save_merged(merged, tmp_path / "flat.pt")
    payload = torch.load(path, weights_only=True)
    assert "call_module conv2__conv3" in payload["graph"]  # the rewritten graph is recorded, node by node
    loaded = load_merged(path)
    x = torch.randn(1, 3, *RES, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert torch.equal(loaded(x), merged(x))
    # A model file that now builds another graph is refused with what to do, not loaded into the wrong places.
    payload["graph"] = [line.replace("conv4__conv6", "conv4__conv5") for line in payload["graph"]]
    torch.save(payload, tmp_path / "changed.pt")
    with pytest.raises(MergeError, match="differs from the saved one at node .*merge it again"):
        load_merged(tmp_path / "changed.pt")


class VGGPool2(nn.Module):
    """torchvision's VGG-11-BN features under a 2x2 adaptive pool: ONNX exports an adaptive pool only where
    it knows the input size, so a graph whose shapes became dynamic does not export."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = tvm.vgg.make_layers(tvm.vgg.cfgs["A"], batch_norm=True)
        self.avgpool = nn.AdaptiveAvgPool2d(2)
        self.classifier = nn.Linear(512 * 4, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def test_a_merged_vgg_with_unmerged_linear_blocks_exports_with_static_shapes(tmp_path, one_thread):
    name = "test_graph_merge.vgg11_bn_pool2"
    if name not in list_models():
        register_model(name, default_resolution=64, family="test", description="VGG-11-BN, 2x2 pool")(
            lambda num_classes=10, pretrained=False: VGGPool2(num_classes))
    model = randomise_bn(get_model(name, resolution=64)).eval()
    n = len(discover_blocks(model).blocks)
    assert n == 3  # VGG-11's conv pairs between max-pools (docs/any-cnn.md)
    merged = merge_model(model, Plan(name, (0,) * n).with_merge([False] * n))  # linear, left unmerged
    path = export_onnx(merged, tmp_path / "vgg.onnx")
    graph = onnx.load(str(path)).graph
    assert "Pad" not in {node.op_type for node in graph.node}
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(3))
    (y_ort,) = session.run(None, {"input": x.numpy()})
    with torch.no_grad():
        y = merged(x).numpy()
    assert np.abs(y_ort - y).max() <= 1e-4 * np.abs(y).max()


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    result = dsprof_here(*args, cwd=cwd)
    assert result.returncode == 0, f"dsprof {' '.join(args)}:\n{result.stderr}"
    return result


TINY = ["--threads", "1", "--batch", "1", "--budget", "0.02", "--warmup", "0.001", "--max-warmup", "0.05", "--min-samples", "2",
        "--max-samples", "4", "--min-sample-time", "0.0005", "--no-progress"]


@pytest.mark.slow
def test_profile_lut_predict_merge_and_report_name_the_chains(tmp_path):
    """The flat network through the command line (the CSP model's chains: tests/test_model_file.py). The
    LUT that predict reads has the medians of tests/rule_lut.py's rule: on a busy machine the blocks timed alone
    can add up to more than the whole model, and predict rightly refuses such a LUT; its subject here is names."""
    spec, label, chain, n = FLAT, "file:flat:factory", FLAT_BLOCKS[0][0], len(FLAT_BLOCKS)
    common = ["--model-file", spec, "--resolution", str(RES[0])]
    assert f"{chain} " in run("blocks", *common, cwd=tmp_path).stdout
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"model": label, "keep": [0] * n, "merge": [True] * n, "name": "all-merged"}))
    merge = run("merge", *common, "--plan", str(plan), "--out", "merged.pt", cwd=tmp_path)
    assert chain in merge.stdout
    run("measure", *common, *TINY, "--variants", "original,merged", "--model-variants", "original",
        "--merged-model", "merged.pt", "--out", "m.jsonl", cwd=tmp_path)
    records = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines() if line.strip()]
    timed = {(r["scope"], r["name"], r["variant"]) for r in records}
    assert {("block", chain, "original"), ("block", chain, "merged")} <= timed
    assert any(r["scope"] == "model" and r["name"] == "merged" for r in records)  # the merged-model file, timed
    run("build-lut", "m.jsonl", "-o", "lut.csv", cwd=tmp_path)
    rule_lut(tmp_path / "lut.csv", tmp_path / "m.jsonl")
    key = next(r["spec"] for r in records if r["name"] == chain)  # a LUT is keyed by the block's spec
    assert key.startswith("chain(") or key.startswith("depthwise_separable(")
    assert key in (tmp_path / "lut.csv").read_text()
    predict = run("predict", *common, "--lut", "lut.csv", "--plan", str(plan), cwd=tmp_path)  # refuses misses
    assert "PARTIAL" not in predict.stdout + predict.stderr
    register_model_file(spec)
    rows = predict_latency(ModelRef.of(label, resolution=RES[0]), tmp_path / "lut.csv", plan).blocks
    assert rows.loc[rows.block == chain, "variant"].tolist() == ["merged"]  # as the plan's merge list says
    run("report", "m.jsonl", "-o", "report", cwd=tmp_path)
    assert any(chain in p.read_text() for p in (tmp_path / "report").rglob("*.md"))
