"""Every file a command reads goes through one way in (issue 22, items 2, 4, 8): any bytes become exit 0 or one
line on exit 2, never a traceback; records and LUTs carry checksums; written files respect the umask.

The property test builds small real seed files once (a tiny MobileNetV2 at 32 px: measurement records from the
fixtures, a LUT built from them, a plan, a merged model, a checkpoint, a TorchScript bundle timed by its own
runner, a model file), then damages them with Hypothesis and runs `dsprof.cli.main` in-process. Each command is
one that reads the file first and stops soon after: where a valid file would lead to long work, the command's
output path runs through a file ("blocked/..."), so that it ends with the output error once its inputs are read.
"""

import contextlib
import csv
import hashlib
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsprof
from dsprof.cli import main
from dsprof.lut import LUT, MergeChoice, build_lut
from dsprof.merging import merge_model, save_merged
from dsprof.records.plan import Plan
from dsprof.models import ModelRef, get_model
from dsprof.planning.decide import merge_rule

FIXTURES = Path(__file__).parent / "fixtures" / "reports"
TINY = ["--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution", "32"]
PLAN = Plan("mobilenet_v2", (1, 0, 1, 0, 0, 1, 1), {"depths": [1] * 7}, name="tiny-ds")

pytestmark = pytest.mark.usefixtures("one_thread")

MODEL_FILE = '''"""A small CNN of one's own (a seed of the property test)."""
from torch import nn


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
                                  nn.Conv2d(c, c, 1), nn.BatchNorm2d(c))

    def forward(self, x):
        return x + self.body(x)


def build(num_classes=10):
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), Block(8), Block(8),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, num_classes))
'''


