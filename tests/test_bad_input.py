"""Bad input through the command line (issue 15's cases): exit status 2, exactly one line on stderr, no
traceback, and the files on disk as they were. The first case runs the console script as a process; the others run
`dsprof.cli.main` in this process (tests/cli_run.py says why). Small models at 32 px, so each case takes seconds."""

import csv
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import dsprof as dsprof_api
from dsprof.errors import BadFileError, DsprofError, OutputPathError, PlanError
from dsprof.lut import LUT, build_lut
from dsprof.merging import load_merged, merge_model, save_merged
from dsprof.records.plan import Plan, load_preset
from dsprof.models import ModelRef, get_model
from dsprof.profiler import Workloads, measure
from dsprof.planning.decide import merge_rule

from cli_run import dsprof_here as dsprof

FIXTURE = Path(__file__).parent / "fixtures" / "reports" / "tiny_torch.jsonl"  # mobilenet_v2, depths 1x7, 32 px
TINY = ["--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution", "32"]
FAST = ["--threads", "1", "--budget", "0.05", "--warmup", "0.01", "--max-warmup", "0.05", "--min-samples", "2", "--no-progress"]

pytestmark = pytest.mark.usefixtures("one_thread")  # the models built here compute on one thread, as under xdist


ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).with_name("dsprof")  # the console script installed beside this Python


