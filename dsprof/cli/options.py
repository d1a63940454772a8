"""The options several commands share, and what they turn into: a model, its options and weights, what is timed and
how, a LUT, a merge rule's name, a budget. Light to import: `dsprof --help` builds every command's options without
PyTorch (tests/test_cli_startup.py)."""

from __future__ import annotations

import argparse
import contextlib
import shlex
from pathlib import Path
from typing import Callable, Iterator

from ..constants import IMAGENET_CLASSES
from ..edge.host import RemoteHost
from ..errors import DsprofError, Interrupted, UsageError
from ..models.spans_text import parse_spans
from ..names import BLOCK_VARIANTS, DEFAULT_BLOCK_VARIANTS, DEFAULT_MODEL_VARIANTS, MERGE_BY
from ..profiler.selection import Workloads, comma_list
from ..profiler.timing import TimingConfig

__all__ = ["CliError", "add_accept_modified", "add_device_key_arg", "add_merge_by_arg", "add_model_args", "add_model_file_arg",
           "add_timing_args", "add_workload_args", "blocks_from_args", "compile_from_args", "csv_list", "keep_arg",
           "load_lut", "merge_choice_from_args", "model_from_args", "model_options_from_args", "model_ref_from_args",
           "on_interrupt", "remote_from_args", "settings_from_args", "spans_arg", "timing_from_args", "use_model_file",
           "weights_from_args", "workloads_from_args"]


class CliError(DsprofError):
    """An option the command line cannot use; `main` prints it as one line, like every `DsprofError`."""


@contextlib.contextmanager
def on_interrupt(message: Callable[[], str]) -> Iterator[None]:
    """Ctrl-C inside becomes `Interrupted` with ``message()``: what the command kept and how to go on
    (`main` prints it as one line, exit 130)."""
    try:
        yield
    except Interrupted:
        raise
    except KeyboardInterrupt:
        raise Interrupted(message()) from None


def add_model_args(parser: argparse.ArgumentParser, classes_help: str | None = None) -> None:
    """The options that pick and build a model, shared by every subcommand that takes one (``classes_help``: what
    ``--num-classes`` means for a command that reads it otherwise)."""
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--model", default="mobilenet_v2",
                       help="model name (see `dsprof models`), or any timm or torchvision classification model as "
                            "timm:NAME or torchvision:NAME (e.g. timm:mobilenetv4_conv_small)")
    add_model_file_arg(which)
    parser.add_argument("--width", type=float, default=None, help="width multiplier (mobilenet_v2 and resnet*), e.g. 1.4")
    parser.add_argument(
        "--depths", default=None, help="blocks per stage (mobilenet_v2 only), 7 comma-separated ints, e.g. 1,2,3,4,3,3,1"
    )
    parser.add_argument("--resolution", type=int, default=None, help="input height and width in pixels (default: the model's)")
    parser.add_argument("--num-classes", type=int, default=None, metavar="N",
                        help=classes_help or f"classes of the model's classifier (default: the model's own, "
                        f"{IMAGENET_CLASSES} for the zoo's); a --weights checkpoint fine-tuned on other classes "
                        "needs its count")
    parser.add_argument("--reparameterize", action="store_true",
                        help="fuse the model's train-time branches into one convolution each first (timm's "
                        "reparameterize_model: MobileOne, RepVGG...), so that its plain chains are blocks")
    parser.add_argument(
        "--weights",
        default=None,
        help="'pretrained' for torchvision/timm weights (downloads), or the path of a local state-dict checkpoint",
    )


def add_device_key_arg(parser) -> None:
    """``--device-key``: which context of a LUT holding several, named as `dsprof.lut.LUT.resolve` reads a name."""
    parser.add_argument("--device-key", default=None, metavar="CONTEXT",
                        help="the LUT context to use where it holds several: its key (ENV/DEVICE/BACKEND/DTYPE/LAYOUT/"
                        "bN/tN), its label as `dsprof plan` prints it ('onnxruntime/cpu t1'), or a backend only one "
                        "context has")


