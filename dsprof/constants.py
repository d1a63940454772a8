"""Constants that several layers use, each written once. Plain data, no imports from dsprof or torch: the
bottom layer, which anything (the command line's parser included) may import."""

from types import MappingProxyType

__all__ = ["DEFAULT_FINETUNE", "DEFAULT_MAX_SPAN", "IMAGENET_CLASSES", "TIE_BREAK_CANDIDATES"]

#: Classes of ImageNet-1k: what the zoo's pretrained classifiers predict, and the models' default head.
IMAGENET_CLASSES = 1000

#: Blocks per span at most, by default: consecutive linear blocks merged as one convolution (1: no spans).
DEFAULT_MAX_SPAN = 4

#: How many top-priced plans of a k a measured tie-break (`dsprof.plan(tie_break=...)`) takes as candidates by
#: default (issue #46: the 20 top-priced plans of a k).
TIE_BREAK_CANDIDATES = 20

#: The short fine-tune of a measured importance and of the importance proxies that train: `TrainConfig` fields
#: (``TrainConfig(**DEFAULT_FINETUNE)``); read-only.
DEFAULT_FINETUNE = MappingProxyType({"epochs": 1, "lr": 0.02})
