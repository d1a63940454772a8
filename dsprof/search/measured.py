"""The full measurement of per-block importance: each block linearised alone and fine-tuned (issue #13).

For every block b, the model with only b linearised is fine-tuned briefly (``config``; 0 epochs: evaluated as
it is) from the same weights, and b's importance is the accuracy the original, fine-tuned alike, keeps over it.
Costs n + 1 fine-tunes per seed: the reference the cheaper proxies (`proxies`) are ranked against, and the
``finetune`` proxy itself.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from ..constants import DEFAULT_FINETUNE
from ..models import ModelRef
from ..records.plan import Plan
from .build import block_count
from .finetuning import finetune
from .loop import TrainConfig, quietly
from .settings import TrainRun

__all__ = ["BlockImportance", "measure_importance"]


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
    config = config or TrainConfig(**DEFAULT_FINETUNE)
    ref = ModelRef.of(model, options=options, resolution=resolution, weights=weights or False)
    n = block_count(ref)
    common = dict(model=ref, data=data, check_merge=False, run=TrainRun(device))
    base, per_block = [], [[] for _ in range(n)]
    for seed in seeds:
        cfg = replace(config, seed=seed)
        base.append(quietly(lambda: finetune(config=cfg, **common)).accuracy)
        for b in range(n):
            plan = Plan(model, tuple(int(i != b) for i in range(n)), options)
            per_block[b].append(quietly(lambda: finetune(plan, config=cfg, **common)).accuracy)
        log(f"importance seed {seed}: original {base[-1]:.4f}, block drops "
            + " ".join(f"{base[-1] - a[-1]:+.3f}" for a in per_block))
    return BlockImportance(statistics.fmean(base), tuple(statistics.fmean(a) for a in per_block),
                           tuple(tuple(a) for a in per_block))
