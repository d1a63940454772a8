"""Ties broken by measurement (issue #46, item 6): the top-priced plans of one k timed inside the model, paired with
the original, and the measured best kept -- as an autotuner times its top candidates.

Where the LUT sees ties, the front picks among them blind: on a held-out architecture (21 blocks, ONNX Runtime, 224 px,
k = 10) the 20 plans that the prices rank highest were priced within 0.01 % of each other, and measured paired
1.066-1.118x; the front's plan measured 19th of 21. The prices cannot tell these plans apart; one interleaved group
can.

What `break_tie` does, for the chosen plan of a k (`dsprof.plan(keep=..., tie_break=...)`):

1. **Candidates.** The ``candidates`` plans of that k that the prices rank fastest, exactly
   (`dsprof.planning.planner.top_plans`: a k-best dynamic programme over the pieces the planner offers -- every
   partition into kept blocks, lone linearised blocks and spans --, so no plan priced faster than the last candidate
   is missed; one-swap neighbours of the front would miss plans two swaps away that tie as closely). The chosen plan
   first, then those *tied* with it: priced inside each other's 95 % intervals (the candidate's latency within the
   chosen plan's interval, and the chosen plan's within the candidate's).
2. **Timing.** Each candidate's merged model (its ``merge`` list and spans, as priced) and the original, in a group of
   two of their own, one candidate after the other, on this machine in the LUT's context (`dsprof.profiler.measure`,
   whole models: variant ``custom`` named after the plan, beside the ``original``), the rounds of each group stopped
   adaptively within its share of ``seconds`` (half of it warm-up, half interleaved rounds: `_timing`; preparing the
   models -- an export, a compilation -- comes on top). Groups of two, not one group of all: a model's time depends on
   what ran just before each call, so in a group of 21 whole models the same plan read 1.34-1.48x over the original
   where every group of two read 1.28-1.30x (issue #46, benchmarks/RESULTS.md); each ratio is paired inside its
   group, so the machine's drift between groups cancels. A LUT context of another environment is refused: its prices
   are not this machine's.
3. **Answer.** The candidate whose paired speed-up over the original (the median of the per-round ratios, with its
   95 % interval: `dsprof.records.stats.paired_speedup`) is highest is the plan written; its predicted speed-up is
   quoted beside the measured one.
4. **Records.** Each group is an ordinary measurement file, ``PLAN.jsonl`` in the folder
   ``tie-break_<model>_k<k>_<context>_<time>`` of ``out`` (one folder per run), which `dsprof build-lut` reads: see
   `TieBreak` for what it adds to a LUT.
"""

from __future__ import annotations

import datetime as _dt
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..constants import TIE_BREAK_CANDIDATES
from ..errors import DeviceError, UsageError
from ..io import output_path
from ..lut.predict import MethodFallbackWarning, prices_of
from ..merging import merge_model
from ..models.ref import ModelRef
from ..planning.front import Front, FrontPoint
from ..planning.planner import context_suffix, top_plans
from ..profiler.fingerprint import environment, environment_id
from ..profiler.runner import measure
from ..profiler.selection import Workloads
from ..portable.timing_loop import DEFAULTS
from ..profiler.timing import TimingConfig
from .check import PairedCheck, paired_check

__all__ = ["Candidate", "TieBreak", "TieBroken", "break_tie", "tie_break_of"]


