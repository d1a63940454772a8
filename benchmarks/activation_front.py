"""Does planning single activations pay on a CPU, and where? The block-level and the activation-level front, measured
(issue #47, item 6).

For each model (EfficientNet-B0 and MobileNetV3-Large from the zoo, VGG-11-BN, MobileOne-S0 re-parameterised) and
runtime (PyTorch eager, ONNX Runtime, OpenVINO), one thread, batch 1, 224 px:

1. the LUT: `dsprof.measure` with every block as built, linearised, merged, ``fused-expand`` and ``fused-project``,
   every span of up to 4 blocks, the whole model and ``Workloads(calibrate=True)`` (as `make demo` measures);
2. the block-level front and the activation-level front (`dsprof.plan`, ``unit="activation"``); from each, the plan
   at k = 0 and at one middle k. The block plan's middle k is round(n/2) blocks keeping their activations; the
   activation plan's is the number of activations that block plan keeps (the sum, over its kept blocks, of each
   block's removable activations), so the two compare at the same number of kept activations (the activation front
   holds a plan there: the block plan is one of its candidates);
3. those plans, each merged by `dsprof.merge` with the LUT (its merge list replayed), and the original timed together,
   interleaved round by round in one group per model and runtime by a plain loop of the runtime
   (`planner_vs_random.runner` and `time_group`); plans that deploy the same model are timed once;
   Only a block of two removable activations has partial states: EfficientNet-B0's, VGG-11-BN's and MobileOne-S0's
   blocks hold one at most, so their two fronts are the same plans ("same plan"); MobileNetV3-Large has 6 such blocks,
   MobileNetV2 (``--models ...,mobilenet_v2``) 16;
4. the table: per model, runtime and k, each plan's predicted speed-up (`dsprof.lut.predict_plan`, 95 % interval)
   and measured one (paired over the rounds, 95 % interval), the activation plan's partial merges (the blocks it
   fuses, ``fused-expand``/``fused-project``) and crossing spans (``crossing A-B``), and the MACs of each merged model against the original's.

Every file stays under ``--out`` (RUNTIME/MODEL/: the LUT run and lut.csv, the fronts, plans/, checks.json;
results.json and results.md at the top). ``--reuse`` takes the LUTs, plans and checks there and measures only what
is missing; the scores are computed afresh each time. Timings are figures only on a quiet machine
(../shared/tools/quiet-run).

    .venv/bin/python benchmarks/activation_front.py --out /work/data/actfront
    .venv/bin/python benchmarks/activation_front.py --out /work/data/actfront --reuse         # re-score
    .venv/bin/python benchmarks/activation_front.py --out /tmp/actsmoke --smoke               # every stage, < 2 min
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from pathlib import Path

import torch

import dsprof
from dsprof.lut import LUT, build_lut
from dsprof.lut.choice import MergeChoice
from dsprof.lut.predict import MethodFallbackWarning, predict_plan, prices_of
from dsprof.merging.partial import act_layouts
from dsprof.models import ModelRef, first_conv_in_channels
from dsprof.profiler import BackendSettings, TimingConfig, Workloads
from dsprof.profiler.allocator import steady_allocator
from dsprof.records.activations import is_crossing, partial_runs, partial_variant
from dsprof.records.plan import Plan, load_plan
from dsprof.records.stats import paired_speedup
from planner_vs_random import load, runner, time_group

HERE = Path(__file__).resolve().parent
VARIANTS = ("original", "merged", "linear", "fused-expand", "fused-project")
#: label: (the model as `ModelRef.of` takes it, its options)
MODELS = {
    "efficientnet_b0": ("efficientnet_b0", {}),
    "mobilenet_v3_large": ("mobilenet_v3_large", {}),
    "vgg11_bn": ("vgg11_bn", {}),
    "mobileone_s0": (f"{HERE / 'activation_models.py'}:mobileone_s0", {"reparameterize": True}),
    "mobilenet_v2_tiny": ("mobilenet_v2", {"width": 0.5, "depths": [1] * 7}),  # --smoke: 7 inverted residuals
}
DEFAULT_MODELS = "efficientnet_b0,mobilenet_v3_large,vgg11_bn,mobileone_s0"
SMOKE = {"models": "mobilenet_v2_tiny,vgg11_bn", "backends": "torch", "resolution": 32, "budget": 0.02,
         "check_seconds": 0.3, "min_rounds": 5, "max_span": 2}
PLANS = ("block-k0", "block-mid", "act-k0", "act-mid")


def ref_of(label: str, resolution: int) -> ModelRef:
    model, options = MODELS.get(label, (label, {}))
    return ModelRef.of(model, options=options, resolution=resolution)


def lut_of(ref: ModelRef, backend: str, args: argparse.Namespace, case: Path, log: dict) -> LUT:
    path = case / "lut.csv"
    if args.reuse and path.is_file():
        return LUT.load(path)
    log["lut_load_before"], t0 = load(), time.perf_counter()
    run = dsprof.measure(ref, settings=BackendSettings(backend, threads=args.threads), batch=args.batch,
                         workloads=Workloads(VARIANTS, ("original",), spans=args.max_span, calibrate=True),
                         timing=TimingConfig(budget_s=args.budget), out=case / "lut", overwrite=True,
                         progress=False).run
    log.update(lut_wall_s=time.perf_counter() - t0, lut_load_after=load(),
               lut_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    return build_lut([run.path]).save(path)


def kept_acts(plan: Plan, counts: list[int]) -> int:
    """The activations ``plan`` keeps: its ``acts``, or each kept block's removable activations."""
    return sum(map(sum, plan.acts)) if plan.acts is not None else sum(c for c, k in zip(counts, plan.keep) if k)


