"""Differentiable activation search, fine-tuning, baselines and DepthShrinker+ (issue #6).

Modules: `gates` (top-k activation gates with straight-through scores), `objective` (the latency-
weighted decay), `data` (ImageFolder, digits), `training` (processes, loaders, epochs, checkpoints),
`run` (`search`, `finetune`), `baselines` (random plans, layer pruning), `expand` (DepthShrinker+).
"""

from .baselines import LayerPruneDecision, layer_prune, random_keep
from .build import build_model, default_training_resolution, replace_classifier
from .data import DataSplits, digits, image_folder, load_data
from .gates import ActivationGates, GatedActivation, GatedBlock, GatedModel, gate_model, resolve_k, ungate
from .objective import BlockWeights, block_weights, latency_penalty, lut_savings, mac_savings
from .run import FinetuneResult, SearchResult, TrainConfig, finetune, search

__all__ = [
    "ActivationGates",
    "BlockWeights",
    "DataSplits",
    "FinetuneResult",
    "GatedActivation",
    "GatedBlock",
    "GatedModel",
    "LayerPruneDecision",
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
    "search",
    "ungate",
]
