"""Latency lookup tables: build, load, look up, predict (issue #5)."""
