"""The names that the command line offers and the engines look up, written once and importing nothing, so that
`dsprof --help` lists them without loading PyTorch: how `predict` counts merged blocks, how a plan's merges are
decided, how `search` chooses a plan, how `importance` scores a block.

The engines' registries are keyed by these names (`dsprof.search.registry.SEARCHES`,
`dsprof.search.proxies.PROXIES`); tests check that they agree.
"""

__all__ = ["ACT_VARIANTS", "CROSSING_VARIANT", "PLAN_UNITS", "BLOCK_VARIANTS", "DEFAULT_BLOCK_VARIANTS", "DEFAULT_MODEL_VARIANTS", "DEFAULT_PROXY", "DEFAULT_SEARCH_METHOD",
           "IN_SITU_VARIANTS", "MERGE_BY", "MODEL_VARIANTS", "OLD_METHOD_NAMES", "PREDICT_METHODS", "PROXY_NAMES", "SEARCH_METHODS"]

#: What `dsprof measure` can time of a block (`dsprof.profiler.workloads`; ``fused-expand``, ``fused-project``: the
#: block with one of its two activations removed and the run beside it merged, `ACT_VARIANTS`; asked for, they also
#: time each partial state of a block of 3-6 activations, variant ``fused-`` and its kept activations, e.g.
#: ``fused-010``: `dsprof.records.activations.partial_variant`) and of the whole model, and what it times unless told
#: otherwise.
BLOCK_VARIANTS = ("original", "merged", "flops_matched", "linear", "fused-expand", "fused-project")
MODEL_VARIANTS = ("original", "merged", "flops_matched")
DEFAULT_BLOCK_VARIANTS = ("original", "merged", "flops_matched")
DEFAULT_MODEL_VARIANTS = ("original", "flops_matched")

#: How `dsprof.lut.predict_latency` counts merged blocks (its docstring says what each means); ``auto`` first.
PREDICT_METHODS = ("auto", "isolated", "in-model", "in-situ", "in-situ-scaled")
#: The methods' names before "context" came to mean the device context only: read for one release, with a warning.
OLD_METHOD_NAMES = {"context": "in-situ", "context-scaled": "in-situ-scaled"}
#: A partial merge of a block (a plan at the level of activations, `dsprof.records.activations`), by where its run of
#: units lies: holding the block's first unit (an inverted residual's expansion and depthwise, the Fused-MBConv form),
#: its last (the depthwise and the projection), or neither.
ACT_VARIANTS = ("fused-expand", "fused-project", "fused-inner")
#: The LUT variant of a crossing span as it deploys (`dsprof.merging.partial.crossing_spec`), timed by `dsprof.measure`
#: with ``Workloads(spans=N)`` and a partial variant (`ACT_VARIANTS`).
CROSSING_VARIANT = "crossing"
#: What the planner counts as kept (`dsprof plan --unit`): blocks (DepthShrinker's, the default) or single activations
#: (`dsprof.planning.activations`).
PLAN_UNITS = ("block", "activation")
#: What a block can be swapped for while the whole model runs (`dsprof measure --in-situ`, `dsprof.profiler.insitu`).
IN_SITU_VARIANTS = ("merged", "linear")
#: How a plan without a ``merge`` list has it written (by the planner, `dsprof.planning.decide`): from a LUT (the rule
#: `predict` prices) or from MACs.
MERGE_BY = ("lut", "macs")
#: How `dsprof search` chooses a plan (`dsprof.search.registry`); the default first: what the ground truth supports
#: (docs/search.md, benchmarks/RESULTS.md).
SEARCH_METHODS = ("importance", "differentiable", "planner", "random")
DEFAULT_SEARCH_METHOD = SEARCH_METHODS[0]
#: How `dsprof importance` scores a block (`dsprof.search.proxies.PROXIES`), and the default: the cheapest that kept
#: the planner's plan in the top decile on both ground truths.
PROXY_NAMES = ("zero-shot", "logit-distance", "short-finetune", "output-distance", "taylor", "finetune")
DEFAULT_PROXY = "zero-shot"
