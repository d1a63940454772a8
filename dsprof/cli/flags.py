"""Python parameters as the command line spells them, in one table (issue #44): the layers below the command line
name parameters in their messages (`` `max_span=1` ``, `` `merge_by='macs'` ``, `` `dsprof.measure(resume=True)` ``),
and `command_line_text` rewrites such a message for a `dsprof` user (``--max-span 1``, ``--merge-by macs``,
`` `dsprof measure --resume` ``). The table is read from the argparse parser itself (each option's ``dest`` is the
parameter it sets), so that a flag renamed there is renamed in every message; `ALIASES` holds the few API parameters
named otherwise than their option's ``dest``.

What a message may write, inside backquotes (anything else is left as it is):

- a run of parameters, ``name=value, name=value``: each becomes ``--flag value``; ``name=`` and ``name=True`` become
  ``--flag``; a quoted string its text; a list or tuple its items joined by commas; a model as
  `dsprof.models.model_args` writes it, ``model='NAME'``, ``model='PATH.py:FACTORY'`` or ``model=ModelRef.of('NAME',
  options={...}, resolution=N)``, the options that build it (``--model`` or ``--model-file``, one flag per build
  option, ``--resolution``); a parameter that is an object given by its fields, ``pricing=Pricing(device_key=KEY,
  max_span=2)`` or ``lut=LUT.load(accept_modified=True)``, the options of its fields (the command line sets each
  field by an option). The backquotes go: the command line names options bare.
- a call of an API verb, ``dsprof.VERB(parameters)``: the command ``dsprof VERB --flag value ...``, in backquotes.
"""

from __future__ import annotations

import argparse
import ast
import re
import shlex
from typing import Mapping

from ..models.registry import is_model_file_spec

__all__ = ["ALIASES", "VERBS", "command_line_text", "flag_table", "learn", "parameters_as_flags"]

#: API parameters named otherwise than the ``dest`` of the option that sets them: (command or "*" for any) ->
#: {parameter: dest}.
ALIASES: Mapping[str, Mapping[str, str]] = {
    "*": {"model_name": "model", "luts": "lut", "merged_models": "merged_model",
          "budget_s": "budget", "min_sample_s": "min_sample_time", "warmup_s": "warmup", "warmup_max_s": "max_warmup",  # fields of the TimingConfig the options build
          # fields of the objects a verb takes, named otherwise than the option that sets them (``Kind.field``)
          "Pricing.resolution": "lut_resolution", "DistillSettings.alpha": "distill_alpha",
          "CheckSettings.out": "measure_out", "Joint.contexts": "joint"},
    "finetune": {"TrainRun.checkpoint": "out"},
    "measure": {"plans": "plan", "compile": "compile_mode", "n": "few", "lut_out": "few_lut_out"},
    "export": {"plans": "plan"},
    "predict": {"json_out": "json"},
    "plan": {"candidates": "tie_break_candidates"},
    "report": {"fronts": "front", "out": "output"},
    "build-lut": {"out": "output"},
}

#: API verbs (`dsprof.VERB`) whose command is not their name with hyphens.
VERBS: Mapping[str, str] = {"measure_few": "measure --few"}

_NAME = r"[a-z_][a-z0-9_]*"
_ONE = re.compile(rf"({_NAME})=(.*)", re.S)  # one parameter; ``out=``: named without a value (its flag alone)
_CALL = re.compile(rf"dsprof\.({_NAME})\((.*)\)")
_OBJECT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\((.*)\)", re.S)  # an object given by its fields: Pricing(max_span=2)
_SPAN = re.compile(r"`([^`\n]+)`")


_TABLES: dict[str, dict[str, str]] = {}  # command -> {dest: flag}, read by `learn` from the parser


