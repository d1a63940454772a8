"""Edge devices end to end: `dsprof export` a bundle, run its runner in a virtual environment that has only
NumPy and the runtime (no torch, no dsprof), `dsprof import` the results, build a LUT and compare it with a
direct `dsprof measure` run on this CPU. Plus resume, the TorchScript runtime and every import error."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from scipy.stats import kendalltau

from dsprof import __version__
from dsprof.cli import main
from dsprof.edge import export_bundle, import_results, read_manifest
from dsprof.lut import LUT, build_lut
from dsprof.profiler import BackendSettings, TimingConfig, Workloads, environment, measure
from dsprof.models import ModelRef
from dsprof.planning.decide import merge_rule
from edge_env import edge_venv
from fast_timing import FEWER

pytestmark = pytest.mark.usefixtures("one_thread")  # building workloads runs small convolutions; see conftest.py

# Short but real timing, for the one test that compares the medians of two runs (the ONNX Runtime bundle against a
# direct `measure`): enough samples for a median that a ratio can be read from; samples of >= 5 ms (the default) so
# that a 20-microsecond block is averaged over several scheduler slices on a shared machine.
TIMING = TimingConfig(warmup_s=0.02, first_warmup_s=0.1, warmup_max_s=0.5, min_samples=5, max_samples=50,
                      budget_s=0.1, min_sample_s=5e-3, target_precision=0.05)
# Every other test reads that each workload was timed (samples, paired rounds, resumed groups) and what the records
# say, never how long a workload took: tests/fast_timing.py's FEWER (a few one-call samples, a call or two of
# warm-up), and its command-line spelling, whose --max-warmup also caps the 0.5 s warm-up of a run's first group.
QUICK = FEWER
QUICK_ARGS = ["--warmup", "0", "--max-warmup", str(FEWER.warmup_max_s), "--min-samples", str(FEWER.min_samples),
              "--max-samples", str(FEWER.max_samples), "--budget", str(FEWER.budget_s), "--min-sample-time", "0"]


def device_env() -> dict[str, str]:
    """The environment of a process on the 'device': nothing points it to this checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def run_on_device(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), *args], cwd=cwd, env=device_env(), capture_output=True, text=True, timeout=900)


def assert_no_torch_no_dsprof(python: Path, cwd: Path) -> None:
    for module in ("torch", "dsprof"):
        done = run_on_device(python, "-c", f"import {module}", cwd=cwd)
        assert done.returncode != 0 and "ModuleNotFoundError" in done.stderr, (module, done.stderr)
    done = run_on_device(python, "-c", "import numpy", cwd=cwd)
    assert done.returncode == 0, done.stderr


def lut_keys(lut) -> dict[tuple, float]:
    frame = lut.to_dataframe()
    return {(r.scope, r.workload, r.variant): r.median_s for r in frame.itertuples() if r.scope != "probe"}  # not bundled


def test_onnxruntime_bundle_timed_without_torch_builds_the_lut_of_a_direct_measure(tmp_path):
    python = edge_venv("onnxruntime")
    device = tmp_path / "device"
    device.mkdir()
    assert_no_torch_no_dsprof(python, device)

    tiny = ModelRef.of("mobilenet_v2", options={"depths": [1] * 7}, resolution=32)  # one block a stage: 7 blocks
    bundle = export_bundle(tiny, timing=TIMING, out=tmp_path / "bundle").path
    done = run_on_device(python, str(bundle / "run_bundle.py"), "--runtime", "onnxruntime", "--threads", "1",
                         "--quiet", cwd=device)
    assert done.returncode == 0, done.stderr
    results = bundle / "results" / "onnxruntime_cpu_t1.jsonl"
    imported = import_results(bundle, results, out=tmp_path / "imported")
    direct = measure(tiny, settings=BackendSettings(backend="onnxruntime", threads=1), timing=TIMING,
                     out=tmp_path / "direct", progress=False)

    # MobileNetV2 (depths 1x7): 7 blocks x (original, merged, flops_matched), the model x (original, flops_matched),
    # stem, head; `measure` also times the drift probe after each group, which a bundle does not carry (yet)
    timed = [r for r in direct.measurements if r.scope != "probe"]
    assert len(imported.measurements) == len(timed) == 7 * 3 + 2 + 2
    assert sorted(r.workload_key for r in imported.measurements) == sorted(r.workload_key for r in timed)
    edge, here = lut_keys(build_lut([imported.path])), lut_keys(build_lut([direct.path]))
    assert set(edge) == set(here)
    # Directions, not sizes (the two runs are seconds apart on a machine other suites may share: a load of 11 on 2
    # cores once put two ~20-microsecond blocks at 0.16x and 14x; benchmarks/RESULTS.md has the careful
    # comparison): both timed every workload, and they order the workloads alike, the whole model above its blocks.
    keys = sorted(here)
    assert all(edge[k] > 0 and here[k] > 0 for k in keys)
    assert kendalltau([edge[k] for k in keys], [here[k] for k in keys]).statistic > 0
    whole = [k for k in keys if k[0] == "model" and k[2] == "original"]
    assert all(t[whole[0]] > max(t[k] for k in keys if k[0] == "block") for t in (edge, here))

    first = imported.measurements[0]
    assert first.backend == "onnxruntime" and first.layout == "nchw" and first.threads == 1
    assert first.device_name == environment()["cpu"]["model"]  # the runner's fingerprint of this CPU
    versions = first.environment["versions"]
    assert versions["onnxruntime"] and "torch" not in versions and "dsprof" not in versions

    lut = tmp_path / "lut.csv"
    assert main(["build-lut", str(imported.path), "-o", str(lut)]) == 0
    assert main(["predict", "--model", "mobilenet_v2", "--depths", "1,1,1,1,1,1,1", "--resolution", "32", "--lut",
                 str(lut), "--strict"]) == 0