def run_cli(*args) -> tuple[int, str, str]:
    """`dsprof.cli.main` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in args])
    return status, out.getvalue(), err.getvalue()


def assert_clean(command: str, status: int, err: str) -> str | None:
    """Exit 0, or exit 2 with one error line last; every line on stderr is one warning or that error line."""
    lines = err.splitlines()
    errors = [line for line in lines if line.startswith(f"dsprof {command}: error: ")]
    assert all(line.startswith("warning: ") or line in errors for line in lines), err
    assert status in (0, 2), err
    if status == 2:
        assert len(errors) == 1 and lines[-1] == errors[0], err
        return errors[0]
    assert not errors, err
    return None


# -- the seed files, built once --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("seeds")
    files = {}
    lines = (FIXTURES / "tiny_torch.jsonl").read_text().splitlines(keepends=True)
    files["measurement"] = root / "m.jsonl"
    files["measurement"].write_text("".join(lines[:8]))  # blocks 0-3 and their variants: small, and real
    files["lut"] = build_lut([FIXTURES / "tiny_torch.jsonl"]).save(root / "lut.csv")
    files["plan"] = root / "plan.json"
    files["plan"].write_text(PLAN.to_json())
    files["accuracies"] = root / "acc.csv"
    shutil.copy(FIXTURES / "accuracies.csv", files["accuracies"])
    torch.manual_seed(0)
    model = get_model("mobilenet_v2", resolution=32, depths=[1] * 7, num_classes=10)
    files["merged"] = save_merged(merge_model(model, merge_rule(model, merge_by="macs").decide(PLAN).plan), root / "merged.pt")
    files["checkpoint"] = root / "ft.pt"
    torch.save(model.state_dict(), files["checkpoint"])
    files["front"] = root / "tiny.front.json"  # the fields `dsprof report --front` reads (dsprof.reports.front)
    points = [{"k": k, "keep": [1] * k + [0] * (7 - k), "latency_s": (3 + k) / 1e3, "low_s": (2.7 + k) / 1e3,
               "high_s": (3.3 + k) / 1e3} for k in range(8)]
    files["front"].write_text(json.dumps({"format": "dsprof.front", "version": 1, "model": "mobilenet_v2",
                                          "device": "cpu", "original_s": 0.01, "points": points}, indent=1) + "\n")
    files["model_file"] = root / "fuzzed_net.py"  # not mynet.py: tests/models/mynet.py registers that name in this process
    files["model_file"].write_text(MODEL_FILE)
    bundle = root / "bundle"
    assert main(["export", *TINY, "--blocks", "features.1", "--variants", "original", "--model-variants", "none",
                 "--format", "torchscript", "--out", str(bundle), "--quiet", "--budget", "0.02", "--warmup", "0", "--max-warmup", "0.05",
                 "--min-samples", "2", "--max-samples", "3", "--min-sample-time", "0.001"]) == 0
    files["results"] = root / "results.jsonl"
    done = subprocess.run([sys.executable, str(bundle / "run_bundle.py"), "--runtime", "torchscript", "--threads", "1",
                           "--out", str(files["results"]), "--quiet"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    files["manifest"] = bundle / "manifest.json"
    (root / "blocked").write_text("a file where the commands' output folder would be\n")
    return files


def _command(kind: str, path: Path, seeds: dict[str, Path]) -> list:
    """The command that reads a file of ``kind`` at ``path`` first (and stops soon after)."""
    root = seeds["lut"].parent
    blocked = root / "blocked"
    return {
        "lut": ["predict", "--lut", path, *TINY, "--no-progress"],
        "measurement": ["build-lut", path, "-o", root / "out" / "lut.csv"],
        # a 10-class head (the merged seed's): almost every damaged plan is refused, and each refusal builds and traces
        # the model to say whether it has blocks at all, ~3x dearer with 1,000 classes (num_classes is no option a
        # plan is checked against: the same plans are read, refused and accepted)
        "plan": ["merge", "--plan", path, *TINY, "--num-classes", "10", "--out", blocked / "x.pt"],
        "accuracies": ["report", seeds["measurement"], "--accuracies", path, "-o", blocked / "report"],
        "front": ["report", seeds["measurement"], "--front", path, "-o", blocked / "report"],
        "merged": ["export", *TINY, "--merged-model", path, "--blocks", "none", "--model-variants", "none",
                   "--out", blocked / "bundle"],
        "checkpoint": ["export", *TINY, "--weights", path, "--blocks", "none", "--model-variants", "none",
                       "--out", blocked / "bundle"],
        "model_file": ["blocks", "--model-file", f"{path}:build", "--resolution", "16"],
        "manifest": ["import", path.parent, seeds["results"], "--out", blocked / "x.jsonl"],
        "results": ["import", seeds["manifest"].parent, path, "--out", blocked / "x.jsonl"],
    }[kind]


# -- damage -------------------------------------------------------------------------------------------------------

def _flip(data: bytes, i: int, bit: int) -> bytes:
    i %= len(data)
    return data[:i] + bytes([data[i] ^ (1 << bit)]) + data[i + 1:]


def _digit(data: bytes, i: int, d: int) -> bytes:
    """Another digit in place of the i-th digit of the file (a value that still parses, changed)."""
    places = [m.start() for m in re.finditer(rb"[0-9]", data)]
    if not places:
        return data
    at = places[i % len(places)]
    new = b"0123456789"[(data[at] - 48 + 1 + d % 9) % 10]
    return data[:at] + bytes([new]) + data[at + 1:]


def damaged(seed: bytes, others: list[bytes]) -> st.SearchStrategy[bytes]:
    """Bit flips, cuts, insertions, deletions, a changed digit, random binary, UTF-16, a file of another kind."""
    n = max(len(seed), 1)
    text = seed if not seed.startswith(b"PK") else others[0]
    index = st.integers(0, n)
    return st.one_of(
        st.builds(_flip, st.just(seed), index, st.integers(0, 7)),
        st.builds(lambda i: seed[: i % n], index),
        st.builds(lambda i, extra: seed[:i] + extra + seed[i:], index, st.binary(min_size=1, max_size=16)),
        st.builds(lambda i, k: seed[:i] + seed[i + k:], index, st.integers(1, 200)),
        st.builds(_digit, st.just(seed), st.integers(0, 10**6), st.integers(0, 8)),
        st.binary(max_size=2048),
        st.sampled_from([text.decode("utf-8").encode("utf-16"), text.decode("utf-8").encode("utf-16-le"), b""]),
        st.sampled_from(others),
    )


# examples per kind (1,080 in all): fewer where a file that still loads leads to real work (building a model)
EXAMPLES = {"lut": 170, "measurement": 170, "plan": 180, "accuracies": 110, "manifest": 110, "results": 110,
            "merged": 40, "checkpoint": 50, "model_file": 80, "front": 60}
assert sum(EXAMPLES.values()) >= 1000


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_any_bytes_in_any_file_end_in_exit_0_or_one_line(seeds, tmp_path, kind):
    seed = seeds[kind].read_bytes()
    others = [p.read_bytes() for k, p in sorted(seeds.items()) if k != kind and k not in ("merged", "checkpoint")]
    others += [seeds["merged"].read_bytes()] if kind != "merged" else [seeds["checkpoint"].read_bytes()]
    target = tmp_path / "bundle" / "manifest.json" if kind == "manifest" else tmp_path / seeds[kind].name
    target.parent.mkdir(exist_ok=True)
    command = _command(kind, target, seeds)
    outcomes = {0: 0, 2: 0}

    @settings(max_examples=EXAMPLES[kind], deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=damaged(seed, others))
    def one(data: bytes) -> None:
        target.write_bytes(data)
        status, _, err = run_cli(*command)
        assert_clean(command[0], status, err)
        outcomes[status] += 1

    one()
    assert sum(outcomes.values()) >= EXAMPLES[kind]
    assert outcomes[2] > EXAMPLES[kind] // 2  # most damage is caught (and each example really ran the command)


# -- the cases the issue names --------------------------------------------------------------------------------------

@pytest.mark.parametrize("field", ["runtime", "workload"])
def test_a_results_line_whose_runtime_or_workload_is_not_text_is_one_line(seeds, tmp_path, field):
    # found by the damage test above on one run: a list where a name belongs raised TypeError (it does not hash)
    lines = [json.loads(line) for line in seeds["results"].read_text().splitlines() if line.strip()]
    lines[0][field] = [lines[0][field]]
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    command = _command("results", path, seeds)
    status, _, err = run_cli(*command)
    line = assert_clean("import", status, err)
    assert status == 2 and line is not None and f"{path}, result 1: " in line, err


def test_a_pytorch_file_where_text_belongs_is_named(seeds):
    merged = seeds["merged"]
    for command in (["predict", "--lut", merged, *TINY], ["build-lut", merged], ["report", merged]):
        status, _, err = run_cli(*command)
        line = assert_clean(command[0], status, err)
        assert line is not None and "Traceback" not in err
        assert f"{merged} is a dsprof merged model (PyTorch file), not a" in line
        assert "a merged model is timed by `dsprof measure --plan`" in line


def test_accuracies_with_other_columns_say_which_columns(seeds, tmp_path):
    path = tmp_path / "acc.csv"
    path.write_text("name,top1\nmobilenet_v2,72.0\n")
    status, _, err = run_cli("report", seeds["measurement"], "--accuracies", path, "-o", tmp_path / "report")
    line = assert_clean("report", status, err)
    assert line == (f"dsprof report: error: {path} is a CSV file with the header 'name,top1', not an accuracies file: "
                    "it lacks the column(s) model, accuracy (needs model,accuracy); give a CSV with the columns "
                    "model,accuracy (%), one row per model or plan name")
    path.write_text("model,accuracy\nmobilenet_v2,high\n")
    status, _, err = run_cli("report", seeds["measurement"], "--accuracies", path, "-o", tmp_path / "report")
    assert "line 2: accuracy 'high' of 'mobilenet_v2' is not a number" in assert_clean("report", status, err)
    assert not (tmp_path / "report").exists()  # inputs are read before anything is written


def test_a_checkpoint_of_10_classes_says_num_classes_and_that_suggestion_runs(seeds, tmp_path):
    checkpoint = seeds["checkpoint"]  # the tiny model with a 10-class classifier: classifier.1.weight is 10x1280
    status, _, err = run_cli("merge", "--plan", seeds["plan"], "--checkpoint", checkpoint, *TINY, "--merge-by", "macs")
    line = assert_clean("merge", status, err)
    assert line == (f"dsprof merge: error: checkpoint {checkpoint} is for 10 classes (classifier.1.weight is 10x1280), "
                    "the model has 1000; pass --num-classes 10")
    status, out, err = run_cli("merge", "--plan", seeds["plan"], "--checkpoint", checkpoint, *TINY, "--merge-by", "macs",
                               "--num-classes", "10", "--out", tmp_path / "m.pt")
    assert status == 0, err
    assert (tmp_path / "m.pt").is_file()


# -- checksums ----------------------------------------------------------------------------------------------------

def test_a_record_checksum_is_the_sha256_of_its_canonical_json(seeds):
    """What docs/records.md says, computed here from the text alone."""
    for line in seeds["measurement"].read_text().splitlines():
        record = json.loads(line)
        stored = record.pop("sha256")
        canonical = json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False)
        assert stored == hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _change_a_latency(line: str) -> tuple[str, float, float]:
    """The line with one digit of its first recorded latency changed: (new line, old value, new value)."""
    match = re.search(r'"samples_s":\[([0-9.e-]+)', line)
    old = match.group(1)
    at = next(i for i, c in enumerate(old) if c in "123456789")  # the first significant digit
    new = old[:at] + ("2" if old[at] != "2" else "3") + old[at + 1:]
    return line[: match.start(1)] + new + line[match.end(1):], float(old), float(new)


def test_a_changed_latency_is_named_left_out_and_accepted_with_the_flag(seeds, tmp_path):
    lines = seeds["measurement"].read_text().splitlines(keepends=True)
    k = 3  # the fourth record
    lines[k], old, new = _change_a_latency(lines[k])
    assert old != new
    path = tmp_path / "m.jsonl"
    path.write_text("".join(lines))
    record = json.loads(lines[k])

    status, out, err = run_cli("build-lut", path, "-o", tmp_path / "lut.csv")
    assert status == 0, err
    assert err.splitlines() == [f"warning: {path}, line {k + 1}: 1 record changed after it was written (checksum "
                                "mismatch), left out; `dsprof measure --resume` measures them again, --accept-modified "
                                "(build-lut, report) uses them as they are"]
    assert "1 record(s) changed after they were written: left out" in out
    without = tmp_path / "without.jsonl"  # the expected table: the file without that line
    without.write_text("".join(lines[:k] + lines[k + 1:]))
    expected = build_lut([without]).to_dataframe().drop(columns="sources")
    got = LUT.load(tmp_path / "lut.csv").to_dataframe().drop(columns="sources")
    assert got.equals(expected)

    status, out, err = run_cli("build-lut", path, "-o", tmp_path / "accepted.csv", "--accept-modified")
    assert status == 0 and "used as they are (--accept-modified)" in out, err
    frame = LUT.load(tmp_path / "accepted.csv").to_dataframe()
    row = frame[(frame.workload == record["spec"]) & (frame.variant == record["variant"])]
    pooled = [s for line in lines if (r := json.loads(line))["spec"] == record["spec"]
              and r["variant"] == record["variant"] for s in r["samples_s"]]
    assert new in pooled and row.median_s.item() == pytest.approx(statistics.median(pooled), rel=1e-12)


def test_records_without_checksums_need_accept_modified_as_changed_ones_do(seeds, tmp_path):
    """Nothing tells a record whose checksum was dropped from an older dsprof's: both are left out unless accepted
    (issue #45)."""
    path = tmp_path / "old.jsonl"
    records = [json.loads(line) for line in seeds["measurement"].read_text().splitlines()]
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "sha256"}) + "\n" for r in records))
    status, out, err = run_cli("build-lut", path, "-o", tmp_path / "lut.csv")
    assert status == 2 and not (tmp_path / "lut.csv").exists()
    assert err.splitlines() == [
        f"warning: {path}: {len(records)} record(s) carry no checksum (written by an older dsprof, or edited), left "
        "out; `dsprof measure --resume` measures them again, --accept-modified (build-lut, report) uses them as they "
        "are", "dsprof build-lut: error: the measurement files hold no successful record; nothing to tabulate"]
    status, out, err = run_cli("build-lut", path, "-o", tmp_path / "lut.csv", "--accept-modified")
    assert status == 0, err
    assert err.splitlines() == [f"warning: {path}: {len(records)} record(s) carry no checksum (written by an older "
                                "dsprof, or edited), used as they are (accepted)"]
    assert len(LUT.load(tmp_path / "lut.csv")) == len(build_lut([seeds["measurement"]]))


