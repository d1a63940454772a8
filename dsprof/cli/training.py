"""The options of the commands that train or score with training data (`search`, `importance`, `finetune`): the
data, the optimisation (`TrainConfig`'s defaults), the importance proxy (`ProxySettings`'), the threads, and what the
threads did."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from ..names import DEFAULT_PROXY, PROXY_NAMES
from ..search.settings import ProxySettings, TrainConfig

__all__ = ["ThreadUse", "add_proxy_args", "add_train_threads_arg", "add_training_args", "checkpoint_note",
           "proxy_settings", "train_config"]

_TRAIN, _PROXY = TrainConfig(), ProxySettings()


def add_training_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", default="digits", help="'digits' (scikit-learn's 8x8 digits, upsampled), 'shapes' (generated, nothing downloaded) or an ImageFolder root with train/ and val/")
    p.add_argument("--epochs", type=int, default=_TRAIN.epochs, help="training epochs")
    p.add_argument("--batch-size", type=int, default=_TRAIN.batch_size, help="images per step and process")
    p.add_argument("--lr", type=float, default=_TRAIN.lr, help="SGD learning rate at the top of the cosine schedule (per process batch)")
    p.add_argument("--momentum", type=float, default=_TRAIN.momentum, help="SGD momentum")
    p.add_argument("--weight-decay", type=float, default=_TRAIN.weight_decay, help="weight decay of conv/linear weights")
    p.add_argument("--warmup-epochs", type=float, default=_TRAIN.warmup_epochs, help="linear learning-rate warm-up, epochs")
    p.add_argument("--label-smoothing", type=float, default=_TRAIN.label_smoothing, help="label smoothing of the cross-entropy")
    p.add_argument("--seed", type=int, default=_TRAIN.seed, help="random seed (initialisation, shuffling, random plans)")
    p.add_argument("--max-batches", type=int, default=None, help="at most this many batches per epoch (smoke runs)")
    p.add_argument("--max-eval-batches", type=int, default=None, help="at most this many validation batches")
    p.add_argument("--workers", type=int, default=_TRAIN.workers, help="data-loading worker processes")
    add_train_threads_arg(p)
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda; under torchrun each process takes its LOCAL_RANK GPU")
    p.add_argument("--resume", action="store_true",
                   help="continue from the checkpoint of an interrupted run (finetune; search --method "
                        "differentiable; search --method importance --proxy finetune, its fine-tunes done)")


def add_train_threads_arg(p: argparse.ArgumentParser) -> None:
    """``--threads`` of the commands that train or score with training data (finetune, search, importance)."""
    p.add_argument("--threads", type=int, default=_TRAIN.threads,
                   help="CPU threads PyTorch computes with while training (each process; torch.set_num_threads), "
                        "as timing's default; give the core count to train faster on an idle machine")


def train_config(args: argparse.Namespace) -> TrainConfig:
    """The `TrainConfig` that `add_training_args` options give."""
    return TrainConfig(
        epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, momentum=args.momentum,
        weight_decay=args.weight_decay, warmup_epochs=args.warmup_epochs, label_smoothing=args.label_smoothing,
        seed=args.seed, max_batches=args.max_batches, max_eval_batches=args.max_eval_batches, workers=args.workers,
        threads=args.threads,
    )


def add_proxy_args(p: argparse.ArgumentParser, default: str | None) -> None:
    p.add_argument("--proxy", default=default, choices=PROXY_NAMES,
                   help=f"how each block's importance is scored (docs/search.md): zero-shot (BatchNorm recalibrated, no "
                   "training), logit-distance (the same without labels), short-finetune (--steps), output-distance (the "
                   "block's output, no labels), taylor (gate gradients), finetune "
                   f"(the full measurement: n + 1 fine-tunes of --epochs); default {DEFAULT_PROXY}, the cheapest that "
                   "kept the planner's plan in the top decile on both ground truths")
    p.add_argument("--batches", type=int, default=_PROXY.batches,
                   help="training batches the proxy reads (zero-shot, logit-distance: recalibration; output-distance, "
                   "taylor: scoring)")
    p.add_argument("--eval-batches", type=int, default=_PROXY.eval_batches,
                   help="validation batches at most (zero-shot, logit-distance, short-finetune)")
    p.add_argument("--steps", type=int, default=_PROXY.steps, help="short-finetune: SGD steps per block")


def proxy_settings(args: argparse.Namespace, **more) -> ProxySettings:
    """The proxy's settings from --batches, --eval-batches, --steps, --batch-size and --seed (and ``more``)."""
    return ProxySettings(batches=args.batches, eval_batches=args.eval_batches, steps=args.steps,
                         batch_size=args.batch_size, seed=args.seed, **more)


def checkpoint_note(path: Path) -> str:
    """What an interrupted training command kept in its checkpoint ``path``, and how to go on."""
    if path.exists():
        return f"interrupted: {path} holds the epochs finished; the same command with --resume continues"
    return f"interrupted before the first epoch ended; nothing saved ({path} not written)"


class ThreadUse:
    """What the threads of a training command did: CPU time of the whole process (every thread) over the wall time
    of the command's work, measured around it (`with ThreadUse(threads) as use: ...; print(use.line())`)."""

    def __init__(self, threads: int) -> None:
        self.threads, self.cpu_s, self.wall_s = threads, 0.0, 0.0

    def __enter__(self) -> "ThreadUse":
        self._start = (time.process_time(), time.perf_counter())
        return self

    def __exit__(self, *exc: object) -> None:
        self.cpu_s, self.wall_s = time.process_time() - self._start[0], time.perf_counter() - self._start[1]

    def line(self) -> str:
        """How many threads were asked for and how many were busy on average, with the machine's load."""
        busy = self.cpu_s / self.wall_s if self.wall_s > 0 else float("nan")
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        return (f"CPU threads: {self.threads} (--threads, torch.set_num_threads while it ran): {self.cpu_s:.1f} s of "
                f"CPU time in {self.wall_s:.1f} s, {busy:.2f} threads busy on average (loading data and building the "
                f"model run on one); load average {load:.1f} on {os.cpu_count()} logical cores")
