"""The search package's layout (issue #20, item 7): one module per method behind one registry, no import circle."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import dsprof.search as search_pkg
from dsprof.errors import UsageError
from dsprof.names import SEARCH_METHODS

PACKAGE = Path(search_pkg.__file__).parent
MODULES = sorted(p.stem for p in PACKAGE.glob("*.py"))


def _imports_within(module: str) -> set[str]:
    """The dsprof.search modules that ``module`` imports, at its top or inside a function (read from its source)."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:  # from .x import y / from . import x
                found |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
            elif node.level == 0 and (node.module or "").startswith("dsprof.search."):
                found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith("dsprof.search.")}
    return {m for m in found if m in MODULES} - {module}


def test_the_search_modules_import_each_other_without_a_circle():
    graph = {m: _imports_within(m) for m in MODULES if m != "__init__"}
    assert graph["measured"] >= {"finetuning", "loop"} and graph["proxies"] >= {"measured", "gates"}
    assert graph["importance"] >= {"proxies", "planned"} and "ground_truth" not in graph["importance"]
    done: set[str] = set()

    def visit(m: str, path: list[str]) -> None:
        assert m not in path, f"import circle: {' -> '.join(path[path.index(m):] + [m])}"
        if m in done:
            return
        for dep in sorted(graph[m]):
            visit(dep, path + [m])
        done.add(m)

    for m in graph:
        visit(m, [])


FIRST_IMPORTS = """
import importlib, sys
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "dsprof" or m.startswith("dsprof.")]:
        del sys.modules[loaded]  # torch stays loaded; dsprof is imported afresh, this module first
    try:
        importlib.import_module("dsprof.search." + name)
    except Exception as e:
        print(name, type(e).__name__, e)
"""


@pytest.mark.slow
def test_every_search_module_imports_first():
    # each module the first dsprof module a fresh interpreter imports: a circle through the package fails here
    env = {**os.environ, "PYTHONPATH": str(PACKAGE.parent.parent)}
    modules = [m for m in MODULES if m != "__init__"]
    r = subprocess.run([sys.executable, "-c", FIRST_IMPORTS, *modules], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr[-2000:]


def test_one_module_per_method_and_unknown_names_list_them():
    from dsprof.search.registry import SEARCHES, search_method

    assert tuple(SEARCHES) == SEARCH_METHODS
    assert {fn.__module__ for fn in SEARCHES.values()} == {f"dsprof.search.{m}" for m in
                                                         ("differentiable", "importance", "planned", "random_plan")}
    with pytest.raises(UsageError, match="choose one of: importance, differentiable, planner, random"):
        search_method("evolutionary")
    with pytest.raises(UsageError, match="unknown search method 'evolutionary'"):
        search_pkg.search("mobilenet_v2", keep=2, method="evolutionary")


def test_the_cli_offers_exactly_the_registered_methods():
    from dsprof.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    method = next(a for a in sub.choices["search"]._actions if a.dest == "method")
    assert tuple(method.choices) == SEARCH_METHODS == tuple(search_pkg.SEARCHES)
