"""Command text is written by the command line only (issue #38): the layers below pass plain data -- a LUT miss its
`MeasureHint`, the planner its plan file's path -- and `dsprof.cli.commands` turns them into `dsprof` commands.

The import graph is read as tests/test_layers.py reads it; the expected words and commands are written out here."""

import argparse
import ast
import re
import warnings

import pytest

import dsprof
from dsprof.cli import build_parser, main
from dsprof.cli.flags import command_line_text, flag_table
from dsprof.cli.commands import hint_command
from dsprof.records.importance import ImportanceResolutionWarning
from dsprof.cli.main import _text
from dsprof.device_context import DeviceContext
from dsprof.errors import ImportanceHint, LUTError, LUTMissError, MeasureHint, UsageError
from dsprof.lut import LUTMissWarning, MergeChoice
from dsprof.planning.front import check_budget
from test_layers import MODULES, ROOT, imports

CONTEXT = DeviceContext("3f9a1c2b7d4e", "cpu", "onnxruntime", "fp32", "nchw", 1, 4)
REQUEST = MeasureHint(CONTEXT, "model=ModelRef.of('mobilenet_v2', resolution=32)", max_span=3, in_situ=True)
WORDS = ("`dsprof measure` (or dsprof.measure) in context 3f9a1c2b7d4e/cpu/onnxruntime/fp32/nchw/b1/t4 with the "
         "model's options (model=ModelRef.of('mobilenet_v2', resolution=32)), timing blocks original, merged and "
         "linear, spans of up to 3 blocks, and each block inside the model")
COMMAND = ("dsprof measure --model mobilenet_v2 --resolution 32 --device cpu --backend onnxruntime --dtype fp32 "
           "--batch 1 --threads 4 --variants original,merged,linear --spans 3 --in-situ merged,linear --resume")


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


