"""Virtual environments that hold only NumPy and one runtime, as on an edge device: no torch, no dsprof.

`edge_venv(name)` builds ``.venv-edge-<name>`` at the repository root on first use (``python -m venv``,
then pip installs the same NumPy and runtime versions as this environment, so a pip cache serves them)
and returns its Python. ``python tests/edge_env.py`` builds them all (the Makefile's ``edge-venvs``).
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Environment name -> the distributions it holds besides NumPy (pinned to this environment's versions).
RUNTIME_PACKAGES = {"onnxruntime": ("onnxruntime",), "litert": ("ai-edge-litert",)}


def edge_venv(name: str) -> Path:
    """The Python of ``.venv-edge-<name>`` (built when missing); raises CalledProcessError when pip fails.
    A lock file beside it makes parallel test workers (pytest-xdist) wait for one build instead of racing."""
    venv = ROOT / f".venv-edge-{name}"
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    if marker.is_file() and python.exists():
        return python
    with open(ROOT / f".venv-edge-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if marker.is_file() and python.exists():  # another worker built it while this one waited
            return python
        pins = [f"{p}=={metadata.version(p)}" for p in ("numpy", *RUNTIME_PACKAGES[name])]
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *pins],
                       check=True)
        marker.write_text(" ".join(pins) + "\n")
    return python


if __name__ == "__main__":
    for env in RUNTIME_PACKAGES:
        print(edge_venv(env))