def add_model_file_arg(parser) -> None:
    """``--model-file``, on a parser or a group (every command that reads a user's model takes it)."""
    parser.add_argument(
        "--model-file",
        default=None,
        metavar="PATH.py:FACTORY",
        help="your own model: the function FACTORY in the file PATH.py builds it (called with resolution= and "
        "num_classes= where it takes them); named file:<stem>:<factory> in records, plans and files",
    )


def use_model_file(args: argparse.Namespace) -> None:
    """Register the model that ``--model-file`` names and put its name in ``args.model``, so that every
    command reads a user's model the way it reads a registered one."""
    if getattr(args, "model_file", None) is None:
        return
    from ..models.user_model import register_model_file  # runs the user's file, which imports PyTorch

    args.model = register_model_file(args.model_file)


def model_options_from_args(args: argparse.Namespace) -> dict[str, object]:
    """The model's build options (width, depths, reparameterize, num_classes) that `add_model_args` options give."""
    options: dict[str, object] = {}
    if getattr(args, "num_classes", None) is not None:
        options["num_classes"] = args.num_classes
    if getattr(args, "reparameterize", False):
        options["reparameterize"] = True
    if args.width is not None:
        options["width"] = args.width
    if args.depths is not None:
        try:
            options["depths"] = [int(d) for d in args.depths.split(",")]
        except ValueError:
            raise CliError(f"--depths must be comma-separated ints, got {args.depths!r}") from None
    return options


def weights_from_args(args: argparse.Namespace) -> bool | str:
    """``--weights``: True for 'pretrained' (torchvision/timm weights), the path of a local state dict, or
    False (none given: random initialisation), as `get_model`, `merge`, `search` and `finetune` take it."""
    return True if args.weights == "pretrained" else (args.weights or False)


def model_ref_from_args(args: argparse.Namespace):
    """The one `dsprof.models.ModelRef` that the model options describe (``--model`` or ``--model-file``, ``--width``,
    ``--depths``, ``--resolution``, ``--weights``), resolved once: what every command passes to the API. None where
    no model is named (`dsprof merge` without one: the plan's)."""
    if getattr(args, "model", None) is None:
        return None
    from ..models.ref import ModelRef  # PyTorch

    return ModelRef.of(args.model, options=model_options_from_args(args), resolution=args.resolution,
                       weights=weights_from_args(args))


def model_from_args(args: argparse.Namespace):
    """Build the model that `add_model_args` options describe."""
    return model_ref_from_args(args).build()


def settings_from_args(args: argparse.Namespace):
    """The one timing context (`dsprof.profiler.BackendSettings`) that ``--backend``, ``--device``, ``--dtype``,
    ``--channels-last``, ``--threads`` and ``--compile``/``--compile-mode`` give, as `dsprof.measure` takes it."""
    from ..profiler.backends import BackendSettings  # PyTorch

    return BackendSettings(args.backend, args.device, args.dtype, args.channels_last, args.threads,
                           compile_from_args(args))


def merge_choice_from_args(args: argparse.Namespace):
    """What merges a plan without its own list (`dsprof.lut.MergeChoice`) as ``--lut``, ``--device-key``,
    ``--merge-by`` and ``--accept-modified`` give it."""
    from ..lut.choice import MergeChoice  # pandas

    return MergeChoice(args.lut, args.device_key, args.merge_by, args.accept_modified)


def remote_from_args(args: argparse.Namespace) -> RemoteHost | None:
    """The machine ``--remote`` names (`dsprof.edge.RemoteHost`), reached with ``--ssh``, its runner run by
    ``--remote-python`` in ``--remote-dir``; None without ``--remote``."""
    if not args.remote:
        return None
    return RemoteHost(args.remote, tuple(shlex.split(args.ssh)), args.remote_python, args.remote_dir)


