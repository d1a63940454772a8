"""The command line on models beyond the paper's: blocks, search and merge on MnasNet and MobileNetV3."""

import json
import subprocess
from pathlib import Path

import pytest
import torch

from cli_run import dsprof_here
from dsprof.merging import load_merged, merge_report



def run(*args: str) -> subprocess.CompletedProcess:
    return dsprof_here(*args)


def test_blocks_of_mnasnet_from_the_command_line():
    out = run("blocks", "--model", "mnasnet1_0", "--resolution", "32")
    assert out.returncode == 0, out.stderr
    # torchvision MNASNet: layers[0:8] (stem 3x3, dw 3x3, pw 1x1) and 16 inverted residual blocks (3,3,3,2,4,1)
    assert "17 blocks" in out.stdout and "layers[0:8]" in out.stdout and "layers.13.0" in out.stdout


@pytest.mark.slow
def test_search_then_merge_with_spans_on_mobilenet_v3(tmp_path: Path):
    plan = tmp_path / "plan.json"
    out = run("search", "--method", "differentiable", "--model", "mobilenet_v3_large", "--resolution", "32", "--epochs", "1", "--max-batches", "2",
              "--max-eval-batches", "1", "--keep", "3", "--device", "cpu", "--out", str(plan))
    assert out.returncode == 0, out.stderr
    keep = json.loads(plan.read_text())["keep"]
    # 15 blocks: the 7 without squeeze-excitation and, before each of the 8 gates, the expansion and depthwise
    # (features.k.block[0:2], issue #47); 3 keep their activations
    assert len(keep) == 15 and sum(keep) == 3
    merged = tmp_path / "merged.pt"
    out = run("merge", "--model", "mobilenet_v3_large", "--resolution", "32", "--num-classes", "10", "--plan", str(plan),
              "--spans", "auto", "--merge-by", "macs", "--out", str(merged))
    assert out.returncode == 0, out.stderr
    model = load_merged(merged).eval()
    decisions = merge_report(model).decisions
    assert [d.keep for d in decisions] == [bool(k) for k in keep]
    with torch.no_grad():
        assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
