"""dsprof's one error family: what a user can fix, with a message that says how.

Every error the library raises for bad input (a file, an option, a plan, a LUT, a model that does not
fit) is a `DsprofError`. The command line catches this family once, in `dsprof.cli.main`: one line on
stderr, exit status 2. Anything else is a bug in dsprof and shows its traceback (exit status 1).

Each class also subclasses the built-in exception callers caught before it existed (``ValueError``,
``KeyError``, ``FileExistsError``, ...), so ``except ValueError`` around a dsprof call keeps working.

A LUT miss says what to time as plain data, a `MeasureRequest`: its message holds the token ``{measure}`` where
that goes. ``str`` puts the request there in words (for Python callers); the command line puts the `dsprof measure`
command there (`dsprof.cli.commands`): no layer below the CLI writes command lines.
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
    "InputFileError",
    "Interrupted",
    "LUTError",
    "LUTMissError",
    "MEASURE",
    "MeasureRequest",
    "MeasureRequested",
    "MeasurementFileError",
    "MergeError",
    "ModelFileError",
    "ModelOptionError",
    "OutputPathError",
    "PartialPredictionError",
    "PlanError",
    "RegistryError",
    "UsageError",
    "WriteError",
    "look_up",
]


class DsprofError(Exception):
    """An error the user can fix; its message says what to do. `dsprof.cli.main` prints it as one line."""

    def __str__(self) -> str:  # a KeyError subclass would otherwise print its message quoted
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


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


#: Where a message names what to time: its `MeasureRequest` in words, or the CLI's `dsprof measure` command.
MEASURE = "{measure}"


@dataclass(frozen=True)
class MeasureRequest:
    """What to time so that a LUT has what a message says it lacks, as plain data: in the LUT context ``context``,
    the model built with the `dsprof` options ``flags``, its blocks original, merged and linear, spans of up to
    ``max_span`` blocks, and (``in_situ``) each block inside the model."""

    context: Any  # a `dsprof.device_context.DeviceContext` (a module that imports this one)
    flags: str
    max_span: int = 1
    in_situ: bool = False

    def describe(self) -> str:
        """The request in plain words."""
        spans = f", spans of up to {self.max_span} blocks" if self.max_span > 1 else ""
        in_situ = ", and each block inside the model" if self.in_situ else ""
        return (f"`dsprof measure` (or dsprof.measure) in context {self.context} with the model's options "
                f"({self.flags}), timing blocks original, merged and linear{spans}{in_situ}")

    def to_dict(self) -> dict:
        return {"key": str(self.context), "flags": self.flags, "max_span": self.max_span, "in_situ": self.in_situ}


def with_measure(message: str, measure: MeasureRequest | None, command: str | None = None) -> str:
    """``message`` with ``command`` (in backquotes) at its `MEASURE` token, or (None) ``measure`` in words."""
    if measure is None:
        return message
    return message.replace(MEASURE, f"`{command}`" if command is not None else measure.describe())


class MeasureRequested:
    """The part of an exception or a warning whose message may name, at its `MEASURE` token, what to time
    (``measure``). ``str`` says it in words; `text` puts a command there."""

    def __init__(self, message: str, *, measure: MeasureRequest | None = None):
        super().__init__(message)
        self.measure = measure

    def text(self, command: str | None = None) -> str:
        """The message with ``command`` (in backquotes) where it names what to time; None: the request in words."""
        return with_measure(str(self.args[0]), self.measure, command)

    def __str__(self) -> str:
        return self.text()


class LUTMissError(MeasureRequested, LUTError, KeyError):
    """A strict lookup of a key the LUT does not have; ``measure``: what to time to add it, where known."""


class PartialPredictionError(LUTError):
    """A prediction that lacks some of the LUT's keys, refused (`dsprof predict` without ``--allow-partial``)."""


class MeasurementFileError(DsprofError, ValueError):
    """A measurement file that cannot be read or resumed, with the line at fault."""


class ModelFileError(DsprofError, ValueError):
    """A ``path.py:factory`` that does not give a model; the message says what to fix."""


class GraphTraceError(DsprofError, ValueError):
    """The model cannot be traced with torch.fx; the message names the module and what to do."""


class EdgeError(DsprofError, ValueError):
    """A bundle or a results file that cannot be used, with what to do instead."""


class WriteError(DsprofError, OSError):
    """A file dsprof could not finish writing (a full disk, a file-size limit); what it held before is kept."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with a message that says what was kept and how to continue. A ``KeyboardInterrupt`` (not a
    `DsprofError`): a caller's ``except KeyboardInterrupt`` still sees it; `dsprof.cli.main` prints the
    message as one line and exits with 130."""
