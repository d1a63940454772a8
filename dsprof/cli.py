"""The `dsprof` command line: thin argparse adapters over the Python API.

Each command imports what it needs when it runs: `--help`, `--version` and `models` import no PyTorch,
timm or pandas (tests/test_cli_startup.py checks it)."""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from pathlib import Path
from typing import Callable, Iterator, Sequence

from . import __version__
from .constants import DEFAULT_FINETUNE, DEFAULT_MAX_SPAN, IMAGENET_CLASSES
from .errors import DsprofError, Interrupted

__all__ = ["main", "build_parser"]


class CliError(DsprofError):
    """An option the command line cannot use; `main` prints it as one line, like every `DsprofError`."""


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line that names the command (exit 2), like every `DsprofError`:
    the usage is one `--help` away, not seven lines above the message."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}; see `{self.prog} --help`\n")

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        """As argparse's, but an unknown option is refused by the command it was given to, not the top level."""
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            commands = next((a.choices for a in self._actions if isinstance(a, argparse._SubParsersAction)), {})
            owner = commands.get(getattr(parsed, "command", None), self)
            owner.error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Each option's default shown once: appended where the help does not say it already, and only where there
    is one to show (not None, not an off switch, not an empty list)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text.lower() or action.default in (None, False, [], argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


def add_model_args(parser: argparse.ArgumentParser) -> None:
    """The options that pick and build a model, shared by every subcommand that takes one."""
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--model", default="mobilenet_v2", help="model name (see `dsprof models`)")
    add_model_file_arg(which)
    parser.add_argument("--width", type=float, default=None, help="width multiplier (mobilenet_v2 and resnet*), e.g. 1.4")
    parser.add_argument(
        "--depths", default=None, help="blocks per stage (mobilenet_v2 only), 7 comma-separated ints, e.g. 1,2,3,4,3,3,1"
    )
    parser.add_argument("--resolution", type=int, default=None, help="input height and width in pixels (default: the model's)")
    parser.add_argument(
        "--weights",
        default=None,
        help="'pretrained' for torchvision/timm weights (downloads), or the path of a local state-dict checkpoint",
    )


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


def _checkpoint_note(path: Path) -> str:
    if path.exists():
        return f"interrupted: {path} holds the epochs finished; the same command with --resume continues"
    return f"interrupted before the first epoch ended; nothing saved ({path} not written)"


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
    from .models.user_model import register_model_file

    args.model = register_model_file(args.model_file)


def model_options_from_args(args: argparse.Namespace) -> dict[str, object]:
    """The model's build options (width, depths) that `add_model_args` options give."""
    options: dict[str, object] = {}
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
    False (none given: random initialisation), as `get_model`, `merge_to_file`, `search` and `finetune` take it."""
    return True if args.weights == "pretrained" else (args.weights or False)


def model_from_args(args: argparse.Namespace):
    """Build the model that `add_model_args` options describe."""
    from .models import get_model

    options = model_options_from_args(args)
    return get_model(args.model, resolution=args.resolution, pretrained=weights_from_args(args), **options)


def cmd_models(args: argparse.Namespace) -> int:
    from .models.registry import list_models, model_entry

    names = list_models(args.pattern)
    if not names:
        raise CliError(f"no model matches {args.pattern!r}; try `dsprof models` for all")
    width = max(map(len, names))
    for name in names:
        entry = model_entry(name)
        print(f"{name:<{width}}  {entry.default_resolution:>4}px  {entry.description}")
    return 0


def cmd_blocks(args: argparse.Namespace) -> int:
    from .io import atomic_write_text
    from .models import find_blocks, summarize_blocks

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


def add_workload_args(p: argparse.ArgumentParser) -> None:
    """The options that pick what is timed, shared by `measure` and `export`."""
    p.add_argument("--variants", default="original,merged,flops_matched", help="block variants, comma-separated (original, merged, flops_matched, linear) or 'none'")
    p.add_argument("--model-variants", default="original,flops_matched", help="whole-model variants (original, merged, flops_matched) or 'none'")
    p.add_argument("--blocks", default="*", help="fnmatch pattern(s) of block names to time, comma-separated, or 'none'")
    p.add_argument("--spans", type=int, default=0, metavar="N",
                   help="also time the one convolution each run of 2..N consecutive blocks merges into (for merge --spans auto)")
    p.add_argument("--plan", action="append", default=None, metavar="PLAN",
                   help="also time the model merged by this plan (preset name or JSON file) as a whole model; repeatable")
    p.add_argument("--lut", type=Path, default=None,
                   help="a LUT whose rule merges the linearised blocks of a --plan without a merge list (as predict prices)")
    p.add_argument("--device-key", default=None, help="the LUT context to use when it holds several")
    add_merge_by_arg(p)
    add_accept_modified(p, "a LUT")
    p.add_argument("--merged-model", action="append", default=None, type=Path, metavar="FILE",
                   help="also time a merged model saved by `dsprof merge --out` as a whole model; repeatable")


def add_merge_by_arg(p: argparse.ArgumentParser) -> None:
    """``--merge-by``: how a plan without a ``merge`` list has it written (`dsprof.merge.rule`), on every command
    that builds a merged model."""
    from .lut.schema import MERGE_BY

    p.add_argument("--merge-by", choices=MERGE_BY, default=None,
                   help="how the linearised blocks of a plan without a merge list merge: lut (where the --lut LUT says "
                        "merging pays, the rule predict prices; the default with --lut) or macs (where merging lowers "
                        "the MACs); a plan's own merge list is replayed as written")


def extra_models_from_args(args: argparse.Namespace, model, **context: object) -> dict[str, object]:
    """The whole models that --plan and --merged-model add (named after the plan or the file). A plan's merges
    are its own list, else --lut's rule in the LUT context ``context`` picks (--device-key first), else MACs
    with --merge-by macs (`dsprof.merge.rule`); each is printed."""
    extra: dict[str, object] = {}
    if args.plan or args.merged_model:
        from .merge import load_merged
        from .merge.plan import load_plan
        from .merge.rule import merge_by_rule, merge_rule

        plans = [(source, load_plan(source)) for source in args.plan or []]
        lut = _load_lut(args)
        for _, plan in plans:  # refused before any model is merged
            merge_rule(plan, lut=lut is not None, merge_by=args.merge_by)
        key = lut.resolve(args.device_key, **context) if lut is not None else None
        for source, plan in plans:
            extra[plan.name or Path(source).stem], merges = merge_by_rule(
                model, plan, lut=lut, device=key, merge_by=args.merge_by, name=args.model,
                options=model_options_from_args(args))
            print(merges.describe())
        for path in args.merged_model or []:
            extra[Path(path).stem] = load_merged(path)
    return extra


def compile_from_args(args: argparse.Namespace) -> str | bool:
    """The torch.compile setting of ``--compile-mode`` (a mode) or ``--compile`` (True: `BackendSettings` reads it
    as --backend torch-compile in mode default); "" for neither."""
    return args.compile_mode or (True if args.compile else "")


def blocks_from_args(args: argparse.Namespace) -> list[str] | None:
    """The --blocks patterns, None for 'none'."""
    return None if args.blocks.lower() == "none" else args.blocks.split(",")


def add_timing_args(p: argparse.ArgumentParser) -> None:
    """The timing-protocol options of `measure` and `export` (seconds)."""
    p.add_argument("--target-precision", type=float, default=0.02, help="stop once each median is known to this fraction (95 %% interval half-width)")
    p.add_argument("--budget", type=float, default=1.0, help="seconds of timed runs per workload at most")
    p.add_argument("--warmup", type=float, default=0.05, help="seconds of warm-up per workload at least")
    p.add_argument("--min-samples", type=int, default=10, help="samples before the precision rule may stop a workload (the --budget may stop it sooner, after 2)")
    p.add_argument("--max-samples", type=int, default=2000, help="samples per workload at most")
    p.add_argument("--min-sample-time", type=float, default=0.005, help="seconds one sample lasts at least (calls are repeated within it)")


def timing_from_args(args: argparse.Namespace):
    """The `TimingConfig` that `add_timing_args` options give (raises ValueError on bad values)."""
    from .profiler import TimingConfig

    return TimingConfig(
        warmup_s=args.warmup, min_samples=args.min_samples, max_samples=args.max_samples,
        target_precision=args.target_precision, budget_s=args.budget, min_sample_s=args.min_sample_time,
        warmup_max_s=max(TimingConfig.warmup_max_s, args.warmup),
    )


def _csv_list(text: str) -> tuple[str, ...]:
    return () if text.strip().lower() == "none" else tuple(v.strip() for v in text.split(",") if v.strip())


def measure_request_from_args(args: argparse.Namespace, model):
    """The `MeasureRequest` that `dsprof measure`'s options describe."""
    from .profiler import BackendSettings, MeasureRequest

    extra = extra_models_from_args(args, model, backend=args.backend, dtype=args.dtype, batch=args.batch)
    return MeasureRequest(
        model, args.model, model_options_from_args(args), args.resolution, extra,
        BackendSettings(args.backend, args.device, args.dtype, args.channels_last, args.threads, compile_from_args(args)),
        args.batch, _csv_list(args.variants), _csv_list(args.model_variants), blocks_from_args(args),
        _csv_list(args.context), args.spans, timing_from_args(args), args.out, args.resume, args.overwrite,
        calibrate=args.calibrate,
    )


def cmd_measure(args: argparse.Namespace) -> int:
    from .profiler import format_summary, measure_request
    from .profiler.runner import check_measurement_out, threads_note

    if (args.few is None) != (args.like is None):
        raise CliError("--few N and --like LUT go together: N entries timed here, the rest predicted from the LUT")
    if args.few is not None and args.calibrate:
        raise CliError("--few times a few chosen entries, not the calibration group: measure the model in full with "
                       "--calibrate, or drop it")
    if args.few is not None:
        return _measure_few(args)
    if args.calibrate and args.remote:
        raise CliError("--calibrate times a plan built from the run's own entries, here: measure on the device "
                       "without it, or run dsprof there")
    if not args.remote:
        check_measurement_out(args.out, args.resume, args.overwrite)  # before the model (and --plan's merged models) is built
    request = measure_request_from_args(args, model_from_args(args))
    if args.remote:
        return _measure_remote(args, request)
    result = measure_request(request, progress=not args.no_progress, log=lambda m: print(f"warning: {m}", file=sys.stderr))
    print(threads_note(result.threads, result.threads_given))
    print(format_summary(result.summary))
    for name in request.extra_models:  # --plan, --merged-model: the speed-up first, paired with the original
        from .profiler.check import check_line, paired_check

        check = paired_check(result.measurements, name)
        print(f"{name}: {check_line(check)}" if check is not None else
              f"{name}: not paired with the original model (time it in one group with --model-variants original)")
    then = f" ({result.calibrated} of them in the groups --calibrate planned from the others)" if result.calibrated else ""
    print(f"{result.new} workloads measured{then}, {result.skipped} already in the file; records: {result.path}")
    return 0


def _measure_few(args: argparse.Namespace) -> int:
    """`dsprof measure --few N --like LUT`: N entries timed here, the rest predicted, the new context planned."""
    from .plan import plan_front
    from .profiler.few import measure_few
    from .profiler.runner import check_measurement_out, threads_note

    if args.remote:
        raise CliError("--few times here; for a remote device, export the chosen entries' model instead (no --remote)")
    check_measurement_out(args.out, args.resume, args.overwrite)
    from .lut import LUT

    # the --like LUT read once, before the model is built (a bad file is said at once), as --accept-modified says
    like_path, args.like = args.like, LUT.load(args.like, accept_modified=args.accept_modified)
    options = model_options_from_args(args)
    result = measure_few(
        model_from_args(args), args.like, args.few, like_key=args.like_key, name=args.model, model_options=options,
        resolution=args.resolution, max_span=args.spans if args.spans > 1 else DEFAULT_MAX_SPAN, lut_out=args.few_lut_out,
        timing=timing_from_args(args), out=args.out, resume=args.resume, overwrite=args.overwrite,
        progress=not args.no_progress, backend=args.backend, device=args.device, dtype=args.dtype,
        channels_last=args.channels_last, batch=args.batch, threads=args.threads, compile=compile_from_args(args),
    )
    print(threads_note(result.run.threads, result.run.threads_given))
    print(f"timed {len(result.chosen)} of the model's {result.candidates} entries in {like_path}: "
          + "; ".join(result.names))
    print(f"predicted the other {result.candidates - len(result.chosen)} (leave-one-out error of the fit "
          f"{result.fit.loo_error:.1%}); records: {result.run.path}")
    print(f"wrote {result.lut_path} (predicted entries marked: their sources start with 'predicted:')\n")
    front = plan_front(args.model, result.lut, max_span=result.max_span, options=options, resolution=args.resolution)
    print(front.table())
    accept = " --accept-modified" if args.accept_modified else ""
    print(f"\nnext: dsprof plan --lut {result.lut_path} {_model_flags_of(args)} (with --lut {like_path}{accept}: both "
          "contexts side by side)")
    return 0


def _model_flags_of(args: argparse.Namespace) -> str:
    """The model options of ``args`` as `dsprof` flags (what a suggested command repeats)."""
    from .models import model_flags

    flags = model_flags(args.model, model_options_from_args(args))
    return flags + (f" --resolution {args.resolution}" if args.resolution else "")


def _measure_remote(args: argparse.Namespace, request) -> int:
    """`dsprof measure --remote HOST`: export, run over ssh, import (dsprof.edge.remote)."""
    import shlex

    from .edge.remote import measure_remote
    from .profiler import default_batch

    settings = request.settings
    if settings.dtype != "fp32" or settings.channels_last:
        raise CliError("--remote times fp32 bundles: drop --dtype and --channels-last")
    result = measure_remote(
        args.remote, request.model, backend=settings.backend, device=settings.device, threads=settings.threads,
        ssh=shlex.split(args.ssh), python=args.remote_python, remote_dir=args.remote_dir, out=request.out,
        overwrite=request.overwrite, log=None if args.no_progress else print, name=request.name,
        model_options=request.model_options, resolution=request.resolution, extra_models=request.extra_models,
        batch=request.batch or default_batch(settings.device), variants=request.variants,
        model_variants=request.model_variants, blocks=request.blocks, timing=request.timing,
    )
    first = result.measurements[0]
    print(f"{sum(r.ok for r in result.measurements)} workloads measured on {args.remote} ({first.device_name}, "
          f"{first.backend}, {first.threads} threads); records: {result.path}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .edge import export_bundle
    from .runtimes import runtime_of_format

    model = model_from_args(args)
    extra = extra_models_from_args(args, model, batch=args.batch)
    with on_interrupt(lambda: f"interrupted: no bundle written ({args.out} is as it was)"):
        result = export_bundle(
            model, name=args.model, model_options=model_options_from_args(args), resolution=args.resolution,
            extra_models=extra, formats=_csv_list(args.format), batch=args.batch, variants=_csv_list(args.variants),
            model_variants=_csv_list(args.model_variants), blocks=blocks_from_args(args), spans=args.spans,
            timing=timing_from_args(args), out=args.out, overwrite=args.overwrite,
            log=None if args.quiet else print, **({"opset": args.opset} if args.opset else {}),
        )
    runtime = runtime_of_format(result.manifest["formats"][0])
    print(f"wrote {result.path}: {result.workloads} workloads ({', '.join(result.manifest['formats'])}), "
          f"manifest.json and run_bundle.py")
    print(f"next: copy {result.path} to the device, run `python3 run_bundle.py --runtime {runtime}` there, "
          f"then `dsprof import {result.path} RESULTS.jsonl` here (docs/devices/)")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from .edge import import_results

    result = import_results(args.bundle, args.results, out=args.out, overwrite=args.overwrite,
                            allow_partial=args.allow_partial)
    first = result.measurements[0]
    ok = sum(r.ok for r in result.measurements)
    print(f"wrote {result.path}: {ok} of {len(result.measurements)} records with samples, "
          f"device {first.device_name} ({first.backend}, {first.device}, {first.threads} threads), env {first.env_id}")
    print(f"next: dsprof build-lut {result.path.parent} -o lut.csv")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from .profiler import TimingConfig
    from .profiler.explain import explain_block, format_explanation

    explanation = explain_block(
        model_from_args(args), args.block, name=args.model, model_options=model_options_from_args(args),
        backend=args.backend, threads=args.threads, batch=args.batch, timing=TimingConfig(budget_s=args.budget),
    )
    print(format_explanation(explanation))
    if args.out:
        print(f"wrote {explanation.save(args.out)}")
    return 0




def cmd_merge(args: argparse.Namespace) -> int:
    from .plan.apply import format_cost_table, merge_to_file

    options = model_options_from_args(args)
    weights = weights_from_args(args)
    spans = _spans_arg(args.spans)
    outcome = merge_to_file(
        args.model, args.plan, options=options, resolution=args.resolution, weights=weights,
        checkpoint=args.checkpoint, out=args.out, onnx=args.onnx, num_classes=args.num_classes,
        spans=spans, max_span=args.max_span, lut=_load_lut(args), device_key=args.device_key, merge_by=args.merge_by,
    )
    print(outcome.merges.describe())
    print(outcome.report)
    print()
    print(format_cost_table(outcome.costs))
    print("before: original blocks, BatchNorm folded; after: merged model; memory at 16 bits, MACs for one image")
    for path in (outcome.out, outcome.onnx):
        if path is not None:
            print(f"wrote {path}")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from .lut import LUT
    from .models import format_spans
    from .plan import plan_to_file

    lut = LUT.concat([LUT.load(path, accept_modified=args.accept_modified) for path in args.lut])
    picked = args.device_key is not None or args.backend is not None or args.batch is not None
    if args.joint is not None and picked:
        raise CliError("--for plans for several contexts; --device-key, --backend and --batch pick one: give one or "
                       "the other")
    if not picked and len(lut.devices()) > 1:
        return _plan_contexts(args, lut)
    if args.joint is not None:
        raise CliError("--for plans for several contexts: give LUTs holding them (--lut repeated) without --device-key")
    device = lut.resolve(args.device_key, backend=args.backend, batch=args.batch) if picked else None
    outcome = plan_to_file(
        args.model, lut, out=args.out, importance=args.importance, keep=args.keep, budget_ms=args.budget_ms,
        speedup=args.speedup, max_span=args.max_span, device=device, method=args.method,
        options=model_options_from_args(args), resolution=args.resolution, plan_out=args.plan_out,
    )
    print(outcome.front.table())
    _predicted_note(lut, outcome.front.device, str(outcome.front.device))
    if outcome.chosen is not None:
        c = outcome.chosen
        print(f"\nchosen: k = {c.k}, {outcome.front.original_s / c.latency_s:.2f}x, {c.latency_s * 1e3:.3f} ms "
              f"(95 % {c.low_s * 1e3:.3f}-{c.high_s * 1e3:.3f}), spans {format_spans(c.plan.spans, 'none')}"
              + (f", importance loss {c.importance:.4f}" if c.importance is not None else ""))
    for path in outcome.paths:
        print(f"wrote {path}")
    if outcome.merge_command is not None:
        print(f"next: {outcome.merge_command}")
    return 0


def _plan_contexts(args: argparse.Namespace, lut) -> int:
    """`dsprof plan` over the several contexts of the LUTs: the fronts side by side, the cross table, --for."""
    from .plan import plan_contexts_to_file

    if args.budget_ms is not None or args.speedup is not None:
        raise CliError("several contexts: --budget-ms and --speedup choose within one; give --device-key KEY (or "
                       "--keep K with --for)")
    outcome = plan_contexts_to_file(
        args.model, lut, out=args.out, importance=args.importance, keep=args.keep, max_span=args.max_span,
        method=args.method, options=model_options_from_args(args), resolution=args.resolution, joint=args.joint,
        objective=args.objective, plan_out=args.plan_out,
    )
    print(outcome.fronts.table())
    for front in outcome.fronts.fronts:
        _predicted_note(lut, front.device, outcome.fronts.labels[front.device])
    if outcome.chosen is not None:
        print("\n" + joint_chosen_line(outcome.chosen, [outcome.fronts.labels[c] for c in outcome.fronts.joint.contexts]))
    for path in outcome.paths:
        print(f"wrote {path}")
    if outcome.merge_command is not None:
        print(f"next: {outcome.merge_command}")
    return 0


def joint_chosen_line(point, labels: Sequence[str]) -> str:
    """The chosen plan for several contexts in one line: on each context its predicted speed-up over that context's
    original with the 95 % interval and its loss against that context's own plan (per cent, signed); its importance."""
    from .units import percent

    on = "; ".join(f"{label} {x:.2f}x (95 % {lo:.2f}-{hi:.2f}x), {percent(loss)} against its own plan"
                   for label, x, lo, hi, loss in zip(labels, point.speedup, point.speedup_low, point.speedup_high,
                                                     point.loss))
    importance = f"; importance loss {point.importance:.4f}" if point.importance is not None else ""
    return f"chosen: k = {point.k}, one plan for all: {on}; worst {percent(point.worst)}{importance}"


def _predicted_note(lut, key, label: str) -> None:
    predicted = lut.predicted_count(key)
    if predicted:
        print(f"note: {predicted} entries of {label} are predicted from another context's (`dsprof measure --few`), "
              "not measured")


def _spans_arg(text: str | None):
    """``--spans``: None (the plan's), "auto", "none", or inclusive block ranges like ``1-3,5-8`` (`parse_spans`)."""
    from .errors import UsageError
    from .models import parse_spans

    if text is None or text == "auto":
        return text
    if text == "none":
        return ()
    try:
        return parse_spans(text)
    except UsageError as exc:
        raise CliError(f"--spans is auto, none or inclusive block ranges like 1-3,5-8: {exc}") from None


def cmd_build_lut(args: argparse.Namespace) -> int:
    from .lut.build import lut_from_files, read_measurement_files

    with on_interrupt(lambda: f"interrupted: {args.output} not written (it is written whole, at the end)"):
        files = read_measurement_files(args.paths, accept_modified=args.accept_modified)
        lut = lut_from_files(files)
    if not len(lut):
        raise CliError("the measurement files hold no successful record; nothing to tabulate")
    lut.save(args.output)
    frame = lut.to_dataframe()
    print(f"wrote {args.output}: {len(lut)} entries, {int(frame.noisy.sum())} marked noisy (IQR/median > 10 %)")
    modified = sum(len(f.modified_lines) for f in files)
    if modified:
        print(f"{modified} record(s) changed after they were written: "
              + ("used as they are (--accept-modified)" if args.accept_modified else
                 "left out (the warnings name them; --accept-modified uses them)"))
    for key in lut.devices():
        print(f"  {key}  {lut.device_name(key)}: {len(lut.entries(key))} entries")
    return 0


def _load_lut(args: argparse.Namespace):
    """The LUT that --lut names, None without one (--accept-modified: one changed after build-lut wrote it too)."""
    from .lut import LUT

    return LUT.load(args.lut, accept_modified=args.accept_modified) if args.lut else None


def add_accept_modified(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--accept-modified", action="store_true",
                   help=f"use {what} changed after dsprof wrote them (their checksum does not match) as they are; "
                        "without it they are left out (records) or refused (a LUT), with the file and line named")


def cmd_predict(args: argparse.Namespace) -> int:
    import json

    from .io import atomic_write_text, check_output_path
    from .lut import LUTMissWarning
    from .lut.interval import lut_probe, probe_ratio, with_probe
    from .lut.predict import predict_latency
    from .merge.plan import load_plan
    from .merge.rule import decide_merges

    lut = _load_lut(args)  # before the model is built: a bad file is said at once
    if args.json is not None:
        check_output_path(args.json)
    model = model_from_args(args)
    options = model_options_from_args(args)
    key = lut.resolve(args.device_key, backend=args.backend, batch=args.batch)
    merges = None
    if args.plan:  # its merge list, written once (the LUT's rule, or --merge-by macs): priced and measured alike
        merges = decide_merges(model, load_plan(args.plan), lut=lut, device=key, merge_by=args.merge_by,
                               name=args.model, options=options, strict=args.strict)
    plan = merges.plan if merges is not None else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LUTMissWarning)  # the misses are in the prediction; said once below
        pred = predict_latency(model, lut, plan, device=key, name=args.model, options=options, strict=args.strict,
                               rest=args.rest, method=args.method)
    if args.probe is not None:
        from .profiler.check import probe_now

        entry = lut_probe(lut, key)  # before timing: a LUT without the probe says so at once
        pred = with_probe(pred, probe_ratio(probe_now(key, args.probe), entry))  # another environment is refused
    print(pred)
    if merges is not None:
        print(merges.describe())
    if args.probe is None:
        print("drift probe: not timed; `--probe 2` times it here for 2 s and scales the milliseconds by this machine's "
              "speed now against the LUT's runs (the speed-up needs no scaling)")
    result = {"prediction": pred.to_dict()}
    if pred.missing:
        shown = "; ".join(pred.missing[:3]) + ("; ..." if len(pred.missing) > 3 else "")
        message = (f"the LUT covers {pred.coverage:.0%} of the blocks; it lacks {len(pred.missing)} key(s): {shown}. "
                   f"Measure {args.model} on that device and rebuild the LUT")
        if not args.allow_partial:
            raise CliError(message + ", or pass --allow-partial to accept a partial prediction")
        print(f"warning: {message}", file=sys.stderr)
    if args.measure:
        result["check"] = _check(args, lut, key, model, options, plan, pred)
    if args.json is not None:
        atomic_write_text(args.json, json.dumps(result, indent=1, default=str) + "\n")
        print(f"wrote {args.json}")
    return 0


def _check(args: argparse.Namespace, lut, key, model, options, plan, pred) -> dict:
    """`predict --measure`: the merged model and the original timed interleaved in one group here; prints the
    paired line (speed-up first), then the milliseconds and the drift probe; returns them for --json."""
    from .lut import LUTMissError
    from .lut.interval import lut_probe, probe_ratio
    from .profiler import environment, environment_id
    from .profiler.check import check_line, measure_planned_run, paired_check, planned_name
    from .units import percent

    if environment_id(environment()) != key.env_id:
        print(f"warning: the LUT context {key} is another environment than this machine's; "
              "the measurement is taken here", file=sys.stderr)
    # the plan's merge list, as predict priced it (`decide_merges` wrote it in cmd_predict)
    run = measure_planned_run(model, key, plan, name=args.model, options=options, out=args.measure_out,
                              progress=not args.no_progress)
    out: dict = {"file": str(run.path)}
    check = paired_check(run.measurements, planned_name(plan)) if plan is not None else None
    if check is not None:
        print(f"check: {check_line(check, pred)}")
        measured_s = check.merged_s
        out.update(speedup=check.speedup.ratio, speedup_low=check.speedup.low, speedup_high=check.speedup.high,
                   pairs=check.speedup.pairs, inside=pred.contains_speedup(check.speedup.ratio),
                   original_s=check.original_s)
    else:
        print("check: no plan, so nothing to pair: the original model timed alone")
        measured_s = next(r for r in run.measurements if r.scope == "model" and r.ok).median_s
    where = "inside" if pred.contains(measured_s) else "OUTSIDE"
    print(f"  measured {measured_s * 1e3:.3f} ms per batch ({key.batch / measured_s:.1f} FPS) now; predicted "
          f"{pred.total_s * 1e3:.3f} ms {pred.when}: error {percent(pred.total_s / measured_s - 1)}, {where} the 95 % "
          f"interval {pred.low_s * 1e3:.3f}-{pred.high_s * 1e3:.3f} ms")
    samples = [s for r in run.measurements if r.scope == "probe" and r.ok for s in r.samples_s]
    try:
        ratio = probe_ratio(samples, lut_probe(lut, key)) if samples else None
    except LUTMissError:
        ratio = None
    if ratio is not None:
        print(f"  drift probe: during this measurement the machine ran the reference at {ratio:.3f}x its time in the "
              f"LUT's runs ({'slower' if ratio > 1 else 'faster'} by {abs(ratio - 1):.1%})")
    out.update(latency_s=measured_s, latency_inside=pred.contains(measured_s), probe_ratio=ratio)
    return out


def cmd_report(args: argparse.Namespace) -> int:
    from .reports import write_report

    report = write_report(args.paths, args.output, lut=_load_lut(args), plans=args.plans, accuracies=args.accuracies,
                          fronts=args.front, accept_modified=args.accept_modified, resolution=args.resolution,
                          merge_by=args.merge_by)
    for message in report.skipped:
        print(f"skipped: {message}")
    print(f"wrote {len(report.files)} files; open {report.html} (one file, opens offline) or {report.index}")
    print()
    for line in report.answer:  # last: what `make demo` ends with
        print(line)
    return 0


def _keep_arg(text: str) -> int | float:
    try:
        return float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--keep takes a count (7) or a fraction (0.4), got {text!r}") from None


def _train_config(args: argparse.Namespace):
    from .search import TrainConfig

    return TrainConfig(
        epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, momentum=args.momentum,
        weight_decay=args.weight_decay, warmup_epochs=args.warmup_epochs, label_smoothing=args.label_smoothing,
        seed=args.seed, max_batches=args.max_batches, max_eval_batches=args.max_eval_batches, workers=args.workers,
        threads=args.threads,
    )


def cmd_search(args: argparse.Namespace) -> int:
    from .search import search

    checkpoint = args.checkpoint or Path(f"{args.out}.ckpt.pt")
    kept = (lambda: _checkpoint_note(checkpoint)) if args.method == "differentiable" else (
        lambda: f"interrupted: {args.out} not written (the plan is written at the end)")
    with on_interrupt(kept), ThreadUse(args.threads) as use:
        result = search(
            args.model, keep=args.keep, data=args.data, options=model_options_from_args(args),
            resolution=args.resolution, weights=weights_from_args(args), method=args.method, lut=_load_lut(args),
            device_key=args.device_key, lut_resolution=args.lut_resolution, lam=args.lam, score_lr=args.score_lr,
            score_normalize=args.score_normalize, score_bound=args.score_bound, anneal_epochs=args.anneal_epochs,
            config=_train_config(args), out=args.out, checkpoint=checkpoint, resume=args.resume,
            device=args.device, name=args.name, weights_out=args.weights_out, budget_ms=args.budget_ms,
            speedup=args.speedup, max_span=args.max_span, proxy=args.proxy,
            proxy_settings=_proxy_settings(args) if args.method == "importance" else None,
        )
    keep = "".join(map(str, result.plan.keep))
    print(f"keep {keep} ({sum(result.plan.keep)} of {len(result.plan.keep)} blocks keep their activations)")
    proxy = (result.plan.search or {}).get("proxy")
    if proxy:
        print(f"importance by {proxy} in {result.plan.search['seconds']:.1f} s")
    if result.ranking:
        print("ranking (most important first): " + " ".join(map(str, result.ranking)))
    planner = (result.plan.search or {}).get("planner")
    if planner:
        from .models import format_spans

        spans = format_spans(result.plan.spans, "none")
        print(f"planner ({planner['device']}): predicted {planner['latency_s'] * 1e3:.3f} ms, "
              f"{planner['speedup']:.2f}x the original; spans {spans}")
    if args.method in ("importance", "differentiable"):  # the methods that train or score with training data
        print(use.line())
    print(f"wrote {result.out}")
    return 0


# The proxies of dsprof.search.proxies.PROXIES and its DEFAULT_PROXY, named here so that --help imports no torch
# (tests/test_importance_proxies.py checks that they agree).
PROXY_NAMES = ("zero-shot", "logit-distance", "short-finetune", "output-distance", "taylor", "finetune")
DEFAULT_PROXY = "zero-shot"


def _proxy_settings(args: argparse.Namespace, **more):
    """The proxy's settings from --batches, --eval-batches, --steps, --batch-size and --seed (and ``more``)."""
    from .search.proxies import ProxySettings

    return ProxySettings(batches=args.batches, eval_batches=args.eval_batches, steps=args.steps,
                         batch_size=args.batch_size, seed=args.seed, **more)


def _add_proxy_args(p: argparse.ArgumentParser, default: str | None) -> None:
    p.add_argument("--proxy", default=default, choices=PROXY_NAMES,
                   help=f"how each block's importance is scored (docs/search.md): zero-shot (BatchNorm recalibrated, no "
                   "training), logit-distance (the same without labels), short-finetune (--steps), output-distance (the "
                   "block's output, no labels), taylor (gate gradients), finetune "
                   f"(the full measurement: n + 1 fine-tunes of --epochs); default {DEFAULT_PROXY}, the cheapest that "
                   "kept the planner's plan in the top decile on both ground truths")
    p.add_argument("--batches", type=int, default=8,
                   help="training batches the proxy reads (zero-shot, logit-distance: recalibration; output-distance, "
                   "taylor: scoring)")
    p.add_argument("--eval-batches", type=int, default=16,
                   help="validation batches at most (zero-shot, logit-distance, short-finetune)")
    p.add_argument("--steps", type=int, default=10, help="short-finetune: SGD steps per block")


def cmd_importance(args: argparse.Namespace) -> int:
    from .search import TrainConfig
    from .search.importance import importance_to_file

    config = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, seed=args.seed,
                         max_batches=args.max_batches, threads=args.threads)
    with ThreadUse(args.threads) as use:
        scored, record = importance_to_file(
            args.model, proxy=args.proxy, data=args.data, out=args.out, options=model_options_from_args(args),
            resolution=args.resolution, weights=weights_from_args(args), settings=_proxy_settings(args, lr=args.lr),
            config=config, device=args.device,
        )
    blocks = record["model"]["blocks"]
    width = max(map(len, blocks))
    print(f"{'block':<{width + 4}}  importance ({scored.unit})")
    for i, (name, value) in enumerate(zip(blocks, scored.scores)):
        print(f"{i:>2}  {name:<{width}}  {value:.6g}")
    print("ranking (most important first): " + " ".join(map(str, scored.ranking)))
    print(f"{scored.proxy}: {scored.seconds:.2f} s on {record['cost']['device']}")
    print(use.line())
    print(f"wrote {args.out} (for dsprof plan --importance)")
    return 0