def test_tflite_bundle_timed_with_the_litert_interpreter_without_torch(tmp_path):
    python = edge_venv("litert")
    device = tmp_path / "device"
    device.mkdir()
    assert_no_torch_no_dsprof(python, device)
    args = ["--model", "mobilenet_v2", "--resolution", "32", "--blocks", "features.2", "--model-variants", "none"]
    assert main(["export", *args, "--format", "tflite", "--out", str(tmp_path / "bundle"), "--quiet", *QUICK_ARGS]) == 0
    done = run_on_device(python, str(tmp_path / "bundle" / "run_bundle.py"), "--runtime", "tflite", "--threads", "1",
                         "--out", str(device / "r.jsonl"), cwd=device)
    assert done.returncode == 0, done.stderr
    assert main(["import", str(tmp_path / "bundle"), str(device / "r.jsonl"), "--out", str(tmp_path / "imported")]) == 0
    direct = measure(ModelRef.of("mobilenet_v2", resolution=32), settings=BackendSettings(backend="tflite", threads=1),
                     workloads=Workloads(blocks="features.2", model_variants=()), timing=QUICK,
                     out=tmp_path / "direct", progress=False)
    edge, here = lut_keys(build_lut([tmp_path / "imported"])), lut_keys(build_lut([direct.path]))
    assert len(here) == 3 and set(edge) == set(here)
    assert all(edge[k] > 0 and here[k] > 0 for k in here)  # both timed every workload (sizes: the ONNX Runtime test)
    frame = build_lut([tmp_path / "imported"]).to_dataframe()
    assert set(frame.backend) == {"tflite"} and set(frame.layout) == {"nhwc"}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A two-block bundle (ONNX and TorchScript) and a complete ONNX Runtime results file for it."""
    import torch

    root = tmp_path_factory.mktemp("edge")
    bundle = root / "bundle"
    torch.manual_seed(0)  # the model's random weights, rebuilt in test_bundle_files_compute_the_workloads
    assert main(["export", "--model", "mobilenet_v2", "--resolution", "32", "--blocks", "features.1,features.2",
                 "--variants", "original,merged,flops_matched", "--model-variants", "none",
                 "--format", "onnx,torchscript", "--out", str(bundle), "--quiet", *QUICK_ARGS]) == 0
    python = edge_venv("onnxruntime")
    results = root / "results.jsonl"
    done = run_on_device(python, str(bundle / "run_bundle.py"), "--runtime", "onnxruntime", "--threads", "1",
                         "--out", str(results), "--quiet", cwd=root)
    assert done.returncode == 0, done.stderr
    return bundle, results, python


def test_interrupted_run_resumes_where_it_stopped(small, tmp_path):
    bundle, results, python = small
    lines = results.read_text().splitlines(keepends=True)
    assert len(lines) == 6  # two blocks x three variants, one line each
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])  # killed while writing the second group
    done = run_on_device(python, str(bundle / "run_bundle.py"), "--runtime", "onnxruntime", "--threads", "1",
                         "--out", str(cut), "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "3 workloads timed, 3 already in the file" in done.stdout
    records = [json.loads(line) for line in cut.read_text().splitlines()]
    assert sorted(r["workload"] for r in records) == [f"w{i}" for i in range(6)]
    assert [json.loads(line) for line in lines[:3]] == records[:3]  # what was measured is kept as it was

    other = run_on_device(python, str(bundle / "run_bundle.py"), "--runtime", "onnxruntime", "--threads", "2",
                          "--out", str(cut), cwd=tmp_path)
    assert other.returncode == 2 and "other settings" in other.stderr and len(other.stderr.splitlines()) == 1


def test_a_group_cut_short_is_resumed_with_its_original_so_each_variant_stays_paired(small, tmp_path):
    """Killed after the second group's original was written: its other two variants are timed with the original
    again, in one group, so that each keeps a paired ratio over an original of its own group once imported."""
    bundle, results, python = small
    variant = {w["id"]: w["variant"] for w in read_manifest(bundle)["workloads"]}
    lines = results.read_text().splitlines(keepends=True)
    first = [json.loads(line) for line in lines]
    assert first[3]["group"] != first[2]["group"] and variant[first[3]["workload"]] == "original"  # group 2 opens
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:4]))
    done = run_on_device(python, str(bundle / "run_bundle.py"), "--runtime", "onnxruntime", "--threads", "1",
                         "--out", str(cut), "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "3 workloads timed, 3 already in the file" in done.stdout  # the original again, and the two it lacked
    records = [json.loads(line) for line in cut.read_text().splitlines()]
    assert records[:4] == first[:4]
    assert [r["workload"] for r in records[4:]] == [r["workload"] for r in first[3:]]
    assert len({r["group"] for r in records[4:]}) == 1
    imported = import_results(bundle, cut, out=tmp_path / "imported")
    lut = build_lut(imported.path).to_dataframe()
    paired = lut[(lut.scope == "block") & (lut.variant != "original")]
    assert len(paired) == 4 and paired.ratio.notna().all()


@pytest.mark.parametrize("formats, linear", [("onnx", False), ("onnx,torchscript", True)])
def test_a_bundle_with_torchscript_holds_each_block_linear_too_and_its_files_compute_the_block(tmp_path, formats,
                                                                                               linear):
    """`export`'s default variants follow its formats (`dsprof.runtimes.bundle_block_variants`): TorchScript runs each
    activation apart, as PyTorch eager does, so a bundle with it holds each block ``linear`` as `measure` times it on
    eager; one of ONNX alone does not (its runtimes fuse the activation). The linear files compute what the
    profiler's linear workload computes (same seeded weights), which is not what the block as built computes."""
    import numpy as np
    import onnxruntime as ort
    import torch

    from dsprof.models import get_model
    from dsprof.profiler import block_workloads

    torch.manual_seed(0)
    assert main(["export", "--model", "mobilenet_v2", "--resolution", "32", "--blocks", "features.2", "--model-variants",
                 "none", "--format", formats, "--out", str(tmp_path / "b"), "--quiet", *QUICK_ARGS]) == 0
    manifest = read_manifest(tmp_path / "b")
    assert [w["variant"] for w in manifest["workloads"]] == ["original", "merged", "flops_matched", *["linear"] * linear]
    if not linear:
        return
    (entry,) = [w for w in manifest["workloads"] if w["variant"] == "linear"]
    torch.manual_seed(0)
    model = get_model("mobilenet_v2", resolution=32).eval()
    (group,) = [g for g in block_workloads(model, ("original", "linear"), input_size=(32, 32)) if g[0].name == "features.2"]
    x = torch.randn(entry["input_shape"], generator=torch.Generator().manual_seed(0))
    session = ort.InferenceSession(str(tmp_path / "b" / entry["files"]["onnx"]), providers=["CPUExecutionProvider"])
    with torch.no_grad():
        original, want = (w.module(x).numpy() for w in group)
        got_ts = torch.jit.load(str(tmp_path / "b" / entry["files"]["torchscript"]))(x).numpy()
    np.testing.assert_allclose(session.run(None, {"input": x.numpy()})[0], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_ts, want, rtol=1e-4, atol=1e-5)
    assert np.abs(want - original).max() > 0.1  # its activations are gone


