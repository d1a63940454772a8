"""`dsprof plan` over several device contexts: one front per context, what each context's plans lose on the others
(`dsprof.planning.cross`), and with ``--for`` one plan for several of them (`dsprof.planning.minimax`).

Contexts are `DeviceContext` keys of the LUT (or of several LUTs, `LUT.concat`); tables name them by
`short_labels`. A context whose entries the planner lacks is not planned; `ContextFronts.unplanned` keeps the
planner's one line for it, which names the missing entry, and what to time to add it (a `MeasureHint`).
"""

from __future__ import annotations

import csv
import io
import json
import statistics
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from torch import nn

from ..device_context import DeviceContext, contexts_named, short_labels
from ..errors import LUTMissError, MeasureHint, UsageError
from ..io import atomic_write_text, csv_row
from ..lut import LUT
from ..lut.choice import Pricing
from ..lut.prices import Prices
from ..models.ref import ModelRef
from ..models.spans_text import format_spans
from ..units import percent
from ..lut.predict import prices_of
from .cross import CrossPoint, cross_points
from .front import Front, _columns, blocks_legend
from .minimax import JointFront, joint_front
from .planner import plan_front

__all__ = ["FRONTS_FORMAT", "ContextFronts", "Unplanned", "pick_contexts", "plan_contexts"]

FRONTS_FORMAT = "dsprof.fronts"
FRONTS_VERSION = 1


@dataclass(frozen=True)
class Unplanned:
    """A context of the LUT the planner could not plan, and the planner's one line for it (``miss``: what is missing,
    with its hint, what to time to add it)."""

    context: DeviceContext
    miss: LUTMissError

    @property
    def reason(self) -> str:
        """The line, what to time said in words (``str`` of the planner's error)."""
        return str(self.miss)

    @property
    def hint(self) -> MeasureHint | None:
        return self.miss.hint


