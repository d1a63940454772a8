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