def console_script(*args, cwd: Path) -> subprocess.CompletedProcess:
    """Run the console script on this checkout's dsprof (PYTHONPATH first: an installed copy may be another)."""
    command = [str(SCRIPT)] if SCRIPT.is_file() else [sys.executable, "-m", "dsprof"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return subprocess.run([*command, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


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
    result = console_script("measure", *TINY, *FAST, "--blocks", "none", "--out", "existing.txt", cwd=work)
    assert_one_line_error(result, "measure", "cannot write the measurement file in existing.txt: existing.txt is a file, "
                          "not a folder", "--out")
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
    tiny = get_model("mobilenet_v2", resolution=32, depths=[1] * 7)
    merged = merge_model(tiny, merge_rule(tiny, merge_by="macs").decide(_tiny_plan()).plan)
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
    with pytest.raises(BadFileError, match="text.pt is text, not a dsprof merged model; write one with"):
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
    # 10-class heads: a plan is checked against the model's name and options, never its class count
    model = get_model("resnet50", resolution=32, num_classes=10)
    with pytest.raises(PlanError, match="efflite0-ds-d is for model 'tf_efficientnet_lite0', not 'resnet50'"):
        merge_model(model, load_preset("efflite0-ds-d"))  # 16 blocks each: the count alone would let it pass
    wide = get_model("mobilenet_v2", resolution=32, width=1.4, num_classes=10)
    with pytest.raises(PlanError, match="options"):
        merge_model(wide, load_preset("mbv2-ds-a"))  # a plan for width 1.0
    same_family = get_model("efficientnet_lite0", resolution=32, num_classes=10)
    # a TF port and its native twin share their plans
    merge_model(same_family, merge_rule(same_family, merge_by="macs").decide(load_preset("efflite0-ds-d")).plan)


def test_7_a_front_where_a_plan_goes_names_the_command_that_writes_one_of_its_plans(work):
    """A new user gave `dsprof merge --plan` the front `dsprof plan --out` wrote: the line said where a front goes and
    that a plan comes from `dsprof search`, not that `dsprof plan --keep K` writes the plan of one k of that front."""
    assert dsprof("build-lut", "m.jsonl", "-o", "lut.csv", cwd=work).returncode == 0
    planned = dsprof("plan", *TINY, "--lut", "lut.csv", "--max-span", "1", "--out", "front.json", cwd=work)
    assert planned.returncode == 0, planned.stderr
    before = snapshot(work)
    line = assert_one_line_error(dsprof("merge", *TINY, "--plan", "front.json", "--out", "m.pt", cwd=work), "merge",
                                 "front.json is a planner's front (JSON), not a plan (JSON)",
                                 "a front goes to `dsprof report --front`", "`dsprof plan --keep K` (one k of the front)")
    assert "dsprof.plan(" not in line  # the command line's words, not the API's
    assert snapshot(work) == before
    with pytest.raises(PlanError, match=r"`dsprof\.plan\(keep=K\)` \(one k of the front\) or `dsprof\.search\(\)`"):
        dsprof_api.merge(ModelRef.of("mobilenet_v2", options={"depths": [1] * 7}, resolution=32), plan=work / "front.json")
    # what it says to do, done with K = 3 and the same model and LUT, gives a plan that merge takes
    assert dsprof("plan", *TINY, "--lut", "lut.csv", "--max-span", "1", "--keep", "3", "--out", "front.json",
                  cwd=work).returncode == 0
    merged = dsprof("merge", *TINY, "--plan", "front.plan.json", "--out", "m.pt", cwd=work)
    assert merged.returncode == 0 and (work / "m.pt").is_file(), merged.stderr


def test_8_depths_that_are_not_ints(work):
    before = snapshot(work)
    result = dsprof("merge", "--model", "mobilenet_v2", "--depths", "1,a", "--plan", "mbv2-ds-a", cwd=work)
    assert_one_line_error(result, "merge", "--depths must be comma-separated ints, got '1,a'")
    assert snapshot(work) == before


def test_9_merge_checks_every_output_before_it_writes_one(work):
    (work / "bad").write_text("mine\n")
    (work / "plan.json").write_text(_tiny_plan().to_json())
    before = snapshot(work)
    result = dsprof("merge", *TINY, "--plan", "plan.json", "--out", "ok.pt", "--onnx", "bad/x.onnx", cwd=work)
    assert_one_line_error(result, "merge", "cannot write bad/x.onnx: bad is a file, not a folder")
    result = dsprof("merge", *TINY, "--plan", "plan.json", "--out", "bad/x.pt", "--onnx", "ok.onnx", cwd=work)
    assert_one_line_error(result, "merge", "cannot write bad/x.pt: bad is a file, not a folder")
    assert snapshot(work) == before  # neither ok.pt nor ok.onnx
    # an earlier merged model that was there: merge replaces it only on success
    assert dsprof("merge", *TINY, "--plan", "plan.json", "--merge-by", "macs", "--out", "ok.pt", cwd=work).returncode == 0
    before = snapshot(work)
    result = dsprof("merge", *TINY, "--plan", "plan.json", "--out", "ok.pt", "--onnx", "bad/x.onnx", cwd=work)
    assert_one_line_error(result, "merge", "cannot write bad/x.onnx")
    assert snapshot(work) == before


def test_10_measure_checks_its_output_before_it_builds_anything(work):
    (work / "a").write_text("mine\n")
    before = snapshot(work)
    # --plan names no file: had the models been built first, that would be the error
    result = dsprof("measure", *TINY, *FAST, "--plan", "no-such-plan.json", "--out", "a/r.jsonl", cwd=work)
    assert_one_line_error(result, "measure", "cannot write the measurement file a/r.jsonl: a is a file, not a folder",
                          "--out")
    result = dsprof("measure", *TINY, *FAST, "--plan", "no-such-plan.json", "--out", "a/results", cwd=work)
    assert_one_line_error(result, "measure", "cannot write the measurement file in a/results: a is a file, not a folder")
    assert snapshot(work) == before
    # an existing .jsonl without --resume or --overwrite: said before anything is built, the file kept
    (work / "old.jsonl").write_text("{}\n")
    before = snapshot(work)
    result = dsprof("measure", *TINY, *FAST, "--plan", "no-such-plan.json", "--out", "old.jsonl", cwd=work)
    assert_one_line_error(result, "measure", "old.jsonl exists; pass --resume to continue it")
    assert snapshot(work) == before
    # the library checks first too: the output, before the workloads that a bad --blocks would stop
    with pytest.raises(OutputPathError, match="a is a file, not a folder"):
        measure(ModelRef.of("mobilenet_v2", options={"depths": [1] * 7}, resolution=32),
                workloads=Workloads(blocks="no-such-block"), out=work / "a" / "r.jsonl", progress=False)
    assert snapshot(work) == before


def _hand_lut_csv(path: Path, whole_ms: float) -> None:
    """A LUT written row by row: the 7 blocks of mobilenet_v2 (depths 1x7, 32 px) at 1, 2, ... 7 ms (28 ms in
    all), block 1 merged at 0.5 ms, and the whole model at ``whole_ms``; one CPU context, no spread."""
    from dsprof.lut.schema import COLUMNS
    from dsprof.models import find_blocks

    label = 'mobilenet_v2{"depths":[1,1,1,1,1,1,1],"resolution":32}'
    context = ["dsprof.lut/2", "hand", "Hand CPU", "cpu", "torch", "fp32", "nchw", 1, 1, False]
    specs = [b.spec.to_str() for b in find_blocks(get_model("mobilenet_v2", resolution=32, depths=[1] * 7))]
    rows = [[*context, "block", spec, "original", (i + 1) * 1e-3] for i, spec in enumerate(specs)]
    rows += [[*context, "block", specs[1], "merged", 0.5e-3], [*context, "model", label, "original", whole_ms * 1e-3]]
    from dsprof.lut.table import table_checksum

    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(row + [0.0, 10, False, "hand", 1, 0.0, "", "", ""] for row in rows)
    path.write_text(f"{text.getvalue()}# end rows={len(rows)} sha256={table_checksum(text.getvalue())}\n")


def test_11_predict_says_what_a_negative_rest_means(work):
    (work / "plan.json").write_text(Plan("mobilenet_v2", (1, 0, 1, 1, 1, 1, 1), {"depths": [1] * 7}).to_json())
    _hand_lut_csv(work / "fast.csv", whole_ms=27.6)  # the whole model 0.4 ms faster than its blocks' 28 ms
    result = dsprof("predict", "--lut", "fast.csv", *TINY, "--plan", "plan.json", "--method", "isolated", cwd=work)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    # the whole model minus block 1's saving (2 - 0.5 ms); the rest 27.6 - 28 ms
    assert "26.100 ms per batch" in result.stdout, result.stdout
    assert ("rest (model-minus-blocks) -0.400 ms: below zero: the whole model measured faster than the sum of its "
            "blocks timed alone") in result.stdout, result.stdout
    _hand_lut_csv(work / "slow.csv", whole_ms=28.4)
    result = dsprof("predict", "--lut", "slow.csv", *TINY, "--plan", "plan.json", "--method", "isolated", cwd=work)
    assert result.returncode == 0 and "26.900 ms per batch" in result.stdout, result.stderr
    assert "rest (model-minus-blocks) 0.400 ms" in result.stdout and "below zero" not in result.stdout


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
    import dsprof.models

    def broken(*args, **kwargs):
        raise bug("a bug inside dsprof")

    # the command builds its model through the one model reference when it runs (a quick start-up), so break it there
    monkeypatch.setattr(dsprof.models.ModelRef, "build", broken)
    with pytest.raises(bug, match="a bug inside dsprof"):
        dsprof.cli.main(["blocks", "--model", "mobilenet_v2"])


def test_published_weights_that_cannot_be_downloaded_end_in_one_line_naming_the_way_out(tmp_path):
    """`--weights pretrained` where the weights cannot be fetched printed the hub's 90-line traceback; now the last
    line says what failed and to give a local checkpoint. Nothing is downloaded: the Hugging Face hub that timm's
    weights come from is switched offline (HF_HUB_OFFLINE), with an empty cache, so it refuses before any request,
    and every proxy points at a closed local port besides."""
    closed = "http://127.0.0.1:9"
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"),
               TORCH_HOME=str(tmp_path / "hub"), http_proxy=closed, https_proxy=closed, HTTP_PROXY=closed,
               HTTPS_PROXY=closed, no_proxy="", NO_PROXY="")
    command = [str(SCRIPT)] if SCRIPT.is_file() else [sys.executable, "-m", "dsprof"]
    done = subprocess.run([*command, "blocks", "--model", "mobilenetv2_100", "--weights", "pretrained"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("dsprof blocks: error: could not download the published weights of mobilenetv2_100 ("), line
    assert line.endswith("); give a local checkpoint as --weights PATH"), line


def test_measure_refuses_an_output_of_another_kind_and_an_empty_selection_and_leaves_nothing(work):
    """`--out m/x.csv` made a folder named x.csv; a selection of nothing (`--variants none --blocks none
    --model-variants none`) wrote an empty file that the next run then refused as existing. Both are one line now,
    before anything is written."""
    model = ["--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution", "32"]
    before = snapshot(work)
    result = dsprof("measure", *model, *FAST, "--out", "m/x.csv", cwd=work)
    assert_one_line_error(result, "measure", "m/x.csv: measurements are JSON Lines; give a .jsonl file or a folder")
    result = dsprof("measure", *model, *FAST, "--variants", "none", "--blocks", "none", "--model-variants", "none",
                    "--out", "m", cwd=work)
    assert_one_line_error(result, "measure", "nothing to measure: no block matched, and no whole-model variant or plan")
    # blocks that match, but no variant of them: said so, not that no block matched
    result = dsprof("measure", *model, *FAST, "--variants", "none", "--blocks", "features.1", "--model-variants",
                    "none", "--out", "m", cwd=work)
    assert_one_line_error(result, "measure", "nothing to measure: no block variant was asked for (--variants), and no "
                                             "whole-model variant or plan")
    assert snapshot(work) == before and not (work / "m").exists()


@pytest.mark.parametrize("size", [(1, 3, 32, 32), (32,), "32", (32.0, 32), (0, 32)])
def test_an_input_size_that_is_not_height_and_width_is_one_line_naming_the_parameter(size):
    """torch's habit is an input's whole shape (N, C, H, W); `find_blocks`, `count_macs` and `summarize_blocks` take
    the image's (height, width). Anything else was a bare ValueError from inside the tracer."""
    import dsprof
    from dsprof.errors import UsageError

    model = get_model("mobilenet_v2", resolution=32, depths=[1] * 7)
    for call in (dsprof.find_blocks, dsprof.count_macs, dsprof.summarize_blocks):
        with pytest.raises(UsageError, match=r"^`input_size=.*`: give the image's \(height, width\) in pixels") as err:
            call(model, size)
        assert ("(not the input tensor's whole shape), e.g. (32, 32)" in str(err.value)) == (len(size) == 4)
    # (height, width) as a tuple or a list: 7 blocks (one per stage of depths 1); the convolutions' MACs grow with the
    # area (both sizes divide by the stride 32), the classifier's (1280 x 1000) do not
    assert len(dsprof.find_blocks(model, [32, 32])) == len(dsprof.find_blocks(model, (64, 64))) == 7
    classifier = 1280 * 1000
    assert dsprof.count_macs(model, (64, 64)) == 4 * (dsprof.count_macs(model, [32, 32]) - classifier) + classifier
