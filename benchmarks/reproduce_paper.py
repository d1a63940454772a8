"""The paper's profiling tables and figures, regenerated on the machine at hand with dsprof's own APIs.

    .venv/bin/python benchmarks/reproduce_paper.py --quick --threads 1     # about 8 min on a 2-core CPU
    .venv/bin/python benchmarks/reproduce_paper.py --threads 1             # full: 224 px, longer timing
    python benchmarks/reproduce_paper.py --device cuda                     # batch 128 on a GPU (Tab. 4 off)

What it does, in order (every measurement through `dsprof.measure`, appended to JSON Lines files
under ``--out``/measurements, so an interrupted run resumes where it stopped):

1. Tab. 1 -- MobileNetV2, MobileNetV2-1.4, EfficientNet-Lite0, ResNet-50/101/152: every block
   (original, and its FLOPs-matched dense conv; MobileNetV2s also the merged block) and the whole
   original and FLOPs-matched models. The MobileNetV2 runs also time the paper's presets (Tab. 8)
   merged for real with random weights (`dsprof.merging.merge_model`), in the same interleaved rounds
   as their original: that is Tab. 2 (MBV2-DS-A..D) and Tab. 3 (MBV2-1.4-DS-A..F).
2. Tab. 9 -- the depth/width variants of equal FLOPs (MobileNetV2 depths with scaled widths, ResNets
   with all channels scaled): whole models, and their original blocks for the LUT.
3. Tab. 4 -- the same presets at batch 1 on the CPU through ONNX Runtime and TFLite (``--cpu-backends``).
4. A LUT (`dsprof.lut.build_lut`) from the block, stem and head measurements, and its predicted FPS
   for every model above next to the measured FPS (`dsprof.lut.predict_latency`).
5. Fig. 1 (block latency, original vs FLOPs-matched dense conv), Fig. 5 (MobileNetV2-1.4 original vs
   merged blocks, with the blocks whose activations DS-A/C/E keep), Fig. 6 (memory of
   MobileNetV2-1.4 before/after DS-E, 16 bits).

Everything lands in ``--out``: ``summary.md`` (each table beside the paper's numbers, and the
device), ``tables/*.csv``, ``plots/*.png``, ``lut.csv``. The paper's devices differ from ours: the
tables compare ratios (dense/original, merged/original), not absolute FPS.
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import math
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from dsprof.cli.options import add_timing_args, timing_from_args
from dsprof.io import atomic_write_text
from dsprof.lut import DeviceContext, build_lut, predict_latency
from dsprof.planning.decide import merge_rule
from dsprof.merging import merge_model
from dsprof.records.plan import Plan, load_preset
from dsprof.models import ModelRef, get_model
from dsprof.profiler import BackendSettings, TimingConfig, Workloads, measure
from dsprof.records.measurement import Measurement, read_measurements
from dsprof.reports import block_latency_figure, block_table, memory_figure, memory_table, render
from dsprof.reports.plots import close
from dsprof.reports.tables import model_title


@dataclass(frozen=True)
class Net:
    """One model of a table: the paper's name for it, dsprof's registered name and build options."""

    label: str
    model: str
    options: dict = field(default_factory=dict)
    presets: tuple[str, ...] = ()


MBV2_PRESETS = ("mbv2-ds-a", "mbv2-ds-b", "mbv2-ds-c", "mbv2-ds-d")
MBV2_14_PRESETS = ("mbv2-1.4-ds-a", "mbv2-1.4-ds-b", "mbv2-1.4-ds-c", "mbv2-1.4-ds-d", "mbv2-1.4-ds-e", "mbv2-1.4-ds-f")
TAB1 = (
    Net("MobileNetV2", "mobilenet_v2", {}, MBV2_PRESETS),
    Net("MobileNetV2-1.4", "mobilenet_v2", {"width": 1.4}, MBV2_14_PRESETS),
    Net("EfficientNet-Lite0", "efficientnet_lite0"),
    Net("ResNet-50", "resnet50"),
    Net("ResNet-101", "resnet101"),
    Net("ResNet-152", "resnet152"),
)
TAB9 = (
    Net("ResNet-18 x1.535", "resnet18", {"width": 1.535}),
    Net("ResNet-34 x1.07", "resnet34", {"width": 1.07}),
    Net("ResNet-50 x1.00", "resnet50", {"width": 1.0}),
    Net("ResNet-101 x0.73", "resnet101", {"width": 0.73}),
    Net("ResNet-152 x0.60", "resnet152", {"width": 0.6}),
    Net("MBV2 [1,1,1,1,1,1,1] x1.45", "mobilenet_v2", {"depths": [1, 1, 1, 1, 1, 1, 1], "width": 1.45}),
    Net("MBV2 [1,2,2,2,1,1,1] x1.25", "mobilenet_v2", {"depths": [1, 2, 2, 2, 1, 1, 1], "width": 1.25}),
    Net("MBV2 [1,2,3,3,2,2,1] x1.11", "mobilenet_v2", {"depths": [1, 2, 3, 3, 2, 2, 1], "width": 1.11}),
    Net("MBV2 [1,2,3,4,3,3,1] x1.00", "mobilenet_v2", {"depths": [1, 2, 3, 4, 3, 3, 1], "width": 1.0}),
    Net("MBV2 [1,3,4,6,5,5,1] x0.85", "mobilenet_v2", {"depths": [1, 3, 4, 6, 5, 5, 1], "width": 0.85}),
)
FIG5_PLANS = ("mbv2-1.4-ds-a", "mbv2-1.4-ds-c", "mbv2-1.4-ds-e")  # the paper marks three variants
FIG6_PLAN = "mbv2-1.4-ds-e"

# ---- the paper's numbers (FPS; batch 128 on V100/2080Ti, 64 on TX2) ---------------------------------
PAPER_TAB1 = {  # GFLOPs, (original, dense) FPS on V100, 2080Ti, TX2
    "MobileNetV2": (0.33, (3088, 12090), (2364, 9351), (115, 397)),
    "MobileNetV2-1.4": (0.63, (2127, 8846), (1617, 6869), (73, 267)),
    "EfficientNet-Lite0": (0.41, (2731, 11174), (2185, 9577), (98, 360)),
    "ResNet-50": (4.14, (1079, 2182), (874, 1862), (45, 53)),
    "ResNet-101": (7.88, (642, 1509), (538, 1279), (28, 44)),
    "ResNet-152": (11.62, (449, 1082), (378, 917), (19, 30)),
}
PAPER_TAB9 = {  # 2080Ti, TX2 bs32, TX2 bs1 FPS
    "ResNet-18 x1.535": (1476, 85, 28), "ResNet-34 x1.07": (1388, 61, 27), "ResNet-50 x1.00": (874, 46, 20),
    "ResNet-101 x0.73": (792, 36, 15), "ResNet-152 x0.60": (674, 31, 11),
    "MBV2 [1,1,1,1,1,1,1] x1.45": (2499, 112, 56), "MBV2 [1,2,2,2,1,1,1] x1.25": (2167, 98, 52),
    "MBV2 [1,2,3,3,2,2,1] x1.11": (2114, 103, 39), "MBV2 [1,2,3,4,3,3,1] x1.00": (2149, 103, 33),
    "MBV2 [1,3,4,6,5,5,1] x0.85": (1916, 96, 23),
}
PAPER_TAB23 = {  # MFLOPs, FPS on V100, 2080Ti, TX2 (Tab. 2: MBV2, Tab. 3: MBV2-1.4)
    "MobileNetV2": (330, 3088, 2364, 115), "mbv2-ds-a": (287, 5012, 3505, 177), "mbv2-ds-b": (272, 5448, 4074, 199),
    "mbv2-ds-c": (261, 6189, 4691, 226), "mbv2-ds-d": (253, 6776, 5257, 258),
    "MobileNetV2-1.4": (630, 2127, 1617, 73), "mbv2-1.4-ds-a": (519, 3827, 2881, 134),
    "mbv2-1.4-ds-b": (502, 4778, 3356, 163), "mbv2-1.4-ds-c": (492, 4597, 3537, 159),
    "mbv2-1.4-ds-d": (484, 5560, 3926, 184), "mbv2-1.4-ds-e": (474, 5317, 4175, 179),
    "mbv2-1.4-ds-f": (415, 10804, 7687, 344),
}
PAPER_TAB4 = {  # latency (s) on Pixel 3, Raspberry Pi 4, batch 1, TFLite
    "MobileNetV2": (0.073, 0.200), "mbv2-ds-a": (0.065, 0.147), "mbv2-ds-b": (0.049, 0.133),
    "mbv2-ds-c": (0.047, 0.124), "mbv2-ds-d": (0.045, 0.116),
    "MobileNetV2-1.4": (0.127, 0.299), "mbv2-1.4-ds-a": (0.089, 0.204), "mbv2-1.4-ds-b": (0.105, 0.196),
    "mbv2-1.4-ds-c": (0.083, 0.185), "mbv2-1.4-ds-e": (0.079, 0.170),
}


# ---- measuring ---------------------------------------------------------------------------------------
@dataclass
class Settings:
    device: str
    backend: str
    batch: int | None
    threads: int | None
    resolution: int
    timing: TimingConfig
    out: Path
    progress: bool
    report_only: bool = False

    @property
    def measurements(self) -> Path:
        return self.out / "measurements"


@functools.cache
def folder_records(folder: Path) -> tuple[Measurement, ...]:
    """Every record of the measurement files in ``folder``, read once (``--report-only`` measures nothing)."""
    return tuple(r for path in sorted(folder.glob("*.jsonl")) for r in read_measurements(path))


def measured_records(net: Net, s: Settings, backend: str, device: str) -> list[Measurement]:
    """What the measurement folder already holds for ``net`` in this context (``--report-only``)."""
    return [r for r in folder_records(s.measurements)
            if (r.model, r.build_options, r.backend, r.device.split(":")[0], r.model_options.get("resolution"))
            == (net.model, net.options, backend, device.split(":")[0], s.resolution)]


@functools.cache
def preset_plan(name: str, resolution: int) -> Plan:
    """Preset ``name`` with the merge list MACs write (`--merge-by macs`): the presets are timed before there is a
    LUT, so MACs decide which of their linearised blocks merge, and the LUT then prices that same list."""
    plan = load_preset(name)
    model = ModelRef.of(plan.model, options=plan.options, resolution=resolution)
    return merge_rule(model, merge_by="macs").decide(plan).plan


def merged_presets(net: Net, resolution: int) -> dict[str, torch.nn.Module]:
    """The net's presets merged for real (random weights; latency and MACs do not depend on them)."""
    out = {}
    for name in net.presets:
        plan = preset_plan(name, resolution)
        out[name] = merge_model(get_model(plan.model, resolution=resolution, **plan.options), plan)
    return out


