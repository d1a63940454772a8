"""Exact merging of linearised blocks into dense convolutions (issue #4)."""
