"""Files from someone else (issue #45, the reading side): each crafted record, LUT, edge result, bundle manifest, plan,
front, importance file and merged model goes through the real reader or the real command line (in process,
`cli_run.dsprof_here`), and is refused in one line that names the file and the field -- before a model is built,
a value is shown or a command is printed -- or, where it may pass, lands quoted in the commands dsprof prints.

The expected refusals are written out from the rules in dsprof/fields.py (a name's charset and length, counts and
sizes within their bounds, samples finite and positive, no weights or paths in options); the hostile strings are the
issue's reproductions."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import pytest
import torch

from cli_run import dsprof_here
from dsprof.cli.commands import (model_flags, build_lut_command, import_command, importance_command, measure_command,
                                 merge_command, plan_command, shell_command)
from dsprof.device_context import DeviceContext
from dsprof.errors import BadFileError, EdgeError, ImportanceHint, LUTError, MeasurementFileError, MergeError, PlanError
from dsprof.fields import check_environment
from dsprof.io import atomic_torch_save, load_torch_payload, read_json
from dsprof.lut import LUT, build_lut
from dsprof.lut.table import table_checksum
from dsprof.models import get_model, model_args
from dsprof.records.plan import load_plan
from dsprof.records import measurement
from dsprof.records.measurement import record_checksum, read_measurements
from dsprof.records.stats import summarize
from dsprof.reports.front import load_front
from dsprof.workflows.plan import load_importance

FIXTURE = Path(__file__).parent / "fixtures" / "reports" / "tiny_torch.jsonl"
#: The issue's hostile strings: a shell substitution, a script link, a spreadsheet formula, LaTeX, a path.
HOSTILE = ["cpu$(touch PWN)", "[x](javascript:alert%28document.domain%29)", "=cmd|' /C calc'!A0",
           "\\input{/etc/passwd}", "/../../../outside/ESCAPED", "a;rm -rf ~", "`id`", "x\ny", "<script>x</script>"]


def one_error_line(result, command: str) -> str:
    """The one line a refused command prints (warnings before it allowed), after checking it is one line."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if not line.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith(f"dsprof {command}: error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


# -- measurement records ----------------------------------------------------------------------------------------------

def _record(**changes) -> dict:
    data = json.loads(FIXTURE.read_text().splitlines()[0])
    data.pop("sha256")
    data.update(changes)
    return data


def _write_records(path: Path, *records: dict) -> Path:
    """Records with their checksum recomputed: what a careful forger writes (the checksum proves no origin)."""
    path.write_text("".join(json.dumps({**r, "sha256": record_checksum(r)}) + "\n" for r in records))
    return path


@pytest.mark.parametrize("field, value, says", [
    ("device", "cpu$(touch PWN)", "field 'device' is 'cpu$(touch PWN)'"),
    ("backend", "torch; id", "field 'backend'"),
    ("env_id", "a/b", "field 'env_id'"),
    ("device_name", "[x](javascript:alert%28document.domain%29)", "field 'device_name' is '[x](javascript:alert%28d"),
    ("device_name", "=cmd|' /C calc'!A0", "it holds '='"),
    ("device_name", "$\\undefinedmacro$", "it holds '$'"),
    ("device_name", "x" * 201, "longer than 200 characters"),
    ("threads", -1, "field 'threads' is -1: it must be from 0 to 4096"),
    ("threads", "4", "field 'threads' must be an integer, got '4'"),
    ("threads", [4], "field 'threads' must be an integer, got [4]"),
    ("batch", 10 ** 9, "field 'batch' is 1000000000: it must be from 1 to 65536"),
    ("batch", True, "field 'batch' must be an integer"),
    ("samples_s", [1e308, 1e308], "field 'samples_s', sample 1 is 1e+308"),
    ("samples_s", [0.001, -0.002], "field 'samples_s', sample 2 is -0.002"),
    ("samples_s", [0.001, 0.0], "sample 2 is 0.0"),
    ("samples_s", "0.001", "field 'samples_s' must be a list of seconds"),
    ("input_shape", [1, 32, 10 ** 6, 16], "field 'input_shape[2]' is 1000000: it must be from 1 to 4096"),
    ("model_options", {"pretrained": "/etc/hostname"}, "field 'model_options.pretrained': a file cannot choose weights"),
    ("model_options", {"width": 1e9}, "field 'model_options.width' is 1000000000.0: it must be a number from 0.01 to 8"),
    ("model_options", {"depths": [1, 1, 1, 1, 1, 1, 1000]}, "field 'model_options.depths' is 1000"),
    ("model_options", {"num_classes": 10 ** 9}, "field 'model_options.num_classes' is 1000000000"),
    ("model_options", {"resolution": 32.5}, "field 'model_options.resolution' is 32.5: it must be an integer"),
    ("model_options", ["width", 1.4], "field 'model_options' must be an object of options, got list"),
    ("model", ["mobilenet_v2"], "field 'model' must be a string, got list"),
])
def test_a_record_with_a_bad_field_is_refused_in_one_line_naming_file_line_and_field(tmp_path, field, value, says):
    path = _write_records(tmp_path / "m.jsonl", _record(), _record(**{field: value}))
    line = one_error_line(dsprof_here("build-lut", path, "-o", tmp_path / "lut.csv"), "build-lut")
    assert line.startswith(f"dsprof build-lut: error: {path}, line 2: not a dsprof measurement record (")
    assert says in line, line
    assert not (tmp_path / "lut.csv").exists()