def workloads_from_args(args: argparse.Namespace):
    """What to time (`dsprof.profiler.Workloads`) as ``--variants``, ``--model-variants``, ``--blocks``,
    ``--in-situ`` and ``--calibrate`` (where the command has them) and ``--spans`` give it."""
    variants = None if args.variants is None else csv_list(args.variants)  # None: the backend's (Workloads.for_backend)
    return Workloads(variants, csv_list(args.model_variants), blocks_from_args(args),
                     csv_list(getattr(args, "in_situ", None) or "none"), args.spans,
                     calibrate=bool(getattr(args, "calibrate", False)))


def csv_list(text: str) -> tuple[str, ...]:
    """A comma-separated option as a tuple; () for 'none'."""
    return () if text.strip().lower() == "none" else comma_list(text)


def add_workload_args(p: argparse.ArgumentParser, by_backend: bool = True) -> None:
    """The options that pick what is timed, shared by `measure` and (its default variants by its formats, not
    ``by_backend``: a bundle has no --backend) `export`."""
    linear = (", and linear on --backend torch, which runs each activation as a kernel of its own" if by_backend else
              ", and linear where --format has torchscript, which runs each activation as a kernel of its own")
    p.add_argument("--variants", default=None, help=f"block variants, comma-separated ({', '.join(BLOCK_VARIANTS)}) "
                                                    f"or 'none' (default: {','.join(DEFAULT_BLOCK_VARIANTS)}{linear}); "
                                                    "with merged, linear too for a block that deploys unmerged in a "
                                                    "larger form than built (ResNet's basic block) or holds an "
                                                    "activation other than ReLU and ReLU6 (hardswish, SiLU)")
    p.add_argument("--model-variants", default=",".join(DEFAULT_MODEL_VARIANTS), help="whole-model variants (original, merged, flops_matched) or 'none'")
    p.add_argument("--blocks", default="*", help="fnmatch pattern(s) of block names to time, comma-separated, or 'none'")
    p.add_argument("--spans", type=int, default=0, metavar="N",
                   help="also time the one convolution each run of 2..N consecutive blocks merges into (for merge --spans auto); "
                        "with fused-expand or fused-project among --variants, also each crossing span of 2..N blocks "
                        "as it deploys (for plans of single activations)")
    p.add_argument("--plan", action="append", default=None, metavar="PLAN",
                   help="also time the model merged by this plan (preset name or JSON file) as a whole model; repeatable")
    p.add_argument("--lut", type=Path, default=None,
                   help="a LUT whose rule merges the linearised blocks of a --plan without a merge list (as predict prices)")
    add_device_key_arg(p)
    add_merge_by_arg(p)
    add_accept_modified(p, "a LUT")
    p.add_argument("--merged-model", action="append", default=None, type=Path, metavar="FILE",
                   help="also time a merged model saved by `dsprof merge --out` as a whole model; repeatable")


def blocks_from_args(args: argparse.Namespace) -> list[str] | None:
    """The --blocks patterns, None for 'none'."""
    return None if args.blocks.lower() == "none" else args.blocks.split(",")


def add_merge_by_arg(p: argparse.ArgumentParser) -> None:
    """``--merge-by``: how a plan without a ``merge`` list has it written (`dsprof.records.merges`), on every command
    that builds a merged model."""
    p.add_argument("--merge-by", choices=MERGE_BY, default=None,
                   help="how the linearised blocks of a plan without a merge list merge: lut (where the --lut LUT says "
                        "merging pays, the rule predict prices; the default with --lut) or macs (where merging lowers "
                        "the MACs); a plan's own merge list is replayed as written")


def add_accept_modified(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--accept-modified", action="store_true",
                   help=f"use {what} changed after dsprof wrote them (their checksum does not match, or is missing) as they are; "
                        "without it they are left out (records) or refused (a LUT), with the file and line named")