def test_every_warning_the_command_line_prints_is_in_its_words_on_stderr():
    """A message from the layers below names parameters (`` `settings=BackendSettings(threads=1)` ``); the command
    line prints it as options. Found: `dsprof blocks` printed `find_blocks`' warning itself, and `dsprof plan` the
    tie-break's contention warning, both in Python's words (`dsprof plan`'s on stdout). Each f-string of dsprof/cli
    that starts "warning: " formats its message through `command_line_text` (or `dsprof.cli.main._text`, which
    calls it) and goes to stderr."""
    found = []
    for path in sorted((ROOT / "dsprof" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "print" and node.args
                    and isinstance(node.args[0], ast.JoinedStr)):
                continue
            parts = node.args[0].values
            if not (parts and isinstance(parts[0], ast.Constant) and str(parts[0].value).startswith("warning: ")):
                continue
            fields = [p.value for p in parts if isinstance(p, ast.FormattedValue)]
            worded = all(isinstance(f, ast.Call) and getattr(f.func, "id", "") in ("command_line_text", "_text")
                         for f in fields)
            to_stderr = any(k.arg == "file" and ast.unparse(k.value) == "sys.stderr" for k in node.keywords)
            if not (fields and worded and to_stderr):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_a_request_in_words_and_as_the_command_line_writes_it():
    assert REQUEST.describe() == WORDS
    assert hint_command(REQUEST) == COMMAND
    build_parser().parse_args(COMMAND.split()[1:])  # a command that runs as written
    plain = MeasureHint(CONTEXT, "model='resnet18'")
    assert plain.describe() == ("`dsprof measure` (or dsprof.measure) in context 3f9a1c2b7d4e/cpu/onnxruntime/fp32/"
                                "nchw/b1/t4 with the model's options (model='resnet18'), timing blocks original, "
                                "merged and linear")
    assert plain.to_dict() == {"key": "3f9a1c2b7d4e/cpu/onnxruntime/fp32/nchw/b1/t4", "model": "model='resnet18'",
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
    hint = ImportanceHint("model=ModelRef.of('mobilenet_v2', options={'width': 0.5})", "my images", "taylor",
                          "w/ck pt.pth", 160)
    assert hint.describe() == ("`dsprof importance` (or dsprof.importance) for the model (model=ModelRef.of("
                               "'mobilenet_v2', options={'width': 0.5})) at 160 px on my images with the proxy taylor, "
                               "from the weights w/ck pt.pth")
    command = hint_command(hint)
    assert command == ("dsprof importance --model mobilenet_v2 --width 0.5 --resolution 160 --data 'my images' "
                       "--proxy taylor --weights 'w/ck pt.pth' --out importance-160px.json")  # not over a file at another
    build_parser().parse_args(["importance", "--model", "mobilenet_v2", "--width", "0.5", "--resolution", "160",
                               "--data", "my images", "--proxy", "taylor", "--weights", "w/ck pt.pth", "--out",
                               "importance.json"])  # the command as a shell splits it
    plain = ImportanceHint("model='resnet18'", "digits", "zero-shot", True)
    assert hint_command(plain) == ("dsprof importance --model resnet18 --data digits --proxy zero-shot --weights "
                                   "pretrained --out importance.json")
    # any error of the family, and the importance warning, carry one the same way
    refused = UsageError("for another model: e.g. {hint} with its `weights=`", hint=plain)
    assert str(refused) == ("for another model: e.g. `dsprof importance` (or dsprof.importance) for the model "
                            "(model='resnet18') on digits with the proxy zero-shot, from pretrained weights with its "
                            "`weights=`")
    assert _text(refused, "plan") == f"for another model: e.g. `{hint_command(plain)}` with its --weights"
    said = ImportanceResolutionWarning("scored at 224 px; to score at 160 px: {hint}", hint=hint)
    assert _text(said) == f"scored at 224 px; to score at 160 px: `{command}`"


# Errors name parameters (issue #44): below the command line a message names the Python parameter in backquotes
# (`max_span=1`, `merge_by='macs'`); the command line alone spells it as its option (dsprof/cli/flags.py).

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")


def _said(node: ast.AST) -> bool:
    """A raise, a ``warn(...)``, or the making of an error or a warning (``...Error(...)``, ``...Warning(...)``)."""
    if isinstance(node, ast.Raise):
        return True
    if isinstance(node, ast.Call):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        return name == "warn" or name.endswith(("Error", "Warning"))
    return False


def test_no_raise_or_warning_below_the_command_line_names_a_flag():
    found = []
    for path in sorted((ROOT / "dsprof").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("dsprof/cli/") or relative == "dsprof/edge/runner.py":  # the runner has its own
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if _said(node):
                for part in ast.walk(node):
                    if isinstance(part, ast.Constant) and isinstance(part.value, str) and FLAG.search(part.value):
                        found.append(f"{relative}:{part.lineno}: {FLAG.search(part.value).group()}")
    assert found == []


def test_the_check_finds_a_flag_where_one_is_written():  # the walk above can fail
    bad = ast.parse('raise UsageError(f"give --max-span {n}")\nwarnings.warn("or --merge-by macs")\nX = "--keep"')
    said = {p.value for n in ast.walk(bad) if _said(n) for p in ast.walk(n) if isinstance(p, ast.Constant)
            and isinstance(p.value, str) and FLAG.search(p.value)}
    assert said == {"give --max-span ", "or --merge-by macs"}  # not the assignment


def test_the_table_is_the_parsers_own():
    parser = build_parser()
    commands = next(a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    table = flag_table("plan")
    # every option of `dsprof plan`, by the parameter it sets (argparse's dest), hand-checked for the odd ones
    for action in commands["plan"]._actions:
        if action.dest != "help":
            assert table[action.dest] == action.option_strings[-1] or action.dest == "help"
    assert (table["max_span"], table["joint"], table["budget_ms"], table["device_key"]) == (
        "--max-span", "--for", "--budget-ms", "--device-key")
    assert flag_table("measure")["plans"] == "--plan" and flag_table("report")["plans"] == "--plans"
    assert flag_table("measure")["compile"] == "--compile-mode" and flag_table("merge")["model_name"] == "--model"


@pytest.mark.parametrize("said, command, line", [
    ("or plan without spans: `max_span=1`", "plan", "or plan without spans: --max-span 1"),
    ("decide by MACs: `merge_by='macs'`.", "merge", "decide by MACs: --merge-by macs."),
    ("pass `overwrite=True` to replace it, or choose another `out=`", "export",
     "pass --overwrite to replace it, or choose another --out"),
    # a model as `model_args` writes it (one `model=`, as every verb takes it): the options that build it
    ("(`model=ModelRef.of('mobilenet_v2', options={'depths': [1, 2], 'width': 1.4}, resolution=32)`)", "measure",
     "(--model mobilenet_v2 --depths 1,2 --width 1.4 --resolution 32)"),
    ("`model='my model.py:build'`", "plan", "--model-file 'my model.py:build'"),
    ("`model=ModelRef.of('resnet18', resolution=160, weights=True)`", "importance",
     "--model resnet18 --resolution 160 --weights pretrained"),
    ("`model=ModelRef.of('x.py:f', weights='w/ck pt.pth')`", "merge", "--model-file x.py:f --weights 'w/ck pt.pth'"),
    ("`model=ModelRef.of(resolution=32)` or `model=ModelRef.of(weights=)`", "plan", "--resolution 32 or --weights"),
    # a field no option sets, or a value that is not a literal: left as written
    ("`model=ModelRef.of('resnet18', name='mine')` `model=ModelRef.of(NAME, resolution=32)`", "plan",
     "`model=ModelRef.of('resnet18', name='mine')` `model=ModelRef.of(NAME, resolution=32)`"),
    # the old keywords (deprecated on the verbs, still read): the same options as before
    ("`model_file='my model.py:build'`", "plan", "--model-file 'my model.py:build'"),
    # a factory's own option, which no command takes: spelt as argparse spells a dest (as model_flags always did)
    ("`model=ModelRef.of('m.py:f', options={'drop_rate': 0.1})`", "measure", "--model-file m.py:f --drop-rate 0.1"),
    ("`model_file='m.py:f', options={'drop_rate': 0.1}`", "measure", "--model-file m.py:f --drop-rate 0.1"),
    ("`dsprof.measure(resume=True)` repairs it", None, "`dsprof measure --resume` repairs it"),
    ("`dsprof.measure(plans=FILE)` times it", "report", "`dsprof measure --plan FILE` times it"),
    ("`dsprof.plan(joint=..., keep=3)` writes it", "report", "`dsprof plan --for ... --keep 3` writes it"),
    ("`dsprof.measure_few()`, `dsprof.build_lut()`", "plan", "`dsprof measure --few`, `dsprof build-lut`"),
    # a call's leading arguments without a name are the command's own words, each one quoted word
    ("with `dsprof.build_lut(FILES, out='lut.csv')`", "predict", "with `dsprof build-lut FILES --output lut.csv`"),
    ("`dsprof.build_lut('my runs', out='a b.csv', accept_modified=True)`", None,
     "`dsprof build-lut 'my runs' --output 'a b.csv' --accept-modified`"),
    # an object given by its fields: each field as the option that sets it (issue #44: a verb takes objects)
    ("or plan with the spans it holds: `pricing=Pricing(max_span=2)`", "plan",
     "or plan with the spans it holds: --max-span 2"),
    ("choose one with `pricing=Pricing(device_key=KEY)` to write its plan", "plan",
     "choose one with --device-key KEY to write its plan"),
    ("`budget=LatencyBudget(budget_ms=)` is the latency", "search", "--budget-ms is the latency"),
    ("(`pricing=Pricing(resolution=224)`)", "search", "(--lut-resolution 224)"),  # a field named otherwise
    ("`run=TrainRun(resume=True)` needs (`run=TrainRun(checkpoint=)`)", "finetune", "--resume needs (--out)"),
    ("`run=TrainRun(resume=True)` needs (`run=TrainRun(checkpoint=)`)", "search", "--resume needs (--checkpoint)"),
    ("pass `lut=LUT.load(accept_modified=True)`", "predict", "pass --accept-modified"),
    ("`joint=Joint(contexts='a,b', objective='mean')`", "plan", "--for a,b --objective mean"),
    ("several contexts: `budget=LatencyBudget(budget_ms=, speedup=)` chooses within one", "plan",
     "several contexts: --budget-ms --speedup chooses within one"),  # the budget's fields, not `(...)`
    ("`dsprof.report(FILES, out=OUT, fronts='FRONT.json')` opens", "report",
     "`dsprof report FILES --output OUT --front FRONT.json` opens"),  # report's out= is -o/--output
    ("`settings=GateSettings(score_normalize=True, score_bound=)`", "search", "--score-normalize --score-bound"),
    ("`pricing=Pricing()` `pricing=Pricing(no_such_field=1)`", "plan", " `pricing=Pricing(no_such_field=1)`"),
    # left as written: a label's options, a parameter no command takes, code that is not a parameter run
    ("lacks mobilenet_v2{depths=[1]} `no_such_parameter=1` `dsprof.models.get_model`", "plan",
     "lacks mobilenet_v2{depths=[1]} `no_such_parameter=1` `dsprof.models.get_model`"),
])
def test_parameters_become_the_commands_options(said, command, line):
    assert command_line_text(said, command) == line


def test_a_python_caller_is_told_the_parameter_and_the_command_line_the_flag(tmp_path, capsys):
    with pytest.raises(UsageError) as caught:  # refused before anything is built
        dsprof.merge(dsprof.ModelRef.of("mobilenet_v2", resolution=32), "mbv2-ds-a", merge=MergeChoice(merge_by="lut"),
                     out=tmp_path / "m.pt")
    said = str(caught.value)
    assert said == ("`merge=MergeChoice(merge_by='lut')` decides the merges from a LUT: pass `merge=MergeChoice(lut=LUT)` "
                    "(or `merge=MergeChoice(merge_by='macs')`)")
    assert not FLAG.search(said)
    with pytest.raises(UsageError, match=r"`budget=LatencyBudget\(budget_ms=\)` is the predicted latency per batch"):
        check_budget(-1.0, None)
    # the same errors on the command line: one line, the flags the user typed
    assert main(["merge", "--model", "mobilenet_v2", "--resolution", "32", "--plan", "mbv2-ds-a", "--merge-by", "lut",
                 "--out", str(tmp_path / "m.pt")]) == 2
    assert capsys.readouterr().err == ("dsprof merge: error: --merge-by lut decides the merges from a LUT: pass --lut "
                                       "LUT (or --merge-by macs)\n")
    assert _text(UsageError(f"x; {said}"), "merge") == "x; --merge-by lut decides the merges from a LUT: pass --lut LUT (or --merge-by macs)"
    assert _text(caught.value, "predict") == ("--merge-by lut decides the merges from a LUT: pass --lut LUT (or "
                                              "--merge-by macs)")
    assert not (tmp_path / "m.pt").exists()


def test_a_folder_given_as_a_lut_is_told_to_build_one_as_each_caller_builds_it(tmp_path, capsys):
    """A new user passed the folder `dsprof.measure` wrote as the LUT: Python was told `dsprof build-lut FILES -o
    lut.csv`, a command with a short flag; it is now the API call, and the command line gets the command."""
    from dsprof.lut import LUT

    with pytest.raises(LUTError) as caught:
        LUT.load(tmp_path)
    said = str(caught.value)
    assert said == (f"{tmp_path} is a folder, not a LUT file; build one from measurement files with "
                    "`dsprof.build_lut(FILES, out='lut.csv')`")
    assert not FLAG.search(said) and " -o " not in said
    assert main(["predict", "--model", "mobilenet_v2", "--resolution", "32", "--lut", str(tmp_path)]) == 2
    assert capsys.readouterr().err.endswith("build one from measurement files with "
                                            "`dsprof build-lut FILES --output lut.csv`\n")


# A Python caller copies the model from a hint (issue #44): the one `model=` argument every verb takes now, which
# builds the very reference the caller gave; the command line shows the same model as its options.

def test_a_miss_names_the_model_as_the_verbs_take_it_and_the_command_line_as_its_options(tmp_path, capsys):
    from test_lut import _hand_lut  # a LUT written by hand: every block of one model, nothing of any other

    from dsprof.lut import model_label
    from dsprof.models import ModelRef, find_blocks, get_model

    held = {"depths": [1] * 7}
    lut = _hand_lut(find_blocks(get_model("mobilenet_v2", resolution=32, **held)),
                    model_label("mobilenet_v2", {**held, "resolution": 32}))
    path = lut.save(tmp_path / "lut.csv")
    # another width at another, non-default resolution: no block of it is in the LUT (other channels, other sizes)
    given = ModelRef.of("mobilenet_v2", options={"depths": [1] * 7, "width": 0.5}, resolution=48)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        with pytest.raises(LUTMissError) as caught:
            dsprof.predict(given, path)
        hint = caught.value.hint.model
        assert hint == "model=ModelRef.of('mobilenet_v2', options={'depths': [1, 1, 1, 1, 1, 1, 1], 'width': 0.5}, " \
                       "resolution=48)"
        assert f"with the model's options ({hint})" in str(caught.value)  # in words, for a Python caller
        # the hint as written builds the reference the caller gave (no DeprecationWarning: the current form)
        parameter, _, value = hint.partition("=")
        built = eval(value, {"ModelRef": ModelRef})  # noqa: S307 -- the hint's own text, as a user would paste it
        assert parameter == "model" and built == given
        assert (built.name, built.entry, built.options, built.resolution, built.weights, built.file) == (
            "mobilenet_v2", "mobilenet_v2", {"depths": [1] * 7, "width": 0.5}, 48, False, None)
        assert built.input_size == (48, 48)
    # the command line: the same miss, its model as the options that build it, in a command that parses as written
    assert main(["predict", "--model", "mobilenet_v2", "--width", "0.5", "--depths", "1,1,1,1,1,1,1",
                 "--resolution", "48", "--lut", str(path)]) == 2
    line = capsys.readouterr().err.strip()
    assert len(line.splitlines()) == 1 and "ModelRef" not in line and "options=" not in line
    command = line.split("`")[1]
    assert command.startswith("dsprof measure --model mobilenet_v2 --width 0.5 --depths 1,1,1,1,1,1,1 --resolution 48 "
                              "--device cpu --backend torch")  # the options in the order the command line gave them
    args = build_parser().parse_args(command.split()[1:])
    assert (args.model, args.model_file, args.depths, args.width, args.resolution) == (
        "mobilenet_v2", None, "1,1,1,1,1,1,1", 0.5, 48)


def test_the_importance_for_another_model_is_not_scored_over_the_file_it_refused(tmp_path):
    """`plan --importance importance.json` with a file scored for ResNet-18, planning MobileNetV2: the refusal's
    command scores MobileNetV2 into a file of its own. It wrote importance.json, over the user's ResNet-18 scores."""
    from dsprof.errors import UsageError
    from dsprof.records.importance import check_importance_model

    record = {"model": {"name": "resnet18", "options": {}}, "data": {"name": "digits"}, "proxy": {"name": "taylor"}}
    with pytest.raises(UsageError) as refused:
        check_importance_model(record, "mobilenet_v2", {"width": 0.5}, tmp_path / "importance.json")
    assert hint_command(refused.value.hint) == ("dsprof importance --model mobilenet_v2 --width 0.5 --data digits "
                                                "--proxy taylor --out importance-mobilenet_v2.json")


def test_reports_repeated_plans_and_fronts_add_up_as_one_list_does():
    """`dsprof report r --plans A --plans B` kept only B (a new list each time); now each flag adds to the list."""
    once = build_parser().parse_args(["report", "r", "--plans", "A", "B", "--front", "f", "g"])
    repeated = build_parser().parse_args(["report", "r", "--plans", "A", "--plans", "B", "--front", "f", "--front", "g"])
    assert once.plans == repeated.plans == ["A", "B"] and once.front == repeated.front and len(once.front) == 2


def test_an_import_hint_in_words_and_as_the_command_line_writes_it():
    """What a failed remote step leaves to import by hand: data below the command line, a command only there."""
    from dsprof.errors import EdgeError, ImportHint

    hint = ImportHint("/tmp/b b/bundle", "/tmp/b b/results.jsonl", "m")
    failed = EdgeError("fetching failed; then {hint}", hint=hint)
    assert str(failed) == ("fetching failed; then `dsprof import` (or dsprof.edge.import_results) of "
                           "/tmp/b b/results.jsonl for the bundle /tmp/b b/bundle, into m")
    assert failed.text(hint_command(hint)) == ("fetching failed; then `dsprof import '/tmp/b b/bundle' "
                                               "'/tmp/b b/results.jsonl' --out m`")
