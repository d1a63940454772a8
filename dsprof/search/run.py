"""`dsprof search` and `dsprof finetune` as Python functions.

search:   gate the blocks' activations, train weights and gate scores jointly with the latency-weighted
          decay (paper Sec. 4.2), write the plan (keep list + scores + ranking); or measure each block's
          importance (`importance`, issue #13); or draw a random plan with the same k (the random-search
          baseline). Each epoch prints the ranking and the scores' spread, and warns when they run away.
finetune: train the linearised model of a plan (padding in front, free ReLU6 after each merged block:
          what `dsprof merge` merges exactly), optionally distilled from the original model; or the
          original model (no plan); or the layer-pruned model (baseline). Checkpoint every epoch,
          ``resume``; the checkpoint is what `dsprof merge --checkpoint` takes.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import PlanError, UsageError
from ..io import atomic_write_text
from ..merge import Plan, linearize_model, merge_model
from ..merge.plan import check_plan
from ..models import find_blocks
from .baselines import layer_prune, random_keep
from .build import build_model, default_training_resolution
from .data import load_data
from .expand import expand_model, set_linear, shrink_model
from .gates import gate_model, resolve_k, ungate
from .objective import block_weights, latency_penalty
from .training import (
    Runtime,
    cosine_lr,
    evaluate,
    load_training_checkpoint,
    make_loader,
    predictions,
    save_training_checkpoint,
    setup_runtime,
    teardown_runtime,
    train_epoch,
)

if TYPE_CHECKING:
    from ..lut import LUT

__all__ = ["FinetuneResult", "SearchResult", "TrainConfig", "finetune", "search"]


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


@dataclass
class SearchResult:
    """The plan a search wrote and what led to it."""

    plan: Plan
    scores: list[float]
    ranking: list[int]
    history: list[dict[str, Any]] = field(default_factory=list)
    out: Path | None = None


@dataclass
class FinetuneResult:
    """Accuracy of the fine-tuned model (and of its merged form, when checked)."""

    accuracy: float
    history: list[dict[str, Any]]
    checkpoint: Path | None
    model: nn.Module
    merged_accuracy: float | None = None
    merged_max_abs_diff: float | None = None
    merged_out: Path | None = None
    notes: list[str] = field(default_factory=list)


def _seed_all(seed: int) -> None:
    torch.manual_seed(seed)


def _optimizer(model: nn.Module, config: TrainConfig, scores: nn.Parameter | None = None, score_lr: float = 0.0):
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


def _wrap(model: nn.Module, rt: Runtime) -> nn.Module:
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
        raise UsageError("--resume needs the checkpoint path (--checkpoint / --out)")
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
                         "or drop --resume to start over") from None
    return state


def _restore(model: nn.Module, optimizer, scaler, state: dict[str, Any]) -> tuple[int, int, list]:
    model.load_state_dict(state["state_dict"])
    optimizer.load_state_dict(state["optimizer"])
    if scaler is not None and state.get("scaler"):
        scaler.load_state_dict(state["scaler"])
    torch.set_rng_state(state["rng"])
    return int(state["epoch"]), int(state["step"]), list(json.loads(state["history"]))


class _Loop(NamedTuple):
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


def _prepare_loop(module: nn.Module, optimizer, ckpt: Path | None, resume: bool, kind: str, rt: Runtime, splits,
                  config: TrainConfig, stop_after_epochs: int | None, model: str, options: dict[str, Any]) -> _Loop:
    """What search and finetune share before their first epoch: the AMP scaler, the epoch, step and
    history resumed from ``ckpt``, the (DDP-wrapped) net, the loaders, the step counts and the epoch
    to stop before (``stop_after_epochs`` of this call at most)."""
    scaler = torch.amp.GradScaler("cuda") if rt.amp else None
    state = _resume_state(ckpt, resume, kind, model, options)
    start, step, history = 0, 0, []
    if state is not None:
        module.to(rt.device)
        start, step, history = _restore(module, optimizer, scaler, state)
        rt.log(f"resumed {ckpt} after epoch {start}")
    net = _wrap(module, rt)
    train_loader = make_loader(splits.train, config.batch_size, rt, train=True, seed=config.seed, workers=config.workers)
    val_loader = make_loader(splits.val, config.batch_size, rt, train=False, workers=config.workers)
    per_epoch = min(len(train_loader), config.max_batches or len(train_loader))
    stop = config.epochs if stop_after_epochs is None else min(config.epochs, start + stop_after_epochs)
    return _Loop(scaler, start, step, history, net, train_loader, val_loader, per_epoch, per_epoch * config.epochs, stop)


def _loop_state(loop: _Loop, optimizer, epoch: int, step: int) -> dict[str, Any]:
    """The checkpoint entries that `_restore` resumes from (besides ``state_dict``), after ``epoch``."""
    return {
        "epoch": epoch, "step": step, "optimizer": optimizer.state_dict(),
        "scaler": loop.scaler.state_dict() if loop.scaler else None, "rng": torch.get_rng_state(),
        "history": json.dumps(loop.history),
    }


@dataclass
class _EpochHooks:
    """What search and finetune do differently in the epoch loop they share (`_run_epochs`).

    ``record(epoch, accuracy, loss parts)``: the history fields that follow the loss parts, and the lines
    to log (``epoch`` counts from 1); ``save(epoch, step, accuracy)``: what the epoch leaves on disk (rank
    0 only). The optional ones run before each epoch (its 0-based index), before each step's forward pass
    (the step), after each optimiser step, and between an epoch's training and its evaluation.
    """

    record: Callable[[int, float, dict[str, float]], tuple[dict[str, Any], list[str]]]
    save: Callable[[int, int, float], None]
    before_epoch: Callable[[int], None] | None = None
    before_step: Callable[[int], None] | None = None
    after_step: Callable[[], None] | None = None
    before_eval: Callable[[], None] | None = None


def _run_epochs(loop: _Loop, optimizer, loss_fn, hooks: _EpochHooks, rt: Runtime, config: TrainConfig) -> float:
    """Epochs ``loop.start`` to ``loop.stop``: train (cosine learning rate over all ``config.epochs``),
    evaluate, append to ``loop.history``, log, save. The last epoch's validation accuracy (NaN: none ran)."""
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
            hooks.save(epoch + 1, step, acc)
    return acc


