"""`dsprof import`: a bundle runner's results as ordinary measurement records (`dsprof.edge.import_results`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .commands import build_lut_command


def add(sub, fmt) -> None:
    p = sub.add_parser(
        "import", help="turn a bundle runner's results into measurement records (then build-lut, predict, report)",
        formatter_class=fmt,
    )
    p.add_argument("bundle", type=Path, help="the bundle folder that `dsprof export` wrote (its manifest.json)")
    p.add_argument("results", type=Path, help="the runner's results file (JSON Lines)")
    p.add_argument("--out", type=Path, default=Path("results/measurements"), help="folder for the measurement file (named after the settings and device), or a .jsonl file")
    p.add_argument("--overwrite", action="store_true", help="replace an existing measurement file")
    p.add_argument("--allow-partial", action="store_true", help="import although some workloads have no result")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..edge.importer import import_results

    result = import_results(args.bundle, args.results, out=args.out, overwrite=args.overwrite,
                            allow_partial=args.allow_partial)
    first = result.measurements[0]
    ok = sum(r.ok for r in result.measurements)
    print(f"wrote {result.path}: {ok} of {len(result.measurements)} records with samples, "
          f"device {first.device_name} ({first.backend}, {first.device}, {first.threads} threads), env {first.env_id}")
    print("its records carry fresh checksums: from here on they show whether the file was changed, they do not vouch "
          "for what the device sent")
    folder = result.path.parent  # the LUT of that folder's files, beside them: not over a lut.csv the user has here
    print(f"next: {build_lut_command(folder, folder / 'lut.csv')}")
    return 0
