"""The full measurement of per-block importance: each block linearised alone and fine-tuned (issue #13).

For every block b, the model with only b linearised is fine-tuned briefly (``config``; 0 epochs: evaluated as
it is) from the same weights, and b's importance is the accuracy the original, fine-tuned alike, keeps over it.
Costs n + 1 fine-tunes per seed: the reference the cheaper proxies (`proxies`) are ranked against, and the
``finetune`` proxy itself. Hours on a real data set, so each fine-tune done can be kept as it ends: one JSON line in a
``progress`` file (`PROGRESS_FORMAT`: the run's key, the seed, the block or null for the original, its accuracy),
which a run given ``resume`` reads back and does not fine-tune again -- where the key says it is the same run (model,
options, resolution, data, settings and the weights' tensors). The file is data: a line that does not hold those
fields is refused in one line, a last line cut by a kill is left out.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import statistics
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from ..constants import DEFAULT_FINETUNE
from ..errors import UsageError
from ..models import ModelRef
from ..records.plan import Plan
from .build import block_count
from .finetuning import finetune
from .loop import TrainConfig, quietly
from .settings import NO_CHECKPOINT, TrainRun

__all__ = ["PROGRESS_FORMAT", "BlockImportance", "measure_importance"]

#: The format of a progress file's lines (the module docstring).
PROGRESS_FORMAT = "dsprof.importance-progress"


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
    progress: str | Path | None = None,
    resume: bool = False,
) -> BlockImportance:
    """Each block's measured importance: ``model`` (from ``weights``) with that block alone linearised,
    fine-tuned with ``config`` (default 1 epoch, lr 0.02) per seed, against the original fine-tuned
    alike (so that the fine-tuning itself is not counted as the block's importance). ``progress``: the file each
    fine-tune done is kept in as it ends (started over unless ``resume``, which takes the ones it holds)."""
    config = config or TrainConfig(**DEFAULT_FINETUNE)
    ref = ModelRef.of(model, options=options, resolution=resolution, weights=weights or False)
    n = block_count(ref)
    common = dict(model=ref, data=data, check_merge=False, run=TrainRun(device))
    if resume and progress is None:
        raise UsageError(NO_CHECKPOINT)
    key, done = "", {}
    if progress is not None:  # the weights read back and hashed only where a file keeps the fine-tunes
        key = _run_key(model, options, resolution, data, config, weights)
        done = _progress(Path(progress), key, n, resume)

    def accuracy(seed: int, block: int | None, plan: Plan | None, cfg: TrainConfig) -> float:
        if (seed, block) in done:
            return done[(seed, block)]
        got = quietly(lambda: finetune(plan, config=cfg, **common)).accuracy
        if progress is not None:
            with open(progress, "a") as f:  # one whole line per fine-tune, on disk before the next starts
                f.write(json.dumps({"format": PROGRESS_FORMAT, "key": key, "seed": seed, "block": block,
                                    "accuracy": got}) + "\n")
                f.flush()
                os.fsync(f.fileno())
        return got

    base, per_block = [], [[] for _ in range(n)]
    for seed in seeds:
        cfg = replace(config, seed=seed)
        base.append(accuracy(seed, None, None, cfg))
        for b in range(n):
            plan = Plan(model, tuple(int(i != b) for i in range(n)), options)
            per_block[b].append(accuracy(seed, b, plan, cfg))
        log(f"importance seed {seed}: original {base[-1]:.4f}, block drops "
            + " ".join(f"{base[-1] - a[-1]:+.3f}" for a in per_block))
    return BlockImportance(statistics.fmean(base), tuple(statistics.fmean(a) for a in per_block),
                           tuple(tuple(a) for a in per_block))


def _run_key(model: str, options: dict[str, Any], resolution: int, data: str | Path, config: Any,
             weights: str | Path | None) -> str:
    """What makes two runs the same run: the model, options, resolution, data and settings, and the weights'
    tensors (not their file, which `dsprof.search.proxies` writes afresh each time)."""
    digest = hashlib.sha256()
    if weights is not None:
        state = torch.load(weights, map_location="cpu", weights_only=True)
        for name in sorted(state):
            digest.update(name.encode())
            digest.update(state[name].detach().cpu().contiguous().numpy().tobytes())
    settings = {k: v for k, v in asdict(config).items() if k != "seed"}  # each line carries its seed
    text = json.dumps([model, options, resolution, str(data), settings, digest.hexdigest()], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _progress(path: Path, key: str, blocks: int, resume: bool) -> dict[tuple[int, int | None], float]:
    """{(seed, block): accuracy} of the fine-tunes ``path`` holds for the run ``key`` (with ``resume``); a run
    without ``resume`` starts the file over."""
    if not resume or not path.exists():
        path.write_text("")
        return {}
    lines = path.read_text().splitlines()
    done: dict[tuple[int, int | None], float] = {}
    for number, line in enumerate(lines, 1):
        try:
            rec = json.loads(line)
        except ValueError:
            if number == len(lines):  # the last line, cut by a kill: left out of the file, fine-tuned again
                path.write_text("".join(f"{kept}\n" for kept in lines[:-1]))
                break
            raise UsageError(f"{path} line {number} is not JSON: not a progress file of an importance search") from None
        seed, block, acc = (rec.get(k) for k in ("seed", "block", "accuracy")) if isinstance(rec, dict) else (None,) * 3
        if not (isinstance(rec, dict) and rec.get("format") == PROGRESS_FORMAT and isinstance(seed, int)
                and (block is None or isinstance(block, int) and 0 <= block < blocks)
                and isinstance(acc, float) and math.isfinite(acc) and 0.0 <= acc <= 1.0):
            raise UsageError(f"{path} line {number} is not a fine-tune of an importance search ({PROGRESS_FORMAT}): "
                             "give the file a run of it kept, or drop `resume` to start over")
        if rec.get("key") != key:
            raise UsageError(f"cannot resume {path}: it holds the fine-tunes of another run (the model, its weights, "
                             "the data or the settings differ); drop `resume` to start over")
        done[(seed, block)] = acc
    return done
