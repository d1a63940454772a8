"""`dsprof finetune` as a Python function: train what a plan leaves of a model.

The linearised model of a plan (padding in front, free ReLU6 after each merged block: what `dsprof
merge` merges exactly), optionally distilled from the original model; or the original model (no plan);
or the layer-pruned model (baseline); or DepthShrinker+ (the original expanded, shrunk back). Checkpoint
every epoch, ``resume``; the checkpoint is what `dsprof merge --checkpoint` takes. The epochs run in the
loop the searches share (`run`).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .._moved import as_request, moved_keywords
from ..errors import UsageError
from ..lut.choice import MergeChoice
from ..lut.table import LUT
from ..merging import linearize_model, merge_model, save_merged
from ..records.plan import Plan
from ..records.plan import check_plan
from ..planning.decide import merge_rule
from ..records.merges import Merges
from ..models import ModelRef
from .baselines import layer_prune
from .build import trainable_model, training_model
from .data import load_data
from .expand import expand_model, set_linear, shrink_model
from .settings import DistillSettings, TrainRun
from .loop import EpochHooks, TrainConfig, make_optimizer, prepare_loop, run_epochs, seed_all
from .training import (
    TrainProcess,
    evaluate,
    make_loader,
    predictions,
    save_training_checkpoint,
    setup_runtime,
    teardown_runtime,
)

__all__ = ["FinetuneResult", "finetune"]


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
    merges: Merges | None = None  # the plan's merge list the check merged by, and what decided it


def _distill_loss(student: torch.Tensor, teacher: torch.Tensor, temperature: float) -> torch.Tensor:
    t = temperature
    return F.kl_div(F.log_softmax(student / t, 1), F.softmax(teacher / t, 1), reduction="batchmean") * t * t


#: The keywords of before (deprecated): each old keyword -> (the parameter that holds it now, its object, field).
_OLD_KEYWORDS = {
    **{k: ("model", "ModelRef.of", k) for k in ("options", "resolution", "weights")},
    "distill_alpha": ("distill", "DistillSettings", "alpha"),
    "temperature": ("distill", "DistillSettings", "temperature"),
    "out": ("run", "TrainRun", "checkpoint"),
    **{k: ("run", "TrainRun", k) for k in ("resume", "device", "stop_after_epochs")},
    **{k: ("merge", "MergeChoice", k) for k in ("lut", "device_key", "merge_by")},
}


def finetune(
    plan: Plan | str | Path | None = None,
    *,
    model: str | nn.Module | ModelRef | None = None,
    data: str | Path = "digits",
    config: TrainConfig = TrainConfig(),
    distill: bool | DistillSettings = False,
    layer_pruning: bool = False,
    ds_plus: bool = False,
    linear_epochs: int | None = None,
    merged_out: str | Path | None = None,
    check_merge: bool = True,
    merge: MergeChoice | None = None,
    lut_resolution: int | None = None,
    run: TrainRun | None = None,
    **old: Any,
) -> FinetuneResult:
    """Fine-tune the linearised model of ``plan`` (or train the original ``model`` when no plan) on ``data``.

    ``model``: what `search` takes, read as it reads it (`dsprof.search.build.training_model`): a registered name,
    ``timm:NAME`` or ``torchvision:NAME``, a ``PATH.py:factory`` model file, an ``nn.Module`` (trained on a copy) or a
    `dsprof.models.ModelRef` (with its options, resolution -- None: `default_training_resolution`, 32 px on 'digits'
    and 'shapes' -- and starting weights, ``"pretrained"`` or a file); with a plan, the plan's model (and options)
    where none is given, and the plan checked against the model where one is (`check_plan`). ``distill`` (True, or a
    `DistillSettings`): the loss is (1 - alpha) * CE + alpha * T^2 * KL(teacher || student) with the original model
    as teacher. ``layer_pruning``: drop the plan's linearised blocks instead (baseline). ``run`` (a `TrainRun`): the
    device; the checkpoint (``run.checkpoint``), written every epoch (rank 0) and read by ``run.resume``, its
    ``state_dict`` what `dsprof.merge(checkpoint=)` takes; ``run.stop_after_epochs``: leave after that many epochs of
    this call, checkpoint written, as a time-limited job would (resume later). With ``check_merge`` the merged model's
    accuracy and max |logit difference| to the fine-tuned model are measured (``merged_out``: also save it).
    ``ds_plus`` (DepthShrinker+, no plan): train `expand_model(model)`, its expanded blocks linear for the last
    ``linear_epochs`` (default a quarter), then shrink it back to the original architecture (``merged_out``: its
    state dict, a ``--weights`` file); the check compares shrunk and trained outputs.
    The check merges as every command does (`dsprof.planning.decide.merge_rule`, decided before training): the
    plan's ``merge`` list, else ``merge``'s (a `dsprof.lut.MergeChoice`: the LUT's rule in its context
    ``device_key``, read at ``lut_resolution``, default the training resolution; or MACs with ``merge_by="macs"``);
    a plan without a list and neither is refused at once. The keywords of before (``options=``, ``resolution=``,
    ``weights=``; ``distill_alpha=``, ``temperature=``; ``out=``, ``resume=``, ``device=``,
    ``stop_after_epochs=``; ``lut=``, ``device_key=``, ``merge_by=``) still work for a release, with a
    `DeprecationWarning`.
    """
    moved = moved_keywords("dsprof.search.finetune", old, _OLD_KEYWORDS)
    run = as_request(run, TrainRun, "run", moved)
    merge = as_request(merge, MergeChoice, "merge", moved)
    if "distill" in moved and distill:  # (without distillation, its settings of before were ignored)
        distill = replace(distill if isinstance(distill, DistillSettings) else DistillSettings(), **moved["distill"])
    if run.weights_out is not None:
        raise UsageError("`run=TrainRun(weights_out=)` saves a search's weights; a fine-tune's are in its checkpoint "
                         "(`run=TrainRun(checkpoint=)`) and, merged, in `merged_out=`")
    teacher = distill if isinstance(distill, DistillSettings) else DistillSettings() if distill else None
    lut, device_key, merge_by = merge.lut, merge.device_key, merge.merge_by
    if lut is not None and not isinstance(lut, LUT):
        lut = LUT.load(lut, accept_modified=merge.accept_modified)
    out, resume, device, stop_after_epochs = run.checkpoint, run.resume, run.device, run.stop_after_epochs
    plan, ref, weights = _what_to_train(plan, model, data, moved.get("model", {}))
    resolution = ref.input_size[0]
    merges = None
    if plan is not None and check_merge and not (ds_plus or layer_pruning or all(plan.keep)):
        priced = ref if lut_resolution in (None, resolution) else ModelRef.of(ref, resolution=lut_resolution)
        merges = merge_rule(priced, lut=lut, device=device_key, merge_by=merge_by, plan=plan).decide(plan)
        plan = merges.plan
    rt = setup_runtime(device, config.threads)
    try:
        seed_all(config.seed)
        splits = load_data(data, resolution)
        original = trainable_model(ref, num_classes=splits.num_classes, weights=weights)
        student, kind, notes = _student(original, plan, resolution, ds_plus, layer_pruning)
        before_epoch = _linear_phase(student, config, linear_epochs) if ds_plus else None
        loss_fn = _finetune_loss(_teacher(original, rt) if teacher else None, teacher.alpha if teacher else 0.5,
                                 teacher.temperature if teacher else 2.0, config, rt)
        optimizer = make_optimizer(student, config)
        ckpt = Path(out) if out is not None else None
        loop = prepare_loop(student, optimizer, ckpt, resume, kind, rt, splits, config, stop_after_epochs, ref.name,
                            dict(ref.options))
        what = {"model": ref.name, "options": json.dumps(ref.options), "num_classes": splits.num_classes,
                "resolution": resolution, "plan": plan.to_json() if plan is not None else None, "epochs": config.epochs}

        def save(_epoch: int, acc: float) -> dict[str, Any]:
            return {**what, "accuracy": acc, "state_dict": {k: v.detach().cpu() for k, v in student.state_dict().items()}}

        def record(epoch: int, acc: float, parts: dict[str, float]):
            return {}, [f"{kind} epoch {epoch}/{config.epochs}: val acc {acc:.4f} loss {parts.get('loss', 0):.4f}"]

        acc = run_epochs(loop, optimizer, loss_fn, EpochHooks(record, save, before_epoch=before_epoch), rt, config)
        if loop.start >= loop.stop:  # resumed a finished run: report its accuracy
            if ds_plus:
                set_linear(student, True)
            acc = evaluate(loop.net, loop.val_loader, rt, max_batches=config.max_eval_batches)
        result = FinetuneResult(acc, loop.history, ckpt, student, notes=notes, merges=merges)
        finished = rt.is_main and loop.stop == config.epochs
        if finished and (ds_plus or check_merge and kind == "finetune"):  # DepthShrinker+ shrinks (no plan)
            _check_merge(result, student, None if ds_plus else plan, splits.val, config, rt, merged_out)
        return result
    finally:
        teardown_runtime(rt)


def _what_to_train(plan, model: Any, data: str | Path, fields: dict[str, Any]
                   ) -> tuple[Plan | None, ModelRef, bool | str | Path | None]:
    """The plan (read, and checked against the model: `check_plan`), the model to train as one reference at the
    training resolution and the weights it starts from, as `search` has them (`training_model`): ``model`` (anything
    `ModelRef.of` takes), else the plan's model with the plan's options; ``fields``: the model's keywords of before
    (``options``, ``resolution``, ``weights``), in place of its own."""
    if model is None:
        if plan is None:
            raise UsageError("give a plan, or the model to train (no plan: the original model is trained)")
        plan = Plan.coerce(plan)
        model, fields = plan.model, {**fields, "options": fields.get("options") or dict(plan.options)}
    ref, weights = training_model(model, data, **fields)
    return (check_plan(plan, ref, dict(ref.options)) if plan is not None else None), ref, weights


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


def _teacher(original: nn.Module, rt: TrainProcess) -> nn.Module:
    """A frozen copy of the original model, the teacher of self-distillation."""
    teacher = copy.deepcopy(original).to(rt.device).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher


def _finetune_loss(teacher: nn.Module | None, distill_alpha: float, temperature: float, config: TrainConfig, rt: TrainProcess):
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


def _check_merge(result: FinetuneResult, student: nn.Module, plan: Plan, val, config: TrainConfig, rt: TrainProcess, merged_out) -> None:
    """Merge the fine-tuned model, measure its accuracy and its largest logit difference (one process)."""
    student = student.cpu().eval()
    merged = merge_model(student, plan) if plan is not None else shrink_model(student).eval()
    single = TrainProcess(0, 1, 0, torch.device("cpu"))
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
