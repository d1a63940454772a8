"""Activation search, fine-tuning, baselines and DepthShrinker+ (issues #6, #13, #20, #30).

Choosing a plan: `registry` (`search(method=...)` and `SEARCHES`, name -> method), one module per method
(`differentiable`: paper Sec. 4.2 with `gates` and the latency-weighted decay of `objective`;
`importance`: per-block importance through the planner, scored by a proxy of `proxies` or measured in full
(`measured`), written for `dsprof plan` in the importance file format (`dsprof.records.importance`); `random_plan`: the random-search baseline), and
`method` (what a method receives and returns). Training: `loop` (the epoch loop they share, checkpoints,
resume), `finetuning` (`finetune`), `training` (processes, loaders, epochs), `data` (ImageFolder, digits,
shapes). Baselines and variants: `baselines` (random plans, layer pruning), `expand` (DepthShrinker+),
`ground_truth` (every plan enumerated, the statistics a search is judged by).
"""

from .._lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(('LayerPruneDecision', 'layer_prune', 'random_keep'), ".baselines"),
    **dict.fromkeys(('build_model', 'default_training_resolution', 'replace_classifier'), ".build"),
    **dict.fromkeys(('DataSplits', 'digits', 'image_folder', 'load_data'), ".data"),
    **dict.fromkeys(('ActivationGates', 'GatedActivation', 'GatedBlock', 'GatedModel', 'gate_model', 'resolve_k', 'ungate'), ".gates"),
    **dict.fromkeys(('BlockWeights', 'block_weights', 'latency_penalty', 'lut_savings', 'mac_savings'), ".objective"),
    **dict.fromkeys(('FinetuneResult', 'finetune'), ".finetuning"),
    **dict.fromkeys(('SearchRequest', 'SearchResult'), ".method"),
    **dict.fromkeys(('PROXIES', 'score_blocks'), ".proxies"),
    'DEFAULT_PROXY': "..names",
    **dict.fromkeys(('DistillSettings', 'GateSettings', 'ProxySettings', 'TrainConfig', 'TrainRun'), ".settings"),
    **dict.fromkeys(('SEARCHES', 'search'), ".registry"),
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
