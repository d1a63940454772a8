"""The `dsprof` command line: the parser (one module per command: its options and one call into the API,
`dsprof.api`) and `main`, the one place that turns a `DsprofError` into one line and exit status 2 (a message that
names the command to run as data, its `hint`, names it there as that command line; the API parameters a message
names, as their options: `dsprof.cli.flags`).

Each command imports what it needs when it runs: `--help`, `--version` and `models` import no PyTorch, timm or
pandas (tests/test_cli_startup.py checks it)."""

from __future__ import annotations

import argparse
import functools
import sys
import warnings
from typing import Sequence

from .. import __version__
from ..errors import DsprofError, Interrupted, WithHint
from .commands import hint_command
from .flags import command_line_text, learn
from . import (blocks, build_lut, explain, export, finetune, import_bundle, importance, measure, merge, models, plan,
               predict, report, search)
from .options import use_model_file

__all__ = ["COMMANDS", "build_parser", "main"]

#: The commands, in the order `dsprof --help` lists them.
COMMANDS = (models, blocks, measure, export, import_bundle, explain, merge, plan, build_lut, predict, report, search,
            importance, finetune)


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line that names the command (exit 2), like every `DsprofError`:
    the usage is one `--help` away, not seven lines above the message."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}; see `{self.prog} --help`\n")

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        """As argparse's, but an unknown option is refused by the command it was given to, not the top level."""
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            commands = next((a.choices for a in self._actions if isinstance(a, argparse._SubParsersAction)), {})
            owner = commands.get(getattr(parsed, "command", None), self)
            owner.error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Each option's default shown once: appended where the help does not say it already, and only where there
    is one to show (not None, not an off switch, not an empty list)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text.lower() or action.default in (None, False, [], argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dsprof",
        description="DepthShrinker on your own hardware: profile blocks, build latency tables, "
        "search which activations to remove, merge blocks into dense convolutions, report.",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dsprof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add(sub, _HelpFormatter)
    return parser


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """The one parser of this process: parsing leaves it as it was (no option keeps state between calls), and
    building it again costs 7 ms a call, which a notebook or a test calling `main` many times pays each time."""
    return build_parser()


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """``argv`` parsed by the one parser, each list its own (argparse hands out an option's default list itself,
    which a command changing it would change for the next call)."""
    args = _parser().parse_args(argv)
    for name, value in vars(args).items():
        if isinstance(value, list):
            setattr(args, name, list(value))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    try:
        args = _parse(argv)
    except SystemExit as exc:  # --help, --version (0) or a usage error (2, one line: `_Parser.error`)
        return 0 if exc.code is None else int(exc.code) if isinstance(exc.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2

    def one_line(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"warning: {_text(message, args.command)}", file=sys.stderr)  # for a user: the message, not our source line

    previous = warnings.showwarning
    warnings.showwarning = one_line
    try:
        use_model_file(args)
        return args.func(args)
    except DsprofError as exc:  # the one place errors a user can fix are caught; anything else is a bug
        message = " ".join(_text(exc, args.command).split()) or type(exc).__name__
        print(f"dsprof {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C: one line (what was kept, how to go on, where a command says), 130
        message = " ".join(_text(exc, args.command).split()) if isinstance(exc, Interrupted) else "interrupted"
        print(f"dsprof {args.command}: {message}", file=sys.stderr)
        return 130
    finally:
        warnings.showwarning = previous


learn(_parser())  # the one table of API parameters and their options, read once from the options themselves


def _text(said: object, command: str | None = None) -> str:
    """An error's or a warning's message as the `dsprof` ``command`` says it: the API parameters it names as their
    options (`dsprof.cli.flags`), and where it names a command as data (its ``hint``), that command line."""
    if isinstance(said, WithHint) and said.hint is not None:
        return command_line_text(said.text(hint_command(said.hint)), command)
    return command_line_text(str(said), command)