def search(
    model: str = "mobilenet_v2",
    *,
    keep: int | float,
    data: str | Path = "digits",
    options: dict[str, Any] | None = None,
    resolution: int | None = None,
    weights: bool | str | Path | None = None,
    method: str = "differentiable",
    lut: LUT | str | Path | None = None,
    device_key: str | None = None,
    lut_resolution: int | None = None,
    lam: float = 1e-3,
    score_lr: float = 0.01,
    score_init: float = 1.0,
    score_normalize: bool = False,
    score_bound: float | None = None,
    anneal_epochs: float = 0.0,
    config: TrainConfig = TrainConfig(),
    out: str | Path | None = None,
    checkpoint: str | Path | None = None,
    resume: bool = False,
    device: str = "auto",
    name: str | None = None,
    weights_out: str | Path | None = None,
    stop_after_epochs: int | None = None,
) -> SearchResult:
    """Search which blocks keep their activations (``keep``: count or fraction) and write the plan to ``out``.

    ``method="differentiable"`` trains weights and gate scores on ``data`` for ``config.epochs`` with
    task loss + ``lam`` * sum_b w_b |m_b| (w_b: LUT latency saving for ``device_key``, measured at
    ``lut_resolution``, or MAC saving); ``score_normalize`` divides the scores' straight-through gradient
    by its largest entry, ``score_bound`` keeps the scores in [-bound, bound], ``anneal_epochs`` lowers
    the number of kept blocks from all to k over that many epochs (the weights warm up with every
    activation on while the scores already learn). ``method="importance"`` measures each block's
    importance (the accuracy lost when it alone is linearised and fine-tuned ``config.epochs``) and keeps
    the k blocks of highest importance - ``lam`` * w_b (`dsprof.search.importance`).
    ``method="random"`` draws k blocks with seed ``config.seed``.
    ``resolution``: None for `default_training_resolution` (32 px on 'digits' and 'shapes').
    The plan is rewritten after every epoch, with a checkpoint (``checkpoint``, default ``OUT.ckpt.pt``)
    that ``resume`` continues from; ``stop_after_epochs``: leave after that many epochs of this call.
    ``weights_out``: also save the searched weights (original architecture) to fine-tune from.
    """
    options = dict(options or {})
    if resolution is None:
        resolution = default_training_resolution(model, data)
    if method == "random":
        return _random_search(model, keep, options, resolution, config.seed, name, out)
    if method == "importance":
        return _importance_search(model, keep, data, options, resolution, weights, lut, device_key, lut_resolution,
                                  lam, config, out, device, name)
    if method != "differentiable":
        raise UsageError(f"unknown search method {method!r}; choose 'differentiable', 'importance' or 'random'")

    rt = setup_runtime(device)
    try:
        _seed_all(config.seed)
        splits = load_data(data, resolution)
        base = build_model(model, options=options, resolution=resolution, num_classes=splits.num_classes, weights=weights)
        _search_k(keep, len(find_blocks(base, (resolution, resolution))))
        gated, bw = _gated_model(base, keep, resolution, lut, device_key, lut_resolution, score_init, score_normalize,
                                 score_bound)
        optimizer = _optimizer(gated, config, gated.gates.scores, score_lr)
        ckpt = Path(checkpoint) if checkpoint is not None else (Path(f"{out}.ckpt.pt") if out is not None else None)
        loop = _prepare_loop(gated, optimizer, ckpt, resume, "search", rt, splits, config, stop_after_epochs, model,
                             options)

        def plan_now() -> Plan:
            return _search_plan(model, options, gated, bw, lam, name, loop.history)

        def save(epoch: int, step: int, _acc: float) -> None:
            plan = plan_now()
            if out is not None:
                atomic_write_text(out, plan.to_json())
            if ckpt is not None:
                save_training_checkpoint(ckpt, {"kind": "search", **_loop_state(loop, optimizer, epoch, step),
                                                "state_dict": gated.state_dict(), "plan": plan.to_json()})

        loss_fn = _search_loss(gated.gates.scores, bw.weights.to(rt.device), lam, config)
        _run_epochs(loop, optimizer, loss_fn, _search_hooks(gated.gates, loop, config, anneal_epochs, score_init, save),
                    rt, config)
        return _save_search(plan_now(), gated, loop.history, out, weights_out, rt)
    finally:
        teardown_runtime(rt)


