"""Exhaustive ground truth for the activation search: every plan with k kept blocks, fine-tuned alike.

On a model small enough to enumerate, `enumerate_plans` fine-tunes *every* keep list with ``k`` ones
the same way (same starting weights, epochs and seeds) and records its accuracy per seed, its MACs and,
with a LUT, its predicted latency. What a search should be judged against is then known:

    outcomes = enumerate_plans("mobilenet_v2", k=4, options=..., weights="original.pt", seeds=(0, 1))
    accuracy_percentile(found_accuracy, [o.accuracy for o in outcomes])   # 0.9: better than 90 % of plans
    front = nondominated([o.macs for o in outcomes], [o.accuracy for o in outcomes])   # dsprof.planning.dp's

The statistics (`accuracy_percentile`, `kendall_tau`, `gap_to_front`) are plain arithmetic on lists, tested alone;
the Pareto filter is the planner's one (`dsprof.planning.dp.nondominated`).
"""

from __future__ import annotations

import itertools
import math
import statistics
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import UsageError
from ..merging import merge_model
from ..records.plan import Plan
from ..planning.decide import merge_rule
from ..planning.dp import nondominated
from ..models import ModelRef, count_macs, get_model
from .build import block_count
from .data import load_data
from .finetuning import finetune
from .loop import quietly, TrainConfig
from .settings import TrainRun
from ..lut.predict import prices_of
from ..lut.pricer import Pricer

__all__ = [
    "PlanOutcome",
    "accuracy_percentile",
    "all_keeps",
    "enumerate_plans",
    "gap_to_front",
    "kendall_tau",
    "plan_macs",
]


@dataclass(frozen=True)
class PlanOutcome:
    """One plan of the enumeration: its keep list, accuracy per fine-tuning seed, MACs (one image)
    and predicted latency (seconds per batch; None without a LUT)."""

    keep: tuple[int, ...]
    accuracies: tuple[float, ...]
    macs: int
    latency_s: float | None = None

    @property
    def accuracy(self) -> float:
        """Mean accuracy over the seeds."""
        return statistics.fmean(self.accuracies)

    @property
    def keep_str(self) -> str:
        return "".join(map(str, self.keep))

    def to_dict(self) -> dict[str, Any]:
        return {"keep": self.keep_str, "accuracies": list(self.accuracies), "accuracy": self.accuracy,
                "macs": self.macs, "latency_s": self.latency_s}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PlanOutcome":
        return cls(tuple(int(c) for c in d["keep"]), tuple(d["accuracies"]), int(d["macs"]), d.get("latency_s"))


def all_keeps(n_blocks: int, k: int) -> list[tuple[int, ...]]:
    """Every keep list of ``n_blocks`` entries with exactly ``k`` ones (C(n, k) of them), in
    lexicographic order of the kept indices."""
    if not 0 <= k <= n_blocks:
        raise UsageError(f"k={k} must lie in 0..{n_blocks}")
    return [tuple(int(i in chosen) for i in range(n_blocks)) for chosen in map(set, itertools.combinations(range(n_blocks), k))]