def cmd_finetune(args: argparse.Namespace) -> int:
    from .merge import load_plan
    from .search import finetune

    plan = load_plan(args.plan) if args.plan else None
    model = args.model if args.model is not None or plan is not None else "mobilenet_v2"  # with a plan: the plan's
    with on_interrupt(lambda: _checkpoint_note(args.out)), ThreadUse(args.threads) as use:
        result = finetune(
            plan, model=model, options=model_options_from_args(args), data=args.data,
            resolution=args.resolution, weights=weights_from_args(args), config=_train_config(args), distill=args.distill,
            distill_alpha=args.distill_alpha, temperature=args.temperature, layer_pruning=args.layer_prune,
            out=args.out, resume=args.resume, merged_out=args.merged_out, check_merge=not args.no_merge_check,
            device=args.device, ds_plus=args.ds_plus, linear_epochs=args.linear_epochs, lut=_load_lut(args),
            device_key=args.device_key, lut_resolution=args.lut_resolution, merge_by=args.merge_by,
        )
    if result.merges is not None:
        print(result.merges.describe())
    for note in result.notes:
        print(f"layer pruning: {note}")
    print(f"accuracy {result.accuracy:.4f}")
    print(use.line())
    if result.merged_accuracy is not None:
        print(f"{'shrunk' if args.ds_plus else 'merged'} model: accuracy {result.merged_accuracy:.4f}, max |logit difference| to the fine-tuned model "
              f"{result.merged_max_abs_diff:.2e}")
    for path in (result.checkpoint, result.merged_out):
        if path is not None:
            print(f"wrote {path}")
    return 0