@dataclass(frozen=True)
class ContextFronts:
    """The planner's answer over several contexts of one model: ``fronts`` (one per planned context), ``cross``
    (every ordered pair of planned contexts, the diagonal included, and every k), ``unplanned`` and, with ``--for``,
    ``joint``. ``labels``: `short_labels` of every context named. ``prices``: each planned context's `Prices`."""

    model: str
    name: str
    options: dict[str, Any]
    max_span: int
    labels: dict[DeviceContext, str]
    fronts: tuple[Front, ...]
    cross: tuple[CrossPoint, ...]
    unplanned: tuple[Unplanned, ...] = ()
    joint: JointFront | None = None
    prices: dict[DeviceContext, Prices] = field(default_factory=dict, repr=False, compare=False)

    def front(self, context: DeviceContext) -> Front:
        """The front of one planned context."""
        return next(f for f in self.fronts if f.device == context)

    def pair(self, chosen_for: DeviceContext, runs_on: DeviceContext) -> list[CrossPoint]:
        """The cross points of one ordered pair, in k order."""
        return [c for c in self.cross if c.chosen_for == chosen_for and c.runs_on == runs_on]

    # -- output ------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"format": FRONTS_FORMAT, "version": FRONTS_VERSION, "model": self.model, "name": self.name,
                "options": self.options, "max_span": self.max_span,
                "contexts": [{"key": str(c), "label": label, "context": c.as_dict()} for c, label in self.labels.items()],
                "fronts": [dict(f.to_dict(), label=self.labels[f.device]) for f in self.fronts],
                "cross": [c.to_dict(self.labels) for c in self.cross],
                "unplanned": [{"key": str(u.context), "label": self.labels[u.context], "reason": u.reason,
                               "measure": u.hint.to_dict() if u.hint else None} for u in self.unplanned],
                "joint": self.joint.to_dict(self.labels) if self.joint is not None else None}

    def fronts_csv(self) -> str:
        """Every front's CSV (`Front.to_csv`), one after the other, each row led by its context and label."""
        out = io.StringIO()
        writer = None
        for f in self.fronts:
            for row in csv.DictReader(io.StringIO(f.to_csv())):
                if writer is None:
                    writer = csv.DictWriter(out, ["context", "label", *row], lineterminator="\n")
                    writer.writeheader()
                writer.writerow(csv_row({"context": str(f.device), "label": self.labels[f.device], **row}))
        return out.getvalue()

    def cross_csv(self) -> str:
        """One row per cross point (`CrossPoint.to_dict`; keep, merge and spans as text)."""
        return _rows_csv([_flat(c.to_dict(self.labels)) for c in self.cross])

    def joint_csv(self) -> str:
        """One row per k of the plan for several contexts (``set``: ``joint``, and with importance ``least_loss``),
        one column group per context: its predicted speed-up over that context's original with the 95 % interval,
        latency, own front latency and loss (relative) with the interval."""
        if self.joint is None:
            return ""
        rows = []
        labels = [self.labels[c] for c in self.joint.contexts]
        for group, points in (("joint", self.joint.points), ("least_loss", self.joint.least_loss)):
            for p in points or ():
                row = {"set": group, "k": p.k, "keep": _bits(p.plan.keep), "merge": _bits(p.plan.merge or ()),
                       "spans": format_spans(p.plan.spans), "worst": p.worst, "mean": p.mean, "importance": p.importance}
                for i, label in enumerate(labels):
                    row.update({f"{label}: speedup": p.speedup[i], f"{label}: speedup_low": p.speedup_low[i],
                                f"{label}: speedup_high": p.speedup_high[i], f"{label}: latency_s": p.latency_s[i],
                                f"{label}: own_latency_s": p.own_latency_s[i], f"{label}: loss": p.loss[i],
                                f"{label}: loss_low": p.loss_low[i], f"{label}: loss_high": p.loss_high[i]})
                rows.append(row)
        return _rows_csv(rows)

    def write(self, path: str | Path) -> tuple[Path, ...]:
        """The JSON at ``path``; beside it the fronts (``.csv``), the cross table (``.cross.csv``) and, with a plan
        for several contexts, that (``.joint.csv``). Returns the paths written."""
        path = Path(path)
        paths = [atomic_write_text(path, json.dumps(self.to_dict(), indent=1) + "\n"),
                 atomic_write_text(path.with_suffix(".csv"), self.fronts_csv()),
                 atomic_write_text(path.with_suffix(".cross.csv"), self.cross_csv())]
        if self.joint is not None:
            paths.append(atomic_write_text(path.with_suffix(".joint.csv"), self.joint_csv()))
        return tuple(paths)

    def table(self, command: Callable[[MeasureHint], str] | None = None) -> str:
        """The fronts side by side (speed-up per context for each k), the cross table (worst and median loss per
        ordered pair), the plan for several contexts, and the contexts not planned, each with what to time
        (``command``: the command line that times a `MeasureHint`; None: in words)."""
        lines = [f"{self.model}: {len(self.fronts)} contexts planned, "
                 f"{'spans up to ' + str(self.max_span) + ' blocks' if self.max_span > 1 else 'no spans'}"]
        lines += [f"  {self.labels[f.device]:<24} {f.device}  (method {f.method}; original {f.original_s * 1e3:.3f} ms)"
                  for f in self.fronts]
        lines += [f"  {self.labels[f.device]}: {note}" for f in self.fronts
                  for note in (f.draft, *f.limits, f.spans_note()) if note]
        if self.fronts and self.fronts[0].blocks:
            lines += blocks_legend(self.fronts[0].blocks)
        if self.fronts:
            names = [self.labels[f.device] for f in self.fronts]
            width = max(10, *(len(n) for n in names))
            by_k = [{p.k: f.original_s / p.latency_s for p in f.points} for f in self.fronts]
            lines += ["", "predicted speed-up of each context's fastest plan over its original, for each k "
                      "(blocks keeping activations):", f"{'k':>3}  " + "  ".join(f"{n:>{width}}" for n in names)]
            for k in sorted(set().union(*by_k)):
                lines.append(f"{k:>3}  " + "  ".join(f"{(f'{s[k]:.2f}x' if k in s else '-'):>{width}}" for s in by_k))
        pairs = [(a.device, b.device) for a in self.fronts for b in self.fronts if a.device != b.device]
        if pairs:
            lines += ["", "what a plan chosen for one context loses on another: its predicted latency there over that "
                      "context's own plan of the same k, minus 1 (worst k with its 95 % interval; median over k):",
                      f"{'chosen for':<24} {'runs on':<24} {'worst loss':>10} {'at k':>5} {'95 % interval':>21} "
                      f"{'median':>9}"]
            for a, b in pairs:
                points = self.pair(a, b)
                if not points:
                    lines.append(f"{self.labels[a]:<24} {self.labels[b]:<24} not priced: {self.labels[b]}'s LUT lacks "
                                 f"spans that {self.labels[a]}'s plans use")
                    continue
                worst = max(points, key=lambda c: c.loss)
                shared = {p.k for p in self.front(a).points} & {p.k for p in self.front(b).points}
                lines.append(f"{self.labels[a]:<24} {self.labels[b]:<24} {percent(worst.loss):>10} {worst.k:>5} "
                             f"{f'{percent(worst.loss_low)} to {percent(worst.loss_high)}':>21} "
                             f"{percent(statistics.median(c.loss for c in points)):>9}"
                             + (f"  ({len(points)} of {len(shared)} k priced: {self.labels[b]}'s LUT lacks spans "
                                f"the others use)" if len(points) < len(shared) else "")
                             + (f"  ({worst.draft})" if worst.draft else ""))
        if self.joint is not None:
            lines += ["", _joint_title(self.joint, self.labels)]
            lines += _joint_lines(self.joint.points, [self.labels[c] for c in self.joint.contexts])
            if self.joint.least_loss is not None:
                lines += ["", f"the same, least importance loss for each k (then the least {self.joint.objective} "
                          "loss against each context's own plan):"]
                lines += _joint_lines(self.joint.least_loss, [self.labels[c] for c in self.joint.contexts])
        for u in self.unplanned:
            shown = u.miss.text(command(u.hint) if command is not None and u.hint is not None else None)
            lines += ["", f"not planned: {self.labels[u.context]} ({u.context}): {shown}"]
        return "\n".join(lines)


