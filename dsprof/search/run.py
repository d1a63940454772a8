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
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import UsageError
from ..io import atomic_write_text
from ..merge import Plan, linearize_model, merge_model
from ..models import find_blocks
from .baselines import layer_prune, random_keep
from .build import build_model
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


def _param_groups(model: nn.Module, weight_decay: float, scores: nn.Parameter | None, score_lr_scale: float):
    decay, no_decay = [], []
    for p in model.parameters():
        if scores is not None and p is scores or not p.requires_grad:
            continue
        (decay if p.ndim > 1 else no_decay).append(p)
    groups = [
        {"params": decay, "weight_decay": weight_decay, "lr_scale": 1.0},
        {"params": no_decay, "weight_decay": 0.0, "lr_scale": 1.0},
    ]
    if scores is not None:
        groups.append({"params": [scores], "weight_decay": 0.0, "lr_scale": score_lr_scale})
    return groups


def _wrap(model: nn.Module, rt: Runtime) -> nn.Module:
    model.to(rt.device)
    if rt.distributed:
        ids = [rt.device.index] if rt.device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=ids)
    return model


def _resume_state(path: Path | None, resume: bool, kind: str) -> dict[str, Any] | None:
    if not resume:
        return None
    if path is None:
        raise UsageError("--resume needs the checkpoint path (--checkpoint / --out)")
    state = load_training_checkpoint(path)
    if state.get("kind") != kind:
        raise UsageError(f"{path} is a {state.get('kind')!r} checkpoint, not a {kind!r} one")
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
    start: int
    step: int
    history: list
    net: nn.Module
    train_loader: Any
    val_loader: Any
    per_epoch: int
    total: int


def _prepare_loop(module: nn.Module, optimizer, ckpt: Path | None, resume: bool, kind: str, rt: Runtime, splits,
                  config: TrainConfig) -> _Loop:
    """What search and finetune share before their first epoch: the AMP scaler, the epoch, step and
    history resumed from ``ckpt``, the (DDP-wrapped) net, the loaders and the step counts."""
    scaler = torch.amp.GradScaler("cuda") if rt.amp else None
    state = _resume_state(ckpt, resume, kind)
    start, step, history = 0, 0, []
    if state is not None:
        module.to(rt.device)
        start, step, history = _restore(module, optimizer, scaler, state)
        rt.log(f"resumed {ckpt} after epoch {start}")
    net = _wrap(module, rt)
    train_loader = make_loader(splits.train, config.batch_size, rt, train=True, seed=config.seed, workers=config.workers)
    val_loader = make_loader(splits.val, config.batch_size, rt, train=False, workers=config.workers)
    per_epoch = min(len(train_loader), config.max_batches or len(train_loader))
    return _Loop(scaler, start, step, history, net, train_loader, val_loader, per_epoch, per_epoch * config.epochs)