def plans_of(ref: ModelRef, lut: LUT, args: argparse.Namespace, case: Path, counts: list[int]) -> dict[str, Plan]:
    """The four plans (`PLANS`), stored in plans/ (read back with ``--reuse``)."""
    folder = case / "plans"
    if args.reuse and all((folder / f"{p}.json").is_file() for p in PLANS):
        return {p: load_plan(folder / f"{p}.json") for p in PLANS}
    block = dsprof.plan(ref, lut, out=case / "front-block.json").front
    act = dsprof.plan(ref, lut, out=case / "front-activation.json", unit="activation").front
    mid = block.at_k(round(len(counts) / 2)).plan
    plans = {"block-k0": block.at_k(0).plan, "block-mid": mid, "act-k0": act.at_k(0).plan,
             "act-mid": act.at_k(kept_acts(mid, counts)).plan}
    folder.mkdir(parents=True, exist_ok=True)
    for label, plan in plans.items():
        (folder / f"{label}.json").write_text(plan.to_json())
    return plans


def deployed(plan: Plan, counts: list[int]) -> str:
    """What a plan deploys, as a key: plans with the same key merge into the same model and are timed once."""
    acts = plan.acts if plan.acts is not None else tuple((k,) * c for k, c in zip(plan.keep, counts))
    merge = [bool(m) for m, k in zip(plan.merge or [False] * len(counts), plan.keep) if not k]
    return json.dumps([acts, merge, sorted(map(list, plan.spans or ())), plan.border, plan.free_activation])


def merged_of(ref: ModelRef, plans: dict[str, Plan], lut: LUT) -> dict[str, tuple[torch.nn.Module, float]]:
    """Each plan merged exactly by `dsprof.merge` with the LUT: (the merged model, its MACs)."""
    out = {}
    for label, plan in plans.items():
        outcome = dsprof.merge(ref, plan, merge=MergeChoice(lut=lut))
        out[label] = (outcome.model, float(outcome.costs.iloc[-1]["macs_after"]))
        out["original"] = (None, float(outcome.costs.iloc[-1]["macs_before"]))
    return out


