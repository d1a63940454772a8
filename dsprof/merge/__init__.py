"""Exact merging of linearised blocks into dense convolutions (issue #4), and BatchNorm folding."""

from .fold import conv_bn_pairs, fold_batchnorm, fold_bn_into_conv, set_submodule

__all__ = ["conv_bn_pairs", "fold_batchnorm", "fold_bn_into_conv", "set_submodule"]