def test_torchscript_runtime_gives_the_same_keys(small, tmp_path):
    """The TorchScript path (old PyTorch on a Jetson): run here with this environment's PyTorch."""
    bundle, results, _ = small
    out = tmp_path / "ts.jsonl"
    done = subprocess.run([sys.executable, str(bundle / "run_bundle.py"), "--runtime", "torchscript", "--threads", "1",
                           "--out", str(out), "--quiet"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    ts = import_results(bundle, out, out=tmp_path / "ts")
    ort = import_results(bundle, results, out=tmp_path / "ort")
    assert {r.backend for r in ts.measurements} == {"torchscript"}
    assert {(r.scope, r.spec, r.variant) for r in ts.measurements} == {(r.scope, r.spec, r.variant) for r in ort.measurements}
    assert all(r.ok and r.median_s > 0 for r in ts.measurements)


def test_a_runner_whose_runtime_fails_every_workload_says_so_and_suggests_no_import(small, tmp_path):
    """The runner under a Python without the runtime (TorchScript where torch is not installed): every workload
    fails to prepare. It said "6 workloads timed" with exit 0 and `next: dsprof import ...`, which then failed with
    "results for 0 of 6 workloads"; now one line says that all failed and why, with exit 1."""
    bundle, _, python = small
    out = tmp_path / "none.jsonl"
    done = run_on_device(python, str(bundle / "run_bundle.py"), "--runtime", "torchscript", "--threads", "1",
                         "--out", str(out), "--quiet", cwd=tmp_path)
    assert done.returncode == 1 and "next:" not in done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("run_bundle: error: all 6 workloads failed (e.g. failed to prepare: ModuleNotFoundError")
    assert str(out) in line and len(out.read_text().splitlines()) == 6  # each failure kept, with its error


def _import_error(capsys, *args: str) -> str:
    assert main(["import", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_import_errors_are_one_clear_line(small, tmp_path, capsys):
    bundle, results, _ = small
    lines = results.read_text().splitlines(keepends=True)
    out = ["--out", str(tmp_path / "imported")]

    bad = tmp_path / "unknown.jsonl"
    bad.write_text("".join(lines[:-1]) + lines[-1].replace('"workload":"w5"', '"workload":"w99"'))
    assert "workload 'w99' is not in the bundle's manifest" in _import_error(capsys, str(bundle), str(bad), *out)

    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:-1]) + lines[-1][:40])
    assert "cut short" in _import_error(capsys, str(bundle), str(cut), *out)

    partial = tmp_path / "partial.jsonl"
    partial.write_text("".join(lines[:-1]))
    assert "results for 5 of 6 workloads" in _import_error(capsys, str(bundle), str(partial), *out)
    assert main(["import", str(bundle), str(partial), *out, "--allow-partial"]) == 0
    assert len((tmp_path / "imported").glob("*.jsonl").__next__().read_text().splitlines()) == 5

    other = tmp_path / "other_bundle"
    other.mkdir()
    manifest = read_manifest(bundle)
    (other / "manifest.json").write_text(json.dumps(dict(manifest, bundle_id="0123456789ab")))
    assert "belongs to bundle" in _import_error(capsys, str(other), str(results), *out)

    old = tmp_path / "old_bundle"
    old.mkdir()
    (old / "manifest.json").write_text(json.dumps(dict(manifest, dsprof_version="0.0.1")))
    err = _import_error(capsys, str(old), str(results), *out)
    assert f"written by dsprof 0.0.1, this is dsprof {__version__}" in err

    assert "does not exist" in _import_error(capsys, str(bundle), str(tmp_path / "none.jsonl"), *out)


def test_imports_next_command_runs_as_written_and_builds_the_lut_beside_the_records(small, tmp_path, capsys,
                                                                                  monkeypatch):
    """`dsprof import` ends with the `build-lut` to run next. It wrote ./lut.csv, over a LUT the user kept there;
    it now writes the LUT into the folder of the imported records, and the command runs as printed."""
    bundle, results, _ = small
    monkeypatch.chdir(tmp_path)
    Path("lut.csv").write_text("the user's own LUT\n")
    capsys.readouterr()
    assert main(["import", str(bundle), str(results), "--out", "imported records"]) == 0
    command = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("next: "))[6:]
    assert command == "dsprof build-lut 'imported records' -o 'imported records/lut.csv'"
    assert main(shlex.split(command)[1:]) == 0
    assert Path("lut.csv").read_text() == "the user's own LUT\n"
    assert len(LUT.load("imported records/lut.csv")) == 6  # the bundle's six workloads


