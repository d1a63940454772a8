"""``--model-file PATH.py:FACTORY``: a user's own model through every command, without editing dsprof.

The model is tests/models/csp.py (a YOLOv5-style CSP backbone written as a user would); its expected
blocks come from the reading in that file's docstring: backbone[0:2], 7 residual Bottlenecks and the 4
chains from a C3's cv3 into the next Conv that no module owns, SPPF refused. The commands run through the command line's
main, as a user runs them (in this process: tests/cli_run.py).
"""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pandas as pd
import pytest
import torch

from dsprof.cli import main
from dsprof.cli.main import _text
from dsprof.models.user_model import ModelFileError, load_model_file, model_file_label, register_model_file
from cli_run import dsprof_here
from rule_lut import rule_lut

CSP = str(Path(__file__).parent / "models" / "csp.py")
LABEL = "file:csp:factory"
CSP_BLOCKS = ["backbone[0:2]", "backbone.2.m.0", "backbone.2.cv3.conv..backbone.3.conv", "backbone.4.m.0", "backbone.4.m.1",
              "backbone.4.cv3.conv..backbone.5.conv", "backbone.6.m.0", "backbone.6.m.1", "backbone.6.m.2",
              "backbone.6.cv3.conv..backbone.7.conv", "backbone.8.m.0", "backbone.8.cv3.conv..backbone.9.cv1.conv"]


def run(*args: str) -> subprocess.CompletedProcess:
    return dsprof_here(*args)


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_blocks_from_a_model_file():
    result = run("blocks", "--model-file", f"{CSP}:factory", "--resolution", "64")
    assert result.returncode == 0, result.stderr
    for name in CSP_BLOCKS:
        assert f"{name} " in result.stdout
    assert f"{len(CSP_BLOCKS)} blocks" in result.stdout
    assert "backbone.9" in result.stderr  # the SPPF refusal is reported, not skipped


def test_measure_labels_the_records_with_the_file_and_factory(tmp_path):
    out = tmp_path / "m.jsonl"
    result = run(
        "measure", "--model-file", f"{CSP}:factory", "--resolution", "32", "--threads", "1", "--batch", "1",
        "--variants", "original,merged", "--model-variants", "original", "--blocks", f"backbone.2.m.0,{CSP_BLOCKS[2]}",
        "--budget", "0.02", "--warmup", "0.001", "--max-warmup", "0.05", "--min-samples", "2", "--max-samples", "5",
        "--min-sample-time", "0.0005", "--no-progress", "--out", str(out),
    )
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    assert records and {r["model"] for r in records} == {LABEL}
    timed = {(r["scope"], r["name"], r["variant"]) for r in records}
    assert {("block", "backbone.2.m.0", "original"), ("block", "backbone.2.m.0", "merged")} <= timed
    assert {("block", CSP_BLOCKS[2], "original"), ("block", CSP_BLOCKS[2], "merged")} <= timed  # no module owns it
    assert any(r["scope"] == "model" for r in records)


def test_merge_a_model_file_writes_a_model_that_onnx_runtime_runs(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"model": LABEL, "keep": [0] * len(CSP_BLOCKS), "name": "all-linear"}))
    out, onnx = tmp_path / "csp-merged.pt", tmp_path / "csp-merged.onnx"
    result = run("merge", "--model-file", f"{CSP}:factory", "--plan", str(plan), "--resolution", "32",
                 "--merge-by", "macs", "--out", str(out), "--onnx", str(onnx))
    assert result.returncode == 0, result.stderr
    assert f"wrote {out}" in result.stdout and f"wrote {onnx}" in result.stdout
    payload = torch.load(out, weights_only=True)
    assert payload["model"] == LABEL and payload["resolution"] == [32, 32]
    decisions = json.loads(payload["plan"])["merge"]
    assert len(decisions) == len(CSP_BLOCKS)
    # In a process that registered the same file, the merged file loads, and ONNX Runtime computes what it does.
    from dsprof.merging import load_merged

    assert register_model_file(f"{CSP}:factory") == LABEL
    merged = load_merged(out)
    session = ort.InferenceSession(str(onnx), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32), dtype=np.float32)
    (y,) = session.run(None, {session.get_inputs()[0].name: x})
    with torch.no_grad():
        y_torch = merged(torch.from_numpy(x)).numpy()
    assert y.shape == (1, 10)  # the factory's default classes
    assert np.abs(y - y_torch).max() <= 1e-4 * np.abs(y_torch).max()