def _search_k(keep: int | float, n_blocks: int) -> int:
    """The blocks a search keeps (`resolve_k`), refused where nothing is left to choose (none or all of them)."""
    k = resolve_k(keep, n_blocks)
    if k in (0, n_blocks):
        every = "no block keeps" if k == 0 else "every block keeps"
        raise UsageError(f"--keep {keep} of {n_blocks} blocks: {every} its activations, so there is nothing to "
                         f"choose; give --keep 1..{n_blocks - 1}")
    return k


def _random_search(model: str, keep, options, resolution: int, seed: int, name: str | None, out) -> SearchResult:
    """`search(method="random")`: k blocks drawn with ``seed`` (the random-search baseline)."""
    base = build_model(model, options=options, resolution=resolution, num_classes=10)
    n = len(find_blocks(base, (resolution, resolution)))
    _search_k(keep, n)
    plan = Plan(
        model, random_keep(n, keep, seed), options, name=name or f"random-k{resolve_k(keep, n)}-s{seed}",
        source=f"dsprof search --method random (seed {seed})",
        search={"method": "random", "seed": seed, "k": resolve_k(keep, n)},
    )
    if out is not None:
        atomic_write_text(out, plan.to_json())
    return SearchResult(plan, [], [], [], Path(out) if out is not None else None)


