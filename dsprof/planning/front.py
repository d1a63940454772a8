"""The planner's answer: a front of plans (one per k, and with importance the accuracy-latency front), the
paper's presets set against it, as a table, JSON and CSV."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..device_context import DeviceContext
from ..errors import UsageError
from ..io import atomic_write_text, csv_row
from ..lut.interval import TOO_WIDE, WIDE_WHY, Estimate, Estimated
from ..records.plan import Plan
from ..models import format_spans
from ..units import percent

__all__ = ["FRONT_FORMAT", "Front", "FrontPoint", "LatencyBudget", "PresetPoint", "blocks_legend", "check_budget",
           "resolve_k"]

FRONT_FORMAT = "dsprof.front"
FRONT_VERSION = 1


@dataclass(frozen=True)
class FrontPoint(Estimated):
    """One plan of the front: k blocks keep their activations; its predicted speed-up over the original and its
    predicted latency (seconds per batch), each an `Estimate` with its 95 % interval, as `dsprof.lut.predict_plan`
    built them (read flat: ``speedup``, ``speedup_low``... ``latency_s``, ``low_s``, ``high_s``); ``importance``: the
    summed loss of the blocks it linearises (None without importance)."""

    k: int
    plan: Plan
    speedup_estimate: Estimate
    latency_estimate: Estimate
    importance: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "keep": list(self.plan.keep), "merge": list(self.plan.merge or ()),
                "spans": [list(s) for s in self.plan.spans or ()], "speedup": self.speedup,
                "speedup_low": self.speedup_low, "speedup_high": self.speedup_high, "latency_s": self.latency_s,
                "low_s": self.low_s, "high_s": self.high_s, "importance": self.importance,
                **({"acts": [list(a) for a in self.plan.acts]} if self.plan.acts is not None else {})}


@dataclass(frozen=True)
class PresetPoint(Estimated):
    """A paper preset priced by the same function, against the front plan of its k: its predicted speed-up over
    the original and its latency (seconds per batch), each an `Estimate` with its 95 % interval."""

    name: str
    k: int
    speedup_estimate: Estimate
    latency_estimate: Estimate
    front_latency_s: float
    importance: float | None = None

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
    (the accuracy-latency front, by loss); ``presets`` the paper's plans against the front. ``no_gain``: the blocks
    that buy nothing linearised alone (as the LUT's rule deploys them, no faster than with their activations);
    information only, every plan of every k is a candidate (`fastest_k` says from which k down the front stops
    getting faster)."""

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
    #: the blocks' names in plan order (digit i of a plan's keep list is block i; a part refused as a block has none)
    blocks: tuple[str, ...] = ()
    spans_predicted: tuple[int, int] = (0, 0)  # (span entries predicted from another context, span entries read)
    presets: tuple[PresetPoint, ...] = ()
    no_gain: tuple[int, ...] = ()
    #: what the LUT limited the planner to, one line each: spans narrower than asked, variants of blocks linearised
    #: alone other than the LUT's rule would deploy (`dsprof.planning.planner`: the planner plans with what the LUT holds)
    limits: tuple[str, ...] = ()
    #: why every figure of the front is a draft (`Prices.draft`): "draft: LUT run contended, 70 % CPU" where the LUT
    #: context's run was contended, a label where no piece was timed inside the model; "" otherwise
    draft: str = ""
    #: the blocks without a removable activation (linear already): k does not count them, and each plan keeps them
    #: as built or linearises them as priced
    uncounted: tuple[int, ...] = ()

    @property
    def fastest_k(self) -> int:
        """The k of the fastest plan of the front (the largest such k on a tie): from there down, linearising more
        blocks makes the front no faster, only less accurate."""
        best = max(p.speedup for p in self.points)
        return max(p.k for p in self.points if p.speedup == best)

    def at_k(self, k: int) -> FrontPoint:
        """The fastest plan with ``k`` blocks keeping their activations."""
        for p in self.points:
            if p.k == k:
                return p
        ks = [p.k for p in self.points]
        why = ""
        if self.uncounted:  # e.g. GhostNetV2 at 96 px: 18 of its 20 blocks are linear already, so k is 0..2
            one = len(self.uncounted) == 1
            why = (f"; {len(self.uncounted)} of the {len(self.blocks) or '?'} blocks {'has' if one else 'have'} no "
                   f"removable activation (linear already), and k does not count {'it' if one else 'them'}")
        raise UsageError(f"k is {min(ks)}..{max(ks)} (blocks that keep their activations), got {k}{why}")

    def spans_note(self) -> str:
        """Where the spans this front could use are priced by predicted entries (a LUT of `dsprof.measure_few()`): one
        line that says how many, and whether any plan of the front uses a span; "" where none is predicted."""
        predicted, read = self.spans_predicted
        if not predicted:
            return ""
        used = sorted(p.k for p in self.points if p.plan.spans)
        how = (f"the plans at k = {', '.join(map(str, used))} use spans" if used else
               "no plan of this front uses a span: it plans without spans")
        what = "all" if predicted == read else f"{predicted} of the"
        return (f"spans: {what} {read} span entries are predicted from another context (`dsprof.measure_few()`), not "
                f"measured; {how} (measure the model in full, `dsprof.measure(workloads=Workloads(spans=N))`, to plan "
                "spans on measured entries)")

    def choose(self, *, keep: int | float | None = None, budget_s: float | None = None,
               speedup: float | None = None) -> FrontPoint:
        """The plan for one budget: ``keep`` blocks with activations, or activations on a front of single
        activations (a count, or a fraction of them: `resolve_k`; with importance the least loss, else the fastest),
        or a latency ``budget_s`` / a ``speedup`` over the original (with importance the least loss within it, else the plan keeping most
        activations within it)."""
        if sum(v is not None for v in (keep, budget_s, speedup)) != 1:
            raise UsageError("choose by one of keep, budget_s or speedup")
        check_budget(budget_s * 1e3 if budget_s is not None else None, speedup)
        if keep is not None:
            what = "activations" if self.points[0].plan.acts is not None else "blocks"  # `plan_front_acts`' front
            k = resolve_k(keep, max(p.k for p in self.points), what)  # the original keeps every one
            point = self.at_k(k)
            if self.least_loss is not None:
                point = next(p for p in self.least_loss if p.k == k)
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
                "blocks": list(self.blocks), "spans_predicted": list(self.spans_predicted),
                "method": self.method, "max_span": self.max_span, "original_s": self.original_s,
                "points": points(self.points), "least_loss": points(self.least_loss), "pareto": points(self.pareto),
                "presets": [p.to_dict() for p in self.presets], "no_gain": list(self.no_gain),
                "fastest_k": self.fastest_k, "draft": self.draft, "notes": self.notes(),
                "uncounted": list(self.uncounted)}

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
                writer.writerow(csv_row({**row, "set": group, "name": p.plan.name, "keep": _bits(p.plan.keep),
                                         "spans": format_spans(p.plan.spans)}))
        for p in self.presets:
            writer.writerow(csv_row({c: v for c, v in {**p.to_dict(), "set": "preset"}.items() if c in columns}))
        return out.getvalue()

    def write(self, path: str | Path) -> tuple[Path, Path]:
        """Write the front as JSON at ``path`` and as CSV beside it (same name, ``.csv``); returns both paths."""
        path = Path(path)
        json_path = atomic_write_text(path, json.dumps(self.to_dict(), indent=1) + "\n")
        csv_path = atomic_write_text(path.with_suffix(".csv"), self.to_csv())
        return json_path, csv_path

    def notes(self) -> list[str]:
        """What the front says beyond its rows: what the LUT limited the spans to, where the front stops getting faster,
        and which blocks buy nothing alone."""
        fastest = self.at_k(self.fastest_k)
        lines = [*filter(None, [self.draft]), *self.limits]
        if self.fastest_k > min(p.k for p in self.points):
            lines.append(f"fastest at k = {self.fastest_k} ({fastest.speedup:.2f}x): below it, removing more "
                         "activations makes the front no faster")
        if self.uncounted:
            one = len(self.uncounted) == 1
            lines.append(f"{'block' if one else 'blocks'} {_indices(self.uncounted)} {'has' if one else 'have'} no "
                         f"removable activation (linear already): k does not count {'it' if one else 'them'}; each "
                         f"plan keeps or linearises {'it' if one else 'them'} as priced")
        if self.no_gain:
            lines.append(f"no gain alone: blocks {_indices(self.no_gain)} are predicted no faster linearised alone "
                         "than with their activations (a plan still takes them where its k needs them, or in a span)")
        wide = [p for p in self.points if p.too_wide]
        if wide:
            worst = max(wide, key=lambda p: p.speedup_high / p.speedup_low if p.speedup_low > 0 else math.inf)
            lines.append(f"too wide to act on: {len(wide)} of the {len(self.points)} plans' 95 % intervals span more "
                         f"than a factor of {TOO_WIDE:g} (k = {worst.k}: {worst.speedup_low:.3g}-"
                         f"{worst.speedup_high:.3g}x). {WIDE_WHY}")
        return lines

    def __str__(self) -> str:
        return self.table()

    def table(self) -> str:
        """The front for the terminal: one line per plan, the speed-up over the original first, then the
        predicted milliseconds; then the presets against it. Columns fit their widest cell, spans last."""
        lines = [f"{self.model} on {self.device}, method {self.method}, "
                 f"{'spans up to ' + str(self.max_span) + ' blocks' if self.max_span > 1 else 'no spans'}; "
                 f"original {self.original_s * 1e3:.3f} ms"]
        lines += self.notes()
        acts = any(p.plan.acts is not None for p in self.points)  # the planner at the level of activations
        lines += _point_lines("fastest plan for each k (activations kept; a plan: each block's activations, 1 = kept)"
                              if acts else "fastest plan for each k (blocks keeping activations)", self.points,
                              self.original_s)
        if self.least_loss is not None:
            lines += _point_lines("least importance loss for each k", self.least_loss, self.original_s)
        if self.pareto is not None:
            lines += _point_lines("accuracy-latency front (least loss for each latency)", self.pareto, self.original_s)
        if self.presets:
            lines += ["", "paper presets against the front plan of their k:"]
            lines += _columns(["preset", "k", "speed-up", "ms", "front ms", "gap"], [
                [p.name, str(p.k), f"{self.original_s / p.latency_s:.2f}x", f"{p.latency_s * 1e3:.3f}",
                 f"{p.front_latency_s * 1e3:.3f}", percent(p.gap)] for p in self.presets], left={0})
        # under the first line: which block each digit of a plan is, and where the spans' prices come from
        lines[1:1] = [*blocks_legend(self.blocks), *filter(None, [self.spans_note()])]
        return "\n".join(lines)


