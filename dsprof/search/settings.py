"""The settings of training and of the importance proxies, as plain data that imports no PyTorch: the command line
shows their defaults in `--help` from here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..constants import DEFAULT_FINETUNE
from ..errors import UsageError

__all__ = ["DistillSettings", "GateSettings", "ProxySettings", "TrainConfig", "TrainRun"]


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings shared by search and fine-tuning (SGD with momentum, cosine schedule)."""

    epochs: int = 10
    batch_size: int = 64  # per process
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 4e-5
    warmup_epochs: float = 0.0
    label_smoothing: float = 0.1
    seed: int = 0
    max_batches: int | None = None  # per epoch, for smoke runs
    max_eval_batches: int | None = None
    workers: int = 0
    threads: int | None = 1  # CPU threads PyTorch computes with (torch.set_num_threads); None: torch's default


@dataclass(frozen=True)
class ProxySettings:
    """What the proxies read (each reads some: `Proxy.reads`). Batches are of ``batch_size`` images, drawn
    once in a seeded order and shared by the original and every block."""

    batches: int = 8  # training batches: BatchNorm recalibration (zero-shot, logit-distance), scoring (the others)
    eval_batches: int = 16  # validation batches at most (zero-shot, logit-distance, short-finetune)
    steps: int = 10  # short-finetune: SGD steps, cosine schedule from lr
    batch_size: int = 64
    lr: float = DEFAULT_FINETUNE["lr"]  # short-finetune: the fine-tune's (importance --lr sets both)
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("batches", "eval_batches", "steps", "batch_size"):
            if int(getattr(self, name)) < 1:
                raise UsageError(f"proxy setting {name} must be at least 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class GateSettings:
    """The differentiable search's gate scores (paper Sec. 4.2): task loss + ``lam`` * sum_b w_b |m_b| (w_b: the
    block's LUT latency saving, or its MAC saving); the scores start at ``score_init`` and learn at ``score_lr``;
    ``score_normalize`` divides their straight-through gradient by its largest entry, ``score_bound`` keeps them in
    [-bound, bound] (None: unbounded), ``anneal_epochs`` lowers the number of kept blocks from all to k over that
    many epochs."""

    lam: float = 1e-3
    score_lr: float = 0.01
    score_init: float = 1.0
    score_normalize: bool = False
    score_bound: float | None = None
    anneal_epochs: float = 0.0


#: What a run asked to resume with no checkpoint to resume from is told.
NO_CHECKPOINT = "`run=TrainRun(resume=True)` needs the checkpoint path (`run=TrainRun(checkpoint=)`)"


@dataclass(frozen=True)
class TrainRun:
    """How a training run runs and what it leaves besides its answer: on ``device`` ("auto": CUDA where there is
    one), its checkpoint file (``checkpoint``; a search's default is its plan file with ``.ckpt.pt``), continued from
    it with ``resume``, left after ``stop_after_epochs`` epochs of this call (as a time-limited job would; resume
    later), and the trained weights of the original architecture saved to ``weights_out`` (a search)."""

    device: str = "auto"
    checkpoint: str | Path | None = None
    resume: bool = False
    stop_after_epochs: int | None = None
    weights_out: str | Path | None = None


@dataclass(frozen=True)
class DistillSettings:
    """Knowledge distillation from the original model while fine-tuning: the loss is (1 - ``alpha``) * CE +
    ``alpha`` * T^2 * KL(teacher || student) at temperature T = ``temperature``."""

    alpha: float = 0.5
    temperature: float = 2.0