class ThreadUse:
    """What the threads of a training command did: CPU time of the whole process (every thread) over the wall time
    of the command's work, measured around it (`with ThreadUse(threads) as use: ...; print(use.line())`)."""

    def __init__(self, threads: int) -> None:
        self.threads, self.cpu_s, self.wall_s = threads, 0.0, 0.0

    def __enter__(self) -> "ThreadUse":
        import time

        self._start = (time.process_time(), time.perf_counter())
        return self

    def __exit__(self, *exc: object) -> None:
        import time

        self.cpu_s, self.wall_s = time.process_time() - self._start[0], time.perf_counter() - self._start[1]

    def line(self) -> str:
        """How many threads were asked for and how many were busy on average, with the machine's load."""
        import os

        busy = self.cpu_s / self.wall_s if self.wall_s > 0 else float("nan")
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        return (f"CPU threads: {self.threads} (--threads, torch.set_num_threads while it ran): {self.cpu_s:.1f} s of "
                f"CPU time in {self.wall_s:.1f} s, {busy:.2f} threads busy on average (loading data and building the "
                f"model run on one); load average {load:.1f} on {os.cpu_count()} logical cores")


def add_train_threads_arg(p: argparse.ArgumentParser) -> None:
    """``--threads`` of the commands that train or score with training data (finetune, search, importance)."""
    p.add_argument("--threads", type=int, default=1,
                   help="CPU threads PyTorch computes with while training (each process; torch.set_num_threads), "
                        "as timing's default; give the core count to train faster on an idle machine")