def resolve_k(keep: int | float, n_blocks: int, what: str = "blocks") -> int:
    """The number of blocks that keep their activations: ``keep`` as a count (int, 0..``n_blocks``) or a
    fraction of ``n_blocks`` (float in [0, 1], rounded to the nearest count): what ``--keep`` takes in
    `dsprof plan` and `dsprof search` alike (``7`` a count, ``0.4`` a fraction). ``what`` the messages count:
    ``activations`` where k counts single activations (``unit="activation"``)."""
    if isinstance(keep, bool) or not isinstance(keep, (int, float)) or keep != keep:
        raise UsageError(f"`keep={keep!r}`: give a count of {what} (from 0 to {n_blocks}) or a fraction in [0, 1]")
    if isinstance(keep, float):
        if not 0.0 <= keep <= 1.0:
            raise UsageError(f"`keep={keep}`: a fraction of the {what} lies in [0, 1]; give a count (from 0 to "
                             f"{n_blocks}) as a whole number")
        return int(math.floor(keep * n_blocks + 0.5))
    k = int(keep)
    if not 0 <= k <= n_blocks:
        raise UsageError(f"`keep={k}` {what}, but a plan keeps 0 to {n_blocks} of them; give `keep=` in 0..{n_blocks}, or a "
                         "fraction in [0, 1]")
    return k


