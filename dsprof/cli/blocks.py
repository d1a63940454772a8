"""`dsprof blocks`: a model's blocks, with their spec, MACs, parameters and memory footprint."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..io import atomic_write_text, csv_frame
from .flags import command_line_text
from .options import add_model_args, model_from_args


def add(sub, fmt) -> None:
    p = sub.add_parser(
        "blocks", help="a model's blocks: spec, MACs, params and memory footprint", formatter_class=fmt
    )
    add_model_args(p)
    p.add_argument("--csv", type=Path, default=None, help="also write the table (raw numbers) to this CSV file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..models import find_blocks, nothing_to_merge, summarize_blocks  # PyTorch

    model = model_from_args(args)
    blocks = find_blocks(model)  # its refusals a warning, said in the command line's words (`dsprof.cli.main`)
    table = summarize_blocks(model, blocks=blocks)
    if table.empty:
        print(f"{args.model}: {command_line_text(nothing_to_merge(model), 'blocks')}")
        return 0
    shown = table.assign(
        MMACs=table.macs / 1e6,
        weights_KiB=table.weight_bytes / 1024,
        peak_act_KiB=table.peak_activation_bytes / 1024,
    )[["block", "spec", "MMACs", "params", "weights_KiB", "peak_act_KiB"]]
    print(shown.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print(f"{len(table)} blocks; memory at 16 bits, BatchNorm folded; MACs for one image")
    if args.csv:
        atomic_write_text(args.csv, csv_frame(table).to_csv(index=False))
        print(f"wrote {args.csv}")
    return 0
