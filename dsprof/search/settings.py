"""The settings of training and of the importance proxies, as plain data that imports no PyTorch: the command line
shows their defaults in `--help` from here."""

from __future__ import annotations

from dataclasses import dataclass

from ..constants import DEFAULT_FINETUNE
from ..errors import UsageError

__all__ = ["ProxySettings", "TrainConfig"]


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
