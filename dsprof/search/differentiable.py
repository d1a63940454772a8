"""The differentiable activation search (paper Sec. 4.2): `search(method="differentiable")`.

The blocks' activations are gated (`gates`); weights and gate scores train jointly on the task loss +
``lam`` * sum_b w_b |m_b| (w_b: the block's LUT latency or MAC saving, `objective`). Each epoch prints
the ranking and the scores' spread, warns when they run away, and rewrites the plan (keep list + scores
+ ranking) with a checkpoint that ``resume`` continues from.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ..records.plan import Plan
from ..merging.partial import with_acts
from ..models import find_blocks
from .build import trainable_model
from .data import load_data
from .gates import annealed_k, gate_model, runaway_spread, ungate
from .method import SearchRequest, SearchResult, decay_weights, write_plan
from .objective import latency_penalty
from .loop import EpochHooks, Loop, TrainConfig, make_optimizer, prepare_loop, run_epochs, seed_all
from .training import TrainProcess, save_training_checkpoint, setup_runtime, teardown_runtime

__all__ = ["GateScoresRanAway", "runaway_message", "search_differentiable"]


class GateScoresRanAway(UserWarning):
    """The gate scores' spread passed `runaway_spread`: their ranking reflects the blow-up, not importance."""


def runaway_message(spread: float, limit: float, scores: list[float]) -> str:
    """What a run whose gate scores ran away says (a `GateScoresRanAway` warning), naming the parameters that bound
    them (the command line spells them as its options)."""
    return (f"the gate scores ran away (spread {spread:.3g} > {limit:.3g}: {', '.join(f'{v:.3g}' for v in scores)}); "
            "their ranking reflects the blow-up, not importance: use `settings=GateSettings(score_normalize=True)` and "
            "`settings=GateSettings(score_bound=)`, or lower `settings=GateSettings(score_lr=)`")


def search_differentiable(req: SearchRequest) -> SearchResult:
    """Train weights and gate scores on ``req.data`` for ``req.config.epochs``; the plan of the k
    highest scores (``score_normalize``, ``score_bound``, ``anneal_epochs``: see `search`)."""
    config, keep = req.config, req.required_keep()
    rt = setup_runtime(req.device, req.config.threads)
    try:
        seed_all(config.seed)
        splits = load_data(req.data, req.resolution)
        base = trainable_model(req.ref, num_classes=splits.num_classes, weights=req.weights)
        # k of the blocks with a removable activation, as the planner's; refused where nothing is left to choose
        req.k(sum(with_acts(find_blocks(base, (req.resolution, req.resolution)))))
        bw = decay_weights(base, req)
        gated = gate_model(base, keep, input_size=(req.resolution, req.resolution), init=req.gates.score_init)
        gated.gates.normalize, gated.gates.bound = req.gates.score_normalize, req.gates.score_bound
        optimizer = make_optimizer(gated, config, gated.gates.scores, req.gates.score_lr)
        out = req.out
        ckpt = req.checkpoint_path
        loop = prepare_loop(gated, optimizer, ckpt, req.resume, "search", rt, splits, config, req.stop_after_epochs,
                            req.model, req.options)

        def plan_now() -> Plan:
            return _search_plan(req, gated, bw, loop.history)

        def save(_epoch: int, _acc: float) -> dict:
            plan = plan_now()
            write_plan(plan, out)
            return {"state_dict": gated.state_dict(), "plan": plan.to_json()}

        loss_fn = _search_loss(gated.gates.scores, bw.weights.to(rt.device), req.gates.lam, config)
        run_epochs(loop, optimizer, loss_fn, _search_hooks(gated.gates, loop, config, req.gates.anneal_epochs,
                                                           req.gates.score_init, save), rt, config)
        return _save_search(plan_now(), gated, loop.history, out, req.weights_out, rt)
    finally:
        teardown_runtime(rt)


def _search_loss(scores: nn.Parameter, block_w: torch.Tensor, lam: float, config: TrainConfig):
    """Cross-entropy + ``lam`` * the latency-weighted L1 decay of the gate scores (paper Sec. 4.2)."""

    def loss_fn(logits, targets, _images):
        task = F.cross_entropy(logits, targets, label_smoothing=config.label_smoothing)
        penalty = latency_penalty(scores, block_w)
        return task + lam * penalty, {"task_loss": task.item(), "penalty": penalty.item()}

    return loss_fn


def _search_hooks(gates, loop: Loop, config: TrainConfig, anneal_epochs: float, score_init: float, save) -> EpochHooks:
    """The differentiable search's part of the epoch loop: the annealed k of each step, the scores'
    bound after it, the target k for evaluation, the ranking and spread in the history and the log."""
    n_blocks, k_final = gates.n_counted, gates.k  # anneals from every block k counts
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
        if spread > runaway_spread(score_init):  # a warning: the command line names its options
            warnings.warn(GateScoresRanAway(runaway_message(spread, runaway_spread(score_init), gates.scores.tolist())),
                          stacklevel=2)
        return {"keep": list(gates.keep()), "ranking": gates.ranking(), "score_spread": spread}, lines

    return EpochHooks(record, save, before_step=before_step, after_step=gates.clamp_, before_eval=before_eval)


def _save_search(plan: Plan, gated, history: list, out, weights_out, rt: TrainProcess) -> SearchResult:
    """Write the searched plan to ``out`` and the searched weights (original architecture) to
    ``weights_out`` (rank 0); the search's result."""
    if rt.is_main:
        write_plan(plan, out)
    if rt.is_main and weights_out is not None:
        save_training_checkpoint(weights_out, {"kind": "search-weights", "state_dict": ungate(gated.cpu()).state_dict()})
        gated.to(rt.device)
    g = gated.gates
    return SearchResult(plan, [float(v) for v in g.scores.detach().cpu()], g.ranking(), history,
                        Path(out) if out is not None else None, g.counted)


def _search_plan(req: SearchRequest, gated, bw, history) -> Plan:
    g = gated.gates
    info = {
        "method": "differentiable",
        "k": g.k,
        "lambda": req.gates.lam,
        "score_normalize": g.normalize,
        "score_bound": g.bound,
        "scores": [round(float(v), 6) for v in g.scores.detach().cpu()],
        "ranking": g.ranking(),
        "blocks": list(g.names),
        "weights": bw.to_dict(),
        "epochs": len(history),
        "val_accuracy": history[-1]["val_accuracy"] if history else None,
    }
    return Plan(req.model, g.keep(), req.options, name=req.name or f"search-k{g.k}",
                source=f"dsprof search ({bw.source})", search=info)
