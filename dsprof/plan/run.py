"""`dsprof plan` as a Python function: the front, the chosen plan, the files."""

from __future__ import annotations

import json
import shlex
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..constants import DEFAULT_MAX_SPAN
from ..errors import InputFileError, UsageError
from ..io import atomic_write_text, check_output_path
from ..models import model_flags
from .front import Front, FrontPoint, check_budget, resolve_k
from .planner import plan_front

__all__ = ["ContextsOutcome", "PlanOutcome", "load_importance", "merge_command", "plan_contexts_to_file", "plan_to_file"]


@dataclass(frozen=True)
class PlanOutcome:
    """What `plan_to_file` produced: the front, the chosen point (None without a budget), the files, and the
    `dsprof merge` command that deploys the chosen plan file (None where none was written)."""

    front: Front
    chosen: FrontPoint | None
    paths: tuple[Path, ...]
    merge_command: str | None = None


@dataclass(frozen=True)
class ContextsOutcome:
    """What `plan_contexts_to_file` produced: the fronts over several contexts, the plan for several contexts at
    ``keep`` (None without one; with importance the least loss at that k), the files, and the `dsprof merge` command
    that deploys the plan file written (None where none was)."""

    fronts: Any  # dsprof.plan.contexts.ContextFronts
    chosen: Any  # dsprof.plan.minimax.JointPoint | None
    paths: tuple[Path, ...]
    merge_command: str | None = None


def load_importance(path: str | Path, model: str | None = None, options: Mapping[str, Any] | None = None,
                    resolution: int | None = None) -> dict[int, float]:
    """Per-block importance from a JSON file: what `dsprof importance` writes (refused when measured for another
    model than ``model`` with ``options``, where given; scored at another input size than ``resolution`` -- None:
    the model's default --, an `ImportanceResolutionWarning` that says what differs), an object {block index: loss}
    or a list, one loss per block."""
    from ..search.importance_file import (ImportanceResolutionWarning, check_importance_model,
                                          importance_resolution_note, is_importance_record, read_importance)

    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputFileError(f"importance file {path}: {exc}; give a JSON object {{block index: loss}} or a list") from None
    if is_importance_record(data):
        record = read_importance(path)
        if model is not None:
            check_importance_model(record, model, dict(options or {}), path)
            from ..models.registry import model_entry

            size = resolution if resolution is not None else model_entry(model).default_resolution
            note = importance_resolution_note(record, model, dict(options or {}), size, path)
            if note is not None:
                warnings.warn(note, ImportanceResolutionWarning, stacklevel=2)
        return {i: float(v) for i, v in enumerate(record["importance"])}
    try:
        if isinstance(data, list):
            return {i: float(v) for i, v in enumerate(data)}
        if isinstance(data, dict):
            return {int(k): float(v) for k, v in data.items()}
    except (TypeError, ValueError):
        pass
    raise InputFileError(f"importance file {path}: give a JSON object {{block index: loss}} or a list of numbers")


def plan_to_file(
    model: str,
    lut: Any,
    *,
    out: str | Path | None = None,
    importance: Mapping[int, float] | Sequence[float] | str | Path | None = None,
    keep: int | float | None = None,
    budget_ms: float | None = None,
    speedup: float | None = None,
    max_span: int = DEFAULT_MAX_SPAN,
    device: Any = None,
    method: str = "auto",
    options: Mapping[str, Any] | None = None,
    resolution: int | None = None,
    plan_out: str | Path | None = None,
) -> PlanOutcome:
    """`plan_front`, then the plan for one budget (``keep`` blocks with activations -- a count, or a fraction
    of the blocks --, ``budget_ms`` or ``speedup``, each above 0; `Front.choose`). Writes the front to ``out`` (JSON, and CSV beside it) and the chosen plan to
    ``plan_out`` (default: ``out`` with ``.plan.json``), an ordinary plan file."""
    check_budget(budget_ms, speedup)  # before the LUT is read
    importance, chosen_path = _inputs(importance, model, options, out, plan_out, resolution)
    front = plan_front(model, lut, importance=importance, max_span=max_span, device=device, method=method,
                       options=options, resolution=resolution)
    chosen = None
    if keep is not None or budget_ms is not None or speedup is not None:
        chosen = front.choose(keep=keep, budget_s=budget_ms / 1e3 if budget_ms is not None else None, speedup=speedup)
    paths = _write(front, out, chosen, chosen_path)
    command = merge_command(front, chosen_path, resolution) if chosen is not None and chosen_path is not None else None
    return PlanOutcome(front, chosen, paths, command)


