"""Per-block importance at a cost users can pay: proxies for what the full measurement measures (issue #30).

A block's importance is the accuracy it costs when its activations go. The full measurement (``finetune``:
each block linearised alone and fine-tuned, n + 1 fine-tunes, `measured.measure_importance`) is what the
ground truth supports, and what stops users at ImageNet scale. The proxies estimate it from the model as it is:

- ``zero-shot``: the block linearised, BatchNorm statistics re-estimated on ``batches`` training batches (the
  original's too, so that recalibration itself is not counted), the validation loss it adds (EagleEye, ECCV'20:
  recalibrated statistics make an untrained evaluation track the fine-tuned one);
- ``logit-distance``: the same without labels: how far the linearised, recalibrated model's predictions on the
  validation images move from the original's (KL divergence, nats);
- ``short-finetune``: the block linearised and the original fine-tuned ``steps`` steps alike, the validation
  loss it adds;
- ``output-distance``: on ``batches`` unlabelled training batches, how far the linearised block's output lies
  from the original block's (squared error over the original output's variance; the linearised block's own
  BatchNorm statistics re-estimated on the same inputs first); no labels;
- ``taylor``: the first-order Taylor estimate of the loss change when the block's activation gate goes from 1
  to 0 (the gate's gradient, `gates`), squared per batch and averaged (Molchanov et al., CVPR'19): one
  backward pass per batch scores every block.

Each is a function of (model, data, block) with its cost measured: `block_importance` scores one block,
`score_blocks` every block at once (what `dsprof importance` and ``search --method importance --proxy``
run), timed in wall seconds. Higher means more important; the units differ between proxies (`Proxy.unit`),
and the planner needs only their order and sums.
"""

from __future__ import annotations

import copy
import math
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..constants import DEFAULT_FINETUNE, IMAGENET_CLASSES
from ..errors import UsageError, look_up
from ..names import DEFAULT_PROXY
from ..merging import linearize_block, linearize_model
from ..merging.partial import with_acts
from ..records.plan import Plan
from ..models import ModelRef, find_blocks, input_size_of, model_identity, own_chains, replace_block
from ..models.build import ClassCountError
from .build import build_model, replace_classifier
from .data import DataSplits, load_data
from .gates import gate_model
from .measured import measure_importance
from .loop import TrainConfig, make_optimizer, seed_all
from .settings import ProxySettings
from .training import TrainProcess, cosine_lr, train_epoch

__all__ = ["DEFAULT_PROXY", "PROXIES", "Proxy", "ProxyInput", "ProxyScores", "ProxySettings", "block_importance",
           "get_proxy", "proxy_input", "recalibrate_bn", "score_blocks"]