def _joint_title(joint: JointFront, labels: Mapping[DeviceContext, str]) -> str:
    what = "the least worst loss" if joint.objective == "worst" else "the least mean loss"
    return (f"one plan for {', '.join(labels[c] for c in joint.contexts)}: at each k the plan of {what} against each "
            "context's own plan of that k; its predicted speed-up over each context's original, and that loss:")


def _joint_lines(points: Sequence[Any], labels: Sequence[str]) -> list[str]:
    """The plans for several contexts as aligned columns: k, per context the speed-up and the loss (per cent, signed),
    the worst and mean loss, the importance (with it), the plan and its spans last."""
    importance = any(p.importance is not None for p in points)
    header = ["k", *(h for n in labels for h in (f"{n} speed-up", "loss")), "worst", "mean",
              *(["importance"] if importance else []), "plan (1 = kept)", "spans"]
    rows = [[str(p.k), *(c for x, v in zip(p.speedup, p.loss) for c in (f"{x:.2f}x", percent(v))),
             percent(p.worst), percent(p.mean), *([f"{p.importance:.4f}"] if importance else []), _bits(p.plan.keep),
             format_spans(p.plan.spans, "-")] for p in points]
    return _columns(header, rows, left={len(header) - 2, len(header) - 1})


def _bits(keep: Sequence[int]) -> str:
    return "".join(str(int(k)) for k in keep)



def _flat(row: dict[str, Any]) -> dict[str, Any]:
    return dict(row, keep=_bits(row["keep"]), merge="".join("1" if m else "0" for m in row["merge"]),
                spans=format_spans(row["spans"]))