def _inputs(importance: Any, model: Any, options: Mapping[str, Any] | None, out: str | Path | None,
            plan_out: str | Path | None, resolution: int | None = None) -> tuple[Any, Path | None]:
    """The importance (read where a file is given, checked against ``model`` at ``resolution``) and where the chosen
    plan goes, both output paths checked."""
    if isinstance(importance, (str, Path)):
        importance = load_importance(importance, model if isinstance(model, str) else None, options, resolution)
    chosen_path = Path(plan_out) if plan_out is not None else (Path(out).with_suffix(".plan.json") if out else None)
    for path in (out, chosen_path):
        if path is not None:
            check_output_path(path)
    return importance, chosen_path


def _write(result: Any, out: str | Path | None, chosen: Any, chosen_path: Path | None) -> tuple[Path, ...]:
    """``result.write(out)`` and the chosen point's plan at ``chosen_path``; the paths written."""
    paths: tuple[Path, ...] = tuple(result.write(out)) if out is not None else ()
    if chosen is not None and chosen_path is not None:
        paths += (atomic_write_text(chosen_path, chosen.plan.to_json()),)
    return paths


def merge_command(front: Front, plan_path: str | Path, resolution: int | None = None) -> str:
    """The `dsprof merge` command that builds the merged model of the plan file ``plan_path`` (written from
    ``front``, at ``resolution`` pixels or the model's default) and writes it beside the plan as
    ``NAME.merged.pt``; quoted for a POSIX shell. The plan's merges and spans are replayed as priced."""
    plan_path = Path(plan_path)
    out = plan_path.with_name(plan_path.name.removesuffix(".json").removesuffix(".plan") + ".merged.pt")
    flags = shlex.split(model_flags(front.name, front.options))
    if resolution is not None:
        flags += ["--resolution", str(resolution)]
    return shlex.join(["dsprof", "merge", *flags, "--plan", str(plan_path), "--out", str(out)])


def plan_contexts_to_file(
    model: str,
    luts: Any,
    *,
    out: str | Path | None = None,
    importance: Mapping[int, float] | Sequence[float] | str | Path | None = None,
    keep: int | float | None = None,
    max_span: int = DEFAULT_MAX_SPAN,
    method: str = "auto",
    options: Mapping[str, Any] | None = None,
    resolution: int | None = None,
    joint: str | Sequence[str] | None = None,
    objective: str = "worst",
    plan_out: str | Path | None = None,
) -> ContextsOutcome:
    """`dsprof plan` over every context of ``luts`` (a LUT, a file, or several): `plan_contexts`. Writes its JSON to
    ``out`` (the fronts, the cross table and the plan for several contexts as CSV beside it:
    `ContextFronts.write`); with ``joint`` and ``keep``, the plan for those contexts with ``keep`` kept blocks as an
    ordinary plan file at ``plan_out`` (default: ``out`` with ``.plan.json``)."""
    from .contexts import plan_contexts

    if keep is not None and joint is None:
        raise UsageError("several contexts: choose one with --device-key KEY to write its plan, or give --for "
                         "CONTEXT,CONTEXT for one plan for several")
    importance, chosen_path = _inputs(importance, model, options, out, plan_out, resolution)
    fronts = plan_contexts(model, luts, importance=importance, max_span=max_span, method=method, options=options,
                           resolution=resolution, joint=joint, objective=objective)
    chosen = None
    if keep is not None and fronts.joint is not None:  # a count or a fraction of the blocks, as for one context
        chosen = fronts.joint.choose(resolve_k(keep, max(p.k for p in fronts.joint.points)))
    paths = _write(fronts, out, chosen, chosen_path)
    command = (merge_command(fronts.fronts[0], chosen_path, resolution) if chosen is not None and chosen_path is not None
               else None)
    return ContextsOutcome(fronts, chosen, paths, command)