def accuracy_percentile(value: float, population: Sequence[float]) -> float:
    """The share of ``population`` that ``value`` beats, ties counted half (mid-rank): 1.0 when it is
    better than every plan, 0.5 at the median. Top quartile: >= 0.75."""
    if not population:
        raise UsageError("an empty population has no percentiles")
    below = sum(1 for p in population if p < value)
    equal = sum(1 for p in population if p == value)
    return (below + 0.5 * equal) / len(population)


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b rank correlation of two equally long sequences (ties handled): 1 when they
    order the items alike, -1 when reversed. NaN when either is constant."""
    if len(x) != len(y):
        raise UsageError(f"kendall_tau needs equally long sequences, got {len(x)} and {len(y)}")
    concordant = discordant = ties_x = ties_y = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        dx, dy = x[i] - x[j], y[i] - y[j]
        if dx == 0 and dy == 0:
            continue
        if dx == 0:
            ties_x += 1
        elif dy == 0:
            ties_y += 1
        elif (dx > 0) == (dy > 0):
            concordant += 1
        else:
            discordant += 1
    n0 = concordant + discordant
    denom = math.sqrt((n0 + ties_x) * (n0 + ties_y))
    return (concordant - discordant) / denom if denom else float("nan")


def gap_to_front(cost: float, accuracy: float, costs: Sequence[float], accuracies: Sequence[float]) -> float:
    """How far (accuracy points, as a fraction) a plan of ``cost`` lies below the Pareto front: the best
    accuracy of any plan at most as costly, minus ``accuracy``; 0 on (or above) the front."""
    reachable = [a for c, a in zip(costs, accuracies) if c <= cost]
    return max(0.0, max(reachable) - accuracy) if reachable else 0.0


def plan_macs(model: str, options: dict[str, Any], resolution: int, keep: Sequence[int], *, num_classes: int) -> int:
    """MACs (one image) of ``model`` with a ``num_classes``-way classifier (the data's), merged by the plan ``keep``
    (all ones: the original), its blocks merged where that lowers their MACs (``merge_by="macs"``: no LUT is at
    hand here)."""
    net = get_model(model, resolution=resolution, **{**options, "num_classes": num_classes}).eval()
    if not all(keep):
        net = merge_model(net, merge_rule(net, merge_by="macs").decide(Plan(model, tuple(keep), options)).plan)
    return count_macs(net, (resolution, resolution))


def enumerate_plans(
    model: str,
    *,
    k: int,
    options: dict[str, Any],
    weights: str | Path,
    data: str | Path = "digits",
    resolution: int = 32,
    config=None,
    seeds: Sequence[int] = (0, 1),
    lut: str | Path | None = None,
    device: str = "cpu",
    keeps: Sequence[tuple[int, ...]] | None = None,
    log: Callable[[str], None] = print,
) -> list[PlanOutcome]:
    """Fine-tune every plan with ``k`` kept blocks (or the given ``keeps``) from ``weights`` with
    ``config`` once per seed (``config.seed`` replaced), no distillation; record accuracy, MACs and,
    with ``lut``, the predicted latency (seconds per batch of the LUT's context)."""
    config = config or TrainConfig(epochs=2, lr=0.02)
    ref = ModelRef.of(model, options=options, resolution=resolution, weights=weights or False)
    n = block_count(ref)
    num_classes = load_data(data, resolution).num_classes
    keeps = list(keeps) if keeps is not None else all_keeps(n, k)
    outcomes = []
    pricer = None
    if lut is not None:  # the model's pieces read once, each plan a sum (as `dsprof predict` prices it)
        pricer = Pricer(prices_of(ModelRef.of(model, options=options, resolution=resolution), lut))
    for i, keep in enumerate(keeps):
        plan = Plan(model, keep, options)
        accs = []
        for seed in seeds:
            cfg = replace(config, seed=seed)
            r = quietly(lambda: finetune(plan, model=ref, data=data, config=cfg, check_merge=False,
                                         run=TrainRun(device)))
            accs.append(r.accuracy)
        latency = pricer.price(plan).latency_s if pricer is not None else None
        macs = plan_macs(model, options, resolution, keep, num_classes=num_classes)
        outcome = PlanOutcome(tuple(keep), tuple(accs), macs, latency)
        outcomes.append(outcome)
        log(f"plan {i + 1}/{len(keeps)} {outcome.keep_str}: accuracy {outcome.accuracy:.4f} "
            f"({', '.join(f'{a:.4f}' for a in accs)}) MMACs {outcome.macs / 1e6:.3f}")
    return outcomes


def __getattr__(name: str) -> Any:
    """``pareto_front``, moved: the one Pareto filter is `dsprof.planning.dp.nondominated` (same arguments, same
    answer); the old name works for one release, with a `DeprecationWarning`."""
    if name == "pareto_front":
        warnings.warn("dsprof.search.ground_truth.pareto_front moved: use dsprof.planning.dp.nondominated(costs, values)",
                      DeprecationWarning, stacklevel=2)
        return nondominated
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
