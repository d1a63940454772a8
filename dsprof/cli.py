"""The `dsprof` command line: thin argparse adapters over the Python API."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Callable, Sequence

from . import __version__
from .io import atomic_write_text
from .models import find_blocks, get_model, list_models, model_entry, summarize_blocks

__all__ = ["main", "build_parser"]

# Subcommands whose issue is still open: they are listed in --help and say so when run.
_PLANNED = {
    "measure": ("per-block, dense-replacement and whole-model latency", 3),
    "build-lut": ("latency lookup tables from measurement files", 5),
    "predict": ("predict a model's latency from a LUT", 5),
    "search": ("differentiable, latency-weighted activation search", 6),
    "finetune": ("fine-tune the linearised model", 6),
    "merge": ("merge linearised blocks into dense convolutions", 4),
    "report": ("tables and plots of measurements", 7),
}


class CliError(Exception):
    """An error the user can fix; printed without a traceback."""


def add_model_args(parser: argparse.ArgumentParser) -> None:
    """The options that pick and build a model, shared by every subcommand that takes one."""
    parser.add_argument("--model", default="mobilenet_v2", help="model name (see `dsprof models`)")
    parser.add_argument("--width", type=float, default=None, help="width multiplier (mobilenet_v2 only), e.g. 1.4")
    parser.add_argument(
        "--depths", default=None, help="blocks per stage (mobilenet_v2 only), 7 comma-separated ints, e.g. 1,2,3,4,3,3,1"
    )
    parser.add_argument("--resolution", type=int, default=None, help="input height and width in pixels (default: the model's)")
    parser.add_argument(
        "--weights",
        default=None,
        help="'pretrained' for torchvision/timm weights (downloads), or the path of a local state-dict checkpoint",
    )


def model_from_args(args: argparse.Namespace):
    """Build the model that `add_model_args` options describe."""
    options: dict[str, object] = {}
    if args.width is not None:
        options["width"] = args.width
    if args.depths is not None:
        try:
            options["depths"] = [int(d) for d in args.depths.split(",")]
        except ValueError:
            raise CliError(f"--depths must be comma-separated ints, got {args.depths!r}") from None
    pretrained: bool | str = False
    if args.weights == "pretrained":
        pretrained = True
    elif args.weights:
        pretrained = args.weights
    try:
        return get_model(args.model, resolution=args.resolution, pretrained=pretrained, **options)
    except (KeyError, TypeError, ValueError, FileNotFoundError) as exc:
        raise CliError(exc.args[0] if exc.args else str(exc)) from None


def cmd_models(args: argparse.Namespace) -> int:
    names = list_models(args.pattern)
    if not names:
        raise CliError(f"no model matches {args.pattern!r}; try `dsprof models` for all")
    width = max(map(len, names))
    for name in names:
        entry = model_entry(name)
        print(f"{name:<{width}}  {entry.default_resolution:>4}px  {entry.description}")
    return 0


def cmd_blocks(args: argparse.Namespace) -> int:
    model = model_from_args(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        blocks = find_blocks(model)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    table = summarize_blocks(model, blocks=blocks)
    if table.empty:
        print(f"{args.model}: no blocks found (plain convolutions only, or unsupported block types)")
        return 0
    shown = table.assign(
        MMACs=table.macs / 1e6,
        weights_KiB=table.weight_bytes / 1024,
        peak_act_KiB=table.peak_activation_bytes / 1024,
    )[["block", "spec", "MMACs", "params", "weights_KiB", "peak_act_KiB"]]
    print(shown.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print(f"{len(table)} blocks; memory at 16 bits, BatchNorm folded; MACs for one image")
    if args.csv:
        atomic_write_text(args.csv, table.to_csv(index=False))
        print(f"wrote {args.csv}")
    return 0


def _planned(name: str, issue: int) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        print(f"dsprof {name}: not built yet (tracked in issue #{issue}).", file=sys.stderr)
        return 2

    return run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsprof",
        description="DepthShrinker on your own hardware: profile blocks, build latency tables, "
        "search which activations to remove, merge blocks into dense convolutions, report.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dsprof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    fmt = argparse.ArgumentDefaultsHelpFormatter

    p = sub.add_parser("models", help="list the registered models", formatter_class=fmt)
    p.add_argument("pattern", nargs="?", default="*", help="fnmatch pattern, e.g. 'mobilenet*'")
    p.set_defaults(func=cmd_models)

    p = sub.add_parser(
        "blocks", help="a model's blocks: spec, MACs, params and memory footprint", formatter_class=fmt
    )
    add_model_args(p)
    p.add_argument("--csv", type=Path, default=None, help="also write the table (raw numbers) to this CSV file")
    p.set_defaults(func=cmd_blocks)

    for name, (summary, issue) in _PLANNED.items():
        p = sub.add_parser(name, help=f"{summary} (not built yet)", formatter_class=fmt)
        p.set_defaults(func=_planned(name, issue))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except CliError as exc:
        print(f"dsprof {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
