"""What search and fine-tuning share: processes (one, or many under torchrun), loaders, the learning
rate schedule, one training epoch, accuracy, and checkpoints that survive an interruption.

Distributed runs: start with ``torchrun --nproc-per-node N -m dsprof.cli ...`` (or ``dsprof`` via
``python -m torch.distributed.run``); each process sees RANK/WORLD_SIZE/LOCAL_RANK, joins a process group
(NCCL on CUDA, Gloo on the CPU), reads its shard of the data (DistributedSampler) and only rank 0
writes files. Automatic mixed precision (float16 with a gradient scaler) is used on CUDA.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler

from ..errors import UsageError
from ..io import atomic_torch_save, load_torch_payload

__all__ = [
    "CHECKPOINT_FORMAT",
    "TrainProcess",
    "cosine_lr",
    "evaluate",
    "load_training_checkpoint",
    "make_loader",
    "predictions",
    "save_training_checkpoint",
    "setup_runtime",
    "teardown_runtime",
    "train_epoch",
    "unwrap",
]

CHECKPOINT_FORMAT = "dsprof.training"


@dataclass
class TrainProcess:
    """This process: its rank among ``world_size`` processes and its device."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    threads_before: int | None = None  # torch's CPU thread count before `setup_runtime` set it, restored after

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def amp(self) -> bool:
        return self.device.type == "cuda"

    def log(self, message: str) -> None:
        if self.is_main:
            print(message, flush=True)


def setup_runtime(device: str = "auto", threads: int | None = None) -> TrainProcess:
    """The process group (when started by torchrun) and the device: ``auto`` picks CUDA when present.
    ``threads``: the CPU threads PyTorch computes with in this process until `teardown_runtime` (None: as
    it is); training and search default to 1 (`TrainConfig.threads`), as timing does."""
    if threads is not None and threads < 1:
        raise UsageError(f"`config=TrainConfig(threads=)` is the number of CPU threads to train with, at least 1; "
                         f"got {threads}")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", local_rank)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    before = None
    if threads is not None:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
    return TrainProcess(rank, world, local_rank, dev, before)


def teardown_runtime(rt: TrainProcess) -> None:
    """Leave the process group (after a distributed run) and give torch back its thread count."""
    if rt.threads_before is not None:
        torch.set_num_threads(rt.threads_before)
    if rt.distributed and dist.is_initialized():
        dist.destroy_process_group()


class _Shard(Sampler[int]):
    """Every ``world``-th index from ``rank``, unpadded: each example is evaluated exactly once."""

    def __init__(self, n: int, rank: int, world: int) -> None:
        self.indices = list(range(rank, n, world))

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)


def make_loader(
    dataset: Dataset, batch_size: int, rt: TrainProcess, *, train: bool, seed: int = 0, workers: int = 0
) -> DataLoader:
    """A loader of this process's shard: shuffled and padded to equal length for training
    (`DistributedSampler`), every example once for evaluation. ``batch_size`` is per process."""
    if train:
        sampler: Sampler[int] = DistributedSampler(
            dataset, num_replicas=rt.world_size, rank=rt.rank, shuffle=True, seed=seed, drop_last=False
        )
    else:
        sampler = _Shard(len(dataset), rt.rank, rt.world_size)
    return DataLoader(
        dataset, batch_size=batch_size, sampler=sampler, num_workers=workers, drop_last=False,
        pin_memory=rt.device.type == "cuda", persistent_workers=workers > 0,
    )


def cosine_lr(step: int, total_steps: int, base_lr: float, warmup_steps: int = 0, min_lr: float = 0.0) -> float:
    """Learning rate at ``step`` (0-based) of a linear warm-up then cosine decay to ``min_lr``."""
    if warmup_steps and step < warmup_steps:
        return base_lr * (step + 1) / warmup_steps
    span = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / span)
    return min_lr + 0.5 * (base_lr - min_lr) * (1 + math.cos(math.pi * progress))


def train_epoch(
    model: nn.Module,
    loader: DataLoader,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, dict[str, float]]],
    rt: TrainProcess,
    *,
    lr_at: Callable[[int], float],
    step: int,
    scaler: torch.amp.GradScaler | None = None,
    max_batches: int | None = None,
    after_step: Callable[[], None] | None = None,
) -> tuple[int, dict[str, float]]:
    """One pass over ``loader``: ``loss_fn(logits, targets, images)`` -> (loss, parts to log).

    The learning rate of every parameter group is ``lr_at(step) * group["lr_scale"]``. Returns the
    step count after the epoch and the mean of each logged part over the batches (this process).
    """
    model.train()
    sums: dict[str, float] = {}
    batches = 0
    for i, (images, targets) in enumerate(loader):
        if max_batches is not None and i >= max_batches:
            break
        images = images.to(rt.device, non_blocking=True)
        targets = targets.to(rt.device, non_blocking=True)
        lr = lr_at(step)
        for group in optimizer.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)
        with torch.autocast(rt.device.type, dtype=torch.float16, enabled=rt.amp):
            logits = model(images)
            loss, parts = loss_fn(logits.float(), targets, images)
        optimizer.zero_grad(set_to_none=True)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        if after_step is not None:
            after_step()
        step += 1
        batches += 1
        for k, v in parts.items():
            sums[k] = sums.get(k, 0.0) + float(v)
    return step, {k: v / max(1, batches) for k, v in sums.items()}


@torch.no_grad()
def evaluate(model: nn.Module, loader: DataLoader, rt: TrainProcess, *, max_batches: int | None = None) -> float:
    """Top-1 accuracy (fraction) over the whole validation set, summed over all processes."""
    model.eval()
    correct = torch.zeros(2, dtype=torch.float64, device=rt.device)
    for i, (images, targets) in enumerate(loader):
        if max_batches is not None and i >= max_batches:
            break
        images, targets = images.to(rt.device), targets.to(rt.device)
        with torch.autocast(rt.device.type, dtype=torch.float16, enabled=rt.amp):
            logits = model(images)
        correct[0] += (logits.argmax(1) == targets).sum()
        correct[1] += targets.numel()
    if rt.distributed:
        dist.all_reduce(correct)
    return float(correct[0] / correct[1]) if correct[1] else float("nan")


def predictions(model: nn.Module, loader: DataLoader, device: torch.device | str = "cpu") -> torch.Tensor:
    """The logits of every example of ``loader`` (one process, float32), in order."""
    model.eval()
    outs = []
    with torch.no_grad():
        for images, _ in loader:
            outs.append(model(images.to(device)).float().cpu())
    return torch.cat(outs)


def save_training_checkpoint(path: str | Path, payload: dict[str, Any]) -> Path:
    """``torch.save`` of plain values and tensors to ``path``, atomically (temp file, then rename)."""
    return atomic_torch_save(path, {"format": CHECKPOINT_FORMAT, **payload})


def load_training_checkpoint(path: str | Path) -> dict[str, Any]:
    """A checkpoint written by `save_training_checkpoint` (``weights_only=True``: no code runs)."""
    return load_torch_payload(path, CHECKPOINT_FORMAT, "dsprof training checkpoint",
                              "nothing to resume (drop `run=TrainRun(resume=True)` to start afresh)")


def unwrap(model: nn.Module) -> nn.Module:
    """The module inside a DistributedDataParallel wrapper (or the model itself)."""
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model