def _gated_model(base: nn.Module, keep, resolution: int, lut, device_key, lut_resolution, score_init: float,
                 score_normalize: bool, score_bound: float | None):
    """The differentiable search's model (``base`` with its blocks' activations gated) and the decay's
    per-block weights (the LUT's latency savings, measured at ``lut_resolution``, or MAC savings)."""
    size = (resolution, resolution)
    bw = block_weights(base, lut=lut, device_key=device_key, input_size=(lut_resolution,) * 2 if lut_resolution else size)
    gated = gate_model(base, keep, input_size=size, init=score_init)
    gated.gates.normalize, gated.gates.bound = score_normalize, score_bound
    return gated, bw


def _search_loss(scores: nn.Parameter, block_w: torch.Tensor, lam: float, config: TrainConfig):
    """Cross-entropy + ``lam`` * the latency-weighted L1 decay of the gate scores (paper Sec. 4.2)."""

    def loss_fn(logits, targets, _images):
        task = F.cross_entropy(logits, targets, label_smoothing=config.label_smoothing)
        penalty = latency_penalty(scores, block_w)
        return task + lam * penalty, {"task_loss": task.item(), "penalty": penalty.item()}

    return loss_fn


def _search_hooks(gates, loop: _Loop, config: TrainConfig, anneal_epochs: float, score_init: float, save) -> _EpochHooks:
    """The differentiable search's part of the epoch loop: the annealed k of each step, the scores'
    bound after it, the target k for evaluation, the ranking and spread in the history and the log."""
    n_blocks, k_final = len(gates.names), gates.k
    anneal_steps = int(round(anneal_epochs * loop.per_epoch))

    def before_step(s: int) -> None:
        gates.k = annealed_k(s, anneal_steps, n_blocks, k_final)  # the k of this step's forward pass
        if loop.scaler is not None and gates.normalize:
            gates.grad_scale = float(loop.scaler.get_scale())  # the normalised gradient survives unscaling

    def before_eval() -> None:
        gates.k = k_final  # evaluated, planned and saved with the target k

    def record(epoch: int, acc: float, parts: dict[str, float]):
        spread = gates.spread()
        lines = [f"search epoch {epoch}/{config.epochs}: val acc {acc:.4f} task {parts.get('task_loss', 0):.4f} "
                 f"penalty {parts.get('penalty', 0):.4f} keep {''.join(map(str, gates.keep()))} "
                 f"ranking {' '.join(map(str, gates.ranking()))} score spread {spread:.3g}"]
        if spread > runaway_spread(score_init):
            lines.append(f"warning: the gate scores ran away (spread {spread:.3g} > {runaway_spread(score_init):.3g}: "
                         f"{', '.join(f'{v:.3g}' for v in gates.scores.tolist())}); their ranking reflects the blow-up, "
                         "not importance: use --score-normalize and --score-bound, or lower --score-lr")
        return {"keep": list(gates.keep()), "ranking": gates.ranking(), "score_spread": spread}, lines

    return _EpochHooks(record, save, before_step=before_step, after_step=gates.clamp_, before_eval=before_eval)


def _save_search(plan: Plan, gated, history: list, out, weights_out, rt: Runtime) -> SearchResult:
    """Write the searched plan to ``out`` and the searched weights (original architecture) to
    ``weights_out`` (rank 0); the search's result."""
    if rt.is_main and out is not None:
        atomic_write_text(out, plan.to_json())
    if rt.is_main and weights_out is not None:
        save_training_checkpoint(weights_out, {"kind": "search-weights", "state_dict": ungate(gated.cpu()).state_dict()})
        gated.to(rt.device)
    g = gated.gates
    return SearchResult(plan, [float(v) for v in g.scores.detach().cpu()], g.ranking(), history,
                        Path(out) if out is not None else None)


def annealed_k(step: int, anneal_steps: int, n_blocks: int, k: int) -> int:
    """The number of kept blocks at ``step``: all ``n_blocks`` at step 0, falling linearly to ``k`` at
    ``anneal_steps`` (and ``k`` from then on, or throughout when ``anneal_steps`` is 0)."""
    if anneal_steps <= 0 or step >= anneal_steps:
        return k
    return int(round(n_blocks - (n_blocks - k) * step / anneal_steps))


