"""A user's own MobileNet-like model (tests/models/mynet.py) through every command with the default workloads.

The model has what hand-written MobileNet-style networks have: its own block class, a squeeze-excitation
block (refused as a block), a block written out in the network's forward. Expected blocks come from the
reading in that file's docstring. Each command runs in this process through `dsprof.cli.main`, at 32 px,
one epoch of two steps, tiny timing budgets; the outputs are read back and checked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dsprof.cli import main
from dsprof.merging import load_merged
from dsprof.records.plan import Plan
from dsprof.records.measurement import read_measurements
from rule_lut import rule_lut

MYNET = str(Path(__file__).parent / "models" / "mynet.py") + ":build"
LABEL = "file:mynet:build"
BLOCKS = ["blocks.0", "blocks.1", "blocks.2", "blocks.4", "flat_expand.0..flat_project.0", "blocks_tail"]  # blocks.3 (SE) refused; the flat chain named first..last
FAST = ["--threads", "1", "--warmup", "0", "--max-warmup", "0.05", "--min-samples", "3", "--max-samples", "4", "--budget", "0.01",
        "--min-sample-time", "0", "--no-progress"]
TRAIN = ["--epochs", "1", "--max-batches", "2", "--max-eval-batches", "1", "--batch-size", "16", "--device", "cpu"]
pytestmark = pytest.mark.usefixtures("one_thread")


def run(capsys, *argv: str, code: int = 0) -> tuple[str, str]:
    got = main(list(argv))
    out, err = capsys.readouterr()
    assert got == code, f"dsprof {' '.join(argv)} -> {got}\n{err[-3000:]}"
    return out, err


@pytest.mark.slow
def test_own_model_through_every_command_with_the_defaults(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out, err = run(capsys, "blocks", "--model-file", MYNET, "--resolution", "32")
    for name in BLOCKS:
        assert f"{name} " in out
    assert "blocks.3 (Block): squeeze-excitation" in err  # refused, and said so

    # measure, default variants: every block in all four (PyTorch eager also times it without its activations,
    # docs/measuring.md "Variants"); the whole model's FLOPs-matched variant cannot
    # pass its channels through the SE block, so it is skipped with one line saying why
    out, err = run(capsys, "measure", "--model-file", MYNET, "--resolution", "32", *FAST, "--out", "m.jsonl")
    skipped = [line for line in err.splitlines() if "no whole-model flops_matched variant" in line]
    assert len(skipped) == 1 and "blocks.3" in skipped[0]
    records = read_measurements(Path("m.jsonl"))
    assert all(r.ok for r in records)
    blocks = [(r.name, r.variant) for r in records if r.scope == "block"]
    found = [name for name in dict.fromkeys(n for n, _ in blocks)]
    assert set(BLOCKS) <= set(found) and "blocks.3" not in found
    assert blocks == [(n, v) for n in found for v in ("original", "merged", "flops_matched", "linear")]
    assert [(r.scope, r.variant) for r in records if r.scope not in ("block", "probe")] == [("model", "original")]

    out, _ = run(capsys, "search", "--model-file", MYNET, "--keep", "2", *TRAIN, "--out", "p.json")
    plan = Plan.from_json(Path("p.json").read_text())
    assert plan.model == LABEL and len(plan.keep) == len(found) and sum(plan.keep) == 2

    out, _ = run(capsys, "finetune", "--model-file", MYNET, "--plan", "p.json", *TRAIN, "--out", "ft.pt",
                 "--merged-out", "merged.pt", "--merge-by", "macs")
    diff = float(out.split("max |logit difference| to the fine-tuned model ")[1].split()[0])
    assert diff < 1e-4

    run(capsys, "merge", "--model-file", MYNET, "--plan", "p.json", "--checkpoint", "ft.pt", "--num-classes", "10",
        "--resolution", "32", "--merge-by", "macs", "--out", "merged2.pt")
    a, b = load_merged("merged.pt"), load_merged("merged2.pt")
    x = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(a(x), b(x), rtol=1e-5, atol=1e-5)  # the same fine-tuned weights, merged twice

    _, err = run(capsys, "export", "--model-file", MYNET, "--resolution", "32", "--out", "bundle", "--quiet")
    manifest = json.loads(Path("bundle/manifest.json").read_text())
    # an ONNX bundle carries what measure times where activations fuse: eager's linear variant only of the two SiLU
    # blocks (tests/models/mynet.py), which a runtime does not fold away; export bundles do not time the drift probe
    silu = ("blocks.2", "blocks.4")
    timed = [r for r in records if r.scope != "probe" and (r.variant != "linear" or r.name in silu)]
    assert len(manifest["workloads"]) == len(timed)  # the workloads measure timed, the same skip said once
    assert sorted(w["name"] for w in manifest["workloads"] if w["variant"] == "linear") == list(silu)
    assert sum("no whole-model flops_matched variant" in line for line in err.splitlines()) == 1

    run(capsys, "build-lut", "m.jsonl", "-o", "lut.csv")
    rule_lut("lut.csv", "m.jsonl")  # the fixed rule's medians: predict refuses a plan a busy clock priced at <= 0
    out, _ = run(capsys, "predict", "--model-file", MYNET, "--resolution", "32", "--lut", "lut.csv", "--plan", "p.json")
    _, err = run(capsys, "predict", "--model-file", MYNET, "--resolution", "32", "--lut", "lut.csv", "--plan",
                 "mbv2-ds-a", code=2)
    assert "is for model 'mobilenet_v2', not 'file:mynet:build'" in err

    run(capsys, "report", "m.jsonl", "-o", "report", "--plans", "p.json")
    assert "Block-wise latency" in Path("report/index.md").read_text()
    _, err = run(capsys, "report", "m.jsonl", "-o", "report2", "--plans", "mbv2-ds-a", code=2)
    assert ("plan mbv2-ds-a is for mobilenet_v2, which the measurement files do not hold (they hold "
            "file:mynet:build)" in err and not Path("report2").exists())

    # a search checkpoint of this model does not resume a search of another
    run(capsys, "search", "--model-file", MYNET, "--keep", "2", "--method", "differentiable", *TRAIN, "--out", "d.json")
    _, err = run(capsys, "search", "--model", "mobilenet_v2", "--width", "0.35", "--depths", "1,1,1,1,1,1,1",
                 "--keep", "2", "--method", "differentiable", *TRAIN, "--out", "d.json", "--resume", code=2)
    assert "cannot resume d.json.ckpt.pt" in err and f"--model-file {MYNET}" in err
    _, err = run(capsys, "search", "--model-file", MYNET, "--keep", "2", *TRAIN, "--out", "p.json", "--resume", code=2)
    assert "--method importance with --proxy zero-shot keeps none" in err  # the default proxy keeps nothing