@dataclass
class ProxyInput:
    """What a proxy scores: the original ``model`` (built by `get_model`, weights loaded, head sized for the
    data, on ``device``), the data and the settings. ``source``: the data set's name or folder (``data``) and the
    weights file (``weights``), which the full measurement and the importance file record."""

    model: nn.Module
    data: DataSplits
    resolution: int
    settings: ProxySettings = field(default_factory=ProxySettings)
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    config: TrainConfig = field(default_factory=lambda: TrainConfig(**DEFAULT_FINETUNE))  # the full measurement's
    source: dict[str, Any] = field(default_factory=dict)
    #: the full measurement's progress file (`dsprof.search.measured`): each fine-tune kept as it ends; ``resume``
    #: takes the ones it holds
    progress: Path | None = None
    resume: bool = False
    _train: list = field(default_factory=list, repr=False)
    _val: list | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        identity = model_identity(self.model)
        if identity is None:
            raise UsageError("the proxies linearise blocks through a plan: build the model with dsprof.models.get_model "
                             "(a registered name, or a model file PATH.py:FACTORY)")
        self.name = identity[0]
        self.options = {k: v for k, v in identity[1].items() if k != "num_classes"}  # the head is the data's
        self.model = self.model.to(self.device).eval()
        found = find_blocks(self.model, self.size)
        self.blocks = [b.name for b in found]
        self.counted = with_acts(found)  # the blocks a search's k counts: those with a removable activation
        if not self.blocks:
            raise UsageError("the model has no blocks whose activations could go (`dsprof blocks` lists what it finds)")

    @property
    def size(self) -> tuple[int, int]:
        return (self.resolution, self.resolution)

    def train_batches(self, n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The first ``n`` training batches of one seeded order (augmented as fine-tuning sees them), cycling
        through the set when it holds fewer; the same list for every block."""
        while len(self._train) < n:
            seed_all(self.settings.seed + len(self._train))  # seeded augmentation, a new order per pass
            order = torch.Generator().manual_seed(self.settings.seed + len(self._train))
            loader = torch.utils.data.DataLoader(self.data.train, batch_size=self.settings.batch_size, shuffle=True,
                                                 generator=order, drop_last=len(self.data.train) >= self.settings.batch_size)
            before = len(self._train)
            for batch in loader:
                self._train.append(batch)
                if len(self._train) >= n:
                    break
            if len(self._train) == before:
                raise UsageError("the training set is empty: the proxies need images under train/")
        return self._train[:n]

    def val_batches(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Up to ``eval_batches`` validation batches, in order (no augmentation)."""
        if self._val is None:
            loader = torch.utils.data.DataLoader(self.data.val, batch_size=self.settings.batch_size, shuffle=False)
            self._val = [b for _, b in zip(range(self.settings.eval_batches), loader)]
            if not self._val:
                raise UsageError("the validation set is empty: the proxies need images under val/")
        return self._val

    def linearised(self, block: int) -> nn.Module:
        """A copy of the model with block ``block`` alone linearised (what the full measurement fine-tunes)."""
        keep = tuple(int(i != block) for i in range(len(self.blocks)))
        return linearize_model(self.model, Plan(self.name, keep, self.options), input_size=self.size).to(self.device)


@dataclass(frozen=True)
class ProxyScores:
    """One proxy's importance of every block (higher: more important), what it cost and what it saw."""

    proxy: str
    scores: tuple[float, ...]
    seconds: float  # wall time of the scoring, from the loaded model and data set
    settings: dict[str, Any]
    unit: str
    base: dict[str, float] = field(default_factory=dict)  # the original's figures the scores are relative to

    @property
    def ranking(self) -> list[int]:
        """Block indices from the most to the least important (ties: the earlier block first)."""
        return sorted(range(len(self.scores)), key=lambda i: (-self.scores[i], i))


@dataclass(frozen=True)
class Proxy:
    """A way to score blocks: ``score`` maps a `ProxyInput` (and the blocks to score) to one value per block."""

    name: str
    summary: str
    unit: str
    reads: tuple[str, ...]  # the `ProxySettings` fields it uses
    labels: bool  # needs labelled data
    trains: bool  # trains the model (a classifier made afresh for the data learns something)
    score: Callable[[ProxyInput, Sequence[int]], tuple[list[float], dict[str, float]]]


def _averaging_norms(module: nn.Module) -> list[tuple[nn.Module, Any]]:
    """Reset every BatchNorm in ``module`` to average the statistics of what it sees next (plain average, not a
    moving one); (norm, its momentum) to restore afterwards."""
    norms = [(m, m.momentum) for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for m, _ in norms:
        m.reset_running_stats()
        m.momentum = None
    return norms


def recalibrate_bn(model: nn.Module, batches: Sequence[tuple[torch.Tensor, Any]], device: torch.device | str = "cpu") -> nn.Module:
    """Re-estimate every BatchNorm's running statistics on ``batches`` (their plain average; no gradient), in
    place; the model is left in eval mode."""
    norms = _averaging_norms(model)
    model.train()
    with torch.no_grad():
        for images, _ in batches:
            model(images.to(device))
    for m, momentum in norms:
        m.momentum = momentum
    return model.eval()


@torch.no_grad()
def _loss_accuracy(model: nn.Module, batches, device) -> tuple[float, float]:
    """Mean cross-entropy (nats, no label smoothing) and top-1 accuracy (fraction) over ``batches``."""
    model.eval()
    loss, correct, count = 0.0, 0, 0
    for images, labels in batches:
        logits = model(images.to(device)).float()
        labels = labels.to(device)
        loss += float(F.cross_entropy(logits, labels, reduction="sum"))
        correct += int((logits.argmax(1) == labels).sum())
        count += labels.numel()
    return loss / count, correct / count


def _recalibrated(inp: ProxyInput, blocks: Sequence[int], measure: Callable[[nn.Module], Any]) -> tuple[Any, list[Any]]:
    """``measure`` of the original and of each block linearised, every model's BatchNorm statistics re-estimated on
    the same ``batches`` training batches first (so that recalibration itself is not counted). Nothing trains, so
    one copy of the model serves all: each block's linearised form is put in, measured and taken out again."""
    calib = inp.train_batches(inp.settings.batches)
    work = copy.deepcopy(inp.model)
    records = find_blocks(work, inp.size)
    work = own_chains(work, records)  # chains no module owns become modules (a rewritten graph)
    base = measure(recalibrate_bn(work, calib, inp.device))
    out = []
    for b in blocks:  # the same form as `ProxyInput.linearised` (the plan's defaults), without tracing again
        replace_block(work, records[b].name, linearize_block(records[b], index=b).to(inp.device))
        try:
            out.append(measure(recalibrate_bn(work, calib, inp.device)))
        finally:
            replace_block(work, records[b].name, records[b].module)
    return base, out


def _zero_shot(inp: ProxyInput, blocks: Sequence[int]) -> tuple[list[float], dict[str, float]]:
    val = inp.val_batches()
    (base_loss, base_acc), results = _recalibrated(inp, blocks, lambda model: _loss_accuracy(model, val, inp.device))
    return [loss - base_loss for loss, _ in results], {"loss": base_loss, "accuracy": base_acc}


@torch.no_grad()
def _logit_distance(inp: ProxyInput, blocks: Sequence[int]) -> tuple[list[float], dict[str, float]]:
    images = [x.to(inp.device) for x, _ in inp.val_batches()]  # the labels are not read
    reference: list[torch.Tensor] = []

    def divergence(model: nn.Module) -> float:
        model.eval()
        logp = [F.log_softmax(model(x).float(), 1) for x in images]
        if not reference:  # the original (recalibrated alike) comes first
            reference.extend(logp)
        total = sum(float(F.kl_div(q, p, log_target=True, reduction="sum")) for p, q in zip(reference, logp))
        return total / sum(len(x) for x in images)

    _, scores = _recalibrated(inp, blocks, divergence)
    return scores, {}


def _tuned(model: nn.Module, inp: ProxyInput) -> nn.Module:
    """``model`` fine-tuned ``steps`` SGD steps on the shared training batches (cosine from ``lr``)."""
    s = inp.settings
    config = replace(inp.config, lr=s.lr, batch_size=s.batch_size)
    rt = TrainProcess(0, 1, 0, inp.device)
    scaler = torch.amp.GradScaler("cuda") if rt.amp else None
    seed_all(s.seed)
    optimizer = make_optimizer(model, config)

    def loss_fn(logits, targets, _images):
        loss = F.cross_entropy(logits, targets, label_smoothing=config.label_smoothing)
        return loss, {}

    train_epoch(model, inp.train_batches(s.steps), optimizer, loss_fn, rt, lr_at=lambda i: cosine_lr(i, s.steps, s.lr),
                step=0, scaler=scaler)
    return model.eval()


def _short_finetune(inp: ProxyInput, blocks: Sequence[int]) -> tuple[list[float], dict[str, float]]:
    val = inp.val_batches()
    base_loss, base_acc = _loss_accuracy(_tuned(copy.deepcopy(inp.model), inp), val, inp.device)
    scores = [_loss_accuracy(_tuned(inp.linearised(b), inp), val, inp.device)[0] - base_loss for b in blocks]
    return scores, {"loss": base_loss, "accuracy": base_acc}


class _Tap(nn.Module):
    """A block run as it is, its input and output handed to ``seen`` (the output is returned untouched)."""

    dsprof_leaf = True

    def __init__(self, block: nn.Module, seen: Callable[[torch.Tensor, torch.Tensor], None]) -> None:
        super().__init__()
        self.block = block
        self._seen = [seen]  # a plain list: not a submodule

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        self._seen[0](x, y)
        return y


def _tapped(inp: ProxyInput, blocks: Sequence[int],
            seen: Callable[[int, torch.Tensor, torch.Tensor], None]) -> tuple[nn.Module, dict[int, nn.Module]]:
    """A copy of the model whose blocks ``blocks`` hand ``seen(index, input, output)`` what they compute, and
    the linearised form of each (`linearize_block`, from the copy's block records)."""
    target = copy.deepcopy(inp.model).eval()
    records = find_blocks(target, inp.size)
    target = own_chains(target, records)  # chains no module owns become modules (a rewritten graph)
    for b in blocks:
        replace_block(target, records[b].name, _Tap(records[b].module, lambda x, y, b=b: seen(b, x, y)))
    return target, {b: linearize_block(records[b], index=b).to(inp.device).eval() for b in blocks}


@torch.no_grad()
def _output_distance(inp: ProxyInput, blocks: Sequence[int]) -> tuple[list[float], dict[str, float]]:
    batches = inp.train_batches(inp.settings.batches)
    err = dict.fromkeys(blocks, 0.0)
    var = dict.fromkeys(blocks, 0.0)
    phase = {"recalibrate": True}

    def seen(b: int, x: torch.Tensor, y: torch.Tensor) -> None:
        if phase["recalibrate"]:
            linear[b](x)  # train mode: its BatchNorms average the statistics of its own inputs
            return
        d = (linear[b](x) - y).double()
        err[b] += float((d * d).sum())
        centred = y.double() - y.double().mean(dim=(0, *range(2, y.ndim)), keepdim=True)
        var[b] += float((centred * centred).sum())

    tapped, linear = _tapped(inp, blocks, seen)
    for b in blocks:
        _averaging_norms(linear[b])
        linear[b].train()
    for images, _ in batches:
        tapped(images.to(inp.device))
    phase["recalibrate"] = False
    for b in blocks:
        linear[b].eval()
    for images, _ in batches:
        tapped(images.to(inp.device))
    return [err[b] / var[b] if var[b] > 0 else (0.0 if err[b] == 0 else math.inf) for b in blocks], {}


def _taylor(inp: ProxyInput, blocks: Sequence[int]) -> tuple[list[float], dict[str, float]]:
    gated = gate_model(inp.model, keep=len(inp.blocks), input_size=inp.size).to(inp.device).eval()
    for name, p in gated.named_parameters():
        p.requires_grad_(name == "gates.scores")  # only the gates' gradient is wanted
    batches = inp.train_batches(inp.settings.batches)
    total = torch.zeros(len(inp.blocks), dtype=torch.float64)
    loss_sum = 0.0
    for images, labels in batches:
        gated.gates.scores.grad = None
        loss = F.cross_entropy(gated(images.to(inp.device)).float(), labels.to(inp.device))
        loss.backward()
        total += gated.gates.scores.grad.detach().double().cpu() ** 2
        loss_sum += float(loss.detach())
    mean = total / len(batches)
    return [float(mean[b]) for b in blocks], {"train_loss": loss_sum / len(batches)}


def _finetune(inp: ProxyInput, blocks: Sequence[int]) -> tuple[list[float], dict[str, float]]:
    source = inp.source
    if "data" not in source:
        raise UsageError("the full measurement builds the model again: give ProxyInput.source its data set name or folder")
    with tempfile.TemporaryDirectory(prefix="dsprof-importance-") as tmp:
        weights = Path(tmp) / "original.pt"  # the model as given, weights and head alike
        torch.save(inp.model.state_dict(), weights)
        measured = measure_importance(inp.name, options=inp.options, weights=weights, data=source["data"],
                                      resolution=inp.resolution, config=replace(inp.config, seed=inp.settings.seed),
                                      seeds=(inp.settings.seed,), device=str(inp.device), log=lambda _line: None,
                                      progress=inp.progress, resume=inp.resume)
    drops = measured.drops
    return [drops[b] for b in blocks], {"accuracy": measured.base_accuracy}


PROXIES: dict[str, Proxy] = {p.name: p for p in (
    Proxy("zero-shot", "activations removed, BatchNorm recalibrated, no training: the validation loss it adds",
          "validation cross-entropy added (nats)", ("batches", "eval_batches", "batch_size", "seed"), True, False, _zero_shot),
    Proxy("logit-distance", "activations removed, BatchNorm recalibrated: how far the model's predictions move "
          "(no labels)", "KL divergence of the original's predictions to the linearised model's (nats)",
          ("batches", "eval_batches", "batch_size", "seed"), False, False, _logit_distance),
    Proxy("short-finetune", "activations removed, a few fine-tuning steps (and the original alike): the loss it adds",
          "validation cross-entropy added after the steps (nats)",
          ("steps", "eval_batches", "batch_size", "lr", "seed"), True, True, _short_finetune),
    Proxy("output-distance", "the linearised block's output against the original's, unlabelled batches",
          "squared error over the output's variance", ("batches", "batch_size", "seed"), False, False, _output_distance),
    Proxy("taylor", "first-order Taylor estimate of the loss change (gate gradient, squared per batch)",
          "mean squared gate gradient (nats^2)", ("batches", "batch_size", "seed"), True, False, _taylor),
    Proxy("finetune", "the full measurement: each block linearised alone and fine-tuned (n + 1 fine-tunes)",
          "validation accuracy lost (fraction)", ("seed",), True, True, _finetune),
)}


def get_proxy(name: str) -> Proxy:
    """The proxy called ``name``; an unknown name lists those there are."""
    return look_up(PROXIES, name, "importance proxy")


def _settings_read(proxy: Proxy, inp: ProxyInput) -> dict[str, Any]:
    read = {k: v for k, v in asdict(inp.settings).items() if k in proxy.reads}
    if proxy.name == "finetune":
        c = inp.config
        read.update(epochs=c.epochs, lr=c.lr, batch_size=c.batch_size, max_batches=c.max_batches,
                    max_eval_batches=c.max_eval_batches)
    return read


def score_blocks(proxy: str, inp: ProxyInput, blocks: Sequence[int] | None = None) -> ProxyScores:
    """Every block's importance (or ``blocks``'s, in that order) by the proxy ``proxy``, timed (wall seconds)."""
    chosen = get_proxy(proxy)
    blocks = list(range(len(inp.blocks))) if blocks is None else [int(b) for b in blocks]
    bad = [b for b in blocks if not 0 <= b < len(inp.blocks)]
    if bad:
        raise UsageError(f"block(s) {bad} out of range: the model has blocks 0..{len(inp.blocks) - 1}")
    t0 = time.perf_counter()
    scores, base = chosen.score(inp, blocks)
    seconds = time.perf_counter() - t0
    return ProxyScores(chosen.name, tuple(float(s) for s in scores), seconds, _settings_read(chosen, inp), chosen.unit,
                       base)


def block_importance(proxy: str, model: nn.Module, data: DataSplits, block: int, *,
                     resolution: int | None = None, settings: ProxySettings | None = None,
                     device: str | torch.device = "cpu") -> float:
    """The importance of one block of ``model`` (built by `get_model`) on ``data`` by ``proxy`` (`PROXIES`)."""
    size = resolution or input_size_of(model)[0]
    inp = ProxyInput(model, data, size, settings or ProxySettings(), torch.device(device))
    return score_blocks(proxy, inp, [block]).scores[0]


def proxy_input(model: Any, proxy: str, *, weights: bool | str | Path | None = None, data: str | Path = "digits",
                settings: ProxySettings | None = None, config: TrainConfig | None = None,
                device: str | torch.device = "cpu", progress: str | Path | None = None,
                resume: bool = False) -> ProxyInput:
    """What ``proxy`` scores: ``model`` (anything `ModelRef.of` takes; a `ModelRef` carries its options and the
    resolution it is trained at) built for ``data``'s classes from ``weights`` (None: the reference's; True or
    "pretrained": the library's; a path: a local checkpoint), the data at the model's resolution. A checkpoint
    whose classifier has other classes than the data serves the proxies that need no labels as it is, gets a
    classifier made afresh for those that train, and is refused for the others (zero-shot, taylor: their labels
    would index another classifier). ``settings`` default: the
    `ProxySettings` defaults with ``config``'s seed and batch size. ``progress`` and ``resume``: the full
    measurement's (``finetune``) file of the fine-tunes done (`ProxyInput.progress`)."""
    chosen = get_proxy(proxy)
    config = config or TrainConfig(**DEFAULT_FINETUNE)
    settings = settings or ProxySettings(seed=config.seed, batch_size=config.batch_size)
    ref = ModelRef.of(model)
    resolution, weights = ref.input_size[0], weights if weights is not None else (ref.weights or None)
    splits = load_data(data, resolution)
    try:
        net = build_model(ref, num_classes=splits.num_classes, weights=weights)
    except ClassCountError as exc:
        if chosen.labels and not chosen.trains:
            raise UsageError(f"{exc.fact} (the classes of {data}): the {proxy} proxy reads labels of the data's "
                             "classes; give data with the checkpoint's classes, or `proxy='logit-distance'` (no labels)"
                             ) from None
        net = build_model(ref, num_classes=exc.num_classes, weights=weights)
        if chosen.labels:  # a proxy that trains: a classifier for the data's classes, made afresh
            replace_classifier(net, splits.num_classes)
    if chosen.labels and not chosen.trains and weights in (True, "pretrained") and splits.num_classes != IMAGENET_CLASSES:
        raise UsageError(f"the pretrained classifier has {IMAGENET_CLASSES} classes, the data {data} {splits.num_classes}: the "
                         f"{proxy} proxy would score a classifier made afresh; use `proxy='logit-distance'` (no labels) "
                         f"or finetune, or data with the {IMAGENET_CLASSES} ImageNet classes")
    return ProxyInput(net, splits, resolution, settings, torch.device(device), config,
                      source={"data": str(data), "weights": None if weights in (None, False) else str(weights)},
                      progress=Path(progress) if progress is not None else None, resume=resume)
