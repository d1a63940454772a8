"""`dsprof build-lut`: the latency lookup table of measurement files of one or many devices (`dsprof.build_lut`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .flags import command_line_text
from .options import add_accept_modified, on_interrupt


def add(sub, fmt) -> None:
    p = sub.add_parser("build-lut", help="latency lookup table from measurement files of one or many devices", formatter_class=fmt)
    p.add_argument("paths", nargs="+", type=Path, help="measurement files (.jsonl) or folders holding them")
    p.add_argument("-o", "--output", type=Path, default=Path("lut.csv"), help="the LUT file to write (CSV, written atomically)")
    add_accept_modified(p, "records")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..api import build_lut

    with on_interrupt(lambda: f"interrupted: {args.output} not written (it is written whole, at the end)"):
        lut = build_lut(args.paths, args.output, accept_modified=args.accept_modified)
    print("wrote " + lut.text(lambda text: command_line_text(text, "build-lut")))
    return 0