def runaway_spread(score_init: float) -> float:
    """The score spread (max - min) above which the search warns that the scores ran away."""
    return 10.0 * max(1.0, abs(score_init))


def _importance_search(model, keep, data, options, resolution, weights, lut, device_key, lut_resolution, lam, config,
                       out, device, name) -> SearchResult:
    """`search(method="importance")`: measured single-block importance, top k of importance - lam * w."""
    from .importance import importance_keep, measure_importance

    rt = setup_runtime(device)
    try:
        _seed_all(config.seed)
        base = build_model(model, options=options, resolution=resolution, num_classes=10)
        size = (resolution, resolution)
        n = len(find_blocks(base, size))
        k = _search_k(keep, n)
        bw = block_weights(base, lut=lut, device_key=device_key, input_size=(lut_resolution,) * 2 if lut_resolution else size)
        imp = measure_importance(model, options=options, weights=weights, data=data, resolution=resolution,
                                 config=config, seeds=(config.seed,), device=str(rt.device), log=rt.log)
        w = bw.weights.tolist()
        keep_list = importance_keep(imp.drops, k, w, lam)
        merit = [d - lam * wi for d, wi in zip(imp.drops, w)]
        ranking = sorted(range(n), key=lambda i: (-merit[i], i))
        info = {"method": "importance", "k": k, "lambda": lam, "scores": [round(v, 6) for v in merit],
                "ranking": ranking, "importance": imp.to_dict(), "weights": bw.to_dict(),
                "finetune_epochs": config.epochs, "seed": config.seed}
        plan = Plan(model, keep_list, options, name=name or f"importance-k{k}",
                    source=f"dsprof search --method importance ({bw.source})", search=info)
        rt.log(f"importance search: keep {''.join(map(str, keep_list))} ranking {' '.join(map(str, ranking))}")
        if rt.is_main and out is not None:
            atomic_write_text(out, plan.to_json())
        return SearchResult(plan, merit, ranking, [], Path(out) if out is not None else None)
    finally:
        teardown_runtime(rt)


def _search_plan(model: str, options, gated, bw, lam: float, name: str | None, history) -> Plan:
    g = gated.gates
    info = {
        "method": "differentiable",
        "k": g.k,
        "lambda": lam,
        "score_normalize": g.normalize,
        "score_bound": g.bound,
        "scores": [round(float(v), 6) for v in g.scores.detach().cpu()],
        "ranking": g.ranking(),
        "blocks": list(g.names),
        "weights": bw.to_dict(),
        "epochs": len(history),
        "val_accuracy": history[-1]["val_accuracy"] if history else None,
    }
    return Plan(model, g.keep(), options, name=name or f"search-k{g.k}", source=f"dsprof search ({bw.source})", search=info)


def _distill_loss(student: torch.Tensor, teacher: torch.Tensor, temperature: float) -> torch.Tensor:
    t = temperature
    return F.kl_div(F.log_softmax(student / t, 1), F.softmax(teacher / t, 1), reduction="batchmean") * t * t


