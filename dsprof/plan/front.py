"""The planner's answer: a front of plans (one per k, and with importance the accuracy-latency front), the
paper's presets set against it, as a table, JSON and CSV."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..device_context import DeviceContext
from ..errors import UsageError
from ..io import atomic_write_text
from ..merge.plan import Plan

__all__ = ["FRONT_FORMAT", "Front", "FrontPoint", "PresetPoint"]

FRONT_FORMAT = "dsprof.front"
FRONT_VERSION = 1


@dataclass(frozen=True)
class FrontPoint:
    """One plan of the front: k blocks keep their activations; its predicted speed-up over the original with its
    95 % interval, then its predicted latency (seconds per batch) and interval (`dsprof.lut.Prediction`);
    ``importance``: the summed loss of the blocks it linearises (None without importance)."""

    k: int
    plan: Plan
    latency_s: float
    low_s: float
    high_s: float
    importance: float | None = None
    speedup: float = float("nan")
    speedup_low: float = float("nan")
    speedup_high: float = float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "keep": list(self.plan.keep), "merge": list(self.plan.merge or ()),
                "spans": [list(s) for s in self.plan.spans or ()], "speedup": self.speedup,
                "speedup_low": self.speedup_low, "speedup_high": self.speedup_high, "latency_s": self.latency_s,
                "low_s": self.low_s, "high_s": self.high_s, "importance": self.importance}


@dataclass(frozen=True)
class PresetPoint:
    """A paper preset priced by the same function, against the front plan of its k: its predicted speed-up over
    the original with its 95 % interval, then its latency (seconds per batch)."""

    name: str
    k: int
    latency_s: float
    low_s: float
    high_s: float
    front_latency_s: float
    importance: float | None = None
    speedup: float = float("nan")
    speedup_low: float = float("nan")
    speedup_high: float = float("nan")

    @property
    def gap(self) -> float:
        """How much slower than the front plan of its k the preset is predicted, relative (0.1 = 10 %)."""
        return self.latency_s / self.front_latency_s - 1

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "k": self.k, "speedup": self.speedup, "speedup_low": self.speedup_low,
                "speedup_high": self.speedup_high, "latency_s": self.latency_s, "low_s": self.low_s, "high_s": self.high_s,
                "front_latency_s": self.front_latency_s, "gap": self.gap,
                "gap_s": self.latency_s - self.front_latency_s, "importance": self.importance}


@dataclass(frozen=True)
class Front:
    """The planner's plans for one model on one LUT context: ``points`` the fastest plan for each k;
    with importance, ``least_loss`` (least summed loss for each k, the fastest among equals) and ``pareto``
    (the accuracy-latency front, by loss); ``presets`` the paper's plans against the front."""

    model: str  # the model's label in the LUT (name + options + resolution)
    name: str  # its registered name, as plans carry it
    options: dict[str, Any]
    device: DeviceContext
    method: str
    max_span: int
    original_s: float
    points: tuple[FrontPoint, ...]
    least_loss: tuple[FrontPoint, ...] | None = None
    pareto: tuple[FrontPoint, ...] | None = None
    presets: tuple[PresetPoint, ...] = ()

    def at_k(self, k: int) -> FrontPoint:
        """The fastest plan with ``k`` blocks keeping their activations."""
        for p in self.points:
            if p.k == k:
                return p
        raise UsageError(f"k is 0..{len(self.points) - 1} (blocks that keep their activations), got {k}")

    def choose(self, *, keep: int | None = None, budget_s: float | None = None,
               speedup: float | None = None) -> FrontPoint:
        """The plan for one budget: ``keep`` blocks with activations (with importance the least loss, else the
        fastest), or a latency ``budget_s`` / a ``speedup`` over the original (with importance the least loss
        within it, else the plan keeping most activations within it)."""
        if sum(v is not None for v in (keep, budget_s, speedup)) != 1:
            raise UsageError("choose by one of keep, budget_s or speedup")
        if keep is not None:
            point = self.at_k(keep)
            if self.least_loss is not None:
                point = next(p for p in self.least_loss if p.k == keep)
            return point
        budget = budget_s if budget_s is not None else self.original_s / speedup
        pool = self.pareto if self.pareto is not None else self.points
        within = [p for p in pool if p.latency_s <= budget]
        if not within:
            fastest = min(self.points, key=lambda p: p.latency_s)
            raise UsageError(f"no plan is predicted within {budget * 1e3:.3f} ms ({self.original_s / budget:.2f}x); the "
                             f"fastest is {fastest.latency_s * 1e3:.3f} ms ({self.original_s / fastest.latency_s:.2f}x) "
                             f"at k = {fastest.k}")
        if self.pareto is not None:
            return min(within, key=lambda p: (p.importance, p.latency_s))
        return max(within, key=lambda p: (p.k, -p.latency_s))

    # -- output ------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        points = lambda ps: [p.to_dict() for p in ps] if ps is not None else None  # noqa: E731
        return {"format": FRONT_FORMAT, "version": FRONT_VERSION, "model": self.model, "name": self.name,
                "options": self.options, "device": str(self.device), "context": self.device.as_dict(),
                "method": self.method, "max_span": self.max_span, "original_s": self.original_s,
                "points": points(self.points), "least_loss": points(self.least_loss), "pareto": points(self.pareto),
                "presets": [p.to_dict() for p in self.presets]}

    def to_csv(self) -> str:
        """One row per plan: ``set`` says which list it is from (front, least_loss, pareto, preset)."""
        out = io.StringIO()
        columns = ["set", "name", "k", "keep", "spans", "speedup", "speedup_low", "speedup_high", "latency_s", "low_s",
                   "high_s", "importance", "front_latency_s", "gap"]
        writer = csv.DictWriter(out, columns, lineterminator="\n")
        writer.writeheader()
        for group, points in (("front", self.points), ("least_loss", self.least_loss), ("pareto", self.pareto)):
            for p in points or ():
                row = {c: v for c, v in p.to_dict().items() if c in columns}
                writer.writerow({**row, "set": group, "name": p.plan.name, "keep": _bits(p.plan.keep),
                                 "spans": _spans(p.plan)})
        for p in self.presets:
            writer.writerow({c: v for c, v in {**p.to_dict(), "set": "preset"}.items() if c in columns})
        return out.getvalue()

    def write(self, path: str | Path) -> tuple[Path, Path]:
        """Write the front as JSON at ``path`` and as CSV beside it (same name, ``.csv``); returns both paths."""
        path = Path(path)
        json_path = atomic_write_text(path, json.dumps(self.to_dict(), indent=1) + "\n")
        csv_path = atomic_write_text(path.with_suffix(".csv"), self.to_csv())
        return json_path, csv_path

    def table(self) -> str:
        """The front for the terminal: one line per plan, then the presets against it."""
        lines = [f"{self.model} on {self.device}, method {self.method}, spans up to {self.max_span} blocks; "
                 f"original {self.original_s * 1e3:.3f} ms"]
        lines += _point_lines("fastest plan for each k (blocks keeping activations)", self.points, self.original_s)
        if self.least_loss is not None:
            lines += _point_lines("least importance loss for each k", self.least_loss, self.original_s)
        if self.pareto is not None:
            lines += _point_lines("accuracy-latency front (least loss for each latency)", self.pareto, self.original_s)
        if self.presets:
            lines += ["", "paper presets against the front plan of their k:",
                      f"{'preset':<16} {'k':>3} {'ms':>9} {'front ms':>9} {'gap':>7}"]
            lines += [f"{p.name:<16} {p.k:>3} {p.latency_s * 1e3:>9.3f} {p.front_latency_s * 1e3:>9.3f} {p.gap:>+7.1%}"
                      for p in self.presets]
        return "\n".join(lines)


def _bits(keep: tuple[int, ...]) -> str:
    return "".join(str(k) for k in keep)


def _spans(plan: Plan) -> str:
    return " ".join(f"{a}-{b - 1}" for a, b in plan.spans or ())


def _point_lines(title: str, points: tuple[FrontPoint, ...], original_s: float) -> list[str]:
    lines = ["", f"{title}:", f"{'k':>3}  {'plan (1 = kept)':<20} {'spans':<16} {'ms':>9} {'95 % interval':>19} "
             f"{'speed-up':>8} {'loss':>8}"]
    for p in points:
        loss = f"{p.importance:8.4f}" if p.importance is not None else f"{'':>8}"
        lines.append(f"{p.k:>3}  {_bits(p.plan.keep):<20} {_spans(p.plan) or '-':<16} {p.latency_s * 1e3:>9.3f} "
                     f"{p.low_s * 1e3:>9.3f}-{p.high_s * 1e3:<9.3f} {p.speedup:>7.2f}x {loss}")
    return lines
