"""`dsprof models`: the registered models (plain data: no PyTorch)."""

from __future__ import annotations

import argparse
import sys

from ..models.registry import list_models, model_entry
from .options import CliError


def add(sub, fmt) -> None:
    p = sub.add_parser("models", help="list the registered models", formatter_class=fmt)
    p.add_argument("pattern", nargs="?", default="*", help="fnmatch pattern, e.g. 'mobilenet*'")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    names = list_models(args.pattern)
    if not names:
        raise CliError(f"no model matches {args.pattern!r}; try `dsprof models` for all")
    width = max(map(len, names))
    for name in names:
        entry = model_entry(name)
        print(f"{name:<{width}}  {entry.default_resolution:>4}px  {entry.description}")
    # on stderr, so that stdout stays one model a line for scripts
    print("and any timm or torchvision classification model by its own name: timm:NAME, torchvision:NAME "
          "(e.g. timm:mobilenetv4_conv_small)", file=sys.stderr)
    return 0
