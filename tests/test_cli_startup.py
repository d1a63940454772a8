"""A quick command line: `--version`, `--help`, `models` and every command's `--help` import none of the
heavy libraries (a structural check, not a timing one: benchmarks/cli_startup.py prints the wall times)."""

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dsprof.cli import build_parser
from dsprof.models.catalog import ZOO

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "torchvision", "timm", "pandas", "matplotlib", "onnxruntime", "onnx", "tensorflow", "ai_edge_litert")

# Runs each command line in one fresh interpreter, in order, and prints, per command, its exit status and
# the heavy modules loaded so far (a module stays loaded: the first command that loads one is the culprit).
_PROBE = """
import contextlib, io, json, sys
from dsprof.cli import main
heavy = tuple(sys.argv[2].split(","))
loaded = lambda: sorted({m.split(".")[0] for m in sys.modules} & set(heavy))
before = loaded()
out = []
for argv in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()) as text, contextlib.redirect_stderr(io.StringIO()):
        try:
            status = main(argv)
        except SystemExit as exc:
            status = exc.code
    out.append([argv, status, loaded(), text.getvalue()])
print(json.dumps({"before": before, "runs": out}))
"""


def _subcommands() -> list[str]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return sorted(sub.choices)


def _probe(argvs: list[list[str]]) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(argvs), ",".join(HEAVY)],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_help_version_and_models_import_no_heavy_library():
    commands = _subcommands()
    assert {"models", "measure", "merge", "report", "search"} <= set(commands)  # the parser was read
    argvs = [["--version"], ["--help"], ["models"], ["models", "resnet*"]] + [[c, "--help"] for c in commands]
    result = _probe(argvs)
    assert result["before"] == [], "importing dsprof.cli loads " + ", ".join(result["before"])
    for argv, status, loaded, _ in result["runs"]:
        assert status == 0, f"dsprof {' '.join(argv)} exited {status}"
        assert loaded == [], f"`dsprof {' '.join(argv)}` imports {', '.join(loaded)}; import it inside the command"


def test_models_lists_the_whole_zoo_without_importing_torch():
    (run,) = _probe([["models"]])["runs"]
    listed = [line.split()[0] for line in run[3].splitlines()]
    assert listed == sorted(z.name for z in ZOO) and len(listed) == 31
    assert run[2] == []
    mbv2 = next(line for line in run[3].splitlines() if line.startswith("mobilenet_v2 "))
    assert "224px" in mbv2 and "depths" in mbv2


def test_import_dsprof_is_light_and_its_api_still_resolves():
    done = subprocess.run(
        [sys.executable, "-c", "import sys, dsprof; print(sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[1:])))",
         *HEAVY],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    import dsprof

    for name in dsprof.__all__:
        assert getattr(dsprof, name) is not None
    assert dsprof.get_model is dsprof.models.build.get_model
    with pytest.raises(AttributeError, match="no attribute 'nothing_like_this'"):
        dsprof.nothing_like_this  # noqa: B018


@pytest.mark.parametrize("entry", ZOO, ids=lambda z: z.name)
def test_the_zoo_catalog_states_each_builders_options(entry):
    """The catalog is plain data; this reads each builder (importing torchvision and timm) to check its options and
    their defaults."""
    from dsprof.models.zoo import builder

    parameters = inspect.signature(builder(entry.name)).parameters
    assert tuple(p for p in parameters if p != "pretrained") == entry.options
    assert "pretrained" in parameters and "resolution" not in parameters
    defaults = {k: p.default for k, p in parameters.items() if k in entry.options and p.default is not p.empty}
    assert dict(entry.defaults) == defaults  # what normalized_options drops without importing the builder


def test_a_torchvision_model_does_not_import_timm():
    (run,) = _probe([["blocks", "--model", "mobilenet_v2", "--resolution", "32"]])["runs"]
    assert run[1] == 0 and "17 blocks" in run[3]
    assert "torch" in run[2] and "timm" not in run[2]  # timm (1-2 s) only for timm's models


def test_a_model_file_imports_neither_torchvision_nor_timm():
    # torchvision's import (2 s here, most of it torch._dynamo through torchvision.ops) is for its own models; a
    # model of the user's own is traced, planned and priced without it
    model_file = str(ROOT / "tests" / "models" / "flatnet.py") + ":build"
    (run,) = _probe([["blocks", "--model-file", model_file, "--resolution", "32"]])["runs"]
    assert run[1] == 0 and "6 blocks" in run[3], run
    assert "torch" in run[2] and "torchvision" not in run[2] and "timm" not in run[2], run[2]


def test_measure_does_not_import_matplotlib(tmp_path):
    # matplotlib (1.7 s here) draws the report's figures; a measure run, which draws none, does not import it
    model_file = str(ROOT / "tests" / "models" / "flatnet.py") + ":build"
    (run,) = _probe([["measure", "--model-file", model_file, "--resolution", "32", "--variants", "original",
                      "--model-variants", "original", "--budget", "0.01", "--min-samples", "3", "--warmup", "0",
                      "--max-warmup", "0.01", "--min-sample-time", "0", "--out", str(tmp_path / "m"), "--no-progress"]])["runs"]
    assert run[1] == 0 and "workloads measured" in run[3], run
    assert "pandas" in run[2] and "matplotlib" not in run[2], run[2]
