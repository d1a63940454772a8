"""Exact merging of linearised blocks into dense convolutions (issue #4), and BatchNorm folding.

Layers, from pure arithmetic up: `algebra` (convolutions as tensors: compose, residual, BN fold),
`linearize` (blocks without their activations, the border rule), `block` (one block -> one conv),
`spans` (runs of blocks as one conv), `partial` (a block keeping some of its activations, its runs merged: plans at
the level of activations), `model` (whole-model merge with reported decisions), `artifact` (the merged-model file,
ONNX export). A plan (which blocks, JSON, the paper's presets) is `dsprof.records.plan.Plan`; what it is told to
merge (a plan's ``merge`` list, checked, and what decided it: `Merges`) is `dsprof.records.merges` -- the planner
decides it, `dsprof.planning.decide`. This package merges what it is told and never imports the LUT or the planner.

The API function is `dsprof.merge` (`dsprof.workflows.merge.merge`). The names below are imported on first use.
"""

from .._lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(('LinearConv', 'MergeError', 'add_residual', 'apply_conv', 'compose_all', 'compose_convs', 'concat_input', 'conv_from_module', 'fold_bn'), ".algebra"),
    **dict.fromkeys(('export_onnx', 'load_merged', 'save_merged'), ".artifact"),
    **dict.fromkeys(('BlockMergeInfo', 'merge_linearized'), ".block"),
    **dict.fromkeys(('conv_bn_pairs', 'fold_batchnorm', 'fold_bn_into_conv', 'set_submodule'), ".fold"),
    **dict.fromkeys(('BorderBias', 'ConcatInput', 'MergedConv', 'PaddedConv2d', 'ZeroPad'), ".layers"),
    **dict.fromkeys(('Linearized', 'linearize_block', 'linearize_model'), ".linearize"),
    **dict.fromkeys(('BlockDecision', 'MergeReport', 'cost_table', 'merge_linearized_model', 'merge_model', 'merge_partial', 'merge_report'), ".model"),
    **dict.fromkeys(('PartialBlock', 'partial_block'), ".partial"),
    **dict.fromkeys(('Merges', 'check_merges', 'replayed'), "..records.merges"),
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