def run_measure(net: Net, s: Settings, *, backend: str | None = None, device: str | None = None, batch: int | None = None,
                variants=(), model_variants=("original",), extra=None) -> list[Measurement]:
    if s.report_only:
        return measured_records(net, s, backend or s.backend, device or s.device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ONNX export/TFLite conversion chatter; errors still raise
        result = measure(ModelRef.of(net.model, options=net.options, resolution=s.resolution), extra_models=extra,
                         settings=BackendSettings(backend=backend or s.backend, device=device or s.device, threads=s.threads),
                         batch=batch if batch is not None else s.batch,
                         workloads=Workloads(variants=variants, model_variants=model_variants, blocks="*" if variants else None),
                         timing=s.timing, out=s.measurements, resume=True, progress=s.progress)
    failed = [r for r in result.measurements if not r.ok]
    for r in failed:
        print(f"  ! {net.label} {r.name} [{r.variant}]: {r.error}", file=sys.stderr)
    return result.measurements


def model_records(records: list[Measurement], variant: str, name: str | None = None) -> list[Measurement]:
    """The whole-model records of ``variant`` (and ``name`` for custom models) that were measured, in order."""
    return [r for r in records if r.ok and r.scope == "model" and r.variant == variant and (name is None or r.name == name)]


def by_model(records: list[Measurement], variant: str, name: str | None = None) -> Measurement | None:
    """The last whole-model record of ``variant`` (and ``name`` for custom models)."""
    hits = model_records(records, variant, name)
    return hits[-1] if hits else None


def fps(r: Measurement | None) -> float:
    return r.batch / r.median_s if r is not None else math.nan


def pooled_fps(records: list[Measurement], variant: str, name: str | None = None) -> float:
    """FPS from the median of every sample of the whole-model records of ``variant`` (and ``name``), as a LUT pools
    them: the original is timed twice where presets are (once with the FLOPs-matched model, once with the presets)."""
    hits = model_records(records, variant, name)
    return hits[0].batch / statistics.median(s for r in hits for s in r.samples_s) if hits else math.nan


def noisy(*records: Measurement | None) -> bool:
    """Whether any of the records spread more than the profiler's noise threshold (IQR/median)."""
    return any(r is not None and r.stats.noisy for r in records)


# ---- tables --------------------------------------------------------------------------------------------
def tab1(runs: dict[str, list[Measurement]]) -> pd.DataFrame:
    rows = []
    for label, records in runs.items():
        orig, dense = by_model(records, "original"), by_model(records, "flops_matched")
        paper = PAPER_TAB1[label]
        rows.append({"model": label, "GMACs": orig.macs / 1e9 if orig else math.nan, "paper GFLOPs": paper[0],
                     "original FPS": fps(orig), "dense FPS": fps(dense), "dense/original": fps(dense) / fps(orig),
                     "paper V100": paper[1][1] / paper[1][0], "paper 2080Ti": paper[2][1] / paper[2][0],
                     "paper TX2": paper[3][1] / paper[3][0], "noisy": noisy(orig, dense)})
    return pd.DataFrame(rows)


def tab9(runs: dict[str, list[Measurement]]) -> pd.DataFrame:
    rows = []
    for label, records in runs.items():
        orig = by_model(records, "original")
        paper = PAPER_TAB9[label]
        rows.append({"model": label, "GMACs": orig.macs / 1e9 if orig else math.nan, "FPS": fps(orig),
                     "paper 2080Ti FPS": paper[0], "paper TX2 bs32 FPS": paper[1], "paper TX2 bs1 FPS": paper[2],
                     "noisy": noisy(orig)})
    table = pd.DataFrame(rows)
    # Relative to the family's standard model (ResNet-50, MobileNetV2 1.0), as Tab. 9 is read
    for family, ref in (("ResNet", "ResNet-50 x1.00"), ("MBV2", "MBV2 [1,2,3,4,3,3,1] x1.00")):
        rows_of = table["model"].str.startswith(family)
        if ref in set(table["model"]):
            base = table.loc[table["model"] == ref].iloc[0]
            table.loc[rows_of, "FPS vs standard"] = table.loc[rows_of, "FPS"] / base["FPS"]
            table.loc[rows_of, "paper 2080Ti vs standard"] = table.loc[rows_of, "paper 2080Ti FPS"] / base["paper 2080Ti FPS"]
    return table


def tab23(runs: dict[str, list[Measurement]], nets: dict[str, Net]) -> pd.DataFrame:
    rows = []
    for label, records in runs.items():
        net = nets[label]
        if not net.presets:
            continue
        orig = by_model(records, "original")
        for name in (label, *net.presets):
            r = orig if name == label else by_model(records, "custom", name)
            paper = PAPER_TAB23.get(name, (math.nan,) * 4)
            base = PAPER_TAB23[label]
            rows.append({"model": name, "MMACs": r.macs / 1e6 if r else math.nan, "paper MFLOPs": paper[0],
                         "FPS": fps(r), "speed-up": fps(r) / fps(orig),
                         "paper V100": paper[1] / base[1], "paper 2080Ti": paper[2] / base[2], "paper TX2": paper[3] / base[3],
                         "noisy": noisy(r, orig)})
    return pd.DataFrame(rows)


def tab4(runs: dict[tuple[str, str], list[Measurement]], nets: dict[str, Net]) -> pd.DataFrame:
    rows: dict[str, dict] = {}
    for (label, backend), records in runs.items():
        orig = by_model(records, "original")
        for name in (label, *nets[label].presets):
            r = orig if name == label else by_model(records, "custom", name)
            row = rows.setdefault(name, {"model": name})
            row[f"{backend} ms"] = r.median_s * 1e3 if r else math.nan
            row[f"{backend} change"] = (r.median_s / orig.median_s - 1) if r and orig else math.nan
            row["noisy"] = row.get("noisy", False) or noisy(r, orig)
            paper, base = PAPER_TAB4.get(name), PAPER_TAB4[label]
            row["paper Pixel 3 change"] = paper[0] / base[0] - 1 if paper else math.nan
            row["paper Raspi 4 change"] = paper[1] / base[1] - 1 if paper else math.nan
    table = pd.DataFrame(list(rows.values()))
    if table.empty:
        return table
    paper_cols = ["paper Pixel 3 change", "paper Raspi 4 change", "noisy"]
    return table[[c for c in table.columns if c not in paper_cols] + paper_cols]


def lut_table(lut, key: DeviceContext, runs: dict[str, list[Measurement]], nets: dict[str, Net], resolution: int) -> pd.DataFrame:
    """Predicted vs measured FPS of every model measured: Tab. 1's originals and FLOPs-matched
    counterparts, the presets, Tab. 9's variants -- predicted two ways (`predict_latency`'s ``rest``):

    * ``stem+head``: stem, blocks and head, each timed alone, added up: a prediction of a model that
      was never timed whole;
    * ``model-blocks``: the measured original model minus its measured blocks stands for the rest,
      so only the blocks that differ from the original are predicted (the original itself comes out
      as its measurement, by construction)."""
    rows = []
    for label, records in runs.items():
        net = nets[label]
        module = ModelRef.of(get_model(net.model, resolution=resolution, **net.options), name=net.model,
                             options=net.options)  # built once for all its predictions
        cases = [(label, "original", None, None)]
        if by_model(records, "flops_matched"):
            cases.append((f"{label} dense", "flops_matched", "flops_matched", None))
        cases += [(name, "custom", None, name) for name in net.presets]
        for name, variant, every, plan in cases:
            measured = pooled_fps(records, variant, plan)
            row = {"model": name, "measured FPS": measured}
            for rest, column in (("stem+head", "stem+head"), ("model-minus-blocks", "model-blocks")):
                try:
                    pred = predict_latency(module, lut, preset_plan(plan, resolution) if plan else None, device=key,
                                           variant=every, strict=True, rest=rest)
                except (KeyError, ValueError):
                    row[f"{column} FPS"] = row[f"{column} error"] = math.nan
                    continue
                row[f"{column} FPS"], row[f"{column} error"] = pred.fps, pred.fps / measured - 1
                row["noisy"] = row.get("noisy", False) or bool(pred.blocks["noisy"].any())
            if math.isnan(row["stem+head FPS"]) and math.isnan(row["model-blocks FPS"]):
                print(f"  ! no prediction for {name}: the LUT lacks its blocks, stem/head or whole model", file=sys.stderr)
                continue
            rows.append(row)
    return pd.DataFrame(rows)


# ---- the run -------------------------------------------------------------------------------------------
def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (Tab. 1/2/3/9, the LUT, Fig. 1/5)")
    p.add_argument("--backend", default="torch", help="backend of the main measurements: torch or onnxruntime")
    p.add_argument("--batch", type=int, default=None, help="batch size (default: 1 on the CPU, 128 on CUDA, as the paper)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: the library's)")
    p.add_argument("--resolution", type=int, default=None, help="input pixels (default: 224; --quick: 160)")
    p.add_argument("--cpu-backends", default=None,
                   help="Tab. 4 backends at batch 1 on the CPU, comma-separated, or 'none' "
                        "(default: onnxruntime,tflite on the CPU; none with --device cuda)")
    p.add_argument("--models", nargs="+", default=["*"], help="fnmatch patterns of the Tab. 1/9 model labels to run")
    p.add_argument("--presets", default=None, help="comma-separated presets to keep (default: all of Tab. 2/3)")
    p.add_argument("--quick", action="store_true", help="160 px, 0.25 s per workload, TFLite for DS-A..D of MBV2 only")
    p.add_argument("--out", type=Path, default=Path("results/paper"), help="output folder (resumes what is there)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--report-only", action="store_true",
                   help="measure nothing: tables, LUT and plots from the measurement files in --out "
                        "(e.g. a GPU run's files, on a machine without that GPU)")
    # `dsprof measure`'s timing options; --budget and --warmup default (None) to the timing this script always used
    add_timing_args(p.add_argument_group(
        "timing", "the timing options of `dsprof measure`, with its defaults, but --budget defaults to 1 s (0.25 s "
                  "with --quick) and --warmup to 0.05 s or --budget if less"), budget=None)
    p.set_defaults(warmup=None)
    return p.parse_args(argv)


def timing_of(args: argparse.Namespace) -> TimingConfig:
    """The timing the options give: `dsprof measure`'s, but --budget and --warmup default to what this script timed
    with before it took them (1 s, 0.25 s with --quick; 0.05 s of warm-up, or --budget if less)."""
    budget = args.budget if args.budget is not None else (0.25 if args.quick else 1.0)
    warmup = args.warmup if args.warmup is not None else min(TimingConfig.warmup_s, budget)
    return timing_from_args(argparse.Namespace(**{**vars(args), "budget": budget, "warmup": warmup}))


def select(nets, patterns: list[str], presets: set[str] | None):
    keep = [n for n in nets if any(fnmatch.fnmatch(n.label, p) for p in patterns)]
    if presets is not None:
        keep = [Net(n.label, n.model, n.options, tuple(p for p in n.presets if p in presets)) for n in keep]
    return keep


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    resolution = args.resolution or (160 if args.quick else 224)
    s = Settings(args.device, args.backend, args.batch, args.threads, resolution, timing_of(args), args.out, not args.no_progress,
                 args.report_only)
    cpu_backends = args.cpu_backends or ("none" if args.device.startswith("cuda") else "onnxruntime,tflite")
    cpu_backends = [] if cpu_backends == "none" else cpu_backends.split(",")
    presets = set(args.presets.split(",")) if args.presets else None
    tab1_nets, tab9_nets = select(TAB1, args.models, presets), select(TAB9, args.models, presets)
    nets = {n.label: n for n in tab1_nets}
    (args.out / "tables").mkdir(parents=True, exist_ok=True)
    (args.out / "plots").mkdir(parents=True, exist_ok=True)

    def step(text: str) -> None:
        print(f"[{time.perf_counter() - started:6.0f} s] {text}", flush=True)

    # 1. Tab. 1 (+ Tab. 2/3 presets as extra whole models in the same rounds)
    runs1 = {}
    for net in tab1_nets:
        step(f"Tab. 1/2/3: {net.label} on {args.device} ({args.backend})")
        variants = ("original", "merged", "flops_matched") if net.presets or net.model == "mobilenet_v2" else ("original", "flops_matched")
        runs1[net.label] = run_measure(net, s, variants=variants, model_variants=("original", "flops_matched"),
                                       extra=None if s.report_only else merged_presets(net, resolution))
    # 2. Tab. 9
    runs9 = {}
    for net in tab9_nets:
        step(f"Tab. 9: {net.label}")
        runs9[net.label] = run_measure(net, s, variants=("original",))  # blocks too: the LUT predicts these
    # 3. Tab. 4: batch 1 on the CPU through ONNX Runtime / TFLite
    runs4 = {}
    for backend in cpu_backends:
        for net in tab1_nets:
            if not net.presets or (args.quick and backend == "tflite" and net.label != "MobileNetV2"):
                continue  # --quick: TFLite conversion is slow; MobileNetV2-1.0 and its presets only
            step(f"Tab. 4: {net.label} through {backend} on the CPU, batch 1")
            runs4[(net.label, backend)] = run_measure(net, s, backend=backend, device="cpu", batch=1,
                                                      extra=None if s.report_only else merged_presets(net, resolution))

    # 4. LUT from the block measurements of the main context, and its predictions
    step("LUT and predictions")
    block_records = [r for records in runs1.values() for r in records if r.ok and r.scope == "block"]
    tables = {"tab1": tab1(runs1), "tab9": tab9(runs9), "tab23": tab23(runs1, nets), "tab4": tab4(runs4, nets),
              "lut": pd.DataFrame()}
    key = DeviceContext.of(block_records[0]) if block_records else None
    if key is not None:
        lut = build_lut([p for p in sorted(s.measurements.glob("*.jsonl")) if in_context(p, key)])
        lut.save(args.out / "lut.csv")
        tables["lut"] = lut_table(lut, key, {**runs1, **runs9}, {**nets, **{n.label: n for n in tab9_nets}}, resolution)
    for name, table in tables.items():
        if not table.empty:
            atomic_write_text(args.out / "tables" / f"{name}.csv", render(table, "csv"))

    # 5. Figures
    step("Figures")
    blocks = block_table(r for r in block_records if r.model == "mobilenet_v2")
    figs = {"fig1_block_latency_dense": block_latency_figure(blocks, counterpart="flops_matched")} if len(blocks) else {}
    mbv2_14 = nets.get("MobileNetV2-1.4")
    if mbv2_14 is not None and len(blocks):
        title = model_title(next(r for r in runs1["MobileNetV2-1.4"] if r.scope == "model"))
        plans = {p: load_preset(p).keep for p in FIG5_PLANS if p in mbv2_14.presets}
        figs["fig5_block_latency_merged"] = block_latency_figure(blocks[blocks["model"] == title], plans)
        if FIG6_PLAN in mbv2_14.presets:
            memory = memory_table(get_model("mobilenet_v2", resolution=resolution, width=1.4),
                                  preset_plan(FIG6_PLAN, resolution))
            atomic_write_text(args.out / "tables" / "fig6_memory.csv", render(memory, "csv"))
            figs["fig6_memory"] = memory_figure(memory, f"MobileNetV2-1.4 memory before/after {FIG6_PLAN} (16 bits)")
    for name, fig in figs.items():
        fig.savefig(args.out / "plots" / f"{name}.png", dpi=130)
    close(figs.values())

    elapsed = time.perf_counter() - started
    summary = write_summary(args, tables, block_records, key, resolution, s.timing.budget_s, elapsed)
    print(summary)
    step(f"done: {args.out / 'summary.md'}")
    return 0


def in_context(path: Path, key: DeviceContext) -> bool:
    """Whether a measurement file was made in the LUT's context (device, backend, batch...)."""
    return any(r.ok and DeviceContext.of(r) == key for r in read_measurements(path))


def write_summary(args, tables, records, key, resolution, budget, elapsed) -> str:
    if not records:
        return "(no block measurements: nothing to summarise)\n"
    r = records[0]
    device = f"{r.device_name} ({r.device}, {r.backend}, {r.dtype}, batch {r.batch}, threads {r.threads})"
    cmd = "python benchmarks/reproduce_paper.py " + " ".join(sys.argv[1:])
    parts = [
        f"Device: **{device}**, env id `{r.env_id}`; torch {r.environment['versions'].get('torch')}; "
        f"{resolution}x{resolution} px"
        + (f"; tables rebuilt from the measurement files (measured {r.environment.get('time_utc', '?')[:16]} UTC)."
           if args.report_only else f", {budget:g} s per workload; run took {elapsed / 60:.1f} min."),
        f"Command: `{cmd.strip()}`", f"LUT context: `{key}`",
    ]
    captions = {
        "tab1": "Tab. 1: original vs FLOPs-matched dense counterpart (ratio = dense FPS / original FPS; "
                "noisy: IQR/median > 10 % in a record used)",
        "tab9": "Tab. 9: equal-FLOPs depth/width variants (FPS vs the family's standard model)",
        "tab23": "Tab. 2/3: merged presets (speed-up over the original; paper columns are the same ratio)",
        "tab4": "Tab. 4: batch-1 CPU latency through ONNX Runtime / TFLite (change vs the original)",
        "lut": "LUT: predicted vs measured FPS; stem+head: every part timed alone, added up; model-blocks: "
               "the measured original minus its blocks stands for the rest (the original's own row is its measurement)",
    }
    for name, caption in captions.items():
        table = tables[name]
        parts.append(f"### {caption}\n\n" + (render(table, "markdown", digits=3) if not table.empty else "(not run)"))
    text = "\n\n".join(parts) + "\n"
    atomic_write_text(args.out / "summary.md", text)
    return text


if __name__ == "__main__":
    sys.exit(main())
