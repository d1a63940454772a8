"""The shared constants (dsprof/constants.py) are written once: the bottom layer imports nothing, and no
default in the package or the command line types their values again."""

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import dsprof
from dsprof.cli import build_parser
from dsprof.constants import DEFAULT_FINETUNE, DEFAULT_MAX_SPAN, IMAGENET_CLASSES
from dsprof.lut import Pricing
from dsprof.models import get_model
from dsprof.planning import plan_front
from dsprof.search import TrainConfig

PACKAGE = Path(dsprof.__file__).parent
#: Parameter and field names whose defaults are these constants.
NAMED = {"max_span": DEFAULT_MAX_SPAN, "max_len": DEFAULT_MAX_SPAN, "num_classes": IMAGENET_CLASSES}


def test_constants_module_imports_neither_dsprof_nor_torch():
    code = "import sys, dsprof.constants; print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    tree = ast.parse((PACKAGE / "constants.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported == {"types"}


def test_no_default_types_a_constant_again():
    """No parameter or dataclass field named max_span, max_len or num_classes types the constant's value as its
    default (another value, e.g. max_span=1 for no spans, is another choice)."""
    typed = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            pairs = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                positional = args.posonlyargs + args.args
                pairs += zip(positional[len(positional) - len(args.defaults):], args.defaults)
                pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
                pairs = [(a.arg, d) for a, d in pairs]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                pairs = [(node.target.id, node.value)]
            typed += [f"{path.relative_to(PACKAGE)}:{d.lineno} {name}" for name, d in pairs
                      if name in NAMED and isinstance(d, ast.Constant) and d.value == NAMED[name]]
    assert typed == []


def test_defaults_are_the_constants():
    # the planner plans with the spans its LUT holds (None), up to DEFAULT_MAX_SPAN where it holds none (issue #44)
    assert Pricing().max_span is None and "pricing" in inspect.signature(plan_front).parameters
    assert DEFAULT_MAX_SPAN == 4
    assert get_model("resnet18", resolution=32).fc.out_features == IMAGENET_CLASSES == 1000
    config = TrainConfig(**DEFAULT_FINETUNE)
    assert (config.epochs, config.lr) == (1, 0.02)
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    spans = {name: p.get_default("max_span") for name, p in sub.choices.items() if p.get_default("max_span") is not None}
    assert spans and set(spans.values()) == {DEFAULT_MAX_SPAN}, spans
    importance = sub.choices["importance"]
    assert (importance.get_default("epochs"), importance.get_default("lr")) == (DEFAULT_FINETUNE["epochs"],
                                                                              DEFAULT_FINETUNE["lr"])