def test_export_keeps_results_and_checks_its_options(small, tmp_path, capsys):
    bundle, results, _ = small
    (bundle / "results").mkdir(exist_ok=True)
    kept = bundle / "results" / "r.jsonl"
    kept.write_text(results.read_text())
    assert main(["export", "--model", "mobilenet_v2", "--resolution", "32", "--out", str(bundle), "--overwrite"]) == 2
    assert "holds results (r.jsonl), which replacing the bundle would delete: move them out of" in capsys.readouterr().err
    assert kept.read_text() == results.read_text()
    assert main(["export", "--format", "onnx,caffe", "--out", str(tmp_path / "b")]) == 2
    assert "unknown format(s) ['caffe']" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def test_a_manifest_cannot_name_a_file_outside_out(small, tmp_path, capsys):
    """The issue's manifest (issue #45): ``dtype`` ``/../../../outside/ESCAPED`` goes into the file name slugged (or is
    refused in one line), inside --out, never outside it; the file is written through a fresh temporary file, so
    that a link planted at the old predictable ``.NAME.tmp`` is left alone, and so is the file it names."""
    bundle, results, _ = small
    deep = tmp_path / "a" / "b" / "c"
    crafted = deep / "bundle"
    shutil.copytree(bundle, crafted, ignore=shutil.ignore_patterns("results"))
    manifest = json.loads((crafted / "manifest.json").read_text())
    (crafted / "manifest.json").write_text(json.dumps(dict(manifest, dtype="/../../../outside/ESCAPED")))
    out = deep / "imported"
    before = _files(tmp_path)
    code = main(["import", str(crafted), str(results), "--out", str(out)])
    err = capsys.readouterr().err
    assert "Traceback" not in err and not (tmp_path / "outside").exists() and not (tmp_path / "a" / "outside").exists()
    written = _files(tmp_path) - before
    assert all(out in p.parents for p in written)
    if code == 2:  # refused where it is read (the manifest's fields validated)
        assert len(err.strip().splitlines()) == 1 and "dtype" in err
        return
    assert code == 0, err
    (path,) = written  # the measurement file, and no temporary file left beside it
    assert path.name.startswith("mobilenet_v2_edge-") and path.name.endswith("_32px_onnxruntime_cpu_outside-ESCAPED_b1.jsonl")
    umask = os.umask(0o022)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # what open() would have given it, not mkstemp's 0600
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (out / f".{path.name}.tmp").symlink_to(victim)
    assert main(["import", str(crafted), str(results), "--out", str(out), "--overwrite"]) == 0
    assert victim.read_text() == "keep me\n" and (out / f".{path.name}.tmp").is_symlink()
    assert len(path.read_text().splitlines()) == 6