def compile_from_args(args: argparse.Namespace) -> str | bool:
    """The torch.compile setting of ``--compile-mode`` (a mode) or ``--compile`` (True: `BackendSettings` reads it
    as --backend torch-compile in mode default); "" for neither."""
    return args.compile_mode or (True if args.compile else "")





def add_timing_args(p: argparse.ArgumentParser, title: str | None = None, budget: float = TimingConfig.budget_s) -> None:
    """The timing-protocol options (seconds) of every command that times: `TimingConfig`'s defaults, but ``budget``
    (`explain` times each operator for less). ``title``: the options' heading in ``--help`` where the command's
    timing is one of its steps (`predict --measure`)."""
    p = p.add_argument_group(title) if title else p
    p.add_argument("--target-precision", type=float, default=TimingConfig.target_precision, help="stop once each median is known to this fraction (95 %% interval half-width)")
    p.add_argument("--budget", type=float, default=budget, help="seconds of timed runs per workload at most")
    p.add_argument("--warmup", type=float, default=TimingConfig.warmup_s, help="seconds of warm-up per workload at least")
    p.add_argument("--max-warmup", type=float, default=None,
                   help=f"seconds of warm-up per workload at most (default {TimingConfig.warmup_max_s:g}, or --warmup if longer; "
                        "warm-up ends sooner once the call time settles; the first group of a run warms up for "
                        f"{TimingConfig.first_warmup_s:g} s, or this if less)")
    p.add_argument("--min-samples", type=int, default=TimingConfig.min_samples, help="samples before the precision rule may stop a workload (the --budget may stop it sooner, after 2)")
    p.add_argument("--max-samples", type=int, default=TimingConfig.max_samples, help="samples per workload at most")
    p.add_argument("--min-sample-time", type=float, default=TimingConfig.min_sample_s, help="seconds one sample lasts at least (calls are repeated within it)")


def timing_from_args(args: argparse.Namespace) -> TimingConfig:
    """The `TimingConfig` that `add_timing_args` options give (raises ValueError on bad values)."""
    most = max(TimingConfig.warmup_max_s, args.warmup) if args.max_warmup is None else args.max_warmup
    return TimingConfig(
        warmup_s=args.warmup, min_samples=args.min_samples, max_samples=args.max_samples,
        target_precision=args.target_precision, budget_s=args.budget, min_sample_s=args.min_sample_time,
        warmup_max_s=most, first_warmup_s=min(TimingConfig.first_warmup_s, most),
    )


def spans_arg(text: str | None):
    """``--spans``: None (the plan's), "auto", "none", or inclusive block ranges like ``1-3,5-8`` (`parse_spans`)."""
    if text is None or text == "auto":
        return text
    if text == "none":
        return ()
    try:
        return parse_spans(text)
    except UsageError as exc:
        raise CliError(f"--spans is auto, none or inclusive block ranges like 1-3,5-8: {exc}") from None


def keep_arg(text: str) -> int | float:
    try:
        return float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--keep takes a count (7) or a fraction (0.4), got {text!r}") from None


def pricing_from_args(args: argparse.Namespace):
    """The `dsprof.lut.Pricing` that `dsprof predict`'s or `dsprof plan`'s options give (those it has: --device-key,
    --backend, --batch, --method, --rest, --strict, --max-span)."""
    from ..lut.choice import Pricing

    fields = ("device_key", "backend", "batch", "method", "rest", "strict", "max_span")
    return Pricing(**{f: getattr(args, f) for f in fields if getattr(args, f, None) is not None})


def load_lut(path: Path | None, accept_modified: bool = False):
    """The LUT at ``path`` (None without one), read as ``--accept-modified`` says: a LUT changed after
    `dsprof build-lut` wrote it is refused without it."""
    if path is None:
        return None
    from ..lut.table import LUT  # pandas

    return LUT.load(path, accept_modified=accept_modified)
