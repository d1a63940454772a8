"""Command text is written by the command line only (issue #38): the layers below pass plain data -- a LUT miss its
`MeasureHint`, the planner its plan file's path -- and `dsprof.cli.commands` turns them into `dsprof` commands.

The import graph is read as tests/test_layers.py reads it; the expected words and commands are written out here."""

import ast
import warnings

import pytest

from dsprof.cli import build_parser
from dsprof.cli.commands import hint_command
from dsprof.search.importance_file import ImportanceResolutionWarning
from dsprof.cli.main import _text
from dsprof.device_context import DeviceContext
from dsprof.errors import ImportanceHint, LUTError, LUTMissError, MeasureHint, UsageError
from dsprof.lut import LUTMissWarning
from test_layers import MODULES, ROOT, imports

CONTEXT = DeviceContext("3f9a1c2b7d4e", "cpu", "onnxruntime", "fp32", "nchw", 1, 4)
REQUEST = MeasureHint(CONTEXT, "--model mobilenet_v2 --resolution 32", max_span=3, in_situ=True)
WORDS = ("`dsprof measure` (or dsprof.measure) in context 3f9a1c2b7d4e/cpu/onnxruntime/fp32/nchw/b1/t4 with the "
         "model's options (--model mobilenet_v2 --resolution 32), timing blocks original, merged and linear, spans of "
         "up to 3 blocks, and each block inside the model")
COMMAND = ("dsprof measure --model mobilenet_v2 --resolution 32 --device cpu --backend onnxruntime --dtype fp32 "
           "--batch 1 --threads 4 --variants original,merged,linear --spans 3 --in-situ merged,linear")


def test_only_the_command_line_imports_its_command_text():
    assert "dsprof.commands" not in MODULES  # moved into the command line's package
    importers = {m for m in MODULES for target, _, _ in imports(m) if target == "dsprof.cli.commands"}
    assert importers == {"dsprof.cli.export", "dsprof.cli.import_bundle", "dsprof.cli.main", "dsprof.cli.measure",
                         "dsprof.cli.plan"}


def test_no_layer_below_the_command_line_writes_a_measure_merge_or_plan_command_from_values():
    # an f-string with a field right after "dsprof measure " (merge, plan): a command put together from values
    found = []
    for path in sorted((ROOT / "dsprof").rglob("*.py")):
        if path.parent.name == "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.JoinedStr):
                for part, after in zip(node.values, node.values[1:]):
                    if (isinstance(part, ast.Constant) and isinstance(after, ast.FormattedValue)
                            and part.value.endswith(("dsprof measure ", "dsprof merge ", "dsprof plan ",
                                                       "dsprof importance "))):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_a_request_in_words_and_as_the_command_line_writes_it():
    assert REQUEST.describe() == WORDS
    assert hint_command(REQUEST) == COMMAND
    build_parser().parse_args(COMMAND.split()[1:])  # a command that runs as written
    plain = MeasureHint(CONTEXT, "--model resnet18")
    assert plain.describe() == ("`dsprof measure` (or dsprof.measure) in context 3f9a1c2b7d4e/cpu/onnxruntime/fp32/"
                                "nchw/b1/t4 with the model's options (--model resnet18), timing blocks original, "
                                "merged and linear")
    assert plain.to_dict() == {"key": "3f9a1c2b7d4e/cpu/onnxruntime/fp32/nchw/b1/t4", "flags": "--model resnet18",
                               "max_span": 1, "in_situ": False}


@pytest.mark.parametrize("kind", [LUTMissError, LUTMissWarning])
def test_a_miss_names_its_request_in_words_or_as_a_given_command(kind):
    # a path and a model label with braces of their own: only the token is replaced
    message = "the LUT /tmp/{x}/lut.csv lacks mobilenet_v2{depths=[1]}: run {hint} and rebuild the LUT"
    miss = kind(message, hint=REQUEST)
    assert str(miss) == f"the LUT /tmp/{{x}}/lut.csv lacks mobilenet_v2{{depths=[1]}}: run {WORDS} and rebuild the LUT"
    assert miss.text(COMMAND) == ("the LUT /tmp/{x}/lut.csv lacks mobilenet_v2{depths=[1]}: run "
                                  f"`{COMMAND}` and rebuild the LUT")
    assert miss.hint is REQUEST and "{hint}" not in str(miss)
    assert str(kind("the LUT lut.csv lacks block 3")) == "the LUT lut.csv lacks block 3"  # no request: as written


def test_a_miss_is_caught_as_before_and_the_command_line_shows_its_command():
    miss = LUTMissError("the LUT lut.csv lacks block 3: run {hint}", hint=REQUEST)
    assert isinstance(miss, LUTError) and isinstance(miss, KeyError) and isinstance(miss, ValueError)
    assert _text(miss) == f"the LUT lut.csv lacks block 3: run `{COMMAND}`"  # what `dsprof ...: error:` prints
    with pytest.warns(LUTMissWarning, match="timing blocks original, merged and linear") as caught:
        warnings.warn(LUTMissWarning("lacks 3 key(s): run {hint}", hint=REQUEST), stacklevel=1)
    assert _text(caught[0].message) == f"lacks 3 key(s): run `{COMMAND}`"  # what `warning:` prints
    assert _text(ValueError("no request")) == "no request"


def test_an_importance_hint_in_words_and_as_the_command_line_writes_it():
    hint = ImportanceHint("--model mobilenet_v2 --width 0.5", "my images", "taylor", "w/ck pt.pth", 160)
    assert hint.describe() == ("`dsprof importance` (or dsprof.importance) for the model (--model mobilenet_v2 --width "
                               "0.5) at 160 px on my images with the proxy taylor, from the weights w/ck pt.pth")
    command = hint_command(hint)
    assert command == ("dsprof importance --model mobilenet_v2 --width 0.5 --resolution 160 --data 'my images' "
                       "--proxy taylor --weights 'w/ck pt.pth' --out importance.json")
    build_parser().parse_args(["importance", "--model", "mobilenet_v2", "--width", "0.5", "--resolution", "160",
                               "--data", "my images", "--proxy", "taylor", "--weights", "w/ck pt.pth", "--out",
                               "importance.json"])  # the command as a shell splits it
    plain = ImportanceHint("--model resnet18", "digits", "zero-shot", True)
    assert hint_command(plain) == ("dsprof importance --model resnet18 --data digits --proxy zero-shot --weights "
                                   "pretrained --out importance.json")
    # any error of the family, and the importance warning, carry one the same way
    refused = UsageError("for another model: e.g. {hint} with its --weights", hint=plain)
    assert str(refused) == ("for another model: e.g. `dsprof importance` (or dsprof.importance) for the model "
                            "(--model resnet18) on digits with the proxy zero-shot, from pretrained weights with its "
                            "--weights")
    assert _text(refused) == f"for another model: e.g. `{hint_command(plain)}` with its --weights"
    said = ImportanceResolutionWarning("scored at 224 px; to score at 160 px: {hint}", hint=hint)
    assert _text(said) == f"scored at 224 px; to score at 160 px: `{command}`"
