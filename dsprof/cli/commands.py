"""The `dsprof` command lines that messages and results suggest, written in one place: what to run to time what a
LUT lacks (`measure_command`), to score importance (`importance_command`; `hint_command` for a message's hint), to
plan a new context
(`plan_command`) and to build the merged model of a plan file (`merge_command`). Plain text from plain values: the
layers below the command line pass the values (a `MeasureHint`, a plan file's path), only the command line
writes commands.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Mapping

from ..device_context import DeviceContext
from ..errors import ImportanceHint, MeasureHint
from ..models.registry import model_args
from .flags import parameters_as_flags

__all__ = ["hint_command", "importance_command", "measure_command", "merge_command", "model_flags", "plan_command"]


def model_flags(name: str, options: Mapping[str, Any] | None = None) -> str:
    """The options that build model ``name`` with ``options``: `model_args` as the command line spells it
    (``--model mobilenet_v2 --width 1.4``, ``--model-file PATH.py:FACTORY``)."""
    return _flags(model_args(name, dict(options or {})))


def _flags(parameters: str) -> str:
    """API parameters (``model='x', resolution=32``) as the command line's options (as given where one has none)."""
    flags = parameters_as_flags(parameters)
    return parameters if flags is None else flags


def measure_command(context: DeviceContext, flags: str, *, max_span: int = 1, in_situ: bool = False) -> str:
    """The `dsprof measure` command that times, with the model options ``flags`` in the LUT context ``context``, what
    the planner and the merge rule read: blocks original, merged and linear, spans of up to ``max_span`` blocks,
    and (``in_situ``) each block timed inside the model."""
    parts = ["dsprof measure", flags]
    parts += [f"--device {context.device}", f"--backend {context.backend}", f"--dtype {context.dtype}",
              f"--batch {context.batch}"]
    if context.threads:
        parts.append(f"--threads {context.threads}")
    if context.layout == "channels_last":
        parts.append("--channels-last")
    if context.compile and context.compile != "default":  # the torch-compile backend's mode, when not its default
        parts.append(f"--compile-mode {context.compile}")
    parts.append("--variants original,merged,linear")
    if max_span > 1:
        parts.append(f"--spans {max_span}")
    if in_situ:
        parts.append("--in-situ merged,linear")
    return " ".join(parts)


def hint_command(hint: MeasureHint | ImportanceHint) -> str:
    """The command line of a message's hint: `measure_command` of what to time, or `importance_command`."""
    if isinstance(hint, ImportanceHint):
        return importance_command(hint)
    return measure_command(hint.context, _flags(hint.model), max_span=hint.max_span, in_situ=hint.in_situ)


def importance_command(hint: ImportanceHint) -> str:
    """The `dsprof importance` command that scores the blocks as ``hint`` says, into importance.json."""
    resolution = f" --resolution {hint.resolution}" if hint.resolution else ""
    weights = (" --weights pretrained" if hint.weights is True
               else f" --weights {shlex.quote(hint.weights)}" if isinstance(hint.weights, str) else "")
    return (f"dsprof importance {_flags(hint.model)}{resolution} --data {shlex.quote(hint.data)} --proxy {hint.proxy}{weights} "
            "--out importance.json")


def merge_command(name: str, options: Mapping[str, Any], plan_path: str | Path, resolution: int | None = None) -> str:
    """The `dsprof merge` command that builds the merged model of the plan file ``plan_path`` (for the registered
    model ``name`` with ``options``, at ``resolution`` pixels or the model's default) and writes it beside the plan
    as ``NAME.merged.pt``; quoted for a POSIX shell. The plan's merges and spans are replayed as priced."""
    plan_path = Path(plan_path)
    out = plan_path.with_name(plan_path.name.removesuffix(".json").removesuffix(".plan") + ".merged.pt")
    flags = shlex.split(model_flags(name, options))
    if resolution is not None:
        flags += ["--resolution", str(resolution)]
    return shlex.join(["dsprof", "merge", *flags, "--plan", str(plan_path), "--out", str(out)])


def plan_command(lut: str | Path, name: str, options: Mapping[str, Any], resolution: int | None = None, *,
                 like: str | Path | None = None, accept_modified: bool = False) -> str:
    """The `dsprof plan` command that plans the context of the LUT ``lut`` for the registered model ``name`` with
    ``options`` at ``resolution`` pixels (the model's default when None); with ``like``, how to plan it beside the
    context that LUT holds too."""
    flags = model_flags(name, options) + (f" --resolution {resolution}" if resolution else "")
    command = f"dsprof plan --lut {lut} {flags}"
    if like is None:
        return command
    accept = " --accept-modified" if accept_modified else ""
    return f"{command} (with --lut {like}{accept}: both contexts side by side)"