@dataclass(frozen=True)
class TieBreak:
    """A measured tie-break: time the ``candidates`` top-priced plans of the chosen k that are tied with the chosen
    plan (inside each other's 95 % intervals), each with the original in a group of two, within ``seconds`` of
    timing in all, and keep the measured best; the records go to the folder ``out``.

    What the records add to a LUT that `dsprof build-lut` builds with them (scope ``model``): one entry per timed plan
    (variant ``custom``, workload the model's label under the plan's name, ``tied-k3-<digest>-<backend>``) whose
    ``ratio`` is that plan's paired time over the original's, measured inside the model and paired with the original
    of its own group; and, per timed plan, one more group of the whole model's ``original`` entry, the reference every
    in-model and in-situ price is read against (its median pooled, and each group's median in the drift term of the
    intervals). The in-model scales and the calibration factor are fitted from single pieces and the calibration
    plan, not from these whole plans."""

    seconds: float
    candidates: int = TIE_BREAK_CANDIDATES
    out: str | Path = "results/tie-break"

    def __post_init__(self) -> None:
        if isinstance(self.seconds, bool) or not isinstance(self.seconds, (int, float)) or not (
                math.isfinite(self.seconds) and self.seconds > 0):
            raise UsageError(f"`tie_break={self.seconds!r}`: give the seconds to time the tied plans for, above 0")
        if isinstance(self.candidates, bool) or not isinstance(self.candidates, int) or self.candidates < 1:
            raise UsageError(f"`candidates={self.candidates!r}`: a tie-break times 1 or more of the top-priced plans")


def tie_break_of(value: "TieBreak | float | None", *, choosing: bool = True, importance: Any = None) -> TieBreak | None:
    """``tie_break=`` as a `TieBreak`: given one, a number of seconds (the other settings their defaults), or None.
    Refused in one line where no k is chosen (``choosing`` False: no `keep=` or ``budget``) or with
    ``importance`` (the plan of a k is then the one of least loss, not the fastest-priced)."""
    if value is None:
        return None
    request = value if isinstance(value, TieBreak) else TieBreak(value)
    if not choosing:
        raise UsageError("`tie_break=` times the tied plans of the chosen k: give `keep=`, "
                         "`budget=LatencyBudget(budget_ms=)` or `budget=LatencyBudget(speedup=)`")
    if importance is not None:
        raise UsageError(_WITH_IMPORTANCE)
    return request


_WITH_IMPORTANCE = ("`tie_break=` times the fastest-priced plans of a k; with `importance=` the plan of a k is the one "
                    "of least loss: give one or the other")


@dataclass(frozen=True)
class Candidate:
    """One plan timed by the tie-break: as priced (``point``) and as measured paired with the original."""

    point: FrontPoint
    measured: PairedCheck

    def to_dict(self) -> dict[str, Any]:
        s = self.measured.speedup
        return {"name": self.point.plan.name, "digest": self.point.plan.digest, **self.point.to_dict(),
                "measured_speedup": s.ratio, "measured_speedup_low": s.low, "measured_speedup_high": s.high,
                "measured_pairs": s.pairs, "measured_s": self.measured.merged_s,
                "original_measured_s": self.measured.original_s}


@dataclass(frozen=True)
class TieBroken:
    """What `break_tie` did at ``k``: the front's plan (``front``, priced), the plans timed (``candidates``, the
    front's first, each with its paired speed-up), the measured best (``best``), how many of the ranked plans were
    tied with the front's (``tied`` of ``ranked``), the folder of its measurement files and, where a group was timed
    on a contended machine, `dsprof.profiler.runner.contention_message`'s warning."""

    k: int
    front: FrontPoint
    candidates: tuple[Candidate, ...]
    ranked: int
    path: Path
    seconds: float
    contention: str | None = None

    @property
    def best(self) -> Candidate:
        """The candidate of highest measured speed-up (of equal ones, the first: the front's where it is one)."""
        return max(self.candidates, key=lambda c: c.measured.speedup.ratio)

    @property
    def tied(self) -> int:
        return len(self.candidates)

    def line(self) -> str:
        """One line: how many tied plans were timed, the measured best with its measured speed-up (labelled) beside
        its predicted one, and what the front's plan measured."""
        best, first = self.best, self.candidates[0]
        m, p = best.measured.speedup, best.point
        line = (f"tie-break at k = {self.k}: {self.tied} of the {self.ranked} top-priced plans priced inside each "
                f"other's intervals, timed paired with the original ({self.seconds:g} s); kept {p.plan.name}: measured "
                f"{m.ratio:.3f}x (95 % {m.low:.3f}-{m.high:.3f}x, {m.pairs} paired rounds), predicted {p.speedup:.3f}x "
                f"({p.speedup_low:.3f}-{p.speedup_high:.3f}x)")
        if best is not first:
            f = first.measured.speedup
            line += f"; the front's plan measured {f.ratio:.3f}x ({f.low:.3f}-{f.high:.3f}x)"
        elif self.tied > 1:
            line += " (the front's plan)"
        if self.contention:
            line += "; draft: the machine was contended while timing"
        return line

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "ranked": self.ranked, "tied": self.tied, "seconds": self.seconds, "path": str(self.path),
                "front": self.front.plan.name, "chosen": self.best.point.plan.name, "contention": self.contention,
                "candidates": [c.to_dict() for c in self.candidates]}