@pytest.mark.parametrize("environment, says", [
    ({"host": "vm`id`"}, "field 'environment.host' is 'vm\\x60id\\x60': it holds a backquote"),
    ({"cpu": {"model": "x\ny"}}, "field 'environment.cpu.model' must be text of at most 1000 characters without "
                                  "control characters"),
    ({"cpu": ["Intel"]}, "field 'environment.cpu' must be an object, got list"),
    ({"gpu": {"name": "x"}}, "field 'environment.gpu' must be a list of objects, got {'name': 'x'}"),
    ({"versions": {"torch": 2.1}}, "field 'environment.versions.torch' must be a string, got float"),
    ({"jetson": {"a": {"b": {"c": {"d": 1}}}}}, "field 'environment.jetson.a.b.c' holds {'d': 1}: more nested than"),
], ids=["backquote", "newline", "cpu_list", "gpu_object", "version_number", "too_deep"])
def test_a_hostile_environment_after_records_of_one_machine_is_refused_naming_its_line(tmp_path, environment, says):
    """A run's records all carry one machine, checked once a file: a last record whose environment is another,
    hostile one is checked on its own and refused as any bad field is, naming the file, its line and the field."""
    machine = _record()["environment"]
    records = [_record(name=f"features.{i}") for i in range(5)] + [_record(environment={**machine, **environment})]
    path = _write_records(tmp_path / "m.jsonl", *records)
    with pytest.raises(MeasurementFileError) as caught:
        read_measurements(path)
    assert str(caught.value).startswith(f"{path}, line 6: not a dsprof measurement record ({says}"), caught.value
    line = one_error_line(dsprof_here("build-lut", path, "-o", tmp_path / "lut.csv"), "build-lut")
    assert line.startswith(f"dsprof build-lut: error: {path}, line 6: not a dsprof measurement record (")
    assert says in line, line
    assert not (tmp_path / "lut.csv").exists()


def test_an_environment_json_cannot_hold_is_still_checked_and_refused(tmp_path):
    """NaN in the last record's environment (no checksum can cover it; read with ``accept_modified``): refused."""
    machine = _record()["environment"]
    good = [json.dumps({**r, "sha256": record_checksum(r)}) for r in (_record(), _record(name="features.2"))]
    bad = json.dumps(_record(environment={**machine, "cpu": {**machine["cpu"], "logical_cores": math.nan}}))
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join([*good, bad]) + "\n")
    with pytest.raises(MeasurementFileError) as caught:
        read_measurements(path, accept_modified=True)
    assert str(caught.value).startswith(f"{path}, line 3: not a dsprof measurement record (field "
                                        "'environment.cpu.logical_cores' is nan: it must be a finite number)")


def test_one_machine_s_environment_is_checked_once_a_file(tmp_path, monkeypatch):
    """Each distinct environment of a file is checked once (its check was most of reading a run's records), every
    other field of every record as before; a second read checks again."""
    checked = []
    monkeypatch.setattr(measurement, "check_environment", lambda env: checked.append(env) or check_environment(env))
    machine = _record()["environment"]
    other = {**machine, "host": "other"}
    envs = [machine, machine, other, {**machine}, other, dict(reversed(machine.items()))]  # key order: the same value
    path = _write_records(tmp_path / "m.jsonl", *[_record(name=f"features.{i}", environment=e)
                                                  for i, e in enumerate(envs)])
    assert [r.environment for r in read_measurements(path)] == envs
    assert checked == [machine, other]
    read_measurements(path)
    assert checked == [machine, other] * 2