def learn(parser: argparse.ArgumentParser) -> None:
    """Read each command's options from ``parser`` ({dest: flag} per command; `dsprof.cli.main` calls it once,
    with its parser, when it is imported: before any message is rewritten)."""
    commands = next(a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    _TABLES.clear()
    for command, sub in commands.items():
        _TABLES[command] = {a.dest: next(o for o in a.option_strings if o.startswith("--"))
                            for a in sub._actions if a.dest != "help" and any(o.startswith("--") for o in a.option_strings)}


def _parsed() -> dict[str, dict[str, str]]:
    if not _TABLES:
        raise RuntimeError("the command line's options are read from its parser: build_parser() first")
    return _TABLES


def flag_table(command: str | None = None) -> dict[str, str]:
    """{Python parameter: the option that sets it} for ``command`` (a `dsprof` command), the options of every other
    command filling in what it lacks (a message from a layer below may name any parameter)."""
    per = _parsed()
    table = {dest: flag for one in per.values() for dest, flag in one.items()}
    table.update(per.get(command or "", {}))
    for scope in ("*", command or ""):
        for parameter, dest in ALIASES.get(scope, {}).items():
            if dest in table:
                table[parameter] = table[dest]
    return table


def _shown(value: object) -> str:
    """A value as one word of a command line, quoted for a POSIX shell (a list: its items joined by commas)."""
    text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    return shlex.quote(text)


def _split(text: str) -> list[str] | None:
    """``text`` cut at its commas that stand outside quotes and brackets; None where a quote or bracket is left open."""
    parts, depth, quote, start = [], 0, "", 0
    for i, c in enumerate(text):
        if quote:
            quote = "" if c == quote and text[i - 1] != "\\" else quote
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return None if quote or depth else [*parts, text[start:]]


def _model_words(model: str, table: Mapping[str, str]) -> list[str]:
    """The option that names ``model``: ``--model NAME``, or ``--model-file PATH.py:FACTORY`` for a model file."""
    return [table["model_file" if is_model_file_spec(model) else "model"], _shown(model)]


def _option_words(options: Mapping[object, object], table: Mapping[str, str]) -> list[str]:
    """A model's build options, one option each (``{'width': 1.4}`` -> ``--width 1.4``; a switch alone)."""
    words: list[str] = []
    for key, option in options.items():  # an option no command takes (a factory's own): spelt as argparse would
        flag = shlex.quote(table.get(str(key), "--" + str(key).replace("_", "-")))
        words += [flag] if option is True else [flag, _shown(option)]  # a switch (--reparameterize) alone
    return words


def _model_reference(value: str, table: Mapping[str, str]) -> list[str] | None:
    """The options of a model given as `dsprof.models.model_args` writes one, a call of literals
    ``ModelRef.of('NAME', options={...}, resolution=N, weights=W)`` read with `ast` (the model, its options, its
    resolution, its weights: True as ``pretrained``); None where ``value`` is not such a call (``ModelRef.of(weights=)``
    names a field without a value: its fields are read as any object's)."""
    try:
        call = ast.parse(value, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(call, ast.Call) or ast.unparse(call.func) != "ModelRef.of" or len(call.args) > 1:
        return None
    try:
        model = [ast.literal_eval(a) for a in call.args]
        given = [(k.arg, ast.literal_eval(k.value)) for k in call.keywords]
    except ValueError:
        return None
    if any(not isinstance(m, str) for m in model):
        return None
    words = _model_words(model[0], table) if model else []
    for key, literal in given:
        if key == "options" and isinstance(literal, dict):
            words += _option_words(literal, table)
        elif key == "resolution" and literal is not None:
            words += [table["resolution"], _shown(literal)]
        elif key == "weights" and (literal is True or isinstance(literal, str)):
            words += [table["weights"], _shown("pretrained" if literal is True else literal)]
        elif not (key in ("options", "resolution", "weights") and not literal):  # None, {}, False: as not given
            return None  # a field no option sets (name=): left as written
    return words


def parameters_as_flags(text: str, command: str | None = None, kind: str = "") -> str | None:
    """The options of the parameters ``text`` (``name=value, ...``, every name one the table knows); None where it
    is not such a run. ``"max_span=1, merge_by='macs'"`` -> ``"--max-span 1 --merge-by macs"``. A value is read as a
    Python literal where it is one (a quoted string, a list, a dict of model options), else taken as written (``PLAN``,
    ``1..5``); a model, ``model='NAME'`` or ``model=ModelRef.of('NAME', options={...}, resolution=N)``, as the options
    that build it (``--model NAME`` or ``--model-file PATH.py:FACTORY``, each option, ``--resolution N``); every value
    is one quoted word, whatever characters it holds. ``kind``: the object whose fields
    ``text`` gives (``Pricing``), where `ALIASES` names a field of it otherwise (``Pricing.resolution``)."""
    pieces = _split(text)
    if not pieces:
        return None
    table = flag_table(command)
    parts: list[str] = []
    for piece in pieces:
        match = _ONE.fullmatch(piece.strip())
        if match is None:
            return None
        name, value = match[1], match[2].strip()
        model = _model_reference(value, table) if name == "model" else None
        if model is not None:  # ModelRef.of('NAME', options={...}, resolution=N): the model's options
            parts += model
            continue
        fields = _OBJECT.fullmatch(value)
        if fields is not None and not value.startswith("dsprof."):  # its fields' options, each as the command sets it
            of = value[:value.index("(")].split(".")[0]
            inner = parameters_as_flags(fields[1], command, of) if fields[1].strip() else ""
            if inner is None:
                return None
            parts += [inner] if inner else []
            continue
        literal = _literal(value) if value else True
        if name == "options" and isinstance(literal, dict):  # a model's build options: one option each
            parts += _option_words(literal, table)
            continue
        if name == "model" and isinstance(literal, str):  # a zoo name, or a model file (path.py:factory)
            parts += _model_words(literal, table)
            continue
        name = f"{kind}.{name}" if f"{kind}.{name}" in table else name
        if name not in table:
            return None
        parts.append(table[name])
        if literal is not True:
            parts.append(_shown("..." if literal is Ellipsis else literal))
    return " ".join(parts)


def _span(match: re.Match, command: str | None) -> str:
    inner = match.group(1)
    flags = parameters_as_flags(inner, command)
    if flags is not None:
        return flags
    call = _CALL.fullmatch(inner)
    if call is not None:
        verb, arguments = call.groups()
        name = VERBS.get(verb, verb.replace("_", "-"))
        pieces = _split(arguments) if arguments else []
        if name.split()[0] in _parsed() and pieces is not None:
            # leading arguments without a name are the command's own words (`dsprof.build_lut(FILES, out=...)`)
            lead = 0
            while lead < len(pieces) and _ONE.fullmatch(pieces[lead].strip()) is None:
                lead += 1
            words = [_shown(_literal(p.strip())) for p in pieces[:lead]]
            rest = ",".join(pieces[lead:])
            flags = parameters_as_flags(rest, name.split()[0]) if rest else ""
            if flags is not None:
                return f"`{' '.join(['dsprof', name, *words, flags]).rstrip()}`"
    return match.group(0)


def _literal(text: str) -> object:
    """``text`` read as a Python literal where it is one (``'lut.csv'``), else as written (``FILES``)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def command_line_text(message: str, command: str | None = None) -> str:
    """``message`` (a `DsprofError`'s or a warning's, with parameters in backquotes) as a `dsprof` user reads it:
    each run of parameters as the options that set them, each API call as its command (``command``: the `dsprof`
    command that runs, whose options come first)."""
    return _SPAN.sub(lambda m: _span(m, command), message)