def _add_training_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", default="digits", help="'digits' (scikit-learn's 8x8 digits, upsampled), 'shapes' (generated, dsprof.search.data.shapes) or an ImageFolder root with train/ and val/")
    p.add_argument("--epochs", type=int, default=10, help="training epochs")
    p.add_argument("--batch-size", type=int, default=64, help="images per step and process")
    p.add_argument("--lr", type=float, default=0.05, help="SGD learning rate at the top of the cosine schedule (per process batch)")
    p.add_argument("--momentum", type=float, default=0.9, help="SGD momentum")
    p.add_argument("--weight-decay", type=float, default=4e-5, help="weight decay of conv/linear weights")
    p.add_argument("--warmup-epochs", type=float, default=0.0, help="linear learning-rate warm-up, epochs")
    p.add_argument("--label-smoothing", type=float, default=0.1, help="label smoothing of the cross-entropy")
    p.add_argument("--seed", type=int, default=0, help="random seed (initialisation, shuffling, random plans)")
    p.add_argument("--max-batches", type=int, default=None, help="at most this many batches per epoch (smoke runs)")
    p.add_argument("--max-eval-batches", type=int, default=None, help="at most this many validation batches")
    p.add_argument("--workers", type=int, default=0, help="data-loading worker processes")
    add_train_threads_arg(p)
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda; under torchrun each process takes its LOCAL_RANK GPU")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint of an interrupted run")


