"""The epoch loop that every training in `dsprof.search` shares (the differentiable search, fine-tuning).

`prepare_loop` sets up what comes before the first epoch (AMP scaler, resumed epoch, step and history,
the DDP-wrapped net, loaders, step counts); `run_epochs` trains with the cosine schedule, evaluates,
records, logs and writes the checkpoint every epoch; `EpochHooks` is what a caller does differently.
The methods that choose a plan live in modules of their own (`registry` names them), fine-tuning in
`finetuning`.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple

import torch
from torch import nn

from ..errors import PlanError, UsageError
from ..records.plan import Plan, check_plan
from .settings import NO_CHECKPOINT, TrainConfig
from .training import (
    TrainProcess,
    cosine_lr,
    evaluate,
    load_training_checkpoint,
    make_loader,
    save_training_checkpoint,
    train_epoch,
)

__all__ = ["EpochHooks", "Loop", "TrainConfig", "make_optimizer", "prepare_loop", "quietly", "run_epochs", "seed_all"]


def seed_all(seed: int) -> None:
    """Seed torch's generator before a stage (model build, data order), so that reruns repeat."""
    torch.manual_seed(seed)


def make_optimizer(model: nn.Module, config: TrainConfig, scores: nn.Parameter | None = None, score_lr: float = 0.0):
    """SGD with momentum: weight decay on the conv/linear weights only; the gate ``scores`` (search) in
    their own group, at ``score_lr`` and without decay."""
    decay, no_decay = [], []
    for p in model.parameters():
        if scores is not None and p is scores or not p.requires_grad:
            continue
        (decay if p.ndim > 1 else no_decay).append(p)
    groups = [
        {"params": decay, "weight_decay": config.weight_decay, "lr_scale": 1.0},
        {"params": no_decay, "weight_decay": 0.0, "lr_scale": 1.0},
    ]
    if scores is not None:
        groups.append({"params": [scores], "weight_decay": 0.0, "lr_scale": score_lr / config.lr})
    return torch.optim.SGD(groups, lr=config.lr, momentum=config.momentum)


def _wrap(model: nn.Module, rt: TrainProcess) -> nn.Module:
    model.to(rt.device)
    if rt.distributed:
        ids = [rt.device.index] if rt.device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=ids)
    return model


def _resume_state(path: Path | None, resume: bool, kind: str, model: str, options: dict[str, Any]) -> dict[str, Any] | None:
    """The checkpoint ``path`` to resume from (None without ``resume``), refused when it is of another kind or
    holds a plan for another model than ``model`` with ``options`` (`check_plan`)."""
    if not resume:
        return None
    if path is None:
        raise UsageError(NO_CHECKPOINT)
    state = load_training_checkpoint(path)
    if state.get("kind") != kind:
        raise UsageError(f"{path} is a {state.get('kind')!r} checkpoint, not a {kind!r} one")
    try:
        if state.get("plan"):
            check_plan(Plan.from_json(state["plan"]), model, options)
        elif state.get("model") not in (None, model):
            raise UsageError(f"it trained {state['model']!r}, not {model!r}")
    except (UsageError, PlanError) as exc:
        raise UsageError(f"cannot resume {path}: {exc}; give the model and options it was started with, "
                         "or drop `run=TrainRun(resume=True)` to start over") from None
    return state


def _restore(model: nn.Module, optimizer, scaler, state: dict[str, Any]) -> tuple[int, int, list]:
    model.load_state_dict(state["state_dict"])
    optimizer.load_state_dict(state["optimizer"])
    if scaler is not None and state.get("scaler"):
        scaler.load_state_dict(state["scaler"])
    torch.set_rng_state(state["rng"])
    return int(state["epoch"]), int(state["step"]), list(json.loads(state["history"]))


class Loop(NamedTuple):
    """The state of one training run's epochs (`prepare_loop`)."""

    scaler: Any
    start: int  # the first epoch to run (0-based)
    step: int
    history: list
    net: nn.Module
    train_loader: Any
    val_loader: Any
    per_epoch: int
    total: int  # steps over all epochs
    stop: int  # run epochs start..stop-1
    ckpt: Path | None  # written every epoch (rank 0), read by resume
    kind: str  # the checkpoint's kind: what resume accepts


