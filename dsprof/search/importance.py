"""Measured-importance search: linearise each block alone, measure the accuracy it costs, plan with it.

The differentiable search (paper Sec. 4.2) estimates each activation's importance from straight-through
gradients while the weights move. This search measures it instead: for every block b, the model with only
b linearised is fine-tuned briefly (``config``; 0 epochs: evaluated as it is) from the same weights, and
b's importance is the accuracy the original keeps over it. Costs n + 1 short fine-tunes per seed.

`search_importance` (`search(method="importance")`) hands the importances to the planner (`planned`,
`dsprof.plan`): with a LUT, the plan of least summed importance for k blocks with activations (the
fastest among equals, its merges and spans chosen by the LUT), or for a latency budget the least loss
within it; without a LUT, the k blocks of highest importance (`importance_keep`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import UsageError
from ..merge import Plan
from ..models import find_blocks, get_model
from .build import build_model
from .finetuning import finetune
from .method import SearchRequest, SearchResult, write_plan
from .planned import choose_point, planned, planner_front
from .run import TrainConfig, quietly, seed_all
from .training import setup_runtime, teardown_runtime

__all__ = ["BlockImportance", "importance_keep", "measure_importance", "search_importance"]


@dataclass(frozen=True)
class BlockImportance:
    """Accuracy of the original and of each single-block linearisation (mean over seeds)."""

    base_accuracy: float
    linearised_accuracy: tuple[float, ...]
    per_seed: tuple[tuple[float, ...], ...] = field(default=())

    @property
    def drops(self) -> tuple[float, ...]:
        """Accuracy lost by linearising each block alone (fraction; negative: it gained)."""
        return tuple(self.base_accuracy - a for a in self.linearised_accuracy)

    def to_dict(self) -> dict[str, Any]:
        return {"base_accuracy": self.base_accuracy, "linearised_accuracy": list(self.linearised_accuracy),
                "drops": list(self.drops), "per_seed": [list(s) for s in self.per_seed]}


def importance_keep(importance: Sequence[float], k: int, weights: Sequence[float] | None = None,
                    lam: float = 0.0) -> tuple[int, ...]:
    """The keep list of the ``k`` blocks with the highest ``importance_b - lam * weights_b`` (ties: the
    earlier block first)."""
    n = len(importance)
    if not 0 <= k <= n:
        raise UsageError(f"k={k} must lie in 0..{n}")
    w = list(weights) if weights is not None else [0.0] * n
    if len(w) != n:
        raise UsageError(f"{len(w)} weights for {n} blocks")
    merit = [float(importance[i]) - lam * float(w[i]) for i in range(n)]
    chosen = set(sorted(range(n), key=lambda i: (-merit[i], i))[:k])
    return tuple(int(i in chosen) for i in range(n))


def measure_importance(
    model: str,
    *,
    options: dict[str, Any],
    weights: str | Path | None,
    data: str | Path = "digits",
    resolution: int = 32,
    config=None,
    seeds: Sequence[int] = (0,),
    device: str = "cpu",
    log: Callable[[str], None] = print,
) -> BlockImportance:
    """Each block's measured importance: ``model`` (from ``weights``) with that block alone linearised,
    fine-tuned with ``config`` (default 1 epoch, lr 0.02) per seed, against the original fine-tuned
    alike (so that the fine-tuning itself is not counted as the block's importance)."""
    config = config or TrainConfig(epochs=1, lr=0.02)
    n = len(find_blocks(get_model(model, resolution=resolution, num_classes=10, **options), (resolution, resolution)))
    common = dict(weights=weights, data=data, resolution=resolution, check_merge=False, device=device)
    base, per_block = [], [[] for _ in range(n)]
    for seed in seeds:
        cfg = replace(config, seed=seed)
        base.append(quietly(lambda: finetune(model=model, options=options, config=cfg, **common)).accuracy)
        for b in range(n):
            plan = Plan(model, tuple(int(i != b) for i in range(n)), options)
            per_block[b].append(quietly(lambda: finetune(plan, config=cfg, **common)).accuracy)
        log(f"importance seed {seed}: original {base[-1]:.4f}, block drops "
            + " ".join(f"{base[-1] - a[-1]:+.3f}" for a in per_block))
    return BlockImportance(statistics.fmean(base), tuple(statistics.fmean(a) for a in per_block),
                           tuple(tuple(a) for a in per_block))


def search_importance(req: SearchRequest) -> SearchResult:
    """Measure each block's importance (fine-tunes of ``req.config``, seed ``config.seed``) and choose the
    plan through the planner: with ``req.lut`` the front plan of least summed importance for ``keep`` (or
    within ``budget_ms`` / ``speedup``), its merges and spans the LUT's; without a LUT the k blocks of
    highest importance keep their activations (what the planner keeps at k whatever the latencies, ties
    aside), merging left to `dsprof merge`."""
    config = req.config
    rt = setup_runtime(req.device, req.config.threads)
    try:
        seed_all(config.seed)
        base = build_model(req.model, options=req.options, resolution=req.resolution, num_classes=10)
        n = len(find_blocks(base, (req.resolution, req.resolution)))
        # what could fail after the n + 1 fine-tunes fails before them: k, or the LUT, its entries and the budget
        if req.lut is None and req.keep is not None:
            req.k(n)
        else:
            choose_point(planner_front(req), req)
        imp = measure_importance(req.model, options=req.options, weights=req.weights, data=req.data,
                                 resolution=req.resolution, config=config, seeds=(config.seed,), device=str(rt.device),
                                 log=rt.log)
        drops = list(imp.drops)
        ranking = sorted(range(n), key=lambda i: (-drops[i], i))
        info = {"scores": [round(v, 6) for v in drops], "ranking": ranking, "importance": imp.to_dict(),
                "finetune_epochs": config.epochs, "seed": config.seed}
        if req.lut is not None:
            front = planner_front(req, drops)
            plan = planned(req, front, choose_point(front, req), info)
        else:
            k = req.k(n)
            plan = Plan(req.model, importance_keep(drops, k), req.options, name=req.name or f"importance-k{k}",
                        source="dsprof search --method importance (no LUT: top k)",
                        search={"method": "importance", "k": k, **info})
        rt.log(f"importance search: keep {''.join(map(str, plan.keep))} ranking {' '.join(map(str, ranking))}")
        if rt.is_main:
            write_plan(plan, req.out)
        return SearchResult(plan, drops, ranking, [], Path(req.out) if req.out is not None else None)
    finally:
        teardown_runtime(rt)
