"""Any CNN: what block discovery finds and refuses per model, and what merging every mergeable block gives.

For each model: blocks found (by kind) and refused (with reasons), MACs of the original and of the model
with every block linearised and merged where MACs drop (`merge_model`'s rule), and ONNX Runtime latency of
both timed by `dsprof measure` in one interleaved group (paired), one thread. Then MobileNetV2-1.4 DS-F
(paper Tab. 8: all 17 blocks linear) merged block by block against span-merged (`--spans auto`, MACs).

    python benchmarks/any_cnn.py --threads 1 --budget 1 --out results/any_cnn

Random weights (nothing downloaded); latency does not depend on them. Prints a Markdown table and writes
`any_cnn.json` next to the measurement files.

Issue #24 (chains no module owns, merged by rewriting the traced graph): ``--section graph`` times the CSP
model (tests/models/csp.py) and a network written flat (tests/models/flat.py) three ways in one interleaved
group -- the original, the module-only merge (what dsprof merged before: blocks a module owns), and every
chain merged (graph rewrite) -- and writes `any_cnn_graph.json`.

    python benchmarks/any_cnn.py --section graph --threads 1 --budget 1 --out results/any_cnn
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections import Counter
from pathlib import Path

import torch

from dsprof.merging import merge_model, merge_report
from dsprof.records.plan import Plan
from dsprof.records.plan import load_preset
from dsprof.planning.decide import merge_rule
from dsprof.models import ModelRef, count_macs, discover_blocks, get_model
from dsprof.models.user_model import register_model_file
from dsprof.profiler import BackendSettings, TimingConfig, Workloads, measure

MODELS = [
    "mobilenet_v2", "mnasnet1_0", "mobilenet_v3_large", "mobilenet_v3_small", "shufflenet_v2_x1_0", "mnasnet_100",
    "fbnetc_100", "efficientnet_b0", "efficientnet_lite0", "resnet18", "resnet50", "vgg11_bn",
]
CSP = str(Path(__file__).resolve().parent.parent / "tests" / "models" / "csp.py") + ":factory"
FLAT = str(Path(__file__).resolve().parent.parent / "tests" / "models" / "flat.py") + ":factory"


def _merged_all(model: torch.nn.Module, name: str) -> tuple[torch.nn.Module | None, int]:
    n = len(discover_blocks(model).blocks)
    if not n:
        return None, 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        merged = merge_model(model, merge_rule(model, merge_by="macs").decide(Plan(name, (0,) * n)).plan)
    return merged, sum(d.merged for d in merge_report(merged).decisions)


def _time(models: dict[str, torch.nn.Module], label: str, args, out: Path) -> dict[str, float]:
    """Median seconds of each model, timed in one interleaved group through ONNX Runtime."""
    first, *rest = models
    result = measure(ModelRef.of(models[first], name=label, resolution=args.resolution),
                     settings=BackendSettings(backend="onnxruntime", threads=args.threads),
                     workloads=Workloads(variants=(), model_variants=("original",)),
                     extra_models={k: models[k] for k in rest}, timing=TimingConfig(budget_s=args.budget),
                     out=out / f"{label}.jsonl", overwrite=True, progress=False)
    medians = {}
    for r in result.measurements:
        if r.scope == "model" and not r.error:
            medians[first if r.variant == "original" else r.name] = r.stats.median
    return medians


def graph_section(args) -> list[dict]:
    """Original vs module-only merge vs every chain merged (graph rewrite), for the CSP and flat models."""
    rows = []
    for spec in (CSP, FLAT):
        label = register_model_file(spec)
        model = get_model(label, resolution=args.resolution).eval()
        blocks = discover_blocks(model).blocks
        owned = tuple(0 if ".." not in b.name else 1 for b in blocks)  # the chains no module owns keep theirs
        models = {"original": model}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if 0 in owned:
                models["module_only"] = merge_model(model, merge_rule(model, merge_by="macs").decide(Plan(label, owned)).plan)
            models["graph"] = merge_model(model, merge_rule(model, merge_by="macs").decide(Plan(label, (0,) * len(blocks))).plan)
        merged = {k: sum(d.merged for d in merge_report(m).decisions) for k, m in models.items() if k != "original"}
        t = _time(models, f"anycnn_graph_{label.split(':')[1]}", args, args.out)
        rows.append({"model": label, "blocks": len(blocks), "chains_no_module_owns": owned.count(1),
                     "merged_blocks": merged, "macs": {k: count_macs(m) for k, m in models.items()},
                     "ms": {k: v * 1e3 for k, v in t.items()}})
        print(json.dumps(rows[-1]), file=sys.stderr)
    (args.out / "any_cnn_graph.json").write_text(json.dumps({"models": rows, "threads": args.threads,
                                                             "resolution": args.resolution}, indent=1))
    print(f"| model | blocks (no module owns) | merged: module-only / graph | MMACs orig / module-only / graph "
          f"| ORT ms orig / module-only / graph ({args.threads} thread) |")
    print("|---|---|---|---|---|")
    for r in rows:
        m, ms, n = r["macs"], r["ms"], r["merged_blocks"]
        cell = lambda d, f: " / ".join(f(d[k]) if k in d else "-" for k in ("original", "module_only", "graph"))  # noqa: E731
        print(f"| {r['model']} | {r['blocks']} ({r['chains_no_module_owns']}) | {n.get('module_only', 0)} / {n['graph']} "
              f"| {cell(m, lambda v: f'{v / 1e6:.1f}')} | {cell(ms, lambda v: f'{v:.3f}')} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--resolution", type=int, default=224)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--budget", type=float, default=1.0, help="seconds of timed runs per model")
    ap.add_argument("--models", default=",".join(MODELS + ["csp"]))
    ap.add_argument("--out", type=Path, default=Path("results/any_cnn"))
    ap.add_argument("--section", choices=("all", "graph"), default="all",
                    help="'graph': only the chains-no-module-owns comparison (issue #24)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    if args.section == "graph":
        graph_section(args)
        return 0
    rows = []
    for name in args.models.split(","):
        label = register_model_file(CSP) if name == "csp" else name
        model = get_model(label, resolution=args.resolution).eval()
        found = discover_blocks(model)
        kinds = Counter(b.spec.kind for b in found.blocks)
        reasons = Counter(r.reason.split(":")[0] for r in found.refusals)
        merged, n_merged = _merged_all(model, label)
        row = {
            "model": name, "blocks": len(found.blocks), "kinds": dict(kinds), "refused": len(found.refusals),
            "refusal_reasons": dict(reasons), "merged_blocks": n_merged,
            "macs": count_macs(model), "merged_macs": count_macs(merged) if merged is not None else None,
        }
        if merged is not None:
            t = _time({"original": model, "merged": merged}, f"anycnn_{name}", args, args.out)
            row.update(original_ms=t.get("original", float("nan")) * 1e3, merged_ms=t.get("merged", float("nan")) * 1e3)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)

    # MBV2-1.4 DS-F: every block linear; merged one by one, or in spans where MACs drop
    preset = load_preset("mbv2-1.4-ds-f")
    base = get_model("mobilenet_v2", width=1.4, resolution=args.resolution).eval()
    by_macs = merge_rule(base, merge_by="macs")
    single = merge_model(base, by_macs.decide(preset).plan)
    spanned_plan = by_macs.decide(preset, spans="auto").plan
    spanned = merge_model(base, spanned_plan)
    t = _time({"original": base, "single": single, "spans": spanned}, "anycnn_dsf", args, args.out)
    dsf = {
        "spans": [list(s) for s in spanned_plan.spans or ()],
        "macs": {"original": count_macs(base), "single": count_macs(single), "spans": count_macs(spanned)},
        "ms": {k: v * 1e3 for k, v in t.items()},
    }
    (args.out / "any_cnn.json").write_text(json.dumps({"models": rows, "dsf": dsf, "threads": args.threads,
                                                       "resolution": args.resolution}, indent=1))
    print(f"| model | blocks (kinds) | refused (why) | merged | GMACs orig -> merged | ORT ms orig -> merged ({args.threads} thread) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        kinds = ", ".join(f"{v} {k}" for k, v in r["kinds"].items()) or "-"
        why = ", ".join(f"{v} {k}" for k, v in r["refusal_reasons"].items()) or "-"
        macs = f"{r['macs'] / 1e9:.3f} -> {r['merged_macs'] / 1e9:.3f}" if r["merged_macs"] else f"{r['macs'] / 1e9:.3f}"
        ms = f"{r['original_ms']:.2f} -> {r['merged_ms']:.2f}" if "merged_ms" in r else "-"
        print(f"| {r['model']} | {r['blocks']} ({kinds}) | {r['refused']} ({why}) | {r['merged_blocks']} | {macs} | {ms} |")
    m, ms = dsf["macs"], dsf["ms"]
    print(f"\nMBV2-1.4 DS-F at {args.resolution}px, spans {dsf['spans']}:")
    for k in ("original", "single", "spans"):
        print(f"  {k:<8} {m[k] / 1e6:8.1f} MMACs  {ms.get(k, float('nan')):8.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