def _rows_csv(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    rows = [csv_row(row) for row in rows]  # a device's label is in the headers too
    out = io.StringIO()
    writer = csv.DictWriter(out, list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def pick_contexts(names: str | Sequence[str | DeviceContext],
                  labels: Mapping[DeviceContext, str]) -> list[DeviceContext]:
    """The contexts that ``names`` (comma-separated, or a list) name: each a context's key (a `DeviceContext`, as
    ``lut.devices()`` gives them, or its text), its label (`short_labels`) or a backend that only one of them has.
    Raises `UsageError` listing the labels otherwise."""
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    listing = "; ".join(f"{label} ({c})" for c, label in labels.items())
    out = []
    for text in names:
        found = contexts_named(text, labels)
        if len(found) != 1:
            what = "names no context" if not found else "names several contexts"
            raise UsageError(f"`joint=` {text!r} {what}; give labels, keys or backends of: {listing}")
        if found[0] in out:
            raise UsageError(f"`joint=` names {labels[found[0]]} twice")
        out.append(found[0])
    if len(out) < 2:
        raise UsageError(f"`joint=` needs at least two contexts, comma-separated, of: {listing}")
    return out


def plan_contexts(
    model: str | nn.Module | ModelRef,
    lut: LUT | str | Path | Sequence[LUT | str | Path],
    *,
    importance: Mapping[int, float] | Sequence[float] | None = None,
    max_span: int | None = None,
    method: str = "auto",
    rest: str = "auto",
    contexts: Sequence[DeviceContext] | None = None,
    joint: str | Sequence[str] | None = None,
    objective: str = "worst",
) -> ContextFronts:
    """`plan_front` of ``model`` (anything `ModelRef.of` takes; a `ModelRef` carries its name, options and
    resolution; built once for every context) in every context of ``lut`` (one LUT, its file, or several:
    `LUT.concat`), or in ``contexts``;
    the cross table of every ordered pair of the planned ones; and with ``joint`` (contexts as `pick_contexts` takes
    them) the plan for those contexts of least ``objective`` (``worst`` or ``mean``) loss at each k, with spans as wide
    as every planned context's LUT holds. Keywords as `plan_front`'s. A context whose entries the planner lacks goes to ``unplanned`` with the planner's line."""
    luts = [lut] if isinstance(lut, (LUT, str, Path)) else list(lut)
    lut = LUT.concat([x if isinstance(x, LUT) else LUT.load(x) for x in luts])
    ref = ModelRef.of(model).built()  # built once for every context's prices
    registered, options = ref.name, dict(ref.options)
    every = list(contexts) if contexts is not None else lut.devices()
    labels = short_labels(every)
    fronts, prices, unplanned = [], {}, []
    for context in every:
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                c = prices_of(ref, lut, device=context, rest=rest, method=method)
                front = plan_front(ref, lut, pricing=Pricing(max_span=max_span), importance=importance, prices=c)
        except LUTMissError as exc:
            unplanned.append(Unplanned(context, exc))
            continue
        for w in caught:  # a planned context's warnings (a method's fallback) are the user's; a skipped one's are not
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        fronts.append(front)
        prices[context] = c
    if not fronts:
        first = unplanned[0]  # one message, one hint: the first context's, the others' in words
        raise LUTMissError("no context of the LUT has what the planner needs for this model:\n  "
                           + "\n  ".join([f"{labels[first.context]}: {first.miss.args[0]}"]
                                          + [f"{labels[u.context]}: {u.reason}" for u in unplanned[1:]]),
                           hint=first.hint)
    max_span = min(f.max_span for f in fronts)  # what every planned context's LUT holds (each front says if less)
    cross = tuple(c for a in fronts for b in fronts for c in cross_points(a, prices[b.device], b))
    together = None
    if joint is not None:
        planned = {f.device: labels[f.device] for f in fronts}
        try:
            chosen = pick_contexts(joint, planned)
        except UsageError as exc:
            if unplanned:
                raise UsageError(f"{exc} (not planned: {', '.join(labels[u.context] for u in unplanned)})") from None
            raise
        together = joint_front([prices[c] for c in chosen], [next(f for f in fronts if f.device == c) for c in chosen],
                               objective=objective, max_span=max_span, importance=importance)
    return ContextFronts(fronts[0].model, registered, options, max_span, labels, tuple(fronts), cross,
                         tuple(unplanned), together, prices)
