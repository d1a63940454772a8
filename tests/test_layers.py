"""The packages depend on each other one way (issue #27): the LUT reads and prices, times nothing (it reads
measurement records, whose module imports no timing code); the merge package never reaches up into the
planner. Every import statement of the package is read (those inside functions too), and the package is
imported in a fresh interpreter to list what it loads."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import dsprof

ROOT = Path(dsprof.__file__).parent


def _imports(package: str) -> set[str]:
    """Every dsprof module that ``package``'s source imports (``dsprof.x.y``), wherever the statement stands."""
    out = set()
    for path in (ROOT / package).rglob("*.py"):
        here = ["dsprof", package] + list(path.relative_to(ROOT / package).parts[:-1])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = here[: len(here) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                out |= {module} | {f"{module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                out |= {a.name for a in node.names}
    return {m for m in out if m.startswith("dsprof")}


def _loaded_after_import(package: str) -> set[str]:
    code = (f"import importlib, json, pkgutil, sys\nimport dsprof.{package} as p\n"
            "for m in pkgutil.iter_modules(p.__path__):\n    importlib.import_module(f'{p.__name__}.{m.name}')\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('dsprof'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT.parent)
    return set(json.loads(done.stdout))


def test_the_lut_imports_no_timing_code():
    profiler = {m.split(".")[2] for m in _imports("lut") | _loaded_after_import("lut") if m.startswith("dsprof.profiler.")}
    # the records and their statistics (timing_loop: the standard-library statistics of a median that the edge runner
    # shares, which stats re-exports), no timing
    assert profiler <= {"records", "stats", "timing_loop"}, sorted(profiler)


def test_the_merge_package_does_not_reach_up_into_the_planner():
    found = {m for m in _imports("merge") | _loaded_after_import("merge") if m == "dsprof.plan" or m.startswith("dsprof.plan.")}
    assert not found, sorted(found)
