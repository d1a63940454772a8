import os

import pytest

from dsprof.io import atomic_write_text


def test_atomic_write_replaces_and_leaves_no_temp_files(tmp_path):
    target = tmp_path / "sub" / "table.csv"
    atomic_write_text(target, "a\n")
    atomic_write_text(target, "b\n")
    assert target.read_text() == "b\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["table.csv"]


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "table.csv"
    target.write_text("old\n")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(target, "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_torch_payload_round_trip_and_refusals(tmp_path):
    import torch

    from dsprof.io import atomic_torch_save, load_torch_payload

    path = atomic_torch_save(tmp_path / "sub" / "x.pt", {"format": "dsprof.test/1", "w": torch.arange(3)})
    back = load_torch_payload(path, "dsprof.test/1", "test file", "make one")
    assert torch.equal(back["w"], torch.arange(3)) and sorted(p.name for p in path.parent.iterdir()) == ["x.pt"]
    with pytest.raises(ValueError, match="is not a other file"):
        load_torch_payload(path, "dsprof.other/1", "other file", "make one")
    with pytest.raises(FileNotFoundError, match="does not exist; make one"):
        load_torch_payload(tmp_path / "none.pt", "dsprof.test/1", "test file", "make one")
    torch.save({"format": "dsprof.test/1", "f": print}, tmp_path / "code.pt")  # a file that would run code
    with pytest.raises(Exception, match="(?i)weights.only|unsupported|global"):
        load_torch_payload(tmp_path / "code.pt", "dsprof.test/1", "test file", "make one")


def test_an_onnx_export_that_fails_midway_leaves_the_old_file(tmp_path):
    import torch
    from torch import nn

    from dsprof.models.onnx_export import export_onnx

    target = tmp_path / "model.onnx"
    export_onnx(nn.Conv2d(3, 4, 3), (1, 3, 8, 8), target)
    good = target.read_bytes()
    assert len(good) > 100

    class Breaks(nn.Module):  # runs, then fails halfway through tracing (after the exporter opened its work)
        def forward(self, x):
            torch.relu(x)
            raise RuntimeError("an operator the exporter cannot take")

    with pytest.raises(RuntimeError, match="cannot take"):
        export_onnx(Breaks(), (1, 3, 8, 8), target)
    assert target.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]  # no temporary file left
