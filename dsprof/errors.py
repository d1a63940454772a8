"""dsprof's one error family: what a user can fix, with a message that says how.

Every error the library raises for bad input (a file, an option, a plan, a LUT, a model that does not
fit) is a `DsprofError`. The command line catches this family once, in `dsprof.cli.main`: one line on
stderr, exit status 2. Anything else is a bug in dsprof and shows its traceback (exit status 1).

Each class also subclasses the built-in exception callers caught before it existed (``ValueError``,
``KeyError``, ``FileExistsError``, ...), so ``except ValueError`` around a dsprof call keeps working.
"""

from __future__ import annotations

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


class LUTMissError(LUTError, KeyError):
    """A strict lookup of a key the LUT does not have."""


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
