"""Differentiable activation search, fine-tuning and baselines (issue #6)."""