#: A 400-digit integer: JSON reads it, no float holds it (`math.isfinite` of it raises OverflowError).
HUGE = 10 ** 400


@pytest.mark.parametrize("changes, field", [
    ({"samples_s": [0.001, HUGE]}, "samples_s"),
    ({"budget_s": HUGE}, "budget_s"),
    ({"batch": HUGE}, "batch"),
    ({"state_before": {"temperature": HUGE}}, "state_before.temperature"),
    ({"model_options": {"width": HUGE}}, "model_options"),
], ids=["samples", "budget", "batch", "state", "model_options"])
def test_an_integer_no_float_holds_is_refused_in_one_line(tmp_path, changes, field):
    path = _write_records(tmp_path / "m.jsonl", _record(), _record(name="features.2", **changes))
    with pytest.raises(MeasurementFileError) as caught:
        read_measurements(path)
    assert str(caught.value).startswith(f"{path}, line 2: not a dsprof measurement record (field '{field}"), caught.value
    assert len(str(caught.value)) < 600  # the number is cut where it is shown
    line = one_error_line(dsprof_here("build-lut", path, "-o", tmp_path / "lut.csv"), "build-lut")
    assert f"line 2: not a dsprof measurement record (field '{field}" in line


def test_an_importance_file_with_an_integer_no_float_holds_is_refused_in_one_line(tmp_path):
    path = tmp_path / "importance.json"
    path.write_text(json.dumps({"format": "dsprof.importance", "version": 1, "model": {"name": "mobilenet_v2"},
                                "importance": [0.5, HUGE]}))
    with pytest.raises(BadFileError, match='"importance" must be a list of finite numbers'):
        load_importance(path)


def test_large_samples_no_longer_overflow_the_statistics():
    """Samples of 1e308 (refused on load) still give finite statistics where summarize is called on them: the mean
    and deviation are taken over the samples scaled to 1 (fsum of 1e308s overflows)."""
    stats = summarize([1e308, 1e308, 1.5e308])
    assert stats.mean == pytest.approx(1e308 * (3.5 / 3), rel=1e-12)
    assert stats.median == 1e308 and math.isfinite(stats.cov)
    assert stats.cov == pytest.approx(math.sqrt(((1 - 7 / 6) ** 2 * 2 + (1.5 - 7 / 6) ** 2) / 2) / (7 / 6), rel=1e-9)


# -- LUTs -------------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lut_text(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("lut") / "lut.csv"
    build_lut([FIXTURE]).save(path)
    return path.read_text()


def _resealed(text: str) -> str:
    """``text`` (a LUT file) with its end line's checksum recomputed over its edited rows."""
    body, _, last = text.rstrip("\n").rpartition("\n")
    rows = last.split()[2]
    return f"{body}\n# end {rows} sha256={table_checksum(body + chr(10))}\n"


@pytest.mark.parametrize("column, value, says", [
    ("device", "cpu$(touch PWN)", "field 'device' is 'cpu$(touch PWN)'"),
    ("device_name", "=cmd|' /C calc'!A0", "field 'device_name'"),
    ("env_id", "../x", "field 'env_id'"),
    ("threads", "99999", "field 'threads' is 99999"),
])
def test_a_lut_with_a_bad_device_column_is_refused_naming_row_and_field(tmp_path, lut_text, column, value, says):
    import csv
    import io

    rows = list(csv.reader(io.StringIO(lut_text.split("\n# end")[0] + "\n")))
    at = rows[0].index(column)
    rows[1][at] = value
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    path = tmp_path / "lut.csv"
    path.write_text(_resealed(out.getvalue() + "# end " + lut_text.split("\n# end ")[1]))
    with pytest.raises(LUTError) as caught:
        LUT.load(path)
    assert str(caught.value).startswith(f"{path}, row 1 (line 2): ") and says in str(caught.value)
    line = one_error_line(dsprof_here("plan", "--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution",
                                      "32", "--lut", path, "--out", tmp_path / "front.json"), "plan")
    assert says in line and not (tmp_path / "front.json").exists()


