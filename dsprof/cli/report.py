"""`dsprof report`: the paper's tables and plots from measurement files, opening with the answer (`dsprof.report`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .flags import command_line_text
from .options import add_accept_modified, add_merge_by_arg, add_model_file_arg


def add(sub, fmt) -> None:
    p = sub.add_parser("report", help="the paper's tables and plots from measurement files", formatter_class=fmt)
    p.add_argument("paths", nargs="+", type=Path, help="measurement files (.jsonl) or folders holding them")
    p.add_argument("-o", "--output", type=Path, default=Path("report"),
                   help="folder for report.html (self-contained), index.md, tables/ and plots/")
    add_model_file_arg(p)
    p.add_argument("--resolution", type=int, default=None,
                   help="report the records measured at this input size in pixels, as measure took it (default: "
                        "every resolution the files hold)")
    p.add_argument("--lut", type=Path, default=None, help="a LUT: predicted vs measured latency of merged and plan models")
    p.add_argument("--plans", nargs="+", action="extend", default=[],  # --plans A B and --plans A --plans B alike
                   help="plan files, preset names or merged models (.pt, `dsprof merge --out`): marked in the block plot, drawn "
                        "in the memory plot, predicted where measured")
    p.add_argument("--accuracies", type=Path, default=None,
                   help="CSV with columns model,accuracy (fractions or %%, detected) for the accuracy-vs-FPS plot")
    p.add_argument("--front", type=Path, nargs="+", action="extend", default=None,
                   help="front files of `dsprof plan --out` (default: front.json and *.front.json in the measurement folders)")
    add_merge_by_arg(p)
    add_accept_modified(p, "records and a LUT")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..api import report

    written = report(args.paths, args.output, lut=args.lut, plans=args.plans, accuracies=args.accuracies,
                     fronts=args.front, accept_modified=args.accept_modified, resolution=args.resolution,
                     merge_by=args.merge_by, commands=lambda text: command_line_text(text, "report"))
    print(written.text(lambda text: command_line_text(text, "report")))
    return 0