@dataclass(frozen=True)
class LatencyBudget:
    """A plan chosen by its predicted latency rather than by how many blocks keep their activations: within
    ``budget_ms`` per batch, or reaching ``speedup`` over the original, as the LUT predicts them (one of the two;
    each above 0: `check_budget`)."""

    budget_ms: float | None = None
    speedup: float | None = None

    def __post_init__(self) -> None:
        check_budget(self.budget_ms, self.speedup)

    @property
    def given(self) -> bool:
        """Whether a budget or a speed-up is given."""
        return self.budget_ms is not None or self.speedup is not None


def check_budget(budget_ms: float | None, speedup: float | None) -> None:
    """Refuse a latency budget or a speed-up that no plan can meet by construction: each must be above 0."""
    if budget_ms is not None and not budget_ms > 0:
        raise UsageError(f"`budget=LatencyBudget(budget_ms=)` is the predicted latency per batch to stay within, above "
                         f"0 ms; got {budget_ms:g}")
    if speedup is not None and not speedup > 0:
        raise UsageError(f"`budget=LatencyBudget(speedup=)` is the predicted speed-up over the original to reach "
                         f"(e.g. 1.3), above 0; "
                         f"got {speedup:g}")


def _indices(values: tuple[int, ...]) -> str:
    return " ".join(map(str, values))