def finetune(
    plan: Plan | str | Path | None = None,
    *,
    model: str | None = None,
    options: dict[str, Any] | None = None,
    data: str | Path = "digits",
    resolution: int | None = None,
    weights: bool | str | Path | None = None,
    config: TrainConfig = TrainConfig(),
    distill: bool = False,
    distill_alpha: float = 0.5,
    temperature: float = 2.0,
    layer_pruning: bool = False,
    out: str | Path | None = None,
    resume: bool = False,
    merged_out: str | Path | None = None,
    check_merge: bool = True,
    device: str = "auto",
    stop_after_epochs: int | None = None,
    ds_plus: bool = False,
    linear_epochs: int | None = None,
) -> FinetuneResult:
    """Fine-tune the linearised model of ``plan`` (or train the original ``model`` when no plan) on ``data``.

    Starting weights: ``weights`` (``"pretrained"`` or a file) for the original model. ``distill``: the
    loss is (1 - alpha) * CE + alpha * T^2 * KL(teacher || student) with the original model as teacher.
    ``layer_pruning``: drop the plan's linearised blocks instead (baseline). ``out`` is the checkpoint,
    written every epoch (rank 0) and read by ``resume``; its ``state_dict`` is what `dsprof merge
    --checkpoint` takes. With ``check_merge`` the merged model's accuracy and max |logit difference| to
    the fine-tuned model are measured (``merged_out``: also save it). ``stop_after_epochs``: leave after
    that many epochs of this call, checkpoint written, as a time-limited job would (resume later).
    ``ds_plus`` (DepthShrinker+, no plan): train `expand_model(model)`, its expanded blocks linear for the
    last ``linear_epochs`` (default a quarter), then shrink it back to the original architecture
    (``merged_out``: its state dict, a ``--weights`` file); the check compares shrunk and trained outputs.
    ``resolution``: None for `default_training_resolution` (32 px on 'digits' and 'shapes').
    """
    plan, model_name, options = _what_to_train(plan, model, options)
    if resolution is None:
        resolution = default_training_resolution(model_name, data)
    rt = setup_runtime(device)
    try:
        _seed_all(config.seed)
        splits = load_data(data, resolution)
        original = build_model(model_name, options=options, resolution=resolution, num_classes=splits.num_classes, weights=weights)
        student, kind, notes = _student(original, plan, resolution, ds_plus, layer_pruning)
        before_epoch = _linear_phase(student, config, linear_epochs) if ds_plus else None
        loss_fn = _finetune_loss(_teacher(original, rt) if distill else None, distill_alpha, temperature, config, rt)
        optimizer = _optimizer(student, config)
        ckpt = Path(out) if out is not None else None
        loop = _prepare_loop(student, optimizer, ckpt, resume, kind, rt, splits, config, stop_after_epochs, model_name,
                             options)
        what = {"kind": kind, "model": model_name, "options": json.dumps(options), "num_classes": splits.num_classes,
                "resolution": resolution, "plan": plan.to_json() if plan is not None else None, "epochs": config.epochs}

        def save(epoch: int, step: int, acc: float) -> None:
            if ckpt is not None:
                save_training_checkpoint(ckpt, {
                    **what, **_loop_state(loop, optimizer, epoch, step), "accuracy": acc,
                    "state_dict": {k: v.detach().cpu() for k, v in student.state_dict().items()},
                })

        def record(epoch: int, acc: float, parts: dict[str, float]):
            return {}, [f"{kind} epoch {epoch}/{config.epochs}: val acc {acc:.4f} loss {parts.get('loss', 0):.4f}"]

        acc = _run_epochs(loop, optimizer, loss_fn, _EpochHooks(record, save, before_epoch=before_epoch), rt, config)
        if loop.start >= loop.stop:  # resumed a finished run: report its accuracy
            if ds_plus:
                set_linear(student, True)
            acc = evaluate(loop.net, loop.val_loader, rt, max_batches=config.max_eval_batches)
        result = FinetuneResult(acc, loop.history, ckpt, student, notes=notes)
        finished = rt.is_main and loop.stop == config.epochs
        if finished and (ds_plus or check_merge and kind == "finetune"):  # DepthShrinker+ shrinks (no plan)
            _check_merge(result, student, None if ds_plus else plan, splits.val, config, rt, merged_out)
        return result
    finally:
        teardown_runtime(rt)


def _what_to_train(plan, model: str | None, options) -> tuple[Plan | None, str, dict[str, Any]]:
    """The plan (read), the model's name and its build options: the plan's (checked against ``model`` and
    ``options`` where a model is given: `check_plan`), or ``model`` and ``options``."""
    if plan is not None:
        plan = Plan.coerce(plan)
        if model is not None or options:
            plan = check_plan(plan, model or plan.model, options)
        return plan, plan.model, dict(plan.options)
    if model is None:
        raise UsageError("give a plan, or the model to train (no plan: the original model is trained)")
    return None, model, dict(options or {})