def test_missing_model_file_is_one_line_from_the_console_script():
    result = run("blocks", "--model-file", "nowhere/model.py:factory")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dsprof blocks: error:") and "does not exist" in lines[0], result.stderr


def test_missing_factory_lists_the_functions_of_the_file(capsys):
    assert main(["merge", "--model-file", f"{CSP}:no_such_factory", "--plan", "mbv2-ds-a"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has no function 'no_such_factory'" in err[0] and "factory" in err[0].split(";")[1]


BAD_FILES = {
    "raises": ("def build():\n    raise RuntimeError('weights file missing')\n", "raised RuntimeError: weights file missing"),
    "not_a_module": ("def build():\n    return 42\n", "returned an object of type int, not a torch.nn.Module"),
    "syntax": ("def build(:\n    pass\n", "importing"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_model_file_is_one_line(case, tmp_path, capsys):
    text, expected = BAD_FILES[case]
    path = write(tmp_path, f"{case}.py", text)
    assert main(["blocks", "--model-file", f"{path}:build"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err


def test_model_file_without_a_factory_name_says_the_form(capsys):
    assert main(["measure", "--model-file", CSP]) == 2
    assert "takes the form PATH.py:FACTORY" in capsys.readouterr().err


# A model file is PATH.py:FACTORY (dsprof.models.registry.model_file_parts): a file without the .py suffix is refused
# by both doors in the same line, before anything is imported, whether it exists or not.
NOT_A_SPEC = {
    "txt": ("net.txt:build", "net.txt"),  # a real file of Python, but not named .py
    "no factory": ("net.py", "net.py"),
    "missing txt": ("missing.txt:build", None),
}


@pytest.mark.parametrize("case", sorted(NOT_A_SPEC))
def test_a_model_file_not_named_path_py_factory_is_refused_alike_by_both_doors(case, tmp_path, monkeypatch, capsys):
    from dsprof.models import ModelRef

    spec, made = NOT_A_SPEC[case]
    if made is not None:
        write(tmp_path, made, "from torch import nn\ndef build():\n    return nn.Conv2d(3, 4, 1)\n")
    monkeypatch.chdir(tmp_path)
    expected = ("a model file takes the form PATH.py:FACTORY (a .py file and the function in it that builds the "
                f"model), got {spec!r}")
    with pytest.raises(ModelFileError) as by_file:
        register_model_file(spec)
    with pytest.raises(ModelFileError) as by_ref:
        ModelRef.of(spec)
    assert str(by_file.value) == str(by_ref.value) == expected
    for option in ("--model-file", "--model"):  # the command line's two doors: the same one line
        assert main(["blocks", option, spec]) == 2
        assert capsys.readouterr().err.strip().splitlines() == [f"dsprof blocks: error: {expected}"]


def test_a_library_model_under_a_prefix_is_refused_naming_the_name_it_likely_means(capsys):
    """RESULTS' tables label library models as the benchmarks do (``zoo:timm:darknet17``); typed as a model name it
    is refused as a model file is, and the line names what to type instead."""
    assert main(["blocks", "--model", "zoo:timm:darknet17"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["dsprof blocks: error: a model file takes the form PATH.py:FACTORY (a .py file and the function in "
                   "it that builds the model), got 'zoo:timm:darknet17'; a timm model is named timm:NAME (here "
                   "timm:darknet17)"]


def test_a_registered_name_with_colons_is_not_read_as_a_file(tmp_path):
    from dsprof.models import ModelRef

    path = write(tmp_path, "colon_net.py", "from torch import nn\ndef build():\n    return nn.Conv2d(3, 4, 1)\n")
    label = register_model_file(f"{path}:build")
    assert label == "file:colon_net:build"  # two colons, no .py: a name
    ref = ModelRef.of(label)
    assert (ref.entry, ref.file) == (label, f"{Path(path).resolve()}:build")


def test_model_and_model_file_exclude_each_other(capsys):
    assert main(["blocks", "--model", "resnet18", "--model-file", f"{CSP}:factory"]) == 2  # a usage error, one line
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not allowed with argument" in err[0]


def test_factory_gets_resolution_and_num_classes_where_it_takes_them(tmp_path):
    path = write(tmp_path, "sized.py", (
        "from torch import nn\n"
        "def build(resolution=96, num_classes=5):\n"
        "    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.Flatten(), nn.Linear(4 * resolution ** 2, num_classes))\n"
        "    return model\n"
        "def plain():\n"
        "    return nn.Conv2d(3, 4, 1)\n"
    ))
    model = load_model_file(f"{path}:build", resolution=16, num_classes=3)
    assert model[2].in_features == 4 * 16 * 16 and model[2].out_features == 3 and not model.training
    assert load_model_file(f"{path}:plain", resolution=16).out_channels == 4  # takes neither: called bare
    with pytest.raises(ModelFileError, match="takes no num_classes"):
        load_model_file(f"{path}:plain", num_classes=3)


def test_register_model_file_names_it_and_builds_at_any_resolution(tmp_path, monkeypatch):
    from dsprof.models import get_model, model_entry

    path = write(tmp_path, "sized_net.py", (
        "from torch import nn\n"
        "def build(resolution=40, num_classes=5):\n"
        "    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.Flatten(), nn.Linear(4 * resolution ** 2, num_classes))\n"
    ))
    label = register_model_file(f"{path}:build")
    assert label == model_file_label(f"{path}:build") == "file:sized_net:build"
    assert register_model_file(f"{path}:build") == label  # the same file again: the same model
    assert model_entry(label).default_resolution == 40  # the factory's own default
    model = get_model(label, resolution=24, num_classes=7)
    assert model[2].in_features == 4 * 24 * 24 and model[2].out_features == 7
    other = tmp_path / "elsewhere"
    other.mkdir()
    clash = write(other, "sized_net.py", "from torch import nn\ndef build():\n    return nn.Conv2d(3, 4, 1)\n")
    with pytest.raises(ModelFileError, match="already the model from"):
        register_model_file(f"{clash}:build")
    def no_network(*args, **kwargs):
        raise AssertionError("a test tried to download")

    # a file model has no weights to fetch: the error comes first, and nothing may be downloaded to find out
    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    with pytest.raises(ModelFileError, match="no published weights"):
        get_model(label, pretrained=True)


def test_an_unregistered_file_model_name_says_how_to_register_it():
    from dsprof.models import model_entry

    with pytest.raises(KeyError, match=r"pass `model='PATH\.py:build'` \(or call dsprof\.models") as caught:
        model_entry("file:never_registered:build")  # the model file, as every verb takes it: its factory is known
    assert "pass --model-file PATH.py:build (or call" in _text(caught.value, "measure")  # on the command line


@pytest.mark.slow  # measures 12 blocks and 3 models, then a report: about 30 s of CPU
def test_report_of_a_model_file_with_plans(tmp_path):
    """`report --model-file`: a plan's markers on the block plot, its memory plot, and the LUT validation of each
    plan's model measured in the LUT's own context (one plan keeps half the blocks, one merges them all, and a
    merged model file of the first, timed with --merged-model)."""
    keep = [1, 0, 1, 0, 0, 1, 0, 1, 0, 0, 1, 0]  # blocks 0, 2, 5, 7 and 10 keep theirs (2 and 5: chains no module owns)
    plans = []
    for name, plan_keep in (("csp-half", keep), ("csp-linear", [0] * len(CSP_BLOCKS))):
        plans.append(tmp_path / f"{name}.json")
        plans[-1].write_text(json.dumps({"model": LABEL, "keep": plan_keep, "name": name}))
    merged = tmp_path / "csp-merged.pt"  # a merged model file: its plan is inside
    result = run("merge", "--model-file", f"{CSP}:factory", "--plan", str(plans[0]), "--resolution", "32", "--merge-by", "macs",
                 "--out", str(merged))
    assert result.returncode == 0, result.stderr
    records = tmp_path / "m.jsonl"
    # (the whole-model "merged" variant is left out: its dense stand-in is not built right for this model yet)
    result = run(
        "measure", "--model-file", f"{CSP}:factory", "--resolution", "32", "--threads", "1", "--variants", "original,merged",
        "--model-variants", "original", "--plan", str(plans[0]), "--plan", str(plans[1]), "--merge-by", "macs", "--merged-model", str(merged),
        "--budget", "0.02",
        "--warmup", "0.001", "--max-warmup", "0.05", "--min-samples", "2", "--max-samples", "4", "--min-sample-time", "0.0005", "--no-progress",
        "--out", str(records),
    )
    assert result.returncode == 0, result.stderr
    assert main(["build-lut", str(records), "-o", str(tmp_path / "lut.csv")]) == 0
    rule_lut(tmp_path / "lut.csv", records)  # the fixed rule's medians: a plan a busy clock priced at <= 0 is skipped
    out = tmp_path / "report"
    result = run("report", str(records), "--model-file", f"{CSP}:factory", "--lut", str(tmp_path / "lut.csv"),
                 "--plans", *map(str, plans), str(merged), "--merge-by", "macs", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "LUT validation" not in result.stdout, result.stdout  # nothing about it skipped

    # Markers: one hover text per kept block of the plan (one device curve here), naming the block
    svg = (out / "plots" / "block_latency.svg").read_text()
    titles = [t.split("</title>")[0] for t in svg.split("<title>")[1:]]
    kept = [name for name, flag in zip(CSP_BLOCKS, keep) if flag]
    assert [t for t in titles if t.startswith("csp-half keeps")] == [f"csp-half keeps the activations of {n}" for n in kept]
    assert not any(t.startswith("csp-linear keeps") for t in titles)
    # Memory plot and table: every block, the kept ones left as they were
    assert (out / "plots" / "memory_csp-half.svg").is_file()
    memory = pd.read_csv(out / "tables" / "memory_csp-half.csv")
    assert list(memory["block"]) == CSP_BLOCKS
    for row, flag in zip(memory.itertuples(), keep):
        if flag:
            assert not row.merged and row.weight_bytes_after == row.weight_bytes_before
    # LUT validation: both plans' models and the merged file; measured = the medians of the records' raw samples
    validation = pd.read_csv(out / "tables" / "lut_validation.csv")
    lines = [json.loads(line) for line in records.read_text().splitlines() if line.strip()]
    medians = {r["name"]: statistics.median(r["samples_s"]) * 1e3 for r in lines if r["scope"] == "model" and r["variant"] == "custom"}
    assert sorted(validation["model"].str.split(" ").str[0]) == ["csp-half", "csp-linear", "csp-merged"]
    predicted = dict(zip(validation["model"].str.split(" ").str[0], validation["predicted_ms"]))
    assert predicted["csp-merged"] == pytest.approx(predicted["csp-half"], rel=1e-12)  # the same plan, as merged
    for row in validation.itertuples():
        assert row.measured_ms == pytest.approx(medians[row.model.split(" ")[0]], rel=1e-9)
        assert row.predicted_ms > 0
    html = (out / "report.html").read_text()
    assert "LUT prediction vs measurement" in html and "Memory footprint before and after merging: csp-half" in html
