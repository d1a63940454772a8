"""Exact merging of linearised blocks into dense convolutions (issue #4), and BatchNorm folding.

Layers, from pure arithmetic up: `algebra` (convolutions as tensors: compose, residual, BN fold),
`linearize` (blocks without their activations, the border rule), `block` (one block -> one conv),
`plan` (which blocks, JSON, the paper's presets), `model` (whole-model merge with reported
decisions), `rule` (which linearised blocks merge: one rule, written into the plan's merge list), `artifact`
(the merged-model file, ONNX export). `dsprof merge` as a function, which applies the planner's choices, is
`dsprof.plan.apply.merge_to_file`: this package never imports the planner.
"""

from .algebra import LinearConv, MergeError, add_residual, apply_conv, compose_all, compose_convs, conv_from_module, fold_bn
from .artifact import export_onnx, load_merged, save_merged
from .block import BlockMergeInfo, merge_linearized
from .fold import conv_bn_pairs, fold_batchnorm, fold_bn_into_conv, set_submodule
from .layers import BorderBias, MergedConv, PaddedConv2d, ZeroPad
from .linearize import Linearized, linearize_block, linearize_model
from .model import BlockDecision, MergeReport, cost_table, merge_model, merge_report
from .plan import PRESETS, Plan, PlanError, list_presets, load_plan, load_preset
from .rule import Merges, decide_merges

__all__ = [
    "PRESETS",
    "BlockDecision",
    "BlockMergeInfo",
    "BorderBias",
    "LinearConv",
    "Linearized",
    "MergeError",
    "MergeReport",
    "MergedConv",
    "Merges",
    "PaddedConv2d",
    "Plan",
    "PlanError",
    "ZeroPad",
    "add_residual",
    "apply_conv",
    "compose_all",
    "compose_convs",
    "conv_bn_pairs",
    "conv_from_module",
    "cost_table",
    "decide_merges",
    "export_onnx",
    "fold_batchnorm",
    "fold_bn",
    "fold_bn_into_conv",
    "linearize_block",
    "linearize_model",
    "list_presets",
    "load_merged",
    "load_plan",
    "load_preset",
    "merge_linearized",
    "merge_model",
    "merge_report",
    "save_merged",
    "set_submodule",
]