def test_export_overwrite_replaces_only_a_bundle_dsprof_wrote(small, tmp_path, capsys):
    """``--overwrite`` replaces a bundle that dsprof wrote (its marker matches its manifest: it failed with "it is
    a folder" before), and refuses, keeping every file, a folder with a manifest.json but no marker, or a bundle
    that holds a file of the user's."""
    bundle, _, _ = small
    args = ["export", "--model", "mobilenet_v2", "--resolution", "32", "--blocks", "features.1", "--model-variants",
            "none", "--overwrite", "--quiet", *QUICK_ARGS]
    forged = tmp_path / "forged"
    forged.mkdir()
    (forged / "manifest.json").write_text((bundle / "manifest.json").read_text())
    (forged / "thesis.tex").write_text("mine\n")
    assert main([*args, "--out", str(forged)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "not a bundle that dsprof wrote" in err
    assert (forged / "thesis.tex").read_text() == "mine\n"

    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy, ignore=shutil.ignore_patterns("results"))
    old_id = json.loads((copy / "manifest.json").read_text())["bundle_id"]
    assert (copy / ".dsprof-bundle").read_text() == old_id + "\n"
    (copy / "notes.txt").write_text("mine\n")
    assert main([*args, "--out", str(copy)]) == 2
    assert "it holds notes.txt" in capsys.readouterr().err and (copy / "notes.txt").is_file()
    (copy / "notes.txt").unlink()
    assert main([*args, "--out", str(copy)]) == 0
    manifest = json.loads((copy / "manifest.json").read_text())
    assert manifest["bundle_id"] != old_id and (copy / ".dsprof-bundle").read_text() == manifest["bundle_id"] + "\n"
    assert sorted(w["label"] for w in manifest["workloads"]) == [f"block features.1 {v}" for v in
                                                                  ("flops_matched", "merged", "original")]


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:FutureWarning")  # old boards have only TorchScript
def test_bundle_files_compute_the_workloads(small, tmp_path):
    """The exported ONNX (opset 13) and TorchScript files of the original blocks compute what the profiler's
    workload modules compute (same seeded weights); the dense variants have the replacement's shapes; a plan's
    merged model is exported as one more whole model, named after the plan, computing the merged model."""
    import numpy as np
    import onnxruntime as ort
    import torch

    from dsprof.merging import merge_model
    from dsprof.records.plan import load_plan
    from dsprof.models import get_model
    from dsprof.profiler import block_workloads

    bundle, _, _ = small
    manifest = read_manifest(bundle)
    torch.manual_seed(0)
    model = get_model("mobilenet_v2", resolution=32).eval()
    modules = {(w.name, w.variant): w for g in block_workloads(model, input_size=(32, 32)) for w in g}
    for entry in manifest["workloads"]:
        w = modules[(entry["name"], entry["variant"])]
        assert entry["input_shape"] == [1, *w.input_shape] and entry["macs"] == w.macs
        x = torch.randn(entry["input_shape"], generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            want = w.module(x).numpy()
            got_ts = torch.jit.load(str(bundle / entry["files"]["torchscript"]))(x).numpy()
        session = ort.InferenceSession(str(bundle / entry["files"]["onnx"]), providers=["CPUExecutionProvider"])
        got_onnx = session.run(None, {"input": x.numpy()})[0]
        if entry["variant"] == "original":
            np.testing.assert_allclose(got_onnx, want, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(got_ts, want, rtol=1e-4, atol=1e-5)
        else:  # a dense convolution with its own random weights: same shapes, ReLU6 range
            assert got_onnx.shape == got_ts.shape == want.shape
            assert got_onnx.min() >= 0 and got_onnx.max() <= 6

    out = tmp_path / "plan"
    torch.manual_seed(1)
    assert main(["export", "--model", "mobilenet_v2", "--resolution", "32", "--blocks", "none", "--model-variants",
                 "none", "--plan", "mbv2-ds-a", "--merge-by", "macs", "--out", str(out), "--quiet"]) == 0
    (entry,) = read_manifest(out)["workloads"]
    assert (entry["scope"], entry["name"], entry["variant"]) == ("model", "mbv2-ds-a", "custom")
    torch.manual_seed(1)
    net = get_model("mobilenet_v2", resolution=32).eval()
    merged = merge_model(net, merge_rule(net, merge_by="macs").decide(load_plan("mbv2-ds-a")).plan).eval()
    x = torch.randn(entry["input_shape"], generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = merged(x).numpy()
    session = ort.InferenceSession(str(out / entry["files"]["onnx"]), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"input": x.numpy()})[0], want, rtol=1e-3, atol=1e-4)


# `sh -c 'exec sh -c "$3"' ssh -- HOST COMMAND` runs COMMAND here: the stand-in for the network hop that this
# machine cannot make (no ssh server); everything else of `measure --remote` runs for real.
SSH_STANDIN = """sh -c 'test "$1" = -- && exec sh -c "$3"' ssh"""  # dsprof ends ssh's options before the host


def test_a_failed_remote_copy_says_what_is_left_as_commands_that_run_as_written(tmp_path, capsys):
    """The copy over ssh fails (the link drops once): the line lists what is left -- copy, run, fetch, import -- each a
    command that runs as written. It said to resume a runner that was never copied, and to import results it never
    said how to fetch. Run in a shell as printed, the records arrive."""
    python = edge_venv("onnxruntime")
    mark = tmp_path / "dropped once"
    flaky = tmp_path / "flaky_ssh.sh"  # like SSH_STANDIN, but the first call fails as a dropped link does
    flaky.write_text(f'if [ ! -e {shlex.quote(str(mark))} ]; then : > {shlex.quote(str(mark))}; exit 255; fi\n'
                     'test "$1" = -- && exec sh -c "$3"\n')
    board = tmp_path / "the board"
    code = main(["measure", "--model", "mobilenet_v2", "--resolution", "32", "--blocks", "features.1",
                 "--model-variants", "none", "--backend", "onnxruntime", "--threads", "1", *QUICK_ARGS,
                 "--remote", "lab@board", "--ssh", f"sh {shlex.quote(str(flaky))}", "--remote-dir", str(board),
                 "--remote-python", str(python), "--out", str(tmp_path / "m"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "copying the bundle on lab@board failed (exit 255" in err, err
    commands = err.split("go on by hand: `", 1)[1].rstrip("`").split("`, then `")
    assert [c.split()[0] for c in commands] == ["tar", "sh", "sh", "dsprof"]  # copy, run, fetch, import
    script = "\n".join(["set -e", f"dsprof() {{ {shlex.quote(sys.executable)} -m dsprof \"$@\"; }}", *commands])
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1])))
    assert done.returncode == 0, done.stderr
    (path,) = (tmp_path / "m").glob("*.jsonl")
    assert sorted(json.loads(line)["variant"] for line in path.read_text().splitlines()) == [
        "flops_matched", "merged", "original"]


def test_measure_remote_exports_runs_over_ssh_and_imports(tmp_path, capsys):
    python = edge_venv("onnxruntime")
    board = tmp_path / "the board"  # a space: every word of the remote command is quoted
    args = ["measure", "--model", "mobilenet_v2", "--resolution", "32", "--blocks", "features.1", "--model-variants",
            "none", "--backend", "onnxruntime", "--threads", "1", *QUICK_ARGS, "--remote", "lab@board",
            "--ssh", SSH_STANDIN, "--remote-dir", str(board), "--out", str(tmp_path / "m"), "--no-progress"]
    assert main([*args, "--remote-python", "/nonexistent/python3"]) == 2
    err = capsys.readouterr().err.strip()
    assert "the runner on lab@board failed" in err and len(err.splitlines()) == 1, err
    assert main([*args, "--remote-python", str(python)]) == 0
    (path,) = (tmp_path / "m").glob("*.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted(r["variant"] for r in records) == ["flops_matched", "merged", "original"]
    assert {r["name"] for r in records} == {"features.1"} and all(r["samples_s"] for r in records)
    assert {r["environment"]["versions"].get("torch") for r in records} == {None}  # timed by the venv's runner
    assert len(list(board.glob("*/manifest.json"))) == 2  # the failed try's bundle stays on the board ...
    assert len(list(board.glob("*/results.jsonl"))) == 1  # ... without results


def test_measure_remote_with_a_plan_prints_its_paired_speedup_as_a_run_here_does(tmp_path, capfd):
    """A plan timed on the remote device is paired with the original there, and said so: the merge, the measured
    speed-up, then the count of workloads on that host. It printed the count alone, and before it the runner's own
    "next: dsprof import ...", an import `measure --remote` had just done. The API's `Measured.text` says the same."""
    python = edge_venv("onnxruntime")
    args = ["measure", "--model", "mobilenet_v2", "--resolution", "32", "--blocks", "none", "--model-variants",
            "original", "--plan", "mbv2-ds-a", "--merge-by", "macs", "--backend", "onnxruntime", "--threads", "1",
            *QUICK_ARGS, "--remote", "lab@board", "--ssh", SSH_STANDIN, "--remote-dir", str(tmp_path / "board"),
            "--remote-python", str(python), "--out", str(tmp_path / "m"), "--no-progress"]
    assert main(args) == 0
    out = capfd.readouterr().out.strip().splitlines()  # the file descriptor: the runner's lines too
    (path,) = (tmp_path / "m").glob("*.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted((r["name"], r["variant"]) for r in records) == [("mbv2-ds-a", "custom"), ("mobilenet_v2", "original")]
    assert len({r["group"] for r in records}) == 1  # one group: paired round by round
    rounds = min(len(r["samples_s"]) for r in records)
    assert out[0].startswith("mbv2-ds-a: merged blocks")
    assert out[1].startswith("mbv2-ds-a: measured speed-up ") and out[1].endswith(f", {rounds} paired rounds)")
    assert out[2] == (f"2 workloads measured on lab@board ({records[0]['device_name']}, onnxruntime, 1 thread); "
                      f"records: {path}")
    assert len(out) == 3 and not any("next:" in line for line in out)


def test_measure_remote_on_torch_times_the_linear_variant_as_measure_here_does(tmp_path):
    """`--backend torch` runs the bundle's TorchScript files, which run each activation as a kernel of their own: its
    blocks are timed linearised too unless told, as `dsprof measure` times them here on PyTorch eager
    (docs/measuring.md, "Variants"); told, it times what it is told."""
    from dsprof.edge.remote import measure_remote

    common = dict(backend="torch", blocks="features.1", model_variants=(), threads=1, timing=QUICK,
                  ssh=shlex.split(SSH_STANDIN), python=sys.executable, remote_dir=str(tmp_path / "board"))
    imported = measure_remote("lab@board", ModelRef.of("mobilenet_v2", resolution=32), out=tmp_path / "m", **common)
    assert sorted(r.variant for r in imported.measurements) == ["flops_matched", "linear", "merged", "original"]
    assert {r.backend for r in imported.measurements} == {"torchscript"}
    told = measure_remote("lab@board", ModelRef.of("mobilenet_v2", resolution=32), out=tmp_path / "m2",
                          variants=("original",), **common)
    assert [r.variant for r in told.measurements] == ["original"]


def test_measure_remote_takes_the_keywords_of_before_with_a_warning(tmp_path):
    """`dsprof.edge.remote.measure_remote` takes ``model`` as every engine does (issue #44); ``name=``,
    ``model_options=`` and ``resolution=`` beside it still build that model, with one warning at the caller."""
    from dsprof.edge.remote import measure_remote

    python = edge_venv("onnxruntime")
    with pytest.warns(DeprecationWarning) as caught:
        imported = measure_remote("lab@board", "mobilenet_v2", name="small", model_options={"depths": [1] * 7},
                                  resolution=32, blocks="features.1", variants=("original",), model_variants=(),
                                  threads=1, timing=QUICK, ssh=shlex.split(SSH_STANDIN), python=str(python),
                                  remote_dir=str(tmp_path / "board"), out=tmp_path / "m")
    said = [str(w.message) for w in caught if w.category is DeprecationWarning]
    assert len(said) == 1 and "measure_remote(model=ModelRef.of(name=, options=, resolution=))" in said[0], said
    assert caught[0].filename == __file__
    (record,) = imported.measurements  # one block in one variant, timed by the venv's runner
    assert (record.model, record.name, record.variant) == ("small", "features.1", "original")
    assert record.model_options == {"depths": [1] * 7, "resolution": 32} and record.samples_s


@pytest.mark.openvino
def test_openvino_times_the_bundles_onnx_files_and_they_import_as_openvino_records(tmp_path):
    """OpenVINO reads the bundle's ONNX files (no IR in bundles: docs/devices/): the runner's ``--runtime openvino``
    with the profiler's settings, its records named ``openvino`` with the compiled models' own reading of them."""
    from importlib import metadata

    import openvino as ov

    options = {"depths": [1] * 7}
    bundle = export_bundle(ModelRef.of("mobilenet_v2", options=options, resolution=32), blocks="features.2",
                           variants=("original", "merged"), model_variants=("original",), timing=QUICK,
                           out=tmp_path / "bundle").path
    done = run_on_device(Path(sys.executable), str(bundle / "run_bundle.py"), "--runtime", "openvino", "--threads",
                         "1", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    imported = import_results(bundle, bundle / "results" / "openvino_cpu_t1.jsonl", out=tmp_path / "imported")
    records = imported.measurements
    assert {(r.backend, r.layout, r.compile, r.device, r.threads) for r in records} == {("openvino", "nchw", "", "cpu", 1)}
    assert all(r.ok for r in records)
    assert {r.environment["versions"]["openvino"] for r in records} == {metadata.version("openvino")}
    for r in records:
        assert (r.runtime_info["performance_hint"], r.runtime_info["inference_num_threads"], r.runtime_info["inference_precision"],
                r.runtime_info["cpu_pinning"]) == ("LATENCY", 1, "f32", False)
        assert r.runtime_info["device_name"] == ov.Core().get_property("CPU", "FULL_DEVICE_NAME")
    direct = measure(ModelRef.of("mobilenet_v2", options=options, resolution=32),
                     settings=BackendSettings(backend="openvino", threads=1),
                     workloads=Workloads(blocks="features.2", variants=("original", "merged"), model_variants=("original",)),
                     timing=QUICK, out=tmp_path / "direct", progress=False)
    timed = [r for r in direct.measurements if r.scope != "probe"]
    assert sorted(r.workload_key for r in records) == sorted(r.workload_key for r in timed)
    assert set(lut_keys(build_lut([imported.path]))) == set(lut_keys(build_lut([direct.path])))
