"""Activation search, fine-tuning, baselines and DepthShrinker+ (issues #6, #13, #20, #30).

Choosing a plan: `registry` (`search(method=...)` and `METHODS`, name -> method), one module per method
(`differentiable`: paper Sec. 4.2 with `gates` and the latency-weighted decay of `objective`;
`importance`: per-block importance through the planner, scored by a proxy of `proxies` or measured in full
(`measured`), written for `dsprof plan` by `importance_file`; `random_plan`: the random-search baseline), and
`method` (what a method receives and returns). Training: `run` (the epoch loop they share, checkpoints,
resume), `finetuning` (`finetune`), `training` (processes, loaders, epochs), `data` (ImageFolder, digits,
shapes). Baselines and variants: `baselines` (random plans, layer pruning), `expand` (DepthShrinker+),
`ground_truth` (every plan enumerated, the statistics a search is judged by).
"""

from .baselines import LayerPruneDecision, layer_prune, random_keep
from .build import build_model, default_training_resolution, replace_classifier
from .data import DataSplits, digits, image_folder, load_data
from .gates import ActivationGates, GatedActivation, GatedBlock, GatedModel, gate_model, resolve_k, ungate
from .objective import BlockWeights, block_weights, latency_penalty, lut_savings, mac_savings
from .finetuning import FinetuneResult, finetune
from .method import SearchRequest, SearchResult
from .proxies import DEFAULT_PROXY, PROXIES, ProxySettings, score_blocks
from .registry import METHODS, search
from .run import TrainConfig

__all__ = [
    "ActivationGates",
    "BlockWeights",
    "DEFAULT_PROXY",
    "DataSplits",
    "FinetuneResult",
    "GatedActivation",
    "GatedBlock",
    "GatedModel",
    "LayerPruneDecision",
    "METHODS",
    "PROXIES",
    "ProxySettings",
    "SearchRequest",
    "SearchResult",
    "TrainConfig",
    "block_weights",
    "build_model",
    "default_training_resolution",
    "digits",
    "finetune",
    "gate_model",
    "image_folder",
    "latency_penalty",
    "layer_prune",
    "load_data",
    "lut_savings",
    "mac_savings",
    "random_keep",
    "replace_classifier",
    "resolve_k",
    "score_blocks",
    "search",
    "ungate",
]