def _student(original: nn.Module, plan: Plan | None, resolution: int, ds_plus: bool,
             layer_pruning: bool) -> tuple[nn.Module, str, list[str]]:
    """The model fine-tuning trains, its checkpoint kind and notes: the original expanded (DepthShrinker+),
    a copy of the original (no plan, or one that keeps every activation), the layer-pruned model
    (baseline) or the plan's linearised model."""
    size = (resolution, resolution)
    if ds_plus:
        if plan is not None:
            raise UsageError("DepthShrinker+ trains the original model expanded: give no plan")
        return expand_model(original), "train-ds-plus", []
    if plan is None or all(plan.keep):
        return copy.deepcopy(original), "train", []
    if layer_pruning:
        student, decisions = layer_prune(original, plan.keep, input_size=size)
        return student, "finetune-layer-prune", [f"block {d.index} ({d.name}): {d.reason}" for d in decisions]
    return linearize_model(original, plan, input_size=size), "finetune", []


def _linear_phase(student: nn.Module, config: TrainConfig, linear_epochs: int | None):
    """DepthShrinker+'s before-epoch hook: the expanded blocks lose their activations for the last
    ``linear_epochs`` (default a quarter of the epochs, at least 1)."""
    linear_epochs = max(1, config.epochs // 4) if linear_epochs is None else linear_epochs
    if not 1 <= linear_epochs <= config.epochs:
        raise UsageError(f"linear_epochs must be 1..{config.epochs}: the expanded blocks shrink back only without activations")

    def before_epoch(epoch: int) -> None:
        set_linear(student, epoch >= config.epochs - linear_epochs)

    return before_epoch


def _teacher(original: nn.Module, rt: Runtime) -> nn.Module:
    """A frozen copy of the original model, the teacher of self-distillation."""
    teacher = copy.deepcopy(original).to(rt.device).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher


def _finetune_loss(teacher: nn.Module | None, distill_alpha: float, temperature: float, config: TrainConfig, rt: Runtime):
    """Cross-entropy, or with a ``teacher`` (1 - alpha) * CE + alpha * the distillation loss."""

    def loss_fn(logits, targets, images):
        ce = F.cross_entropy(logits, targets, label_smoothing=config.label_smoothing)
        if teacher is None:
            return ce, {"loss": ce.item()}
        with torch.no_grad(), torch.autocast(rt.device.type, dtype=torch.float16, enabled=rt.amp):
            t_logits = teacher(images)
        kd = _distill_loss(logits, t_logits.float(), temperature)
        loss = (1 - distill_alpha) * ce + distill_alpha * kd
        return loss, {"loss": loss.item(), "ce": ce.item(), "kd": kd.item()}

    return loss_fn


def _check_merge(result: FinetuneResult, student: nn.Module, plan: Plan, val, config: TrainConfig, rt: Runtime, merged_out) -> None:
    """Merge the fine-tuned model, measure its accuracy and its largest logit difference (one process)."""
    from ..merge import save_merged
    from .training import Runtime as _Rt

    student = student.cpu().eval()
    merged = merge_model(student, plan) if plan is not None else shrink_model(student).eval()
    single = _Rt(0, 1, 0, torch.device("cpu"))
    loader = make_loader(val, config.batch_size, single, train=False)
    if config.max_eval_batches is not None:
        loader = [b for i, b in zip(range(config.max_eval_batches), loader)]
    a, b = predictions(student, loader), predictions(merged, loader)
    labels = torch.cat([y for _, y in loader])
    result.merged_accuracy = float((b.argmax(1) == labels).float().mean())
    result.accuracy = float((a.argmax(1) == labels).float().mean())
    result.merged_max_abs_diff = float((a - b).abs().max())
    if merged_out is not None and plan is None:  # DepthShrinker+: the original architecture, a plain state dict
        result.merged_out = save_training_checkpoint(merged_out, {"kind": "ds-plus-shrunk", "state_dict": merged.state_dict()})
    elif merged_out is not None:
        result.merged_out = save_merged(merged, merged_out)
    student.to(rt.device)