def _bits(keep: tuple[int, ...]) -> str:
    return "".join(str(k) for k in keep)


def _columns(header: list[str], rows: list[list[str]], left: set[int] = frozenset()) -> list[str]:
    """``header`` and ``rows`` as lines of columns two spaces apart, each as wide as its widest cell (numbers
    right-aligned, the columns in ``left`` left-aligned); the last column is not padded."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    last = len(header) - 1

    def line(cells: list[str]) -> str:
        return "  ".join(c if i == last and i in left else (c.ljust(w) if i in left else c.rjust(w))
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [line(header), *(line(r) for r in rows)]


def _point_lines(title: str, points: tuple[FrontPoint, ...], original_s: float) -> list[str]:
    loss = any(p.importance is not None for p in points)
    # the speed-up first, then the milliseconds, then their 95 % intervals
    header = ["k", "speed-up", "ms", "interval x", "interval ms", *(["importance"] if loss else []),
              "plan (1 = kept)", "spans"]
    rows = [[str(p.k), f"{p.speedup:.2f}x", f"{p.latency_s * 1e3:.3f}", f"{p.speedup_low:.2f}-{p.speedup_high:.2f}x",
             f"{p.low_s * 1e3:.3f}-{p.high_s * 1e3:.3f}", *([f"{p.importance:.4f}"] if loss else []),
             _bits(p.plan.keep) if p.plan.acts is None else " ".join(map(_bits, p.plan.acts)),
             format_spans(p.plan.spans, "-")] for p in points]
    return ["", f"{title}:", *_columns(header, rows, left={len(header) - 2, len(header) - 1})]


def blocks_legend(names: tuple[str, ...] | list[str], width: int = 118) -> list[str]:
    """The blocks by index, as the plan tables number them (digit i of a plan is block i), in lines of at most
    ``width`` characters: where a part of the model is refused as a block, index and module name part ways."""
    lines, line = [], "blocks (digit i of a plan is block i):"
    for i, name in enumerate(names):
        item = f"{i} {name}"
        if len(line) + 2 + len(item) > width:
            lines.append(line)
            line = "  " + item
        else:
            line += ("  " if lines or i else " ") + item
    return lines + [line] if names else []
