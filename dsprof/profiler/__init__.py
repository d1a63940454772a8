"""Timing of blocks, dense replacements and whole models on CPU, CUDA, ONNX Runtime and TFLite (issue #3)."""
