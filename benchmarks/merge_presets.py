"""MACs and ONNX Runtime CPU latency of the paper's merged MobileNetV2 presets against the originals.

    .venv/bin/python benchmarks/merge_presets.py                       # all MBV2 presets, 224x224, batch 1
    .venv/bin/python benchmarks/merge_presets.py --presets mbv2-ds-a --budget 1

For each preset (paper Tab. 8) the model is built with random weights (latency and MACs do not depend
on the values), merged by `dsprof.merging.merge_model` (a block merges where that lowers MACs) and,
for comparison, with every linearised block merged ("merge all"). All three models have BatchNorm
folded. They are exported to ONNX and timed with the profiler's ONNX Runtime backend (CPU execution
provider, all graph optimisations) in interleaved rounds (`dsprof.profiler.time_interleaved`), so
that drift of a shared machine hits all of them alike; the table gives medians and the paired
speed-up (median of per-round ratios, 95 % interval). Raw samples go to ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import warnings
from pathlib import Path

import torch

from dsprof.io import atomic_write_text
from dsprof.merging import fold_batchnorm, merge_model, merge_report
from dsprof.records.plan import load_preset
from dsprof.planning.decide import merge_rule
from dsprof.models import count_macs, get_model
from dsprof.profiler import BackendSettings, TimingConfig, time_interleaved
from dsprof.records.stats import paired_speedup, summarize
from dsprof.profiler.backends import get_backend

# Paper Tab. 3 (MBV2-1.4, "MFLOPs") and Tab. 6 (MBV2, "FLOPS (M)"); Raspberry Pi 4 latency
# reduction from Tab. 4 (D and F of MBV2-1.4 are not in it).
PAPER = {
    "mobilenet_v2-1.0": (330, None),
    "mbv2-ds-a": (287, 26.5),
    "mbv2-ds-b": (272, 33.5),
    "mbv2-ds-c": (261, 38.0),
    "mbv2-ds-d": (253, 42.0),
    "mobilenet_v2-1.4": (630, None),
    "mbv2-1.4-ds-a": (519, 31.8),
    "mbv2-1.4-ds-b": (502, 34.4),
    "mbv2-1.4-ds-c": (492, 38.1),
    "mbv2-1.4-ds-d": (484, None),
    "mbv2-1.4-ds-e": (474, 43.1),
    "mbv2-1.4-ds-f": (415, None),
}
DEFAULT_PRESETS = [k for k in PAPER if k.startswith("mbv2")]


def _models(name: str, resolution: int) -> dict[str, torch.nn.Module]:
    plan = load_preset(name)
    model = get_model(plan.model, resolution=resolution, **plan.options)
    example = torch.zeros(1, 3, resolution, resolution)
    merged = merge_model(model, merge_rule(model, merge_by="macs").decide(plan).plan)
    all_flags = [not k for k in plan.keep]
    merged_all = merge_model(model, plan.with_merge(all_flags))
    return {"original": fold_batchnorm(model, example), "merged": merged, "merge_all": merged_all}


def run(presets: list[str], resolution: int, budget_s: float, threads: int | None) -> list[dict]:
    backend = get_backend(BackendSettings(backend="onnxruntime", threads=threads))
    config = TimingConfig(budget_s=budget_s, target_precision=0.01, min_samples=20, warmup_s=0.3)
    rows = []
    for name in presets:
        models = _models(name, resolution)
        report = merge_report(models["merged"])
        macs = {k: count_macs(m, (resolution, resolution)) for k, m in models.items()}
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prepared = {}
            for key, module in models.items():
                workdir = Path(tmp) / key
                workdir.mkdir()
                prepared[key] = backend.prepare(module, (1, 3, resolution, resolution), workdir)
            timed = time_interleaved({k: p.run for k, p in prepared.items()}, config, timer=prepared["original"].timer)
        samples = {k: list(r.samples_s) for k, r in timed.items()}
        rows.append(
            {
                "preset": name,
                "linearised": sum(1 for k in load_preset(name).keep if not k),
                "merged_blocks": sum(d.merged for d in report.decisions),
                "not_merged": [d.name for d in report.decisions if not d.keep and not d.merged],
                "macs": macs,
                "median_s": {k: summarize(v).median for k, v in samples.items()},
                "speedup": {k: paired_speedup(samples["original"], samples[k]).__dict__ for k in ("merged", "merge_all")},
                "samples_s": samples,
                "threads": prepared["original"].threads,
            }
        )
        print(f"{name}: done ({len(samples['original'])} rounds)", flush=True)
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| preset | blocks linearised / merged | paper MFLOPs | MACs original (M) | MACs merged (M) | MACs merge-all (M) "
        "| ΔMACs | paper ΔMFLOPs | ORT original (ms) | ORT merged (ms) | latency change merged [95 % CI] | ORT merge-all (ms) | paper Raspi 4 Δ |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        base = "mobilenet_v2-1.4" if "1.4" in r["preset"] else "mobilenet_v2-1.0"
        paper_flops, paper_lat = PAPER[r["preset"]]
        paper_base = PAPER[base][0]
        m, t, s = r["macs"], r["median_s"], r["speedup"]["merged"]
        # latency change of the merged model: (1 / speed-up - 1); negative = faster
        change = (1 / s["ratio"] - 1) * 100
        lo, hi = sorted(((1 / s["high"] - 1) * 100, (1 / s["low"] - 1) * 100))
        lines.append(
            f"| {r['preset'].upper()} | {r['linearised']} / {r['merged_blocks']} | {paper_flops} | "
            f"{m['original'] / 1e6:.1f} | {m['merged'] / 1e6:.1f} | {m['merge_all'] / 1e6:.1f} | "
            f"{(m['merged'] / m['original'] - 1) * 100:+.1f} % | {(paper_flops / paper_base - 1) * 100:+.1f} % | "
            f"{t['original'] * 1e3:.2f} | {t['merged'] * 1e3:.2f} | {change:+.1f} % [{lo:+.1f}, {hi:+.1f}] | "
            f"{t['merge_all'] * 1e3:.2f} | {'-' + str(paper_lat) + ' %' if paper_lat else 'n/a'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", default=",".join(DEFAULT_PRESETS), help="comma-separated preset names")
    parser.add_argument("--resolution", type=int, default=224)
    parser.add_argument("--budget", type=float, default=3.0, help="seconds of timed rounds per model at most")
    parser.add_argument("--threads", type=int, default=None, help="ONNX Runtime intra-op threads (default: torch's)")
    parser.add_argument("--out", type=Path, default=Path("results/merge_presets.json"), help="raw samples and figures")
    args = parser.parse_args()
    rows = run(args.presets.split(","), args.resolution, args.budget, args.threads)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, json.dumps(rows, indent=1))
    print(table(rows))
    print(f"raw samples: {args.out}")


if __name__ == "__main__":
    main()