def prepare_loop(module: nn.Module, optimizer, ckpt: Path | None, resume: bool, kind: str, rt: TrainProcess, splits,
                 config: TrainConfig, stop_after_epochs: int | None, model: str, options: dict[str, Any]) -> Loop:
    """What a training run needs before its first epoch: the AMP scaler, the epoch, step and history
    resumed from ``ckpt`` (a ``kind`` checkpoint), the (DDP-wrapped) net, the loaders, the step counts
    and the epoch to stop before (``stop_after_epochs`` of this call at most). A checkpoint resumed must be of
    ``model`` with ``options``."""
    scaler = torch.amp.GradScaler("cuda") if rt.amp else None
    state = _resume_state(ckpt, resume, kind, model, options)
    start, step, history = 0, 0, []
    if state is not None:
        module.to(rt.device)
        try:
            start, step, history = _restore(module, optimizer, scaler, state)
        except RuntimeError as exc:  # its weights are another model's: e.g. another plan's linearised blocks
            started = ""
            if state.get("plan"):
                keep = "".join(map(str, Plan.from_json(state["plan"]).keep))
                started = f" (it was started with the plan that keeps {keep})"
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UsageError(f"cannot resume {ckpt}: its weights do not fit this run's model ({first}){started}; give "
                             "the plan it was started with, or drop `run=TrainRun(resume=True)` to start over") from None
        rt.log(f"resumed {ckpt} after epoch {start}")
    net = _wrap(module, rt)
    train_loader = make_loader(splits.train, config.batch_size, rt, train=True, seed=config.seed, workers=config.workers)
    val_loader = make_loader(splits.val, config.batch_size, rt, train=False, workers=config.workers)
    per_epoch = min(len(train_loader), config.max_batches or len(train_loader))
    stop = config.epochs if stop_after_epochs is None else min(config.epochs, start + stop_after_epochs)
    return Loop(scaler, start, step, history, net, train_loader, val_loader, per_epoch, per_epoch * config.epochs,
                stop, ckpt, kind)


def _loop_state(loop: Loop, optimizer, epoch: int, step: int) -> dict[str, Any]:
    """The checkpoint entries that `_restore` resumes from (besides ``state_dict``), after ``epoch``."""
    return {
        "kind": loop.kind, "epoch": epoch, "step": step, "optimizer": optimizer.state_dict(),
        "scaler": loop.scaler.state_dict() if loop.scaler else None, "rng": torch.get_rng_state(),
        "history": json.dumps(loop.history),
    }


@dataclass
class EpochHooks:
    """What a training run does differently in the epoch loop it shares (`run_epochs`).

    ``record(epoch, accuracy, loss parts)``: the history fields that follow the loss parts, and the lines
    to log (``epoch`` counts from 1); ``save(epoch, accuracy)``: the checkpoint's own entries (its
    ``state_dict`` and what else it keeps; the loop adds what resume needs), after writing whatever else
    the epoch leaves on disk (rank 0 only). The optional ones run before each epoch (its 0-based index),
    before each step's forward pass (the step), after each optimiser step, and between an epoch's training
    and its evaluation.
    """

    record: Callable[[int, float, dict[str, float]], tuple[dict[str, Any], list[str]]]
    save: Callable[[int, float], dict[str, Any]]
    before_epoch: Callable[[int], None] | None = None
    before_step: Callable[[int], None] | None = None
    after_step: Callable[[], None] | None = None
    before_eval: Callable[[], None] | None = None


def run_epochs(loop: Loop, optimizer, loss_fn, hooks: EpochHooks, rt: TrainProcess, config: TrainConfig) -> float:
    """Epochs ``loop.start`` to ``loop.stop``: train (cosine learning rate over all ``config.epochs``),
    evaluate, append to ``loop.history``, log, save (the checkpoint to ``loop.ckpt``). The last epoch's
    validation accuracy (NaN: none ran)."""
    warmup_steps = int(config.warmup_epochs * loop.per_epoch)

    def lr_at(s: int) -> float:
        if hooks.before_step is not None:
            hooks.before_step(s)
        return cosine_lr(s, loop.total, config.lr, warmup_steps)

    step, acc = loop.step, float("nan")
    for epoch in range(loop.start, loop.stop):
        loop.train_loader.sampler.set_epoch(epoch)
        if hooks.before_epoch is not None:
            hooks.before_epoch(epoch)
        t0 = time.perf_counter()
        step, parts = train_epoch(
            loop.net, loop.train_loader, optimizer, loss_fn, rt, lr_at=lr_at, step=step, scaler=loop.scaler,
            max_batches=config.max_batches, after_step=hooks.after_step,
        )
        if hooks.before_eval is not None:
            hooks.before_eval()
        acc = evaluate(loop.net, loop.val_loader, rt, max_batches=config.max_eval_batches)
        fields, lines = hooks.record(epoch + 1, acc, parts)
        loop.history.append(
            {"epoch": epoch + 1, "val_accuracy": acc, **parts, **fields, "seconds": round(time.perf_counter() - t0, 3)}
        )
        for line in lines:
            rt.log(line)
        if rt.is_main:
            entries = hooks.save(epoch + 1, acc)
            if loop.ckpt is not None:
                save_training_checkpoint(loop.ckpt, {**entries, **_loop_state(loop, optimizer, epoch + 1, step)})
    return acc


def quietly(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` with its per-epoch lines swallowed (for callers that print one line per run)."""
    with contextlib.redirect_stdout(io.StringIO()):
        return fn()
