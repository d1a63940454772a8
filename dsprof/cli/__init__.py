"""The `dsprof` command line (`main`), one small module per command: its options and one call into the Python API
(`dsprof.api`); the options several commands share are `options` and `training`."""

from .main import build_parser, main

__all__ = ["build_parser", "main"]