def build_parser() -> argparse.ArgumentParser:
    from .device_context import COMPILE_MODES
    from .lut.schema import METHODS
    from .runtimes import BACKENDS, FORMATS

    parser = _Parser(
        prog="dsprof",
        description="DepthShrinker on your own hardware: profile blocks, build latency tables, "
        "search which activations to remove, merge blocks into dense convolutions, report.",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dsprof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    fmt = _HelpFormatter

    p = sub.add_parser("models", help="list the registered models", formatter_class=fmt)
    p.add_argument("pattern", nargs="?", default="*", help="fnmatch pattern, e.g. 'mobilenet*'")
    p.set_defaults(func=cmd_models)

    p = sub.add_parser(
        "blocks", help="a model's blocks: spec, MACs, params and memory footprint", formatter_class=fmt
    )
    add_model_args(p)
    p.add_argument("--csv", type=Path, default=None, help="also write the table (raw numbers) to this CSV file")
    p.set_defaults(func=cmd_blocks)

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
    p.add_argument("--context", default="none",
                   help="also time each block inside the whole model: the model with the block swapped for these "
                        "variants (merged, linear; comma-separated) against the model, interleaved; 'none' to skip")
    p.add_argument("--calibrate", action="store_true",
                   help="end with the calibration group: the whole model with every block linearised, merged where this "
                        "run's entries say it pays, against the original, paired (its saving widens the intervals of "
                        "predictions to what the runtime realises; docs/predictions.md)")
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
    p.add_argument("--like-key", default=None, help="--few: the --like LUT's context, when it holds several")
    p.add_argument("--few-lut-out", type=Path, default=None,
                   help="--few: the new context's LUT (default: the measurement file with .lut.csv)")
    p.set_defaults(func=cmd_measure)

    p = sub.add_parser(
        "export",
        help="bundle the workloads `measure` times (model files, manifest, runner) for a device that cannot run dsprof",
        formatter_class=fmt,
    )
    add_model_args(p)
    p.add_argument("--format", default="onnx", help=f"model file formats, comma-separated: {', '.join(FORMATS)}")
    p.add_argument("--batch", type=int, default=1, help="images per forward pass")
    p.add_argument("--opset", type=int, default=None,
                   help="ONNX operator set (default: dsprof.edge.EDGE_OPSET, 13, which ONNX Runtime >= 1.6 reads, e.g. 1.10 on Python 3.6)")
    add_workload_args(p)
    add_timing_args(p)
    p.add_argument("--out", type=Path, default=Path("bundle"), help="the bundle folder to write")
    p.add_argument("--overwrite", action="store_true", help="replace an existing bundle (one without results)")
    p.add_argument("--quiet", action="store_true", help="no line per exported workload")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "import", help="turn a bundle runner's results into measurement records (then build-lut, predict, report)",
        formatter_class=fmt,
    )
    p.add_argument("bundle", type=Path, help="the bundle folder that `dsprof export` wrote (its manifest.json)")
    p.add_argument("results", type=Path, help="the runner's results file (JSON Lines)")
    p.add_argument("--out", type=Path, default=Path("results/measurements"), help="folder for the measurement file (named after the settings and device), or a .jsonl file")
    p.add_argument("--overwrite", action="store_true", help="replace an existing measurement file")
    p.add_argument("--allow-partial", action="store_true", help="import although some workloads have no result")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser(
        "explain",
        help="why a block is slow: its latency as a unit beside its operators (torch.profiler, Inductor's kernels, "
             "ONNX Runtime profiling, OpenVINO's per-layer counters: what a compiler fused)",
        formatter_class=fmt,
    )
    add_model_args(p)
    p.add_argument("--block", required=True, help="the block's module name, e.g. features.2 (see `dsprof blocks`)")
    p.add_argument("--backend", default="torch", help="torch, torch-compile, onnxruntime or openvino (CPU)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: 1); with more, the block is also timed on 1")
    p.add_argument("--batch", type=int, default=1, help="images per forward pass")
    p.add_argument("--budget", type=float, default=0.5, help="seconds of timed runs per timed module at most")
    p.add_argument("--out", type=Path, default=None,
                   help="also write the explanation as JSON (name it *.explain.json beside the measurements: `dsprof report` shows it)")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser(
        "merge",
        help="merge the blocks a plan linearises into dense convolutions (exact); write the merged model",
        formatter_class=fmt,
    )
    add_model_args(p)
    p.set_defaults(model=None)  # no --model (or --model-file): the plan's model
    p.add_argument("--plan", default=None,
                   help="a preset (e.g. mbv2-1.4-ds-e, see dsprof.merge.list_presets()) or a plan JSON file; default: "
                        "the plan the --checkpoint carries (`dsprof finetune --out` writes it there)")
    p.add_argument("--checkpoint", type=Path, default=None,
                   help="state dict of the fine-tuned linearised model (or of the original); `dsprof finetune --out` "
                        "also carries the plan and the class count")
    p.add_argument("--out", type=Path, default=None, help="write the merged model here (state dict + plan; dsprof.merge.load_merged)")
    p.add_argument("--onnx", type=Path, default=None, help="also export the merged model to this ONNX file (batch 1)")
    p.add_argument("--num-classes", type=int, default=None,
                   help="classes of the checkpoint's classifier (default: the checkpoint's where it says, as "
                        f"`dsprof finetune`'s do, else the model's, {IMAGENET_CLASSES})")
    p.add_argument("--spans", default=None, metavar="auto|none|A-B,...",
                   help="merge runs of consecutive linear blocks into one convolution each: 'auto' where it pays "
                        "(--lut, or MACs with --merge-by macs), or inclusive block ranges (0-1,3-4: blocks 0 and 1, 3 "
                        "and 4); default: the plan's")
    p.add_argument("--max-span", type=int, default=DEFAULT_MAX_SPAN, help="blocks per span at most (--spans auto)")
    p.add_argument("--lut", type=Path, default=None,
                   help="latency table that decides which linearised blocks of a plan without a merge list merge (the "
                        "rule predict prices) and, with --spans auto, the spans (the planner's; span entries: dsprof "
                        "measure --spans N)")
    p.add_argument("--device-key", default=None, help="the LUT context to use when it holds several")
    add_merge_by_arg(p)
    add_accept_modified(p, "a LUT")
    p.set_defaults(func=cmd_merge)

    p = sub.add_parser(
        "plan", formatter_class=fmt,
        help="before training: the plan (activations, merges, spans) of lowest predicted latency for every k, "
             "and with --importance the accuracy-latency front, from a LUT",
    )
    add_model_args(p)
    p.add_argument("--lut", type=Path, required=True, action="append",
                   help="LUT file from `dsprof build-lut` (span entries: measure --spans N); repeatable. Without "
                        "--device-key or --backend, a LUT (or LUTs) holding several contexts plans each, and prints "
                        "what each context's plans lose on the others")
    p.add_argument("--importance", type=Path, default=None,
                   help="the file `dsprof importance` writes (refused when measured for another model), or JSON: "
                        "{block index: accuracy loss without its activations} or a list, one per block")
    p.add_argument("--for", dest="joint", default=None, metavar="CONTEXT,CONTEXT[,...]",
                   help="also one plan for several contexts (labels as printed, keys, or backends): at each k the "
                        "least --objective loss against each one's own plan (with --importance also the least "
                        "importance loss, which --keep writes); --keep K writes it")
    p.add_argument("--objective", default="worst", choices=("worst", "mean"),
                   help="--for: minimise the worst or the mean relative latency over the contexts")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--keep", type=_keep_arg, default=None,
                        help="write the plan in which this many blocks keep their activations: a count (7) or a "
                             "fraction of the blocks (0.4), as search --keep")
    budget.add_argument("--budget-ms", type=float, default=None, help="write the plan for this predicted latency budget (ms)")
    budget.add_argument("--speedup", type=float, default=None, help="write the plan for this predicted speed-up over the original")
    p.add_argument("--max-span", type=int, default=DEFAULT_MAX_SPAN, help="blocks per span at most (1: no spans)")
    p.add_argument("--method", default="auto", choices=METHODS, help="how block changes are counted (see dsprof predict)")
    p.add_argument("--device-key", default=None,
                   help="the LUT context to plan (ENV/DEVICE/BACKEND/DTYPE/LAYOUT/bN/tN) when it holds several")
    p.add_argument("--backend", default=None, help="pick the LUT context to plan by backend, as predict --backend")
    p.add_argument("--batch", type=int, default=None, help="pick the LUT context to plan by batch size")
    add_accept_modified(p, "a LUT")
    p.add_argument("--out", type=Path, default=Path("front.json"), help="the front as JSON (and CSV beside it)")
    p.add_argument("--plan-out", type=Path, default=None,
                   help="the chosen plan file (default: --out with .plan.json); for merge, finetune, measure --plan, export --plan, predict")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("build-lut", help="latency lookup table from measurement files of one or many devices", formatter_class=fmt)
    p.add_argument("paths", nargs="+", type=Path, help="measurement files (.jsonl) or folders holding them")
    p.add_argument("-o", "--output", type=Path, default=Path("lut.csv"), help="the LUT file to write (CSV, written atomically)")
    add_accept_modified(p, "records")
    p.set_defaults(func=cmd_build_lut)

    p = sub.add_parser("predict", help="predict a model's latency from a LUT (and --measure it to check)", formatter_class=fmt)
    add_model_args(p)
    p.add_argument("--lut", type=Path, required=True, help="LUT file from `dsprof build-lut`")
    p.add_argument("--plan", default=None, help="a plan file (JSON) or preset name (e.g. mbv2-ds-a); none: the original model")
    p.add_argument("--device-key", default=None, help="LUT context ENV/DEVICE/BACKEND/DTYPE/LAYOUT/bN/tN; needed when the LUT holds several")
    p.add_argument("--backend", default=None, help="pick the LUT context by backend")
    p.add_argument("--batch", type=int, default=None, help="pick the LUT context by batch size")
    p.add_argument("--strict", action="store_true", help="a LUT miss is an error (raised by the library, naming the key)")
    p.add_argument("--allow-partial", action="store_true",
                   help="print a prediction that lacks some LUT keys (its coverage said) and exit 0; without it, exit 2")
    p.add_argument("--rest", choices=("auto", "stem+head", "model-minus-blocks"), default="auto",
                   help="what stands for the part outside the blocks: the stem and head timed alone, or the measured "
                        "original model minus its blocks; auto: the latter where the LUT has the whole model")
    p.add_argument("--method", choices=METHODS, default="auto",
                   help="count merged blocks by their savings timed alone (isolated), timed alone and bounded by "
                        "how much longer the blocks take inside the whole model (in-model), inside the running model "
                        "(context), or alone scaled by the in-context/isolated ratio (context-scaled); the context "
                        "methods need `dsprof measure --context`; auto: in-model where the LUT has the whole model, "
                        "its stem and head, else isolated (docs/predictions.md)")
    p.add_argument("--probe", type=float, default=None, metavar="SECONDS",
                   help="time the drift probe here for SECONDS (e.g. 2) and scale the milliseconds by how much slower or "
                        "faster this machine runs it now than in the LUT's runs (needs a LUT of this environment, "
                        "measured with the probe); default: not scaled")
    p.add_argument("--measure", action="store_true",
                   help="also merge the model per the plan and time it here interleaved with the original in one group: "
                        "the measured speed-up (paired) against the predicted one and its interval, then the milliseconds "
                        "and the drift probe's ratio during it")
    p.add_argument("--json", type=Path, default=None, metavar="FILE",
                   help="also write the prediction (speed-up first, then milliseconds) and the check as JSON")
    p.add_argument("--measure-out", type=Path, default=Path("results/predict"), help="where --measure writes its measurement file")
    add_merge_by_arg(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_accept_modified(p, "a LUT")
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser("report", help="the paper's tables and plots from measurement files", formatter_class=fmt)
    p.add_argument("paths", nargs="+", type=Path, help="measurement files (.jsonl) or folders holding them")
    p.add_argument("-o", "--output", type=Path, default=Path("report"),
                   help="folder for report.html (self-contained), index.md, tables/ and plots/")
    add_model_file_arg(p)
    p.add_argument("--resolution", type=int, default=None,
                   help="report the records measured at this input size in pixels, as measure took it (default: "
                        "every resolution the files hold)")
    p.add_argument("--lut", type=Path, default=None, help="a LUT: predicted vs measured latency of merged and plan models")
    p.add_argument("--plans", nargs="*", default=[],
                   help="plan files, preset names or merged models (.pt, `dsprof merge --out`): marked in the block plot, drawn "
                        "in the memory plot, predicted where measured")
    p.add_argument("--accuracies", type=Path, default=None,
                   help="CSV with columns model,accuracy (fractions or %%, detected) for the accuracy-vs-FPS plot")
    p.add_argument("--front", type=Path, nargs="*", default=None,
                   help="front files of `dsprof plan --out` (default: front.json and *.front.json in the measurement folders)")
    add_merge_by_arg(p)
    add_accept_modified(p, "records and a LUT")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser(
        "search", help="choose which blocks keep their activations (block importance through the planner); writes a plan",
        formatter_class=fmt,
    )
    add_model_args(p)
    _add_training_args(p)
    budget = p.add_mutually_exclusive_group(required=True)
    budget.add_argument("--keep", type=_keep_arg, default=None,
                        help="blocks that keep their activations: a count (7) or a fraction of the blocks (0.4), as "
                             "plan --keep")
    budget.add_argument("--budget-ms", type=float, default=None,
                        help="instead of --keep: the LUT's predicted latency per batch at most (importance, planner)")
    budget.add_argument("--speedup", type=float, default=None,
                        help="instead of --keep: the LUT's predicted speed-up over the original at least (importance, planner)")
    p.add_argument("--method", default="importance", choices=("importance", "differentiable", "planner", "random"),
                   help="importance: each block scored by --proxy (finetune: linearised alone and fine-tuned "
                   "--epochs), the plan of least summed importance chosen by the planner (with --lut: its merges and spans too; without: the k most "
                   "important blocks keep their activations) -- the default, as the ground truth supports "
                   "(docs/search.md); differentiable: the paper's search (Sec. 4.2); planner: the LUT's fastest plan, "
                   "no training; random: the random-search baseline (seeded by --seed)")
    _add_proxy_args(p, None)
    p.add_argument("--lut", type=Path, default=None, help="LUT file: the planner's latencies (importance, planner); the "
                   "differentiable search's decay weights = each block's latency saving there (default: MAC saving)")
    p.add_argument("--device-key", default=None, help="the LUT context (ENV/DEVICE/BACKEND/DTYPE/LAYOUT/bN/tN) when it holds several")
    p.add_argument("--lut-resolution", type=int, default=None, help="the resolution the LUT was measured at (default: --resolution)")
    p.add_argument("--max-span", type=int, default=DEFAULT_MAX_SPAN,
                   help="the planner's spans: consecutive linear blocks merged as one, at most this many (1: none; span "
                   "entries: dsprof measure --spans N)")
    p.add_argument("--lam", type=float, default=1e-3,
                   help="differentiable search: strength of the latency-weighted L1 decay of the gate scores")
    p.add_argument("--score-lr", type=float, default=0.01, help="learning rate of the gate scores")
    p.add_argument("--score-normalize", action="store_true", help="divide the scores' straight-through gradient by its largest entry")
    p.add_argument("--score-bound", type=float, default=None, help="re-centre the gate scores on their initial value and keep them within BOUND of it")
    p.add_argument("--anneal-epochs", type=float, default=0.0, help="lower the kept blocks from all to --keep over this many epochs")
    p.add_argument("--name", default=None, help="name stored in the plan")
    p.add_argument("--out", type=Path, required=True, help="the plan file to write (JSON)")
    p.add_argument("--checkpoint", type=Path, default=None, help="search checkpoint, written every epoch (none given: OUT.ckpt.pt)")
    p.add_argument("--weights-out", type=Path, default=None, help="also save the searched weights (original architecture)")
    add_accept_modified(p, "a LUT")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser(
        "importance", formatter_class=fmt,
        help="each block's importance (what it loses without its activations) by a proxy; the file dsprof plan --importance takes",
    )
    add_model_args(p)
    p.add_argument("--data", default="digits", help="'digits' (scikit-learn's 8x8 digits, upsampled), 'shapes' (generated) "
                   "or an ImageFolder root with train/ and val/ (ImageNet layout)")
    _add_proxy_args(p, DEFAULT_PROXY)
    p.add_argument("--batch-size", type=int, default=64, help="images per batch")
    p.add_argument("--lr", type=float, default=DEFAULT_FINETUNE["lr"], help="learning rate of short-finetune and finetune")
    p.add_argument("--epochs", type=int, default=DEFAULT_FINETUNE["epochs"], help="finetune: epochs of each of the n + 1 fine-tunes")
    p.add_argument("--max-batches", type=int, default=None, help="finetune: at most this many batches per epoch")
    p.add_argument("--seed", type=int, default=0, help="random seed (batch order, augmentation, fine-tuning)")
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda")
    add_train_threads_arg(p)
    p.add_argument("--out", type=Path, default=Path("importance.json"), help="the importance file to write (JSON)")
    p.set_defaults(func=cmd_importance)

    p = sub.add_parser(
        "finetune", help="fine-tune the linearised model of a plan (free ReLU6, optional self-distillation)", formatter_class=fmt
    )
    add_model_args(p)
    _add_training_args(p)
    p.add_argument("--plan", default=None, help="plan file or preset; without one the original model (--model) is trained")
    p.set_defaults(model=None)  # with --plan and no --model (or --model-file): the plan's model; else mobilenet_v2
    p.add_argument("--distill", action="store_true", help="self-distillation from the original model (KL divergence)")
    p.add_argument("--distill-alpha", type=float, default=0.5, help="weight of the distillation term (1 - alpha on cross-entropy)")
    p.add_argument("--temperature", type=float, default=2.0, help="distillation temperature")
    p.add_argument("--layer-prune", action="store_true", help="baseline: drop the plan's linearised blocks instead (where shapes allow)")
    p.add_argument("--out", type=Path, default=Path("finetune.pt"), help="checkpoint, every epoch; `dsprof merge --checkpoint` takes it")
    p.add_argument("--merged-out", type=Path, default=None, help="also write the merged model (dsprof.merge.load_merged)")
    p.add_argument("--no-merge-check", action="store_true", help="skip merging and comparing the merged model's outputs")
    p.add_argument("--lut", type=Path, default=None,
                   help="a LUT whose rule merges the linearised blocks of a plan without a merge list (as predict prices)")
    p.add_argument("--device-key", default=None, help="the LUT context to use when it holds several")
    p.add_argument("--lut-resolution", type=int, default=None, help="the resolution the LUT was measured at (default: --resolution)")
    add_merge_by_arg(p)
    add_accept_modified(p, "a LUT")
    p.add_argument("--ds-plus", action="store_true", help="DepthShrinker+: train the model expanded (VGG, MobileNetV2 rules), shrink it back; --merged-out gets the original-architecture weights")
    p.add_argument("--linear-epochs", type=int, default=None, help="DepthShrinker+: last epochs with the expanded blocks' activations removed (default: a quarter)")
    p.set_defaults(func=cmd_finetune)

    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) or a usage error (2, one line: `_Parser.error`)
        return 0 if exc.code is None else int(exc.code) if isinstance(exc.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    def one_line(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"warning: {message}", file=sys.stderr)  # for a user: the message, not our source line

    previous = warnings.showwarning
    warnings.showwarning = one_line
    try:
        use_model_file(args)
        return args.func(args)
    except DsprofError as exc:  # the one place errors a user can fix are caught; anything else is a bug
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"dsprof {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C: one line (what was kept, how to go on, where a command says), 130
        message = " ".join(str(exc).split()) if isinstance(exc, Interrupted) else "interrupted"
        print(f"dsprof {args.command}: {message}", file=sys.stderr)
        return 130
    finally:
        warnings.showwarning = previous


if __name__ == "__main__":
    sys.exit(main())