def checks_of(ref: ModelRef, backend: str, plans: dict[str, Plan], merged: dict, args: argparse.Namespace,
              case: Path, counts: list[int], log: dict) -> dict:
    """The original and each distinct plan timed together, interleaved round by round (checks.json)."""
    path = case / "checks.json"
    keys = {label: deployed(plan, counts) for label, plan in plans.items()}
    if args.reuse and path.is_file():
        stored = json.loads(path.read_text())
        if stored["keys"] == keys:
            return stored
        print(f"  {path}: its plans are not these; timed again", flush=True)
    torch.set_num_threads(args.threads)
    if backend in ("torch", "torch-compile"):
        steady_allocator()  # the heap setting dsprof times PyTorch with
    net = ref.build().eval()
    shape = (args.batch, first_conv_in_channels(net), args.resolution, args.resolution)
    distinct = list(dict.fromkeys(keys.values()))
    first = {key: next(label for label in plans if keys[label] == key) for key in distinct}
    out = {"keys": keys, "load_before": load(), "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with tempfile.TemporaryDirectory(prefix="actfront-") as tmp:
        runs = [runner(m, backend, shape, Path(tmp), args.threads)
                for m in [net] + [merged[first[key]][0] for key in distinct]]
        samples = time_group(runs, args.check_seconds, args.min_rounds, seed=0)
    out.update(original=samples[0], samples=dict(zip(distinct, samples[1:])), load_after=load())
    path.write_text(json.dumps(out))
    log["checks"] = {key: out[key] for key in ("load_before", "load_after", "utc")}
    return out


def partial_of(plan: Plan, blocks) -> list[str]:
    """The partial merges of an activation plan: ``BLOCK: VARIANT`` for each block outside a span that keeps some of
    its activations and fuses the run beside them, and ``crossing A-B`` for each crossing span (blocks A to B, one
    convolution across their borders, `dsprof.records.activations.is_crossing`)."""
    if plan.acts is None:
        return []
    layouts = act_layouts(blocks)
    spans = list(plan.spans or ())
    inside = {i for a, b in spans for i in range(a, b)}
    fused = [f"{block.name}: {partial_variant(lay, a) or 'partial'}"
             for i, (block, lay, a) in enumerate(zip(blocks, layouts, plan.acts))
             if i not in inside and any(a) and partial_runs(lay, a)]
    return fused + [f"crossing {a}-{b - 1}" for a, b in spans if is_crossing(plan.acts, (a, b))]


def run_case(args: argparse.Namespace, label: str, backend: str, logs: dict) -> list[dict]:
    ref = ref_of(label, args.resolution)
    setting = "".join(f"_{v}{unit}" for v, unit, default in ((args.resolution, "px", 224), (args.threads, "t", 1),
                                                             (args.batch, "b", 1)) if v != default)
    case = args.out / backend / f"{label}{setting}"
    case.mkdir(parents=True, exist_ok=True)
    log = logs.setdefault(f"{backend}/{case.name}", {})
    print(f"{backend} {label} {args.resolution} px, {args.threads} thread(s), batch {args.batch}: load {load()}",
          flush=True)
    lut = lut_of(ref, backend, args, case, log)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MethodFallbackWarning)
        prices = prices_of(ref, lut)
    counts = [lay.n_acts for lay in act_layouts(prices.blocks)]
    plans = plans_of(ref, lut, args, case, counts)
    merged = merged_of(ref, plans, lut)
    checks = checks_of(ref, backend, plans, merged, args, case, counts, log)
    scored = {}
    for name, plan in plans.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MethodFallbackWarning)
            p = predict_plan(prices, plan)
        s = paired_speedup(checks["original"], checks["samples"][checks["keys"][name]])
        scored[name] = {"k_blocks": sum(plan.keep), "k_acts": kept_acts(plan, counts), "keep": list(plan.keep),
                        "acts": [list(a) for a in plan.acts] if plan.acts is not None else None,
                        "spans": [list(x) for x in plan.spans or ()], "partial": partial_of(plan, prices.blocks),
                        "predicted": p.speedup, "predicted_low": p.speedup_low, "predicted_high": p.speedup_high,
                        "measured": s.ratio, "measured_low": s.low, "measured_high": s.high,
                        "macs": merged[name][1]}
    rows = []
    for k in ("k0", "mid"):
        b, a = scored[f"block-{k}"], scored[f"act-{k}"]
        rows.append({"model": label, "name": ref.name, "runtime": backend, "resolution": args.resolution,
                     "threads": args.threads, "batch": args.batch,
                     "n_blocks": len(counts), "n_acts": sum(counts), "k": b["k_blocks"], "k_acts": b["k_acts"],
                     "original_macs": merged["original"][1], "block": b, "activation": a,
                     "same_plan": checks["keys"][f"block-{k}"] == checks["keys"][f"act-{k}"]})
    print(f"  done; LUT {log.get('lut_utc', 'reused')}, checks {checks.get('utc', '?')} (load "
          f"{checks.get('load_before', '?')} -> {checks.get('load_after', '?')})", flush=True)
    return rows


