"""`dsprof export`: the workloads `measure` times, as a bundle for a device that cannot run dsprof
(`dsprof.api.export`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..runtimes import FORMATS, runtime_of_format
from .commands import import_command, runner_command
from .flags import command_line_text
from .options import (add_model_args, add_timing_args, add_workload_args, csv_list, merge_choice_from_args,
                      model_ref_from_args, on_interrupt, timing_from_args, workloads_from_args)


def add(sub, fmt) -> None:
    p = sub.add_parser(
        "export",
        help="bundle the workloads `measure` times (model files, manifest, runner) for a device that cannot run dsprof",
        formatter_class=fmt,
    )
    add_model_args(p)
    p.add_argument("--format", default="onnx", help=f"model file formats, comma-separated: {', '.join(FORMATS)}")
    p.add_argument("--batch", type=int, default=1, help="images per forward pass")
    p.add_argument("--opset", type=int, default=None,
                   help="ONNX operator set (default: 13, which ONNX Runtime >= 1.6 reads, e.g. 1.10 on Python 3.6)")
    add_workload_args(p, by_backend=False)
    add_timing_args(p)
    p.add_argument("--out", type=Path, default=Path("bundle"), help="the bundle folder to write")
    p.add_argument("--overwrite", action="store_true", help="replace an existing bundle (one without results)")
    p.add_argument("--quiet", action="store_true", help="no line per exported workload")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..api import export

    with on_interrupt(lambda: f"interrupted: no bundle written ({args.out} is as it was)"):
        exported = export(
            model_ref_from_args(args), plans=args.plan or (), merged_models=args.merged_model or (),
            merge=merge_choice_from_args(args), batch=args.batch, workloads=workloads_from_args(args), out=args.out, formats=csv_list(args.format),
            timing=timing_from_args(args), overwrite=args.overwrite, log=None if args.quiet else print,
            **({"opset": args.opset} if args.opset else {}),
        )
    print(exported.text(command_line_text))
    result = exported.bundle
    runtime = runtime_of_format(result.manifest["formats"][0])
    print(f"next: copy {result.path} to the device, run `{runner_command(runtime)}` there, "
          f"then `{import_command(result.path)}` here (docs/devices/)")
    return 0
