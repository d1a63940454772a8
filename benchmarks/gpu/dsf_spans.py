"""MobileNetV2-1.4 DS-F on a CUDA GPU: merged block by block vs span-merged, and the paper's timing protocol.

Rows (batch 128, 224 px, fp32 and fp16 channels-last, CUDA events, models interleaved round by round):
* original, BatchNorm folded        -- dsprof's fair baseline (DESIGN: fair timing)
* original, BatchNorm unfolded      -- what the paper's published throughput code timed as the original
* DS-F merged block by block        -- the planner on MACs (`merge_rule(model, merge_by="macs")`), then `merge_model`
                                       (BatchNorm folded, biases kept)
* DS-F span-merged                  -- the same, its spans chosen too (``decide(plan, spans="auto")``)
* DS-F span-merged, every run       -- longest spans allowed (up to 4 blocks), whatever MACs say
* DS-F merged, bias-free convs      -- the paper's merged model: the same convolutions without bias

    PYTHONPATH=$PWD python3 benchmarks/gpu/dsf_spans.py --out $OUT/dsf
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from dsprof.merging import fold_batchnorm, merge_model
from dsprof.records.plan import load_preset
from dsprof.models.spans import span_runs
from dsprof.planning.decide import merge_rule
from dsprof.models import count_macs, find_blocks, get_model


def _every_run(model: nn.Module, plan, max_len: int = 4) -> tuple[tuple[int, int], ...]:
    """Each run of consecutive linear blocks cut into the fewest spans of up to ``max_len`` blocks (a lone
    block left over stays a block)."""
    spans = []
    for run in span_runs(find_blocks(model), plan.keep):
        for a in range(0, len(run), max_len):
            piece = run[a:a + max_len]
            if len(piece) > 1:
                spans.append((piece[0], piece[-1] + 1))
    return tuple(spans)


def _bias_free(model: nn.Module) -> nn.Module:
    m = copy.deepcopy(model)
    for mod in m.modules():
        if isinstance(mod, nn.Conv2d) and mod.bias is not None:
            mod.bias = None
    return m


def _time(models: dict[str, nn.Module], batch: int, dtype: torch.dtype, channels_last: bool, rounds: int, iters: int) -> dict[str, float]:
    """Median seconds per forward pass of each model, rounds interleaved across the models."""
    x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=dtype)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = x.to(memory_format=fmt)
    ready = {k: m.to("cuda", dtype).to(memory_format=fmt).eval() for k, m in models.items()}
    samples: dict[str, list[float]] = {k: [] for k in ready}
    with torch.inference_mode():
        for m in ready.values():  # warm-up: cuDNN algorithm choice, allocator
            for _ in range(10):
                m(x)
        torch.cuda.synchronize()
        for _ in range(rounds):
            for k, m in ready.items():
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(iters):
                    m(x)
                end.record()
                end.synchronize()
                samples[k].append(start.elapsed_time(end) / 1e3 / iters)
    return {k: statistics.median(v) for k, v in samples.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--out", type=Path, default=Path("results/dsf"))
    args = ap.parse_args(argv)
    torch.backends.cudnn.benchmark = True
    base = get_model("mobilenet_v2", width=1.4).eval()
    preset = load_preset("mbv2-1.4-ds-f")
    x = torch.zeros(1, 3, 224, 224)
    by_macs = merge_rule(base, merge_by="macs")
    spans_macs = by_macs.decide(preset, spans="auto").plan
    spans_all = replace(preset, spans=_every_run(base, preset))
    models = {
        "original (BN folded)": fold_batchnorm(base, x),
        "original (BN unfolded, paper)": copy.deepcopy(base),
        "DS-F merged per block": merge_model(base, by_macs.decide(preset).plan),
        "DS-F span-merged (MACs)": merge_model(base, spans_macs),
        "DS-F span-merged (every run)": merge_model(base, by_macs.decide(spans_all).plan),
    }
    models["DS-F merged, bias-free (paper)"] = _bias_free(models["DS-F merged per block"])
    macs = {k: count_macs(m, (224, 224)) for k, m in models.items()}
    rows = {}
    for label, dtype, cl in (("fp32", torch.float32, False), ("fp16 channels-last", torch.float16, True)):
        rows[label] = _time(models, args.batch, dtype, cl, args.rounds, args.iters)
    args.out.mkdir(parents=True, exist_ok=True)
    result = {
        "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "batch": args.batch,
        "spans_macs": [list(s) for s in spans_macs.spans or ()], "spans_all": [list(s) for s in spans_all.spans or ()],
        "macs": macs, "seconds": rows,
    }
    (args.out / "dsf_spans.json").write_text(json.dumps(result, indent=1))
    print(f"{result['gpu']}, torch {result['torch']}, batch {args.batch}, 224 px")
    print(f"spans (MACs): {result['spans_macs']}; spans (every run): {result['spans_all']}")
    ref = {label: rows[label]["original (BN folded)"] for label in rows}
    paper_ref = {label: rows[label]["original (BN unfolded, paper)"] for label in rows}
    print("| model | MMACs | " + " | ".join(f"{l} FPS | x folded | x unfolded" for l in rows) + " |")
    print("|---|---|" + "---|---|---|" * len(rows))
    for k in models:
        cells = []
        for label in rows:
            s = rows[label][k]
            cells.append(f"{args.batch / s:,.0f} | {ref[label] / s:.2f} | {paper_ref[label] / s:.2f}")
        print(f"| {k} | {macs[k] / 1e6:.0f} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