def test_a_lut_without_its_checksum_needs_accept_modified(tmp_path, lut_text):
    path = tmp_path / "lut.csv"
    path.write_text(lut_text.rsplit(" sha256=", 1)[0] + "\n")  # the end line as an older dsprof wrote it
    with pytest.raises(LUTError, match="carries no checksum .* pass `accept_modified=True` to use it as it is"):
        LUT.load(path)
    assert len(LUT.load(path, accept_modified=True)) == len(build_lut([FIXTURE]))
    line = one_error_line(dsprof_here("plan", "--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution",
                                      "32", "--lut", path, "--out", tmp_path / "front.json"), "plan")
    assert "carries no checksum" in line and "--accept-modified" in line


# -- edge results and bundle manifests --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """A real one-block bundle (ONNX), exported by `dsprof export`."""
    out = tmp_path_factory.mktemp("edge") / "bundle"
    torch.manual_seed(0)
    done = dsprof_here("export", "--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution", "32",
                       "--blocks", "features.1", "--model-variants", "none", "--variants", "original",
                       "--format", "onnx", "--out", out, "--quiet")
    assert done.returncode == 0, done.stderr
    return out


def _results(bundle: Path, path: Path, **changes) -> Path:
    """A results file as the runner writes it, one line per workload of ``bundle``, with ``changes`` in every line
    (the settings of a run must agree from line to line)."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    lines = []
    for i, w in enumerate(manifest["workloads"]):
        line = {"format": manifest["results_format"], "bundle_id": manifest["bundle_id"], "runtime": "onnxruntime",
                "device": "cpu", "threads": 1, "workload": w["id"], "layout": "nchw", "group": f"0000abcd:{i}",
                "samples_s": [0.0011, 0.0010, 0.0012], "iterations_per_sample": 1, "warmup_iterations": 5,
                "stop_reason": "budget", "target_precision": 0.05, "budget_s": 0.1,
                "environment": {"cpu": {"model": "Cortex-A57 (v8l)"}, "versions": {"onnxruntime": "1.x"}},
                "state_before": {}, "state_after": {}, "time_utc": "2026-11-28T00:00:00+00:00", "error": None,
                "runtime_info": {}}
        lines.append({**line, **changes})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_plain_edge_results_import_with_fresh_checksums(bundle, tmp_path):
    """The crafted results file is a good one: without the changes below it imports, and says that the checksums
    are new (they check the file from here on, not what the device sent)."""
    done = dsprof_here("import", bundle, _results(bundle, tmp_path / "r.jsonl"), "--out", tmp_path / "m")
    assert done.returncode == 0, done.stderr
    assert "fresh checksums" in done.stdout
    (path,) = (tmp_path / "m").glob("*.jsonl")
    assert [r.samples_s for r in read_measurements(path)] == [(0.0011, 0.0010, 0.0012)] * len(
        json.loads((bundle / "manifest.json").read_text())["workloads"])
    (suggested,) = [line.removeprefix("next: ") for line in done.stdout.splitlines() if line.startswith("next: ")]
    assert shlex.split(suggested) == ["dsprof", "build-lut", str(path.parent), "-o", str(path.parent / "lut.csv")]


@pytest.mark.parametrize("changes, says", [
    ({"device": "cpu$(touch PWN)"}, "field 'device' is 'cpu$(touch PWN)'"),
    ({"environment": {"cpu": {"model": "[x](javascript:alert(1))"}}}, "field 'device_name'"),
    ({"samples_s": [0.001, -0.001]}, "field 'samples_s', sample 2 is -0.001"),
    ({"samples_s": [0.001, float("nan")]}, "field 'samples_s', sample 2 is nan"),
    ({"samples_s": [1e308]}, "field 'samples_s', sample 1 is 1e+308"),
    ({"threads": 10 ** 6}, "field 'threads' is 1000000: it must be from 0 to 4096"),
])
def test_edge_results_with_a_bad_field_are_refused_at_import_naming_file_result_and_field(bundle, tmp_path, changes,
                                                                                          says):
    results = _results(bundle, tmp_path / "r.jsonl", **changes)
    line = one_error_line(dsprof_here("import", bundle, results, "--out", tmp_path / "m"), "import")
    assert line.startswith(f"dsprof import: error: {results}, result 1: "), line
    assert says in line, line
    assert not (tmp_path / "m").exists() or not list((tmp_path / "m").glob("*.jsonl"))


@pytest.mark.parametrize("changes, says", [
    ({"dtype": "/../../../outside/ESCAPED"}, "field 'dtype' is '/../../../outside/ESCAPED'"),
    ({"batch": "1/../x"}, "field 'batch' must be an integer"),
    ({"model_options": {"pretrained": "/etc/hostname", "resolution": 32}}, "field 'model_options.pretrained'"),
    ({"model_options": {"resolution": 10 ** 6}}, "field 'model_options.resolution' is 1000000"),
])
def test_a_manifest_with_a_bad_field_is_refused(bundle, tmp_path, changes, says):
    other = tmp_path / "bundle"
    other.mkdir()
    manifest = json.loads((bundle / "manifest.json").read_text())
    (other / "manifest.json").write_text(json.dumps({**manifest, **changes}))
    results = _results(bundle, tmp_path / "r.jsonl")
    line = one_error_line(dsprof_here("import", other, results, "--out", tmp_path / "m"), "import")
    assert line.startswith(f"dsprof import: error: {other / 'manifest.json'}: ") and says in line, line
    assert not list(tmp_path.rglob("*ESCAPED*"))


# -- plans, fronts, importance files, merged models -------------------------------------------------------------------

@pytest.mark.parametrize("options, says", [
    ({"pretrained": "/etc/hostname"}, "field 'options.pretrained': a file cannot choose weights or files to load; "
                                      "give weights yourself (the weights parameter)"),
    ({"width": "../../w.pt"}, "field 'options.width' is '../../w.pt': an option read from a file cannot name a path "
                              "(or exceed 64 characters); give weights yourself (the weights parameter)"),
    ({"width": "wide"}, "field 'options.width' must be a number, got 'wide'"),
    ({"num_classes": 10 ** 9}, "field 'options.num_classes' is 1000000000: it must be a number from 1 to 100000"),
    ({"depths": [1, 1, 1, 1, 1, 1, 10 ** 6]}, "field 'options.depths' is 1000000: it must be a number from 0 to 64"),
])
def test_a_plan_cannot_name_weights_or_ask_for_a_huge_model(tmp_path, options, says):
    path = tmp_path / "p.plan.json"
    path.write_text(json.dumps({"format": "dsprof.plan", "version": 1, "model": "mobilenet_v2", "keep": [1] * 17,
                                "options": options}))
    with pytest.raises(PlanError) as caught:
        load_plan(path)
    assert str(caught.value) == f"{path}: {says}"
    line = one_error_line(dsprof_here("merge", "--model", "mobilenet_v2", "--resolution", "32", "--plan", path,
                                      "--merge-by", "macs", "--out", tmp_path / "m.pt"), "merge")
    assert says in line and not (tmp_path / "m.pt").exists()


FRONT = {"format": "dsprof.front", "version": 1, "model": "mobilenet_v2", "name": "mobilenet_v2", "options": {},
         "device": "91602364b5d0/cpu/torch/fp32/nchw/b1/t2", "original_s": 0.01, "points": []}


@pytest.mark.parametrize("changes, says", [
    ({}, None),
    ({"device": "91602364b5d0/cpu$(touch PWN)/torch/fp32/nchw/b1/t2"}, "field 'device (device)'"),
    ({"options": {"pretrained": True}}, "field 'options.pretrained'"),
    ({"name": "x\n<script>"}, "field 'name' must be text"),
    ({"device": ["x"]}, "field 'device' must be a device key"),
])
def test_a_front_with_a_bad_field_is_refused(tmp_path, changes, says):
    path = tmp_path / "front.json"
    path.write_text(json.dumps({**FRONT, **changes}))
    if says is None:
        assert load_front(path)["device"] == FRONT["device"]
        return
    with pytest.raises(BadFileError) as caught:
        load_front(path)
    assert str(caught.value).startswith(f"{path}: ") and says in str(caught.value)


@pytest.mark.parametrize("text, block", [("[0.5, NaN, 0.1]", 1), ("[0.5, 1e400]", 1), ('{"0": 0.1, "2": -Infinity}', 2)])
def test_an_importance_list_with_nan_or_infinity_is_refused_in_one_line(tmp_path, text, block):
    path = tmp_path / "importance.json"
    path.write_text(text)
    with pytest.raises(BadFileError, match=rf"^importance file {path}: block {block}'s importance is -?(nan|inf), not a "
                                           "finite number"):
        load_importance(path)
    path.write_text("[0.5, 0.25]")
    assert load_importance(path) == {0: 0.5, 1: 0.25}


@pytest.fixture(scope="module")
def merged_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("merged") / "m.pt"
    torch.manual_seed(0)
    done = dsprof_here("merge", "--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution", "32",
                       "--num-classes", "10", "--plan", _all_linear(tmp_path_factory), "--merge-by", "macs",
                       "--out", path)
    assert done.returncode == 0, done.stderr
    return path


def _all_linear(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("plan") / "p.plan.json"
    path.write_text(json.dumps({"format": "dsprof.plan", "version": 1, "model": "mobilenet_v2", "keep": [0] * 7,
                                "options": {"depths": [1] * 7}}))
    return path


@pytest.mark.parametrize("changes, says", [
    ({}, None),
    ({"dtype": "nn"}, "field 'dtype' is 'nn': one of float32, float16, bfloat16, float64"),
    ({"options": {"depths": [1] * 7, "pretrained": "/etc/hostname"}}, "field 'options.pretrained'"),
    ({"num_classes": 10 ** 9}, "field 'model.num_classes' is 1000000000"),  # refused before a 10^9-class head is built
    ({"resolution": [100_000, 100_000]}, "field 'model.resolution' is 100000"),
])
def test_a_merged_model_cannot_name_weights_an_odd_dtype_or_a_huge_size(merged_file, tmp_path, changes, says):
    payload = load_torch_payload(merged_file, "dsprof.merged", "merged model", "")
    path = atomic_torch_save(tmp_path / "m.pt", {**payload, **changes})
    from dsprof.merging.artifact import load_merged

    if says is None:
        model = load_merged(path)
        assert model(torch.zeros(1, 3, 32, 32)).shape == (1, 10)
        return
    with pytest.raises(MergeError) as caught:
        load_merged(path)
    assert str(caught.value).startswith(f"{path}: ") and says in str(caught.value), str(caught.value)


def test_the_reading_door_refuses_a_file_over_its_cap(tmp_path, monkeypatch):
    import dsprof.io

    path = tmp_path / "p.plan.json"
    path.write_text(json.dumps({"format": "dsprof.plan", "model": "mobilenet_v2", "keep": [1] * 17}) + " " * 2000)
    assert load_plan(path).keep == (1,) * 17
    monkeypatch.setattr(dsprof.io, "MAX_TEXT_BYTES", 1000)
    with pytest.raises(PlanError, match=rf"^{path} is larger than 1000 bytes, more than a plan \(JSON\) dsprof reads "
                                        "may hold; "):
        load_plan(path)
    with pytest.raises(BadFileError, match="larger than 1000 bytes"):
        read_json(path, "plan", "")


# -- commands shown to copy -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("hostile", HOSTILE)
def test_every_command_dsprof_prints_keeps_a_hostile_value_one_quoted_word(hostile):
    """Should a value get past the readers (or come from the user), each command still splits into the words
    dsprof meant: the hostile value is one word, nothing of it runs in a POSIX shell."""
    context = DeviceContext("91602364b5d0", hostile, hostile, hostile, "channels_last", 1, 2, hostile)
    options = {"width": hostile, hostile: 1}
    commands = {
        "measure": measure_command(context, model_flags("mobilenet_v2", options), max_span=2, in_situ=True),
        "importance": importance_command(ImportanceHint(model_args("mobilenet_v2", options), hostile, hostile,
                                                        hostile, 32)),
        "merge": merge_command("mobilenet_v2", options, f"/tmp/{hostile}.plan.json", 32),
        "plan": plan_command(hostile, "mobilenet_v2", options, 32),
        "import": import_command(hostile, hostile),
        "build-lut": build_lut_command(hostile, hostile),
    }
    for name, command in commands.items():
        words = shlex.split(command)
        assert words[:2] == ["dsprof", name], command
        assert hostile in words or f"/tmp/{hostile}.plan.json" in words, command
        assert f"--{hostile.replace('_', '-')}" in words or name in ("import", "build-lut"), command
    measure = shlex.split(commands["measure"])
    assert measure[measure.index("--device") + 1] == hostile and measure[measure.index("--compile-mode") + 1] == hostile
    assert shlex.split(shell_command(["dsprof", hostile])) == ["dsprof", hostile]
    beside = plan_command("lut.csv", "mobilenet_v2", {}, like=hostile, accept_modified=True)
    first, second = beside.split("\n  both contexts side by side: ")  # each a command of its own, pasted as it is
    mine = shlex.split(first)  # each writes its front beside the LUT, not over a front.json of the user's
    assert mine[-2:] == ["--out", "lut.front.json"]
    assert shlex.split(second) == [*mine[:-2], "--lut", hostile, "--accept-modified", "--out", "lut.both.front.json"]


# -- a fuzz of hostile values through every field of each kind of file ------------------------------------------------

#: Values no field should let through unchecked: strings a shell, a browser, a spreadsheet or LaTeX would act on, a
#: path, control characters, a long string; numbers out of every bound; values of the wrong type.
FUZZ = [*HOSTILE, "", " ", "-rf", "..", "x" * 5000, "\u202ex", "\x00", "%s%n", "{hint}", float("nan"), float("inf"),
        -1, 0, 1e308, 10 ** 30, -0.0, True, None, [], {}, [1, 2], {"a": 1}]
#: Characters that must never reach a name that was accepted.
UNSAFE = set("$`;|&<>[]{}\\\"=\n\r\x00!")


def _fuzz(make, fields, read) -> int:
    """Each hostile value in each field of a file (``make(field, value)`` writes it and returns its path), through
    the real reader ``read``: refused with a `DsprofError` naming the file, or read with that field holding a value
    its rules allow. Anything else (a traceback) fails. Returns the number of cases."""
    from dsprof.errors import DsprofError

    cases = 0
    for field in fields:
        for value in FUZZ:
            path = make(field, value)
            cases += 1
            try:
                read(path)
            except DsprofError as exc:
                assert str(path) in str(exc), (field, value, str(exc))
                continue
            except Exception as exc:  # noqa: BLE001 - what the test is for
                pytest.fail(f"{field}={value!r}: {type(exc).__name__}: {exc}")
            if isinstance(value, str) and field in ("device", "device_name", "env_id", "backend", "dtype", "layout"):
                assert not UNSAFE & set(value), (field, value)  # read back: only what the rules allow
    return cases


def test_hostile_values_in_every_field_are_refused_by_name_or_harmless(tmp_path, bundle, lut_text):
    cases = 0

    def record(field, value):
        data = _record(**{field: value})
        try:
            data["sha256"] = record_checksum(data)
        except ValueError:  # NaN or infinity: no checksum can hold it; read as accepted below, to reach the field
            data["sha256"] = "0" * 64
        (tmp_path / "m.jsonl").write_text(json.dumps(data) + "\n")
        return tmp_path / "m.jsonl"

    cases += _fuzz(record, ["device", "device_name", "env_id", "backend", "dtype", "layout", "compile", "scope",
                            "variant", "model", "name", "group", "spec", "time_utc", "threads", "batch", "samples_s",
                            "input_shape", "model_options"],
                   lambda path: read_measurements(path, accept_modified=True))

    def plan(field, value):
        data = {"format": "dsprof.plan", "version": 1, "model": "mobilenet_v2", "keep": [1] * 17, field: value}
        if field.startswith("options."):
            data = {**data, "options": {field.split(".", 1)[1]: value}}
            data.pop(field)
        (tmp_path / "p.json").write_text(json.dumps(data))
        return tmp_path / "p.json"

    cases += _fuzz(plan, ["model", "name", "source", "keep", "options", "options.width", "options.pretrained",
                          "border", "free_activation", "merge", "spans", "acts"], load_plan)

    def front(field, value):
        (tmp_path / "front.json").write_text(json.dumps({**FRONT, field: value}))
        return tmp_path / "front.json"

    cases += _fuzz(front, ["model", "name", "device", "options", "method"], load_front)

    from dsprof.edge import import_results

    def manifest(field, value):
        other = tmp_path / "bundle"
        other.mkdir(exist_ok=True)
        data = json.loads((bundle / "manifest.json").read_text())
        (other / "manifest.json").write_text(json.dumps({**data, field: value}))
        return other / "manifest.json"

    def imported(path):
        import shutil

        shutil.rmtree(tmp_path / "out", ignore_errors=True)
        import_results(path.parent, _results(bundle, tmp_path / "r.jsonl"), out=tmp_path / "out")

    cases += _fuzz(manifest, ["model", "model_options", "batch", "dtype"], imported)

    def results(field, value):
        return _results(bundle, tmp_path / "r.jsonl", **{field: value})

    cases += _fuzz(results, ["device", "threads", "samples_s", "group", "time_utc"],
                   lambda path: (import_results(bundle, path, out=tmp_path / "out", overwrite=True)))
    assert cases >= 200
