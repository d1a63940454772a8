"""The `dsprof` command lines that messages and results suggest, written in one place: what to run to time what a
LUT lacks (`measure_command`), to score importance (`importance_command`; `hint_command` for a message's hint), to
plan a new context (`plan_command`), to build the merged model of a plan file (`merge_command`), and the next steps
of an edge bundle (`runner_command`, `import_command`, `build_lut_command`). Plain text from plain values: the
layers below the command line pass the values (a `MeasureHint`, a plan file's path), only the command line
writes commands, and every one goes through `shell_command` (``shlex.join``): a value from a file, a device name
or a path, is one quoted word, never something a shell runs.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..device_context import DeviceContext
from ..errors import Hint, ImportanceHint, ImportHint
from ..models.registry import model_args
from .flags import parameters_as_flags

__all__ = ["build_lut_command", "hint_command", "import_command", "importance_command", "measure_command",
           "merge_command", "model_flags", "plan_command", "runner_command", "shell_command"]


def shell_command(words: Sequence[Any]) -> str:
    """The one way a command shown to copy is written: its words quoted for a POSIX shell (``shlex.join``), so that
    a value from a file (a device name, a path, an option) stays one word and never runs (``$(...)``, ``;``)."""
    return shlex.join(str(w) for w in words)


def model_flags(name: str, options: Mapping[str, Any] | None = None) -> str:
    """The options that build model ``name`` with ``options``: `model_args` as the command line spells it
    (``--model mobilenet_v2 --width 1.4``, ``--model-file PATH.py:FACTORY``), each value quoted."""
    return _flags(model_args(name, dict(options or {})))


def _flags(parameters: str) -> str:
    """API parameters (``model='x', resolution=32``) as the command line's options (as given where one has none)."""
    flags = parameters_as_flags(parameters)
    return parameters if flags is None else flags


def _words(flags: str) -> list[str]:
    """The words of ``flags`` (options as `model_flags` writes them, quoted): each value one word; text that does
    not split (an unbalanced quote from a file) is one word."""
    try:
        return shlex.split(flags)
    except ValueError:
        return [flags]


def measure_command(context: DeviceContext, flags: str, *, max_span: int = 1, in_situ: bool = False) -> str:
    """The `dsprof measure` command that times, with the model options ``flags`` in the LUT context ``context``, what
    the planner and the merge rule read: blocks original, merged and linear, spans of up to ``max_span`` blocks,
    and (``in_situ``) each block timed inside the model. With ``--resume``: it runs as written whether or not the
    default records file of that model and context exists (the user's first run, there by default), and times only
    what that file lacks."""
    words: list[Any] = ["dsprof", "measure", *_words(flags), "--device", context.device, "--backend", context.backend,
                        "--dtype", context.dtype, "--batch", context.batch]
    if context.threads:
        words += ["--threads", context.threads]
    if context.layout == "channels_last":
        words.append("--channels-last")
    if context.compile and context.compile != "default":  # the torch-compile backend's mode, when not its default
        words += ["--compile-mode", context.compile]
    words += ["--variants", "original,merged,linear"]
    if max_span > 1:
        words += ["--spans", max_span]
    if in_situ:
        words += ["--in-situ", "merged,linear"]
    return shell_command([*words, "--resume"])


def hint_command(hint: Hint) -> str:
    """The command line of a message's hint: `measure_command` of what to time, `importance_command`, or
    `import_command`."""
    if isinstance(hint, ImportanceHint):
        return importance_command(hint)
    if isinstance(hint, ImportHint):
        return import_command(hint.bundle, hint.results, hint.out)
    return measure_command(hint.context, _flags(hint.model), max_span=hint.max_span, in_situ=hint.in_situ)


def importance_command(hint: ImportanceHint) -> str:
    """The `dsprof importance` command that scores the blocks as ``hint`` says, into its ``out``, else importance.json,
    or importance-Rpx.json at a resolution said (a hint must not overwrite the file it is about)."""
    words: list[Any] = ["dsprof", "importance", *_words(_flags(hint.model))]
    if hint.resolution:
        words += ["--resolution", hint.resolution]
    words += ["--data", hint.data, "--proxy", hint.proxy]
    if hint.weights is True:
        words += ["--weights", "pretrained"]
    elif isinstance(hint.weights, str):
        words += ["--weights", hint.weights]
    out = hint.out or (f"importance-{hint.resolution}px.json" if hint.resolution else "importance.json")
    return shell_command([*words, "--out", out])


def merge_command(name: str, options: Mapping[str, Any], plan_path: str | Path, resolution: int | None = None) -> str:
    """The `dsprof merge` command that builds the merged model of the plan file ``plan_path`` (for the registered
    model ``name`` with ``options``, at ``resolution`` pixels or the model's default) and writes it beside the plan
    as ``NAME.merged.pt``; quoted for a POSIX shell. The plan's merges and spans are replayed as priced."""
    plan_path = Path(plan_path)
    out = plan_path.with_name(plan_path.name.removesuffix(".json").removesuffix(".plan") + ".merged.pt")
    flags = _words(model_flags(name, options))
    if resolution is not None:
        flags += ["--resolution", str(resolution)]
    return shell_command(["dsprof", "merge", *flags, "--plan", str(plan_path), "--out", str(out)])


def plan_command(lut: str | Path, name: str, options: Mapping[str, Any], resolution: int | None = None, *,
                 like: str | Path | None = None, accept_modified: bool = False) -> str:
    """The `dsprof plan` command that plans the context of the LUT ``lut`` for the registered model ``name`` with
    ``options`` at ``resolution`` pixels (the model's default when None), writing its front beside the LUT (not over
    a front.json of the user's); with ``like``, how to plan it beside the context that LUT holds too, as a second
    command on a line of its own (each line pastes as it is)."""
    lut = Path(lut)
    base = lut.parent / lut.name.removesuffix(".csv").removesuffix(".lut")
    words: list[Any] = ["dsprof", "plan", "--lut", lut, *_words(model_flags(name, options))]
    if resolution:
        words += ["--resolution", resolution]
    command = shell_command([*words, "--out", f"{base}.front.json"])
    if like is None:
        return command
    beside = shell_command([*words, "--lut", like, *(["--accept-modified"] if accept_modified else []), "--out",
                            f"{base}.both.front.json"])
    return f"{command}\n  both contexts side by side: {beside}"


def import_command(bundle: str | Path, results: str | Path = "RESULTS.jsonl", out: str | Path | None = None) -> str:
    """The `dsprof import` command that turns the runner's ``results`` for ``bundle`` into measurement records (in
    ``out``; None: import's default)."""
    return shell_command(["dsprof", "import", bundle, results, *(["--out", out] if out is not None else [])])


def runner_command(runtime: str) -> str:
    """The command that runs a bundle's runner with ``runtime``, from inside the bundle folder on the device."""
    return shell_command(["python3", "run_bundle.py", "--runtime", runtime])


def build_lut_command(folder: str | Path, out: str | Path = "lut.csv") -> str:
    """The `dsprof build-lut` command that builds a LUT from the measurement files in ``folder``."""
    return shell_command(["dsprof", "build-lut", folder, "-o", out])