def _x(d: dict, key: str) -> str:
    return f"{d[key]:.3f}x ({d[key + '_low']:.3f}-{d[key + '_high']:.3f})"


def table(rows: list[dict]) -> str:
    lines = ["| model | runtime | px | k blocks (acts) of n | block plan predicted | block plan measured | "
             "activation plan predicted | activation plan measured | partial (fused) merges and crossings | MMACs original / "
             "block plan / activation plan |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        b, a = r["block"], r["activation"]
        fused = "same plan" if r["same_plan"] else (f"yes: {len(a['partial'])} ({'; '.join(a['partial'])})"
                                                    if a["partial"] else "no")
        lines.append(f"| {r['model']} | {r['runtime']} | {r['resolution']} | {r['k']} ({r['k_acts']}) of "
                     f"{r['n_blocks']} ({r['n_acts']}) | {_x(b, 'predicted')} | {_x(b, 'measured')} | "
                     f"{_x(a, 'predicted')} | {_x(a, 'measured')} | {fused} | {r['original_macs'] / 1e6:.1f} / "
                     f"{b['macs'] / 1e6:.1f} / {a['macs'] / 1e6:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--models", default=DEFAULT_MODELS,
                        help=f"comma-separated: {', '.join(MODELS)}, or any name or path.py:factory dsprof takes")
    parser.add_argument("--backends", default="torch,onnxruntime,openvino")
    parser.add_argument("--resolution", type=int, default=224)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--budget", type=float, default=1.0, help="LUT run: seconds of timing per workload at most")
    parser.add_argument("--check-seconds", type=float, default=20.0, help="seconds of timed rounds per check group")
    parser.add_argument("--min-rounds", type=int, default=30)
    parser.add_argument("--max-span", type=int, default=4, help="spans of up to this many blocks in the LUT")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--reuse", action="store_true",
                        help="take the LUTs, plans and checks under --out; measure what is missing")
    parser.add_argument("--smoke", action="store_true", help="every stage at toy sizes (figures mean nothing; "
                        "options given still apply): " + ", ".join(f"{k}={v}" for k, v in SMOKE.items()))
    args = parser.parse_args(argv)
    if args.smoke:  # its sizes where not given
        parser.set_defaults(**SMOKE)
        args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "results.json"
    logs = json.loads(results.read_text())["logs"] if results.is_file() else {}
    rows = []
    for backend in args.backends.split(","):
        for label in args.models.split(","):
            rows += run_case(args, label, backend, logs)
            results.write_text(json.dumps({"rows": rows, "logs": logs}, indent=1))
    text = (f"{args.threads} thread(s), batch {args.batch}; speed-ups over the original, predicted (95 % interval) and "
            f"measured paired in one group (95 % interval)\n\n" + table(rows))
    (args.out / "results.md").write_text(text + "\n")
    print()
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
