"""Exact merging of linearised blocks into dense convolutions (issue #4), and BatchNorm folding.

Layers, from pure arithmetic up: `algebra` (convolutions as tensors: compose, residual, BN fold),
`linearize` (blocks without their activations, the border rule), `block` (one block -> one conv),
`spans` (runs of blocks as one conv), `rule` (the plan's merge list as merge/ is told it: the planner decides it,
`dsprof.plan.decide`), `model` (whole-model merge with reported decisions), `artifact` (the merged-model file, ONNX export).
A plan (which blocks, JSON, the paper's presets) is `dsprof.plan.Plan`. This package merges what it is told and
never imports the LUT or the planner.

The names below are imported on first use. Calling the package calls `dsprof.workflows.merge.merge`.
"""

from .._lazy import calls, lazy_exports

_EXPORTS = {
    **dict.fromkeys(('LinearConv', 'MergeError', 'add_residual', 'apply_conv', 'compose_all', 'compose_convs', 'conv_from_module', 'fold_bn'), ".algebra"),
    **dict.fromkeys(('export_onnx', 'load_merged', 'save_merged'), ".artifact"),
    **dict.fromkeys(('BlockMergeInfo', 'merge_linearized'), ".block"),
    **dict.fromkeys(('conv_bn_pairs', 'fold_batchnorm', 'fold_bn_into_conv', 'set_submodule'), ".fold"),
    **dict.fromkeys(('BorderBias', 'MergedConv', 'PaddedConv2d', 'ZeroPad'), ".layers"),
    **dict.fromkeys(('Linearized', 'linearize_block', 'linearize_model'), ".linearize"),
    **dict.fromkeys(('BlockDecision', 'MergeReport', 'cost_table', 'merge_model', 'merge_report'), ".model"),
    **dict.fromkeys(('Merges', 'check_merges', 'replayed'), ".rule"),
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
calls(__name__, "dsprof.workflows.merge:merge")  # `dsprof.merge(...)`: the API function (docs/api.md)
