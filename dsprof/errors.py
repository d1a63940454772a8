"""dsprof's one error family: what a user can fix, with a message that says how.

Every error the library raises for bad input (a file, an option, a plan, a LUT, a model that does not
fit) is a `DsprofError`. The command line catches this family once, in `dsprof.cli.main`: one line on
stderr, exit status 2. Anything else is a bug in dsprof and shows its traceback (exit status 1).

Each class also subclasses the built-in exception callers caught before it existed (``ValueError``,
``KeyError``, ``FileExistsError``, ...), so ``except ValueError`` around a dsprof call keeps working.

A message that names the command to run (a LUT miss: `dsprof measure`; an importance file for another model:
`dsprof importance`; results fetched from a device by hand: `dsprof import`) holds the token ``{hint}`` there and the
command as plain data, its ``hint`` (`MeasureHint`, `ImportanceHint`, `ImportHint`). ``str`` puts the hint there in words (for Python callers); the command line puts the command
there (`dsprof.cli.commands`): no layer below the CLI writes command lines.

A message names the parameters of dsprof's Python functions, in backquotes (`` `max_span=1` ``,
`` `dsprof.measure(resume=True)` ``), never command-line options: the command line rewrites them as its options
(`dsprof.cli.flags`, the one table of both).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "BadFileError",
    "DeviceError",
    "DsprofError",
    "EdgeError",
    "GraphTraceError",
    "HINT",
    "ImportHint",
    "ImportanceHint",
    "InputFileError",
    "Interrupted",
    "LUTError",
    "LUTMissError",
    "MeasureHint",
    "MeasurementFileError",
    "MergeError",
    "ModelFileError",
    "ModelOptionError",
    "OutputPathError",
    "PartialPredictionError",
    "PlanError",
    "RegistryError",
    "UsageError",
    "WithHint",
    "WriteError",
    "look_up",
]


#: Where a message names the command that fixes what it says: there ``str`` puts the message's hint in words, and
#: the command line (`dsprof.cli.commands`) the command.
HINT = "{hint}"


@dataclass(frozen=True)
class MeasureHint:
    """What `dsprof measure` should time so that a LUT has what a message says it lacks: in the LUT context
    ``context``, the model that the API argument ``model`` builds (``"model=ModelRef.of('mobilenet_v2',
    resolution=32)"``: `dsprof.models.model_args`; the command line spells it as its options), its blocks original,
    merged and linear, spans of up to ``max_span`` blocks, and (``in_situ``) each block inside the model."""

    context: Any  # a `dsprof.device_context.DeviceContext` (a module that imports this one)
    model: str
    max_span: int = 1
    in_situ: bool = False

    def describe(self) -> str:
        spans = f", spans of up to {self.max_span} blocks" if self.max_span > 1 else ""
        in_situ = ", and each block inside the model" if self.in_situ else ""
        return (f"`dsprof measure` (or dsprof.measure) in context {self.context} with the model's options "
                f"({self.model}), timing blocks original, merged and linear{spans}{in_situ}")

    def to_dict(self) -> dict:
        return {"key": str(self.context), "model": self.model, "max_span": self.max_span, "in_situ": self.in_situ}


@dataclass(frozen=True)
class ImportanceHint:
    """What `dsprof importance` should score: the model that the API argument ``model`` builds (as `MeasureHint`'s),
    on ``data`` with the proxy ``proxy``, from ``weights`` (True: pretrained; a path; None: not said), at
    ``resolution`` pixels (None: the model's default), into ``out`` (None: importance.json, or importance-Rpx.json at
    a resolution said)."""

    model: str
    data: str
    proxy: str
    weights: bool | str | None = None
    resolution: int | None = None
    out: str | None = None

    def describe(self) -> str:
        at = f" at {self.resolution} px" if self.resolution else ""
        weights = (", from pretrained weights" if self.weights is True
                   else f", from the weights {self.weights}" if isinstance(self.weights, str) else "")
        return (f"`dsprof importance` (or dsprof.importance) for the model ({self.model}){at} on {self.data} with the "
                f"proxy {self.proxy}{weights}")


@dataclass(frozen=True)
class ImportHint:
    """What `dsprof import` should turn into measurement records: the bundle runner's ``results`` file for the bundle
    folder ``bundle``, written into ``out`` (a folder or a ``.jsonl`` file)."""

    bundle: str
    results: str
    out: str

    def describe(self) -> str:
        return (f"`dsprof import` (or dsprof.edge.import_results) of {self.results} for the bundle {self.bundle}, "
                f"into {self.out}")


Hint = MeasureHint | ImportanceHint | ImportHint


class WithHint:
    """An exception or a warning whose message may name, at its `HINT` token, the command that fixes what it says,
    as plain data (``hint``: a `MeasureHint`, an `ImportanceHint` or an `ImportHint`). ``str`` says it in words;
    `text` puts a command line there. No layer below the command line writes command lines."""

    def __init__(self, *args: Any, hint: Hint | None = None):
        super().__init__(*args)
        self.hint = hint

    def text(self, command: str | None = None) -> str:
        """The message with ``command`` (in backquotes) where it names the fix; None: the hint in words."""
        message = str(self.args[0]) if len(self.args) == 1 else super().__str__()  # a KeyError's: not quoted
        if self.hint is None:
            return message
        return message.replace(HINT, f"`{command}`" if command is not None else self.hint.describe())

    def __str__(self) -> str:
        return self.text()


class DsprofError(WithHint, Exception):
    """An error the user can fix; its message says what to do (with a ``hint``: the command, as data).
    `dsprof.cli.main` prints it as one line."""


class UsageError(DsprofError, ValueError):
    """An option or argument value dsprof cannot use (a count, a list, a range, a setting)."""


def look_up(table, name: str, what: str):
    """``table[name]``; an unknown name raises `UsageError` ("unknown WHAT 'NAME'; choose one of: ...")."""
    try:
        return table[name]
    except KeyError:
        raise UsageError(f"unknown {what} {name!r}; choose one of: {', '.join(table)}") from None


class InputFileError(DsprofError, FileNotFoundError):
    """An input file or folder that does not exist."""


class BadFileError(DsprofError, ValueError):
    """An input file that exists but does not hold what dsprof needs (empty, damaged, another kind of file)."""


class OutputPathError(DsprofError, FileExistsError):
    """An output path dsprof will not or cannot write: it exists, or a folder on its way is a file."""


class RegistryError(DsprofError, KeyError):
    """A name the model registry (or a preset list) does not know; the message lists the known ones."""


class ModelOptionError(DsprofError, TypeError):
    """An option a registered model does not take; the message lists the ones it does."""


class DeviceError(DsprofError, ValueError):
    """A device, backend, dtype or layout that this machine or this backend cannot time."""


class PlanError(DsprofError, ValueError):
    """A plan that is malformed or does not fit the model; the message says what to fix."""


class MergeError(DsprofError, ValueError):
    """Something cannot be merged exactly, or a merged-model file cannot be used; the message says why and what to do."""


class LUTError(DsprofError, ValueError):
    """A LUT file or table that is not valid, or that cannot answer a question; names the file and the row at fault."""


class LUTMissError(LUTError, KeyError):
    """A strict lookup of a key the LUT does not have; its ``hint`` (a `MeasureHint`): what to time to add it."""


class PartialPredictionError(LUTError):
    """A prediction that lacks some of the LUT's keys, refused (`dsprof.predict` without ``allow_partial=True``)."""


class MeasurementFileError(DsprofError, ValueError):
    """A measurement file that cannot be read or resumed, with the line at fault."""


class ModelFileError(DsprofError, ValueError):
    """A ``path.py:factory`` that does not give a model; the message says what to fix."""


class GraphTraceError(DsprofError, ValueError):
    """The model cannot be traced with torch.fx; the message names the module and what to do."""


class ModelRunError(DsprofError, ValueError):
    """The model does not run on the input its resolution gives (a model made for one size: attention over a fixed
    grid); the message says what failed and to give a resolution it takes."""


class EdgeError(DsprofError, ValueError):
    """A bundle or a results file that cannot be used, with what to do instead."""


class WriteError(DsprofError, OSError):
    """A file dsprof could not finish writing (a full disk, a file-size limit); what it held before is kept."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with a message that says what was kept and how to continue. A ``KeyboardInterrupt`` (not a
    `DsprofError`): a caller's ``except KeyboardInterrupt`` still sees it; `dsprof.cli.main` prints the
    message as one line and exits with 130."""
