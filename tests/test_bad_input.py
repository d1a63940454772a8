"""Bad input through the console script (issue 15's eight cases): exit status 2, exactly one line on stderr, no
traceback, and the files on disk as they were. Small models at 32 px, so each case takes seconds."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dsprof.errors import BadFileError, DsprofError, PlanError
from dsprof.lut import LUT, build_lut
from dsprof.merge import Plan, load_merged, load_preset, merge_model, save_merged
from dsprof.models import get_model

FIXTURE = Path(__file__).parent / "fixtures" / "reports" / "tiny_torch.jsonl"  # mobilenet_v2, depths 1x7, 32 px
TINY = ["--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution", "32"]
FAST = ["--threads", "1", "--budget", "0.05", "--warmup", "0.01", "--min-samples", "2", "--no-progress"]


def dsprof(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dsprof", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def assert_one_line_error(result: subprocess.CompletedProcess, command: str, *phrases: str) -> str:
    lines = result.stderr.splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr and lines[0].startswith(f"dsprof {command}: error: "), result.stderr
    for phrase in phrases:
        assert phrase in lines[0], lines[0]
    return lines[0]


@pytest.fixture()
def work(tmp_path) -> Path:
    shutil.copy(FIXTURE, tmp_path / "m.jsonl")
    return tmp_path


def test_1_measure_out_an_existing_regular_file(work):
    (work / "existing.txt").write_text("mine\n")
    before = snapshot(work)
    result = dsprof("measure", *TINY, *FAST, "--blocks", "none", "--out", "existing.txt", cwd=work)
    assert_one_line_error(result, "measure", "cannot write the measurement file existing.txt/", "existing.txt is a file, not a folder", "--out")
    assert snapshot(work) == before


def test_2_a_cut_last_line_is_skipped_with_a_warning_and_garbage_in_the_middle_is_an_error(work):
    data = (work / "m.jsonl").read_bytes()
    lines = data.splitlines(keepends=True)
    (work / "cut").mkdir()
    (work / "cut" / "m.jsonl").write_bytes(data[:-40])  # the last record lost its end (and its newline)
    before = snapshot(work / "cut")
    result = dsprof("build-lut", "cut", "-o", "lut.csv", cwd=work)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"warning: cut/m.jsonl, line {len(lines)}: skipped a last line cut short by an interrupted run "
        "(`dsprof measure --resume` repairs the file)"
    ]
    # the cut record was the only one of its key (the last whole model): one entry fewer, none of the others lost
    assert len(LUT.load(work / "lut.csv")) == len(build_lut([work / "m.jsonl"])) - 1
    report = dsprof("report", "cut", "-o", "report", cwd=work)
    assert report.returncode == 0 and f"cut/m.jsonl, line {len(lines)}: skipped" in report.stderr
    assert snapshot(work / "cut") == before

    (work / "mid").mkdir()
    (work / "mid" / "m.jsonl").write_bytes(b"".join(lines[:5]) + b"garbage\n" + b"".join(lines[5:]))
    before = snapshot(work)
    result = dsprof("build-lut", "mid", "-o", "mid.csv", cwd=work)
    assert_one_line_error(result, "build-lut", "mid/m.jsonl, line 6: not a dsprof measurement record")
    assert snapshot(work) == before


def test_3_predict_says_the_coverage_and_exits_2_unless_allow_partial(work):
    build_lut([work / "m.jsonl"]).save(work / "lut.csv")
    before = snapshot(work)
    none = dsprof("predict", "--lut", "lut.csv", "--model", "resnet18", "--resolution", "32", cwd=work)
    assert_one_line_error(none, "predict", "covers none of the 8 blocks", "coverage 0 %", "dsprof measure --model resnet18")
    assert "contradict" not in none.stderr and none.stdout == ""
    # one block more in the last stage: 320->320 channels, which the LUT never saw; 8 blocks, 7 in the LUT
    partial_args = ["predict", "--lut", "lut.csv", "--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,2",
                    "--resolution", "32"]
    partial = dsprof(*partial_args, cwd=work)
    assert_one_line_error(partial, "predict", "covers 88% of the blocks", "--allow-partial")
    assert "coverage 88%" in partial.stdout and "PARTIAL PREDICTION" in partial.stdout
    allowed = dsprof(*partial_args, "--allow-partial", cwd=work)
    assert allowed.returncode == 0 and "PARTIAL PREDICTION" in allowed.stdout
    assert allowed.stderr.startswith("warning: the LUT covers 88% of the blocks") and len(allowed.stderr.splitlines()) == 1
    strict = dsprof(*partial_args, "--strict", cwd=work)
    assert_one_line_error(strict, "predict", "lacks 2 key(s)")
    assert snapshot(work) == before


def test_4_merged_model_files_that_are_empty_damaged_or_foreign(work):
    merged = merge_model(get_model("mobilenet_v2", resolution=32, depths=[1] * 7), _tiny_plan())
    good = save_merged(merged, work / "good.pt").read_bytes()
    (work / "empty.pt").write_bytes(b"")
    (work / "damaged.pt").write_bytes(good[: len(good) // 2])
    torch.save({"fc.weight": torch.zeros(2, 2)}, work / "foreign.pt")  # a plain state dict, not a merged model
    before = snapshot(work)
    for name, phrase in [("empty.pt", "it is empty"), ("damaged.pt", "damaged or cut"),
                         ("foreign.pt", "no format 'dsprof.merged'")]:
        result = dsprof("measure", *TINY, *FAST, "--blocks", "none", "--model-variants", "none",
                        "--merged-model", name, "--out", "r.jsonl", cwd=work)
        assert_one_line_error(result, "measure", f"{name} is not a", phrase, "dsprof merge --out")
    assert snapshot(work) == before
    with pytest.raises(BadFileError, match="empty.pt is not a readable dsprof merged model .it is empty."):
        load_merged(work / "empty.pt")
    (work / "text.pt").write_text("not a torch file at all\n")
    with pytest.raises(BadFileError, match="it is not a torch file"):
        load_merged(work / "text.pt")


def _tiny_plan() -> Plan:
    return Plan("mobilenet_v2", (1, 0, 0, 1, 0, 0, 1), {"depths": [1] * 7})


def test_5_outputs_below_a_regular_file(work):
    (work / "a").write_text("mine\n")
    (work / "plan.json").write_text(_tiny_plan().to_json())
    before = snapshot(work)
    result = dsprof("merge", *TINY, "--plan", "plan.json", "--out", "a/b.pt", cwd=work)
    assert_one_line_error(result, "merge", "cannot write a/b.pt: a is a file, not a folder")
    result = dsprof("build-lut", "m.jsonl", "-o", "a/lut.csv", cwd=work)
    assert_one_line_error(result, "build-lut", "cannot write a/lut.csv: a is a file, not a folder")
    assert snapshot(work) == before


def test_6_merge_model_refuses_a_plan_for_another_model():
    model = get_model("resnet50", resolution=32)
    with pytest.raises(PlanError, match="efflite0-ds-d is for model 'tf_efficientnet_lite0', not 'resnet50'"):
        merge_model(model, load_preset("efflite0-ds-d"))  # 16 blocks each: the count alone would let it pass
    wide = get_model("mobilenet_v2", resolution=32, width=1.4)
    with pytest.raises(PlanError, match="options"):
        merge_model(wide, load_preset("mbv2-ds-a"))  # a plan for width 1.0
    same_family = get_model("efficientnet_lite0", resolution=32)
    merge_model(same_family, load_preset("efflite0-ds-d"))  # a TF port and its native twin share their plans


def test_8_depths_that_are_not_ints(work):
    before = snapshot(work)
    result = dsprof("merge", "--model", "mobilenet_v2", "--depths", "1,a", "--plan", "mbv2-ds-a", cwd=work)
    assert_one_line_error(result, "merge", "--depths must be comma-separated ints, got '1,a'")
    assert snapshot(work) == before


def test_every_library_error_for_users_is_one_family():
    """Registry misses are DsprofErrors that still are KeyErrors, and print unquoted."""
    with pytest.raises(DsprofError) as info:
        get_model("mobilenet_v9")
    assert isinstance(info.value, KeyError) and str(info.value).startswith("unknown model 'mobilenet_v9'")


@pytest.mark.parametrize("bug", [TypeError, KeyError, ImportError, ValueError])
def test_anything_else_is_a_bug_with_its_traceback(monkeypatch, bug):
    """Only the DsprofError family is turned into one line; a built-in exception from inside a command propagates
    (Python prints its traceback and exits with status 1)."""
    import dsprof.cli

    def broken(*args, **kwargs):
        raise bug("a bug inside dsprof")

    monkeypatch.setattr(dsprof.cli, "get_model", broken)
    with pytest.raises(bug, match="a bug inside dsprof"):
        dsprof.cli.main(["blocks", "--model", "mobilenet_v2"])