def search(
    model: str = "mobilenet_v2",
    *,
    keep: int | float,
    data: str | Path = "digits",
    options: dict[str, Any] | None = None,
    resolution: int = 32,
    weights: bool | str | Path | None = None,
    method: str = "differentiable",
    lut: str | Path | None = None,
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
    The plan is rewritten after every epoch, with a checkpoint (``checkpoint``, default ``OUT.ckpt.pt``)
    that ``resume`` continues from; ``stop_after_epochs``: leave after that many epochs of this call.
    ``weights_out``: also save the searched weights (original architecture) to fine-tune from.
    """
    options = dict(options or {})
    if method == "random":
        base = build_model(model, options=options, resolution=resolution, num_classes=10)
        n = len(find_blocks(base, (resolution, resolution)))
        plan = Plan(
            model, random_keep(n, keep, config.seed), options, name=name or f"random-k{resolve_k(keep, n)}-s{config.seed}",
            source=f"dsprof search --method random (seed {config.seed})",
            search={"method": "random", "seed": config.seed, "k": resolve_k(keep, n)},
        )
        if out is not None:
            atomic_write_text(out, plan.to_json())
        return SearchResult(plan, [], [], [], Path(out) if out is not None else None)
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
        size = (resolution, resolution)
        bw = block_weights(
            base, lut=lut, device_key=device_key, input_size=(lut_resolution,) * 2 if lut_resolution else size
        )
        weights_t = bw.weights.to(rt.device)
        gated = gate_model(base, keep, input_size=size, init=score_init)
        gates = gated.gates
        gates.normalize, gates.bound = score_normalize, score_bound
        scores = gates.scores
        n_blocks, k_final = len(gates.names), gates.k
        optimizer = torch.optim.SGD(
            _param_groups(gated, config.weight_decay, scores, score_lr / config.lr), lr=config.lr, momentum=config.momentum
        )
        ckpt = Path(checkpoint) if checkpoint is not None else (Path(f"{out}.ckpt.pt") if out is not None else None)
        scaler, start, step, history, net, train_loader, val_loader, per_epoch, total = _prepare_loop(
            gated, optimizer, ckpt, resume, "search", rt, splits, config)

        def loss_fn(logits, targets, _images):
            task = F.cross_entropy(logits, targets, label_smoothing=config.label_smoothing)
            penalty = latency_penalty(scores, weights_t)
            return task + lam * penalty, {"task_loss": task.item(), "penalty": penalty.item()}

        anneal_steps = int(round(anneal_epochs * per_epoch))

        def lr_at(s: int) -> float:
            gates.k = annealed_k(s, anneal_steps, n_blocks, k_final)  # the k of this step's forward pass
            if scaler is not None and score_normalize:
                gates.grad_scale = float(scaler.get_scale())  # the normalised gradient survives unscaling
            return cosine_lr(s, total, config.lr, int(config.warmup_epochs * per_epoch))

        plan = None
        stop = config.epochs if stop_after_epochs is None else min(config.epochs, start + stop_after_epochs)
        for epoch in range(start, stop):
            train_loader.sampler.set_epoch(epoch)
            t0 = time.perf_counter()
            step, parts = train_epoch(
                net, train_loader, optimizer, loss_fn, rt, lr_at=lr_at, step=step, scaler=scaler,
                max_batches=config.max_batches, after_step=gates.clamp_,
            )
            gates.k = k_final  # evaluated, planned and saved with the target k
            acc = evaluate(net, val_loader, rt, max_batches=config.max_eval_batches)
            g = gates
            spread = g.spread()
            history.append(
                {"epoch": epoch + 1, "val_accuracy": acc, **parts, "keep": list(g.keep()), "ranking": g.ranking(),
                 "score_spread": spread, "seconds": round(time.perf_counter() - t0, 3)}
            )
            rt.log(f"search epoch {epoch + 1}/{config.epochs}: val acc {acc:.4f} task {parts.get('task_loss', 0):.4f} "
                   f"penalty {parts.get('penalty', 0):.4f} keep {''.join(map(str, g.keep()))} "
                   f"ranking {' '.join(map(str, g.ranking()))} score spread {spread:.3g}")
            if spread > runaway_spread(score_init):
                rt.log(f"warning: the gate scores ran away (spread {spread:.3g} > {runaway_spread(score_init):.3g}: "
                       f"{', '.join(f'{v:.3g}' for v in g.scores.tolist())}); their ranking reflects the blow-up, not "
                       "importance: use --score-normalize and --score-bound, or lower --score-lr")
            plan = _search_plan(model, options, gated, bw, lam, name, history)
            if rt.is_main:
                if out is not None:
                    atomic_write_text(out, plan.to_json())
                if ckpt is not None:
                    save_training_checkpoint(ckpt, {
                        "kind": "search", "epoch": epoch + 1, "step": step, "state_dict": gated.state_dict(),
                        "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict() if scaler else None,
                        "rng": torch.get_rng_state(), "history": json.dumps(history), "plan": plan.to_json(),
                    })
        if plan is None:
            plan = _search_plan(model, options, gated, bw, lam, name, history)
        if rt.is_main and out is not None:
            atomic_write_text(out, plan.to_json())
        if rt.is_main and weights_out is not None:
            save_training_checkpoint(weights_out, {"kind": "search-weights", "state_dict": ungate(gated.cpu()).state_dict()})
            gated.to(rt.device)
        g = gated.gates
        return SearchResult(plan, [float(v) for v in g.scores.detach().cpu()], g.ranking(), history,
                            Path(out) if out is not None else None)
    finally:
        teardown_runtime(rt)


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
        k = resolve_k(keep, n)
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
    resolution: int = 32,
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
    """
    if plan is not None:
        plan = Plan.coerce(plan)
        model_name, options = plan.model, dict(plan.options)
    elif model is None:
        raise UsageError("give a plan, or the model to train (no plan: the original model is trained)")
    else:
        model_name, options = model, dict(options or {})
    rt = setup_runtime(device)
    try:
        _seed_all(config.seed)
        splits = load_data(data, resolution)
        size = (resolution, resolution)
        original = build_model(model_name, options=options, resolution=resolution, num_classes=splits.num_classes, weights=weights)
        notes: list[str] = []
        kind = "finetune"
        if ds_plus:
            if plan is not None:
                raise UsageError("DepthShrinker+ trains the original model expanded: give no plan")
            student = expand_model(original)
            kind = "train-ds-plus"
            linear_epochs = max(1, config.epochs // 4) if linear_epochs is None else linear_epochs
            if not 1 <= linear_epochs <= config.epochs:
                raise UsageError(f"linear_epochs must be 1..{config.epochs}: the expanded blocks shrink back only without activations")
        elif plan is None or all(plan.keep):
            student = copy.deepcopy(original)
            kind = "train"
        elif layer_pruning:
            student, decisions = layer_prune(original, plan.keep, input_size=size)
            notes = [f"block {d.index} ({d.name}): {d.reason}" for d in decisions]
            kind = "finetune-layer-prune"
        else:
            student = linearize_model(original, plan, input_size=size)
        teacher = None
        if distill:
            teacher = copy.deepcopy(original).to(rt.device).eval()
            for p in teacher.parameters():
                p.requires_grad_(False)
        optimizer = torch.optim.SGD(_param_groups(student, config.weight_decay, None, 1.0), lr=config.lr, momentum=config.momentum)
        ckpt = Path(out) if out is not None else None
        scaler, start, step, history, net, train_loader, val_loader, per_epoch, total = _prepare_loop(
            student, optimizer, ckpt, resume, kind, rt, splits, config)

        def loss_fn(logits, targets, images):
            ce = F.cross_entropy(logits, targets, label_smoothing=config.label_smoothing)
            if teacher is None:
                return ce, {"loss": ce.item()}
            with torch.no_grad(), torch.autocast(rt.device.type, dtype=torch.float16, enabled=rt.amp):
                t_logits = teacher(images)
            kd = _distill_loss(logits, t_logits.float(), temperature)
            loss = (1 - distill_alpha) * ce + distill_alpha * kd
            return loss, {"loss": loss.item(), "ce": ce.item(), "kd": kd.item()}

        def lr_at(s: int) -> float:
            return cosine_lr(s, total, config.lr, int(config.warmup_epochs * per_epoch))

        acc = float("nan")
        stop = config.epochs if stop_after_epochs is None else min(config.epochs, start + stop_after_epochs)
        for epoch in range(start, stop):
            train_loader.sampler.set_epoch(epoch)
            if ds_plus:
                set_linear(student, epoch >= config.epochs - linear_epochs)
            t0 = time.perf_counter()
            step, parts = train_epoch(
                net, train_loader, optimizer, loss_fn, rt, lr_at=lr_at, step=step, scaler=scaler,
                max_batches=config.max_batches,
            )
            acc = evaluate(net, val_loader, rt, max_batches=config.max_eval_batches)
            history.append({"epoch": epoch + 1, "val_accuracy": acc, **parts, "seconds": round(time.perf_counter() - t0, 3)})
            rt.log(f"{kind} epoch {epoch + 1}/{config.epochs}: val acc {acc:.4f} loss {parts.get('loss', 0):.4f}")
            if rt.is_main and ckpt is not None:
                save_training_checkpoint(ckpt, {
                    "kind": kind, "model": model_name, "options": json.dumps(options), "num_classes": splits.num_classes,
                    "resolution": resolution, "plan": plan.to_json() if plan is not None else None,
                    "epoch": epoch + 1, "epochs": config.epochs, "step": step,
                    "state_dict": {k: v.detach().cpu() for k, v in student.state_dict().items()},
                    "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict() if scaler else None,
                    "rng": torch.get_rng_state(), "history": json.dumps(history), "accuracy": acc,
                })
        if start >= stop:  # resumed a finished run: report its accuracy
            if ds_plus:
                set_linear(student, True)
            acc = evaluate(net, val_loader, rt, max_batches=config.max_eval_batches)
        result = FinetuneResult(acc, history, ckpt, student, notes=notes)
        if check_merge and kind == "finetune" and rt.is_main and stop == config.epochs:
            _check_merge(result, student, plan, splits.val, config, rt, merged_out)
        if ds_plus and rt.is_main and stop == config.epochs:
            _check_merge(result, student, None, splits.val, config, rt, merged_out)
        return result
    finally:
        teardown_runtime(rt)


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
