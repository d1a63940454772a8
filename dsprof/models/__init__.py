"""Model zoo, block discovery and MAC / parameter / memory counting."""

from . import zoo as _zoo  # noqa: F401  (registers the models)
from .blocks import Block, UnsupportedBlock, UnsupportedBlockWarning, find_blocks
from .graph import Discovery, GraphTraceError, Refusal, Unit, block_module, discover_blocks, register_leaf_module, replace_block, run_of
from .blockspec import BLOCK_KINDS, PADDING_STYLES, BlockSpec
from .counting import MemoryFootprint, count_macs, count_params, memory_footprint, summarize_blocks
from .registry import (
    ModelEntry,
    get_model,
    input_size_of,
    model_flags,
    model_identity,
    list_models,
    load_checkpoint,
    model_entry,
    named_model,
    normalized_options,
    register_model,
)
from .split import ModelSplit, split_model
from .tracing import eval_forward, first_conv_in_channels

__all__ = [
    "BLOCK_KINDS",
    "PADDING_STYLES",
    "Block",
    "Discovery",
    "GraphTraceError",
    "Refusal",
    "Unit",
    "block_module",
    "discover_blocks",
    "register_leaf_module",
    "replace_block",
    "run_of",
    "BlockSpec",
    "MemoryFootprint",
    "ModelEntry",
    "ModelSplit",
    "UnsupportedBlock",
    "UnsupportedBlockWarning",
    "count_macs",
    "count_params",
    "eval_forward",
    "find_blocks",
    "first_conv_in_channels",
    "get_model",
    "input_size_of",
    "model_flags",
    "model_identity",
    "normalized_options",
    "list_models",
    "load_checkpoint",
    "memory_footprint",
    "model_entry",
    "named_model",
    "register_model",
    "split_model",
    "summarize_blocks",
]
