"""Model zoo, block discovery and MAC / parameter / memory counting.

The names below are imported on first use: the registry (`list_models`, `model_entry`) is plain data and
imports no PyTorch, so `dsprof models` and `--help` stay quick.
"""

from .._lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(("Block", "NothingToMergeWarning", "UnsupportedBlock", "UnsupportedBlockWarning", "find_blocks",
                     "nothing_to_merge"), ".blocks"),
    **dict.fromkeys(
        ("Chain", "ChainGraph", "Discovery", "GraphTraceError", "Refusal", "Unit", "block_module", "block_modules",
         "discover_blocks", "own_chains", "register_leaf_module", "replace_block", "run_of"),
        ".graph",
    ),
    **dict.fromkeys(("BLOCK_KINDS", "PADDING_STYLES", "BlockSpec"), ".blockspec"),
    **dict.fromkeys(("MemoryFootprint", "conv_macs", "count_macs", "count_params", "memory_footprint", "spec_macs",
                     "summarize_blocks"), ".counting"),
    **dict.fromkeys(("ModelEntry", "input_size_of", "is_library_name", "is_module_name", "model_args", "model_identity", "list_models",
                     "model_entry", "module_name", "normalized_options", "register_model", "registered_module"),
                    ".registry"),
    **dict.fromkeys(("ModelRef", "is_model_file_spec", "named_model"), ".ref"),
    **dict.fromkeys(("ClassCountError", "get_model", "library_entry", "load_checkpoint", "reparameterize"), ".build"),
    **dict.fromkeys(("ModelSplit", "split_model"), ".split"),
    **dict.fromkeys(("format_span", "format_spans", "parse_spans"), ".spans_text"),
    **dict.fromkeys(("eval_forward", "first_conv_in_channels"), ".tracing"),
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