def test_a_changed_lut_is_refused_unless_accepted(seeds, tmp_path):
    text = seeds["lut"].read_text()
    header, first, rest = text.split("\n", 2)
    old = next(csv.DictReader([header, first]))["median_s"]
    assert first.count(f",{old},") == 1
    path = tmp_path / "lut.csv"
    path.write_text("\n".join([header, first.replace(f",{old},", f",{float(old) * 2!r},"), rest]))
    status, _, err = run_cli("predict", "--lut", path, *TINY)
    assert assert_clean("predict", status, err) == (
        f"dsprof predict: error: {path}: changed after `dsprof build-lut` wrote it (its checksum does not match its "
        "rows); rebuild it from the measurement files with `dsprof build-lut`, or pass --accept-modified to use it as "
        "it is")
    accepted = LUT.load(path, accept_modified=True).to_dataframe()
    assert accepted.median_s.iloc[0] == float(old) * 2
    # the checksum: SHA-256 of the text before the end line
    body, end = text.rstrip("\n").rsplit("\n", 1)
    assert end == f"# end rows={len(accepted)} sha256={hashlib.sha256((body + chr(10)).encode()).hexdigest()}"


# -- outputs: a file is replaced only by one of its kind ---------------------------------------------------------

def test_an_output_never_replaces_a_file_of_another_kind_and_replaces_one_of_its_own(seeds, tmp_path):
    """The fine-tuned checkpoint named as merge's --out, a model's source as its --out, another run's LUT beside
    plan's --out (where the front's CSV goes): each is refused in one line and left byte for byte; a merged model is replaced by
    the next merge, as before."""
    checkpoint, source = (shutil.copy(seeds[k], tmp_path / seeds[k].name) for k in ("checkpoint", "model_file"))
    lut = shutil.copy(seeds["lut"], tmp_path / "other.csv")  # a LUT of another run, not the one plan reads
    before = {p: Path(p).read_bytes() for p in (checkpoint, source, lut)}
    merge = ["merge", *TINY, "--num-classes", "10", "--plan", seeds["plan"], "--merge-by", "macs"]
    for out in (checkpoint, source):
        status, _, err = run_cli(*merge, "--checkpoint", checkpoint, "--out", out)
        line = assert_clean("merge", status, err)
        assert line is not None and f"cannot write {out}: it holds " in line and "choose another path" in line, err
    # the front is JSON at --out and CSV beside it: other.csv, that LUT
    status, _, err = run_cli("plan", *TINY, "--lut", seeds["lut"], "--keep", "2", "--out", tmp_path / "other.json",
                             "--plan-out", tmp_path / "chosen.plan.json")
    line = assert_clean("plan", status, err)
    assert line is not None and f"cannot write {lut}: it holds a dsprof LUT (CSV)" in line, err
    assert {p: Path(p).read_bytes() for p in before} == before
    merged = tmp_path / "merged.pt"
    for _ in range(2):  # written, then replaced by one of its kind
        status, out, err = run_cli(*merge, "--checkpoint", checkpoint, "--out", merged)
        assert status == 0 and f"wrote {merged}" in out, err
    from dsprof.errors import OutputPathError

    with pytest.raises(OutputPathError, match="it holds a PyTorch file"):
        dsprof.merge(ModelRef.of("mobilenet_v2", options={"depths": [1] * 7, "num_classes": 10}, resolution=32),
                     seeds["plan"], checkpoint=checkpoint, out=checkpoint, merge=MergeChoice(merge_by="macs"))
    assert Path(checkpoint).read_bytes() == before[checkpoint]


