"""The packages import one way only, down the layers that docs/development.md's map names (issue #38).

The map's layer table is read from docs/development.md itself, so the page and the code cannot drift apart. Every
import statement of the package is read (those inside functions too, not those under ``if TYPE_CHECKING``) and
resolved to the module it loads (through the lazy re-exports of the packages' ``__init__`` files). Then:

- no import climbs to a higher layer, and no modules import each other round a circle;
- an import inside a function is there only to load a heavy library late (PyTorch, pandas, ONNX Runtime,
  OpenVINO, TensorFlow, matplotlib...): the module it imports loads one that the importing module does not;
- the data layer loads none of the heavy libraries (read from the code, and checked in a fresh interpreter);
- importing a package loads no heavy library (what it offers it re-exports lazily).
"""

import ast
import importlib
import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import dsprof

PACKAGE = Path(dsprof.__file__).parent
ROOT = PACKAGE.parent
MAP = ROOT / "docs" / "development.md"
#: The libraries that make an import slow (seconds, not milliseconds), or that are optional.
HEAVY = frozenset({"torch", "torchvision", "timm", "pandas", "numpy", "scipy", "sklearn", "matplotlib", "onnx",
                   "onnxruntime", "openvino", "tensorflow", "ai_edge_litert", "onnx2tf", "tqdm", "jinja2"})


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def layer_table() -> list[tuple[str, list[str]]]:
    """(layer, the module and package names of its row), top layer first, from the map in docs/development.md: the
    table that follows the line ``<!-- layers: tests/test_layers.py reads this table -->``."""
    text = MAP.read_text(encoding="utf-8")
    start = text.index("<!-- layers: tests/test_layers.py reads this table -->")
    rows = []
    for line in text[start:].splitlines()[1:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] in ("layer", "") or set(cells[0]) <= set("-: "):
            continue
        rows.append((cells[0].strip("*"), re.findall(r"`([\w.]+)`", cells[1])))
    return rows


LAYERS = layer_table()
RANK = {name: len(LAYERS) - i for i, (name, _) in enumerate(LAYERS)}  # the bottom layer is 1


def layer_of(module: str) -> str | None:
    """The layer of the most specific name of the map that covers ``module`` (``dsprof`` covers itself only)."""
    best, found = -1, None
    for layer, names in LAYERS:
        for name in names:
            covers = module == name or (name != "dsprof" and module.startswith(name + "."))
            if covers and len(name) > best:
                best, found = len(name), layer
    return found


@cache
def _lazy_exports(package: str) -> dict[str, str]:
    """{name: module} that a package's ``__init__`` re-exports lazily (`dsprof._lazy.lazy_exports`)."""
    getter = getattr(importlib.import_module(package), "__getattr__", None)
    exports = getattr(getter, "exports", {})
    return {name: importlib.util.resolve_name(target, package) for name, target in exports.items()}


def _targets(module: str, node: ast.AST) -> list[str]:
    """The dsprof modules an import statement of ``module`` loads."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "dsprof"]
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) if node.level else node.module
    if base.split(".")[0] != "dsprof":
        return []
    out = []
    for alias in node.names:
        name = f"{base}.{alias.name}"
        if name in MODULES:
            out.append(name)
        elif MODULES[base].name == "__init__.py" and alias.name in _lazy_exports(base):
            out.append(_lazy_exports(base)[alias.name])
        else:
            out.append(base)
    return out


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


@cache
def imports(module: str) -> tuple[tuple[str, int, bool], ...]:
    """(imported dsprof module or heavy library, line, inside a function) of every import statement of ``module``;
    a heavy library is named ``lib:NAME``."""
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, True)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                found.extend((t, child.lineno, in_function) for t in _targets(module, child))
                names = [a.name for a in child.names] if isinstance(child, ast.Import) else \
                    ([child.module] if child.module and not child.level else [])
                found.extend((f"lib:{n.split('.')[0]}", child.lineno, in_function) for n in names
                             if n.split(".")[0] in HEAVY)
            else:
                visit(child, in_function)

    visit(ast.parse(MODULES[module].read_text(encoding="utf-8")), False)
    return tuple(found)


def _parents(module: str) -> list[str]:
    """The packages Python imports before ``module`` (their ``__init__`` files run first)."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


@cache
def heavy(module: str) -> frozenset[str]:
    """The heavy libraries that importing ``module`` loads, read from its module-level imports and those of every
    dsprof module they load (its parent packages' too)."""
    seen, todo, libs = set(), [module], set()
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo += _parents(m)
        for target, _, in_function in imports(m):
            if in_function:
                continue
            if target.startswith("lib:"):
                libs.add(target[4:])
            else:
                todo.append(target)
    return frozenset(libs)


def _edges() -> list[tuple[str, str, int, bool]]:
    return [(m, t, line, f) for m in MODULES for t, line, f in imports(m) if not t.startswith("lib:")]


def test_the_map_names_a_layer_for_every_module():
    assert [name for name, _ in LAYERS][-1] == "data" and len(LAYERS) >= 5, LAYERS
    named = {n for _, names in LAYERS for n in names}
    assert not named - set(MODULES), f"docs/development.md names modules that do not exist: {sorted(named - set(MODULES))}"
    assert [m for m in MODULES if layer_of(m) is None] == []


def test_no_import_climbs_to_a_higher_layer():
    upward = [f"{MODULES[m].relative_to(ROOT)}:{line} {m} ({layer_of(m)}) imports {t} ({layer_of(t)})"
              for m, t, line, _ in _edges() if RANK[layer_of(t)] > RANK[layer_of(m)]]
    assert upward == [], "\n".join(upward)


def test_no_modules_import_each_other_round_a_circle():
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m, t, _, _ in _edges():
        if t != m:
            graph[m].add(t)
    # Tarjan's strongly connected components, iteratively
    index, low, on_stack, stack, circles, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter[0]
                counter[0] += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    assert circles == []


def test_an_import_inside_a_function_only_loads_a_heavy_library_late():
    dodges = [f"{MODULES[m].relative_to(ROOT)}:{line} imports {t} inside a function, but {t} loads no heavy library "
              f"that {m} does not load already: import it at the top (or move what it needs down a layer)"
              for m, t, line, in_function in _edges() if in_function and not heavy(t) - heavy(m)]
    assert dodges == [], "\n".join(dodges)


def test_the_data_layer_loads_no_heavy_library():
    data = [m for m in MODULES if layer_of(m) == "data"]
    assert {"dsprof.records.plan", "dsprof.records.measurement", "dsprof.records.stats", "dsprof.lut.schema",
            "dsprof.records.importance", "dsprof.names"} <= set(data)
    loaded = {m: sorted(heavy(m)) for m in data if heavy(m)}
    assert loaded == {}
    code = ("import importlib, json, sys\n"
            f"for m in {data!r}:\n    importlib.import_module(m)\n"
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert set(json.loads(done.stdout)) & HEAVY == set()


def test_importing_a_package_loads_no_heavy_library():
    """A package's ``__init__`` re-exports lazily: importing ``dsprof.records.plan`` (data) must not load the planner."""
    heavy_inits = {m: sorted(heavy(m)) for m in MODULES if MODULES[m].name == "__init__.py" and heavy(m)}
    assert heavy_inits == {}
