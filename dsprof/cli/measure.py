"""`dsprof measure`: a model's blocks, their dense replacements and the whole model timed here (`dsprof.measure`),
on another machine over ssh (``--remote``), or a few entries of a new context (``--few``, `dsprof.api.measure_few`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .commands import plan_command
from ..constants import DEFAULT_MAX_SPAN
from ..device_context import COMPILE_MODES
from ..runtimes import BACKENDS
from .flags import command_line_text
from .options import (CliError, add_model_args, add_timing_args, add_workload_args, load_lut, merge_choice_from_args,
                      model_options_from_args, model_ref_from_args, remote_from_args, settings_from_args,
                      timing_from_args, workloads_from_args)


def add(sub, fmt) -> None:
    p = sub.add_parser(
        "measure",
        help="per-block, dense-replacement and whole-model latency (PyTorch eager or torch.compile on CPU/CUDA, ONNX "
             "Runtime, OpenVINO, TFLite)",
        formatter_class=fmt,
    )
    add_model_args(p)
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    p.add_argument("--backend", default="torch", help=", ".join(BACKENDS))
    p.add_argument("--dtype", default="fp32", help="fp32, fp16 (CUDA only) or bf16 (torch only)")
    p.add_argument("--channels-last", action="store_true", help="channels-last memory layout (torch)")
    p.add_argument("--batch", type=int, default=None, help="images per forward pass (default: 1 on the CPU, 128 on CUDA)")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads for inference (default: 1, the setting whose timings repeat on a shared machine; "
                        "give the core count to time multi-threaded)")
    p.add_argument("--compile-mode", default=None, metavar="MODE",
                   help="the torch.compile mode of --backend torch-compile, one of " + ", ".join(COMPILE_MODES)
                        + " (the first when not given); recorded, part of the context")
    p.add_argument("--compile", action="store_true", help="the same as --backend torch-compile (its older spelling)")
    add_workload_args(p)
    p.add_argument("--in-situ", "--context", dest="in_situ", default="none",
                   help="also time each block in situ, inside the whole model: the model with the block swapped for "
                        "these variants (merged, linear; comma-separated) against the model, interleaved; 'none' to "
                        "skip (--context: its older name, read until the next release)")
    p.add_argument("--calibrate", action="store_true",
                   help="end with the groups planned from this run's records: the front's pieces inside the model (and "
                        "the three that cost the most time alone, which other runtimes' plans take), six session pairs "
                        "(the whole model against itself: the noise of one check), then the calibration group (the "
                        "whole model with every block linearised, merged where this run's entries say it "
                        "pays, against the original, paired); predictions then price what the pieces save inside the "
                        "model, with intervals from all three (docs/predictions.md)")
    add_timing_args(p)
    p.add_argument("--out", type=Path, default=Path("results"), help="folder for the measurement file (named after the settings), or a .jsonl file")
    p.add_argument("--resume", action="store_true", help="continue an existing file, skipping what it holds")
    p.add_argument("--overwrite", action="store_true", help="replace an existing file")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--remote", default=None, metavar="USER@HOST",
                   help="time on this machine over ssh (export a bundle, run its runner there, import); backends "
                        "onnxruntime, openvino, tflite, torch (TorchScript); see docs/devices/")
    p.add_argument("--ssh", default="ssh", help="the ssh command for --remote, e.g. 'ssh -p 2222 -i key'")
    p.add_argument("--remote-python", default="python3", help="the Python on the remote machine (NumPy + the runtime)")
    p.add_argument("--remote-dir", default="dsprof-bundles", help="where bundles go on the remote machine (from its home)")
    p.add_argument("--few", type=int, default=None, metavar="N",
                   help="a new context from N measurements: time only the N entries (of those --like holds for the "
                        "model) that tell most, predict the rest from --like, write this context's LUT (predicted "
                        "entries marked) and plan it; spans up to --spans blocks (default 4)")
    p.add_argument("--like", type=Path, default=None, metavar="LUT",
                   help="--few: a full LUT of the model in another context (`dsprof build-lut`)")
    p.add_argument("--like-key", default=None, help="--few: the --like LUT's context where it holds several (its key, label or backend, as --device-key)")
    p.add_argument("--few-lut-out", type=Path, default=None,
                   help="--few: the new context's LUT (default: the measurement file with .lut.csv)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..api import measure

    if (args.few is None) != (args.like is None):
        raise CliError("--few N and --like LUT go together: N entries timed here, the rest predicted from the LUT")
    if args.few is not None and args.calibrate:
        raise CliError("--few times a few chosen entries, not the calibration group: measure the model in full with "
                       "--calibrate, or drop it")
    if args.few is not None:
        return _few(args)
    measured = measure(
        model_ref_from_args(args), settings=settings_from_args(args), batch=args.batch,
        workloads=workloads_from_args(args), plans=[*(args.plan or ()), *(args.merged_model or ())],
        merge=merge_choice_from_args(args), timing=timing_from_args(args), out=args.out,
        resume=args.resume, overwrite=args.overwrite, progress=False if args.no_progress else print,
        log=lambda m: print(f"warning: {command_line_text(m, 'measure')}", file=sys.stderr), remote=remote_from_args(args),
    )
    print(measured.text(lambda words: command_line_text(words, "measure")))
    return 0


def _few(args: argparse.Namespace) -> int:
    """`dsprof measure --few N --like LUT`: N entries timed here, the rest predicted, the new context planned."""
    from ..api import measure_few

    if args.remote:
        raise CliError("--few times here; for a remote device, export the chosen entries' model instead (no --remote)")
    from ..lut.choice import Pricing

    options = model_options_from_args(args)
    result = measure_few(
        model_ref_from_args(args), load_lut(args.like, args.accept_modified), args.few,
        pricing=Pricing(args.like_key, max_span=args.spans if args.spans > 1 else DEFAULT_MAX_SPAN),
        settings=settings_from_args(args), batch=args.batch, timing=timing_from_args(args), out=args.out,
        lut_out=args.few_lut_out, resume=args.resume, overwrite=args.overwrite, progress=not args.no_progress,
    )
    print(result.text(lambda text: command_line_text(text, "measure")))
    command = plan_command(result.lut_path, args.model, options, args.resolution, like=args.like,
                           accept_modified=args.accept_modified)
    print(f"\nnext: {command}")
    return 0
