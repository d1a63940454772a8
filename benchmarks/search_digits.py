"""Search to merged model on a small real data set, on this CPU, in minutes (issue #6).

Scikit-learn's handwritten digits (1,797 8x8 images, upsampled), a small MobileNetV2:

1. train the original model from scratch (it plays the pretrained model): 2 warm-up epochs, lr 0.05,
   cosine (lr 0.1 without warm-up diverged in some runs and left 0.67-0.94 depending on the machine);
2. search which k blocks keep their activations (--method: measured importance by default, the k most
   important blocks without a LUT; or the differentiable search with its issue-#13 options and a
   MAC-weighted decay), from 1.;
3. fine-tune the linearised model of that plan from 1. (free ReLU6, self-distillation), merge it,
   and check that the merged model's outputs equal the fine-tuned model's;
4. random search: seeded random plans with the same k, fine-tuned the same way (mean over seeds);
5. layer pruning: the searched plan's blocks dropped instead (where shapes allow), fine-tuned the same way.

    .venv/bin/python benchmarks/search_digits.py                 # the run reported in benchmarks/RESULTS.md
    .venv/bin/python benchmarks/search_digits.py --quick         # a smoke run, seconds per stage

Prints a Markdown table; writes everything to --out (JSON).

Repeatable on the CPU: 1 thread (--threads), torch.manual_seed before every stage, a seeded split,
seeded shuffling and augmentation, no loader workers, torch.use_deterministic_algorithms(True). Two runs
on one machine give identical numbers; other CPUs (other kernels, e.g. AVX2 against AVX-512) round
differently, which the stable recipe keeps within about a point (see benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from dsprof.io import atomic_write_text
from dsprof.merging import merge_model
from dsprof.records.plan import Plan
from dsprof.planning.decide import merge_rule
from dsprof.models import count_macs, get_model
from dsprof.models import ModelRef
from dsprof.search import GateSettings, TrainConfig, TrainRun, finetune, layer_prune, random_keep, search

METHODS = {  # --method: search() keywords
    "importance": dict(method="importance"),
    "differentiable": dict(method="differentiable"),
    "differentiable-bounded": dict(method="differentiable", gates=dict(score_normalize=True, score_bound=1.0,
                                                                        anneal_epochs=2.0)),
}


def macs(options: dict, resolution: int, keep=None, pruned: bool = False) -> int:
    """MACs of one image: the original model (keep None), merged by the plan, or layer-pruned."""
    model = get_model("mobilenet_v2", resolution=resolution, num_classes=10, **options).eval()
    if keep is not None and pruned:
        model = layer_prune(model, tuple(keep))[0]
    elif keep is not None:
        model = merge_model(model, merge_rule(model, merge_by="macs").decide(Plan("mobilenet_v2", tuple(keep), options)).plan)
    return count_macs(model, (resolution, resolution))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--width", type=float, default=0.35)
    ap.add_argument("--depths", default="1,2,2,2,1,1,1")
    ap.add_argument("--resolution", type=int, default=24)
    ap.add_argument("--keep", type=int, default=4, help="blocks that keep their activations")
    ap.add_argument("--train-epochs", type=int, default=12)
    ap.add_argument("--search-epochs", type=int, default=4)
    ap.add_argument("--finetune-epochs", type=int, default=8)
    ap.add_argument("--seeds", default="0,1,2", help="random-search seeds")
    ap.add_argument("--lam", type=float, default=0.05, help="decay strength of the differentiable search")
    ap.add_argument("--score-lr", type=float, default=0.05)
    ap.add_argument("--method", default="importance", choices=tuple(METHODS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="2 batches per epoch: a smoke run")
    ap.add_argument("--out", type=Path, default=Path("results/search_digits.json"))
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    print(f"repeatability: torch {torch.__version__}, {args.threads} thread(s), {torch.backends.cpu.get_cpu_capability()} "
          "kernels; deterministic algorithms, manual seeds, seeded data order, no loader workers", flush=True)
    options = {"width": args.width, "depths": [int(d) for d in args.depths.split(",")]}
    model = ModelRef.of("mobilenet_v2", options=options, resolution=args.resolution)
    limit = 2 if args.quick else None

    def cfg(epochs: int, lr: float) -> TrainConfig:
        return TrainConfig(epochs=epochs, batch_size=64, lr=lr, max_batches=limit)

    timings: dict[str, float] = {}
    work = Path(tempfile.mkdtemp(prefix="dsprof-search-digits-"))

    t = time.perf_counter()
    original = finetune(model=model, data="digits", config=replace(cfg(args.train_epochs, 0.05), warmup_epochs=2),
                        run=TrainRun("cpu", work / "original.pt"))
    timings["train original"] = time.perf_counter() - t
    print(f"original: {original.accuracy:.4f}", flush=True)

    t = time.perf_counter()
    search_cfg = cfg(args.search_epochs, 0.01) if args.method != "importance" else replace(cfg(2, 0.02), seed=100)
    trained = ModelRef.of(model, weights=work / "original.pt")
    chosen = dict(METHODS[args.method])
    gates = GateSettings(lam=args.lam, score_lr=args.score_lr, **chosen.pop("gates", {}))
    found = search(trained, keep=args.keep, data="digits", settings=gates, config=search_cfg, out=work / "plan.json",
                   run=TrainRun("cpu"), **chosen)
    timings["search"] = time.perf_counter() - t
    print(f"searched plan: {found.plan.keep}, scores {[round(s, 3) for s in found.scores]}", flush=True)

    tune = dict(model=trained, data="digits", distill=True, config=cfg(args.finetune_epochs, 0.02))
    t = time.perf_counter()
    tuned = finetune(found.plan, run=TrainRun("cpu", work / "searched.pt"), merged_out=work / "merged.pt", **tune)
    timings["fine-tune searched"] = time.perf_counter() - t
    print(f"searched: {tuned.accuracy:.4f} merged {tuned.merged_accuracy:.4f} diff {tuned.merged_max_abs_diff:.2e}", flush=True)

    randoms = []
    t = time.perf_counter()
    for seed in [int(s) for s in args.seeds.split(",")]:
        keep = random_keep(len(found.plan.keep), args.keep, seed)
        plan = Plan("mobilenet_v2", keep, options, name=f"random-{seed}")
        r = finetune(plan, run=TrainRun("cpu", work / f"random{seed}.pt"), **tune)
        randoms.append({"seed": seed, "keep": list(keep), "accuracy": r.accuracy, "merged_accuracy": r.merged_accuracy,
                        "merged_max_abs_diff": r.merged_max_abs_diff, "macs": macs(options, args.resolution, keep)})
        print(f"random seed {seed} {keep}: {r.accuracy:.4f}", flush=True)
    timings["fine-tune random plans"] = time.perf_counter() - t

    t = time.perf_counter()
    pruned = finetune(found.plan, run=TrainRun("cpu", work / "pruned.pt"), layer_pruning=True, **tune)
    timings["fine-tune layer-pruned"] = time.perf_counter() - t
    print(f"layer pruning: {pruned.accuracy:.4f}; " + "; ".join(pruned.notes), flush=True)

    accs = [r["accuracy"] for r in randoms]
    res = args.resolution
    mac = {"original": macs(options, res), "searched": macs(options, res, found.plan.keep),
           "layer_pruned": macs(options, res, found.plan.keep, pruned=True)}
    summary = {
        "settings": {**vars(args), "out": str(args.out), "options": options, "torch": torch.__version__},
        "original_accuracy": original.accuracy,
        "searched_plan": list(found.plan.keep),
        "search_scores": found.scores,
        "search_ranking": found.ranking,
        "searched_finetuned_accuracy": tuned.accuracy,
        "searched_merged_accuracy": tuned.merged_accuracy,
        "merged_max_abs_logit_diff": tuned.merged_max_abs_diff,
        "random": randoms,
        "random_mean_accuracy": statistics.mean(accs),
        "random_std_accuracy": statistics.stdev(accs) if len(accs) > 1 else 0.0,
        "macs": mac,
        "layer_pruning_accuracy": pruned.accuracy,
        "layer_pruning_notes": pruned.notes,
        "seconds": timings,
    }
    atomic_write_text(args.out, json.dumps(summary, indent=1) + "\n")

    n_val = 359
    print()
    k = "".join(map(str, found.plan.keep))
    mean_macs = statistics.mean(r["macs"] for r in randoms)
    print(f"| model | keep (1 = activations kept) | MMACs (merged) | val accuracy ({n_val} images) |")
    print("|---|---|---:|---:|")
    print(f"| original | {'1' * len(found.plan.keep)} | {mac['original'] / 1e6:.2f} | {original.accuracy:.4f} |")
    print(f"| searched + fine-tuned | {k} | | {tuned.accuracy:.4f} |")
    print(f"| searched + fine-tuned + merged | {k} | {mac['searched'] / 1e6:.2f} | {tuned.merged_accuracy:.4f} |")
    print(f"| random search, same k, merged (mean +- std over {len(accs)} seeds) | "
          f"{', '.join(''.join(map(str, r['keep'])) for r in randoms)} | {mean_macs / 1e6:.2f} (mean) | "
          f"{statistics.mean(accs):.4f} +- {summary['random_std_accuracy']:.4f} |")
    print(f"| layer pruning of the searched blocks | {k} | {mac['layer_pruned'] / 1e6:.2f} | {pruned.accuracy:.4f} |")
    print(f"\nmax |logit difference| merged vs fine-tuned: {tuned.merged_max_abs_diff:.2e}")
    print("seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