def test_a_header_from_someone_elses_file_puts_no_control_character_into_the_line_that_names_it(seeds, tmp_path):
    """The refusal to replace a file names what it holds; a CSV's header is quoted with its escapes spelled out, so a
    terminal escape (clearing the screen, a hidden link) in it reaches the terminal as text."""
    hostile = tmp_path / "theirs.csv"
    hostile.write_text('a\x1b[2J\x1b]8;;http://x\x1b\\,=HYPERLINK("x"),$(id)\n1,2,3\n')
    before = hostile.read_bytes()
    status, _, err = run_cli("merge", *TINY, "--num-classes", "10", "--plan", seeds["plan"], "--merge-by", "macs",
                             "--out", hostile)
    line = assert_clean("merge", status, err)
    assert line is not None and "it holds a CSV file with the header 'a\\x1b[2J\\x1b]8;;http://x" in line, err
    assert not any(ord(c) < 32 for c in err.replace("\n", "")) and hostile.read_bytes() == before


# -- umask ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_written_files_respect_the_umask(tmp_path, umask):
    from dsprof.io import atomic_torch_save, atomic_write_text
    from dsprof.records.measurement import MeasurementWriter

    old = os.umask(umask)
    try:
        reference = tmp_path / "by_open.txt"
        reference.write_text("x")  # what any tool's open() gives under this umask
        files = [atomic_write_text(tmp_path / "a.csv", "x\n"), atomic_torch_save(tmp_path / "m.pt", {"format": "x"}),
                 build_lut([FIXTURES / "tiny_torch.jsonl"]).save(tmp_path / "lut.csv")]
        with MeasurementWriter(tmp_path / "r.jsonl"):
            files.append(tmp_path / "r.jsonl")
    finally:
        os.umask(old)
    expected = 0o666 & ~umask
    assert reference.stat().st_mode & 0o777 == expected
    assert {f.name: f.stat().st_mode & 0o777 for f in files} == {f.name: expected for f in files}
