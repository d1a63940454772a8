"""`make demo` needs no TensorFlow: its install is dsprof's core, and its commands run with TFLite's libraries unimportable.

The demo's commands are read from the Makefile itself and run at 32 px with short timing in a fresh
process where importing tensorflow, onnx2tf or ai_edge_litert fails, as on a core-only install.
"""

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAKEFILE = (ROOT / "Makefile").read_text()
TFLITE_MODULES = ("tensorflow", "onnx2tf", "ai_edge_litert")
SMALL = {
    "blocks": ["--resolution", "32"],
    "measure": ["--resolution", "32", "--threads", "1", "--warmup", "0", "--min-samples", "3", "--max-samples", "4",
                "--budget", "0.01", "--min-sample-time", "0"],
    "build-lut": [],
    "report": [],
}

# Runs dsprof commands in this process with the TFLite libraries made unimportable.
RUNNER = """
import importlib.util, json, sys
BLOCKED = set(json.loads(sys.argv[1]))
blocked = lambda name: name.split(".")[0] in BLOCKED

class Block:  # `import tensorflow` fails as it does where it is not installed
    def find_spec(self, name, path=None, target=None):
        if blocked(name):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked: a core install has no TFLite)", name=name)
        return None

sys.meta_path.insert(0, Block())
find_spec = importlib.util.find_spec  # ... and looking it up finds nothing
importlib.util.find_spec = lambda name, package=None: None if blocked(name) else find_spec(name, package)
from dsprof.cli import main
for args in json.loads(sys.argv[2]):
    code = main(args)
    if code != 0:
        sys.exit(f"{args} exited {code}")
print("imported:", sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
"""


def recipe(target: str) -> list[str]:
    """The command lines of a Makefile target's recipe."""
    match = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", MAKEFILE, flags=re.M)
    assert match, f"the Makefile has no recipe for {target}"
    return [line.strip() for line in match.group(1).splitlines()]


def test_demo_installs_the_core_only_and_test_installs_the_extras():
    demo_prerequisites = re.search(r"^demo:(.*)$", MAKEFILE, flags=re.M).group(1).split()
    assert demo_prerequisites == ["venv"]
    assert re.search(r"^venv: \$\(VENV\)/\.installed$", MAKEFILE, flags=re.M)
    core = [line for line in recipe("$(VENV)/.installed") if "install" in line and "-e" in line]
    assert core == ["$(PY) -m pip install --quiet -e ."]
    extras = " ".join(recipe("$(VENV)/.installed-test"))
    assert "'.[test,tflite]'" in extras
    assert "$(VENV)/.installed-test" in re.search(r"^test:(.*)$", MAKEFILE, flags=re.M).group(1).split()
    assert (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1] == "make test"  # CI runs the README's command


@pytest.mark.slow
def test_demo_commands_run_without_tensorflow(tmp_path):
    commands = []
    for line in recipe("demo"):
        args = shlex.split(line.replace("$(RESULTS)", "results"))
        assert args[0] == "$(VENV)/bin/dsprof", line
        assert args[1] in SMALL, f"tests/test_make_targets.py does not know how to run `dsprof {args[1]}` small"
        commands.append([*args[1:], *SMALL[args[1]]])
    assert [c[0] for c in commands] == ["blocks", "measure", "build-lut", "report"]
    run = subprocess.run(
        [sys.executable, "-c", RUNNER, json.dumps(TFLITE_MODULES), json.dumps(commands)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().splitlines()[-1] == "imported: []"
    assert (tmp_path / "results" / "report" / "index.md").exists()
    assert (tmp_path / "results" / "lut.csv").exists()