def _tied(a: FrontPoint, b: FrontPoint) -> bool:
    """Whether two plans are priced inside each other's 95 % intervals (latency)."""
    return a.low_s <= b.latency_s <= a.high_s and b.low_s <= a.latency_s <= b.high_s


def _timing(seconds: float, size: int) -> TimingConfig:
    """The timing of one of the tie-break's groups: ``seconds`` shared by the ``size`` workloads of the group, half
    for warm-up (the first group's longer warm-up included: each group is its run's first) and half for the
    interleaved rounds, so that the budget asked for is the time spent timing (10 ms of warm-up each at least)."""
    share = seconds / size
    warm = max(0.01, min(DEFAULTS["warmup_max_s"], share / 2))  # the profiler's cap on a warm-up
    return TimingConfig(budget_s=max(share / 2, 1e-3), warmup_s=min(DEFAULTS["warmup_s"], warm), warmup_max_s=warm,
                        first_warmup_s=warm)


def break_tie(model: ModelRef, lut: Any, front: Front, chosen: FrontPoint, request: TieBreak, *,
              method: str = "auto", progress: bool = False) -> TieBroken:
    """Time the plans of ``chosen.k`` tied with ``chosen`` (``front``'s plan of that k) paired with the original here,
    in ``front``'s LUT context, and return what was measured (the module docstring). A context of another
    environment than this machine's is refused (`DeviceError`), as is a chosen plan weighed by importance."""
    if chosen.importance is not None:
        raise UsageError(_WITH_IMPORTANCE)
    context = front.device
    here = environment_id(environment())
    if context.env_id != here:
        raise DeviceError(f"the LUT context {context} was measured in environment {context.env_id}, this machine is "
                          f"{here}: a tie-break times the plans here against the LUT's prices. Plan without "
                          "`tie_break=`, or run it on the machine the LUT was measured on")
    model = model.built()  # one module for the prices and the timing
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MethodFallbackWarning)  # said once already, by the front
        prices = prices_of(model, lut, device=context, method=method)
    ranked = top_plans(prices, chosen.k, request.candidates, max_span=front.max_span, model=model)
    others = [p for p in ranked if p.plan.digest != chosen.plan.digest]
    tied = [chosen, *(p for p in others if _tied(chosen, p))][:request.candidates]
    net = model.build()
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    folder = output_path(request.out, f"tie-break_{model.name}_k{chosen.k}_{context_suffix(context)}_{stamp}",
                         what="the tie-break's measurement folder")
    timing = _timing(request.seconds / len(tied), 2)
    candidates, contention = [], None
    for p in tied:  # one group of two per plan: the original and that plan, nothing else (module docstring, item 2)
        run = measure(model, settings=context, workloads=Workloads((), ("original",), blocks=None),
                      extra_models={p.plan.name: merge_model(net, p.plan)}, timing=timing,
                      out=output_path(folder, p.plan.name, suffix=".jsonl", what="a tie-break measurement file"),
                      progress=progress)
        contention = contention or run.contention
        check = paired_check(run.measurements, p.plan.name)
        if check is None:
            failed = next((r.error for r in run.measurements if r.name == p.plan.name and r.error), "not timed")
            raise DeviceError(f"the tie-break could not time {p.plan.name} ({failed}); plan without `tie_break=`")
        candidates.append(Candidate(p, check))
    return TieBroken(chosen.k, chosen, tuple(candidates), len(ranked), folder, request.seconds, contention)
