"""Ground truth for the activation search: every plan with k kept blocks, fine-tuned alike (issue #13).

A MobileNetV2 small enough to enumerate (width 0.35, depths 1,2,1,1,1,1,1: 8 blocks) on scikit-learn's
digits at 16x16, 1 thread:

1. train the original model (the "pretrained" model; warm-up, lr 0.05, cosine, seed 0);
2. measure each block's importance: the accuracy lost when that block alone is linearised and
   fine-tuned like every plan (same epochs, same seeds), against the original fine-tuned alike;
3. fine-tune every plan with k kept blocks (C(8, 4) = 70) with each seed, from 1.: accuracy, MACs
   (and, with --lut, predicted latency);
4. run the searches from 1. and look their plans up in 3.: percentile among all plans, Kendall tau of
   their scores with 2., gap to the accuracy-MACs Pareto front; random plans (the mean of all plans is
   the expectation of random search) and layer pruning of the searched plan beside them.
5. with --lut (issue #20): the importance search through the planner (least summed importance at k, its
   merges from the LUT) and the planner's latency-aware plans of that k (its accuracy-latency front for the
   measured importance), each judged by its gap to the enumeration's accuracy-latency front; the planner
   without importance (the LUT's fastest plan) beside them.
6. with --proxies (issue #30): every importance proxy (`dsprof.search.proxies`) scores the original's blocks
   (seed 100); each is judged by the Kendall tau of its scores with the measured importance of 2. and by the
   percentile of the planner's k plan for its importance (with --lut the planner's front plan, else the k
   blocks of highest importance: the planner's choice at k whatever the latencies), next to its wall seconds
   and those of the full measurement (the ``finetune`` proxy, n + 1 fine-tunes) in the same run.

    .venv/bin/python benchmarks/search_ground_truth.py                  # ~10-15 min on 1 thread
    .venv/bin/python benchmarks/search_ground_truth.py --reuse           # searches only, on the stored enumeration
    .venv/bin/python benchmarks/search_ground_truth.py --reuse --lut L --methods importance,planner
                                                                         # rerun these; the other rows kept
    .venv/bin/python benchmarks/search_ground_truth.py --quick           # smoke run: 7 blocks, 1 seed, 2 batches
    .venv/bin/python benchmarks/search_ground_truth.py --reuse --proxies --out benchmarks/search/ground_truth_amd.json
                                                                         # the proxies only (no search rerun)

Writes --out (JSON) and a PNG beside it (all plans, the front, random, searched, layer pruning).
CPU repeatability: 1 thread, torch.manual_seed per stage, seeded data order and augmentation, no data
loader workers, torch.use_deterministic_algorithms(True): two runs on one machine give the same numbers.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from dsprof.io import atomic_write_text
from dsprof.records.plan import Plan
from dsprof.planning.dp import nondominated
from dsprof.lut import Pricing
from dsprof.models import ModelRef
from dsprof.search import GateSettings, TrainConfig, TrainRun, finetune, search
from dsprof.search.data import load_data
from dsprof.search.ground_truth import (
    PlanOutcome,
    accuracy_percentile,
    enumerate_plans,
    gap_to_front,
    kendall_tau,
    plan_macs,
)
from dsprof.search.importance import importance_keep, measure_importance

MODEL = "mobilenet_v2"

# The searches compared against the ground truth: name -> search() keywords. "paper" is the method as
# the paper states it (and as dsprof ran it before issue #13); the others add one change each.
SEARCHES = {
    "differentiable (before: init 1, sum gradient, unbounded)": dict(method="differentiable"),
    "+ anneal k from all blocks": dict(method="differentiable", anneal_epochs=2.0),
    "+ normalised, bounded scores": dict(method="differentiable", score_normalize=True, score_bound=1.0),
    "+ both": dict(method="differentiable", anneal_epochs=2.0, score_normalize=True, score_bound=1.0),
    "measured importance": dict(method="importance"),
    "planner (LUT latency only, no training)": dict(method="planner"),
}


def repeatability_note(threads: int) -> str:
    return (f"torch {torch.__version__}, {threads} thread(s), {torch.backends.cpu.get_cpu_capability()} kernels, "
            f"{platform.processor() or platform.machine()}; deterministic algorithms on, manual seeds, no loader workers")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--width", type=float, default=0.35)
    ap.add_argument("--depths", default="1,2,1,1,1,1,1")
    ap.add_argument("--resolution", type=int, default=16)
    ap.add_argument("--keep", type=int, default=4)
    ap.add_argument("--train-epochs", type=int, default=15)
    ap.add_argument("--finetune-epochs", type=int, default=2, help="fine-tuning of every plan")
    ap.add_argument("--search-epochs", type=int, default=4)
    ap.add_argument("--seeds", default="0,1", help="fine-tuning seeds of every plan")
    ap.add_argument("--lam", type=float, default=0.05, help="decay strength of the latency-weighted differentiable searches")
    ap.add_argument("--max-span", type=int, default=1, help="the planner's spans (the LUT needs span entries for > 1)")
    ap.add_argument("--methods", default=None,
                    help="the search methods to run, comma-separated (default differentiable,importance,planner; none "
                    "with --proxies); with --reuse the stored rows of the others are kept")
    ap.add_argument("--proxies", nargs="?", const="all", default=None,
                    help="score the importance proxies (all, or comma-separated names) against the ground truth")
    ap.add_argument("--score-lr", type=float, default=0.05)
    ap.add_argument("--lut", type=Path, default=None, help="a LUT for this model at --resolution: latency of every plan")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reuse", action="store_true", help="read the enumeration from --out, run the searches only")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 7 blocks, 1 seed, 2 batches per epoch")
    ap.add_argument("--out", type=Path, default=Path("results/search_ground_truth.json"))
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    if args.quick:
        args.depths, args.keep, args.seeds = "1,1,1,1,1,1,1", 5, "0"
    if args.methods is None:
        args.methods = "" if args.proxies else "differentiable,importance,planner"
    options = {"width": args.width, "depths": [int(d) for d in args.depths.split(",")]}
    seeds = tuple(int(s) for s in args.seeds.split(","))
    limit = 2 if args.quick else None
    common = dict(data="digits", resolution=args.resolution, device="cpu")
    tune_cfg = TrainConfig(epochs=args.finetune_epochs, lr=0.02, max_batches=limit)
    work = Path(tempfile.mkdtemp(prefix="dsprof-ground-truth-"))
    print(f"repeatability: {repeatability_note(args.threads)}", flush=True)

    stored = json.loads(args.out.read_text()) if args.reuse else None
    timings: dict[str, float] = {}
    t = time.perf_counter()
    model = ModelRef.of(MODEL, options=options, resolution=args.resolution)
    original = finetune(model=model, data=common["data"], config=TrainConfig(
        epochs=args.train_epochs, lr=0.05, warmup_epochs=2, max_batches=limit), run=TrainRun("cpu", work / "original.pt"))
    timings["train original"] = time.perf_counter() - t
    print(f"original: {original.accuracy:.4f}", flush=True)
    if stored and abs(stored["original_accuracy"] - original.accuracy) > 1e-9:
        print(f"warning: the original differs from the stored run's ({stored['original_accuracy']:.4f})")

    if stored:
        importance = stored["importance"]
        outcomes = [PlanOutcome.from_dict(d) for d in stored["plans"]]
    else:
        t = time.perf_counter()
        imp = measure_importance(MODEL, options=options, weights=work / "original.pt", config=tune_cfg, seeds=seeds, **common)
        importance = imp.to_dict()
        timings["importance"] = time.perf_counter() - t
        t = time.perf_counter()
        outcomes = enumerate_plans(MODEL, k=args.keep, options=options, weights=work / "original.pt", config=tune_cfg,
                                   seeds=seeds, lut=args.lut, **common)
        timings["enumeration"] = time.perf_counter() - t
    if args.lut is not None and any(o.latency_s is None for o in outcomes):  # stored without: look them up now
        from dsprof.lut import predict_latency

        outcomes = [o if o.latency_s is not None else replace(o, latency_s=predict_latency(
            model, args.lut, Plan(MODEL, o.keep, options)).total_s)
            for o in outcomes]
    drops = importance["drops"]
    by_keep = {o.keep: o for o in outcomes}
    accs = [o.accuracy for o in outcomes]
    # the cost axis of the Pareto front: LUT latency where the plans have it, else MACs
    macs = [o.latency_s if o.latency_s is not None else o.macs for o in outcomes]
    cost_of = (lambda o: o.latency_s) if outcomes[0].latency_s is not None else (lambda o: o.macs)
    seed_spread = (statistics.fmean(max(o.accuracies) - min(o.accuracies) for o in outcomes) if len(seeds) > 1 else 0.0)
    n = len(drops)
    marginal = [statistics.fmean(o.accuracy for o in outcomes if o.keep[b]) -
                statistics.fmean(o.accuracy for o in outcomes if not o.keep[b]) for b in range(n)]

    methods = set(args.methods.split(","))
    rerun = {label for label, kw in SEARCHES.items() if kw["method"] in methods}
    rows = [{**r, "stored": True} for r in (stored or {}).get("searches", []) if r["search"] not in rerun]
    latency_aware = (stored or {}).get("latency_aware") if "importance" not in methods else None
    for weighted in (False, True):
        for label, kw in SEARCHES.items():
            method = kw["method"]
            # the planner's methods choose by the LUT: the importance search without one keeps the top k
            if label not in rerun or method == "planner" and not (weighted and args.lut) \
                    or weighted and method == "importance" and args.lut is None:
                continue
            lam = args.lam if weighted and method == "differentiable" else 0.0
            t = time.perf_counter()
            cfg = TrainConfig(epochs=args.search_epochs, lr=0.01, max_batches=limit, seed=100)
            if method == "importance":
                cfg = replace(tune_cfg, seed=100)  # its own seed: not the ground truth's fine-tuning runs
            gates = GateSettings(lam=lam, score_lr=args.score_lr, **{k: v for k, v in kw.items() if k != "method"})
            found = search(ModelRef.of(model, weights=work / "original.pt"), keep=args.keep, method=kw["method"],
                           data=common["data"], settings=gates, config=cfg, lut=args.lut if weighted else None,
                           pricing=Pricing(max_span=args.max_span), run=TrainRun("cpu"))
            seconds = time.perf_counter() - t
            keep = tuple(found.plan.keep)
            o = by_keep[keep]
            scores = found.plan.search.get("scores") or [0.0] * n  # the planner alone has none
            row = {"search": label, "lambda": lam if method == "differentiable" else None,
                   "lut": bool(weighted and args.lut), "keep": o.keep_str, "accuracy": o.accuracy, "macs": o.macs,
                   "percentile": accuracy_percentile(o.accuracy, accs),
                   "tau_importance": kendall_tau(scores, drops), "tau_marginal": kendall_tau(scores, marginal),
                   "latency_s": o.latency_s, "gap_to_front": gap_to_front(cost_of(o), o.accuracy, macs, accs),
                   "score_spread": max(scores) - min(scores), "scores": scores, "seconds": seconds}
            rows.append(row)
            print(f"{label}, lambda {row['lambda']}, LUT {row['lut']}: keep {o.keep_str} accuracy {o.accuracy:.4f} "
                  f"percentile {row['percentile']:.2f} tau {row['tau_importance']:.2f} gap {row['gap_to_front']:.4f}",
                  flush=True)
            if method == "importance" and row["lut"]:
                latency_aware = judge_latency_aware(found.plan.search["planner"], args.keep, by_keep, macs, accs,
                                                    seed_spread)

    proxy_rows = (stored or {}).get("proxies") or []
    if args.proxies:
        proxy_rows = judge_proxies(args, options, work / "original.pt", drops, marginal, by_keep, accs, tune_cfg, limit)
    num_classes = load_data(common["data"], args.resolution).num_classes
    primary = next((r for r in rows if r["search"] == "measured importance" and not r.get("lut")), None)
    if primary is not None and not primary.get("stored"):
        layer_pruning = judge_layer_pruning(primary["keep"], options, work / "original.pt", seeds, tune_cfg, common,
                                            args.resolution, num_classes)
    else:  # the importance search was not rerun: its layer-pruning baseline as stored (none without the search)
        layer_pruning = (stored or {}).get("layer_pruning")
    front = nondominated(macs, accs)
    summary = {
        "settings": {**{k: v for k, v in vars(args).items() if k not in ("out", "lut")}, "options": options,
                     "lut": str(args.lut) if args.lut else None, "repeatability": repeatability_note(args.threads)},
        "original_accuracy": original.accuracy,
        "original_macs": plan_macs(MODEL, options, args.resolution, [1] * n, num_classes=num_classes),
        "importance": importance,
        "marginal_importance": marginal,
        "plans": [o.to_dict() for o in outcomes],
        "pareto_front": [outcomes[i].keep_str for i in front],
        "random_mean_accuracy": statistics.fmean(accs),
        "random_std_accuracy": statistics.pstdev(accs),
        "best_plan": max(outcomes, key=lambda o: o.accuracy).to_dict(),
        "seed_spread": seed_spread,
        "searches": rows,
        "latency_aware": latency_aware,
        "proxies": proxy_rows,
        "layer_pruning": layer_pruning,
        "seconds": {**(stored["seconds"] if stored else {}), **timings},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, json.dumps(summary, indent=1) + "\n")
    png = args.out.with_suffix(".png")
    plot(summary, outcomes, front, rows).savefig(png, dpi=120, bbox_inches="tight")
    print_report(summary, rows)
    print(f"wrote {args.out} and {png}")


def judge_layer_pruning(keep: str, options: dict, weights: Path, seeds, tune_cfg: TrainConfig, common: dict,
                        resolution: int, num_classes: int) -> dict:
    """Layer pruning of the searched plan ``keep`` (its linearised blocks dropped where shapes allow), fine-tuned
    like every plan of the enumeration: accuracy per seed, MACs."""
    from dsprof.models import count_macs, get_model
    from dsprof.search import layer_prune

    pruned_keep = tuple(int(c) for c in keep)
    model = ModelRef.of(MODEL, options=options, resolution=resolution, weights=weights)
    accs = [finetune(Plan(MODEL, pruned_keep, options), model=model, data=common["data"], layer_pruning=True,
                     config=replace(tune_cfg, seed=seed), check_merge=False, run=TrainRun(common["device"])).accuracy
            for seed in seeds]
    net = get_model(MODEL, resolution=resolution, num_classes=num_classes, **options)
    macs = count_macs(layer_prune(net, pruned_keep)[0], (resolution, resolution))
    return {"keep": keep, "accuracies": accs, "accuracy": statistics.fmean(accs), "macs": macs}


def judge_latency_aware(planner: dict, k: int, by_keep: dict, costs: list, accs: list, seed_spread: float) -> list:
    """The planner's accuracy-latency front for the measured importance, its plans with ``k`` kept blocks (the
    enumeration's k): each one's accuracy in the enumeration and its gap to the enumeration's accuracy-latency
    front (the best accuracy of any plan predicted at most as fast), against the seed spread."""
    out = []
    for p in planner["front"]:
        if p["k"] != k:
            continue
        o = by_keep[tuple(p["keep"])]
        gap = gap_to_front(o.latency_s if o.latency_s is not None else p["latency_s"], o.accuracy, costs, accs)
        out.append({"keep": o.keep_str, "latency_s": p["latency_s"], "enumeration_latency_s": o.latency_s,
                    "predicted_loss": p["importance"], "accuracy": o.accuracy,
                    "percentile": accuracy_percentile(o.accuracy, accs), "gap_to_front": gap,
                    "within_seed_spread": gap <= seed_spread})
        print(f"latency-aware plan {o.keep_str}: {p['latency_s'] * 1e3:.3f} ms (enumeration's price "
              f"{o.latency_s * 1e3:.3f} ms), accuracy {o.accuracy:.4f}, gap to front {gap:.4f} "
              f"(seed spread {seed_spread:.4f})", flush=True)
    return out


def judge_proxies(args, options: dict, weights: Path, drops: list, marginal: list, by_keep: dict, accs: list,
                  tune_cfg: TrainConfig, limit: int | None) -> list[dict]:
    """Every proxy (or those --proxies names) on the original ``weights``, seed 100 (none of the ground truth's):
    its Kendall tau with the measured importance ``drops`` (and the marginal importance), the percentile among
    the enumeration's plans of the planner's k plan for its importance, its wall seconds; the full measurement
    (``finetune``: the fine-tunes of the ground truth's importance, one seed) first, its seconds beside each."""
    from dsprof.search.proxies import PROXIES, ProxySettings, proxy_input, score_blocks

    names = list(PROXIES) if args.proxies == "all" else args.proxies.split(",")
    names = ["finetune"] + [n for n in names if n != "finetune"]  # S0 first: every line shows it
    config = replace(tune_cfg, seed=100)
    settings = ProxySettings(seed=100, **({"batches": 2, "eval_batches": 2, "steps": 2} if limit else {}))
    out, finetune_s = [], None
    for name in names:
        inp = proxy_input(ModelRef.of(MODEL, options=options, resolution=args.resolution), name, weights=weights,
                          data="digits", settings=settings, config=config)
        scored = score_blocks(name, inp)
        scores = list(scored.scores)
        if args.lut is not None:
            from dsprof.planning import plan_front

            front = plan_front(ModelRef.of(MODEL, options=options, resolution=args.resolution), args.lut,
                               pricing=Pricing(max_span=args.max_span), importance=scores)
            keep = tuple(front.choose(keep=args.keep).plan.keep)
        else:
            keep = importance_keep(scores, args.keep)
        o = by_keep[keep]
        finetune_s = scored.seconds if name == "finetune" else finetune_s
        row = {"proxy": name, "keep": o.keep_str, "accuracy": o.accuracy, "percentile": accuracy_percentile(o.accuracy, accs),
               "tau_importance": kendall_tau(scores, drops), "tau_marginal": kendall_tau(scores, marginal),
               "seconds": scored.seconds, "finetune_seconds": finetune_s, "lut": args.lut is not None,
               "settings": scored.settings, "unit": scored.unit, "scores": scores}
        out.append(row)
        print(f"importance proxy {name}: percentile {row['percentile']:.2f} tau {row['tau_importance']:.2f} seconds "
              f"{row['seconds']:.2f} (fine-tune importance: seconds {finetune_s:.2f})", flush=True)
    return out


def plot(summary, outcomes, front, rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    by_lut = outcomes[0].latency_s is not None  # the front's cost axis: LUT latency (ms) where known, else MMACs
    x = (lambda o: o.latency_s * 1e3) if by_lut else (lambda o: o.macs / 1e6)
    by_keep = {o.keep_str: o for o in outcomes}
    ax.scatter([x(o) for o in outcomes], [o.accuracy for o in outcomes], s=12, c="0.6", label="all plans (k fixed)")
    f = [outcomes[i] for i in front]
    ax.plot([x(o) for o in f], [o.accuracy for o in f], "k-", lw=1, label="Pareto front")
    ax.axhline(summary["random_mean_accuracy"], color="0.4", ls="--", lw=1, label="random plans (mean)")
    marks = "o^sDv*P"
    for i, r in enumerate(rows):
        ax.scatter([x(by_keep[r["keep"]])], [r["accuracy"]], marker=marks[i % len(marks)], s=50,
                   label=f"{r['search']} ({_weighting(r)})")
    lp = summary["layer_pruning"]
    if not by_lut and lp:
        ax.scatter([lp["macs"] / 1e6], [lp["accuracy"]], marker="x", s=60, c="r", label="layer pruning")
    ax.set_xlabel("predicted latency, ms (LUT)" if by_lut else "MMACs (merged, one image)")
    ax.set_ylabel("val accuracy (mean over seeds)")
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def print_report(summary, rows) -> None:
    print()
    print(f"original {summary['original_accuracy']:.4f}; random plans {summary['random_mean_accuracy']:.4f} "
          f"± {summary['random_std_accuracy']:.4f}; best plan {summary['best_plan']['keep']} "
          f"{summary['best_plan']['accuracy']:.4f}; seed spread {summary['seed_spread']:.4f}; layer pruning "
          + (f"{summary['layer_pruning']['accuracy']:.4f}" if summary["layer_pruning"] else "not run"))
    print("| search | weighting | plan | accuracy | percentile | τ (single-block importance) | τ (marginal) | gap to front "
          "| score spread |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['search']}{' (stored)' if r.get('stored') else ''} | {_weighting(r)} | {r['keep']} | "
              f"{r['accuracy']:.4f} | {r['percentile']:.2f} | {r['tau_importance']:.2f} | {r['tau_marginal']:.2f} | "
              f"{r['gap_to_front']:.4f} | {r['score_spread']:.3g} |")
    if summary.get("proxies"):
        print("| importance proxy | plan (k from its importance) | accuracy | percentile | τ (measured importance) "
              "| τ (marginal) | seconds | fine-tune importance, seconds |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for r in summary["proxies"]:
            print(f"| {r['proxy']} | {r['keep']} | {r['accuracy']:.4f} | {r['percentile']:.2f} | {r['tau_importance']:.2f} "
                  f"| {r['tau_marginal']:.2f} | {r['seconds']:.2f} | {r['finetune_seconds']:.2f} |")
    for p in summary.get("latency_aware") or []:
        print(f"latency-aware (planner front, k fixed): {p['keep']} {p['latency_s'] * 1e3:.3f} ms accuracy "
              f"{p['accuracy']:.4f} percentile {p['percentile']:.2f} gap {p['gap_to_front']:.4f} "
              f"{'within' if p['within_seed_spread'] else 'OUTSIDE'} one seed spread")


def _weighting(row: dict) -> str:
    """How a row's search weighed latency: the decay's λ (differentiable), the planner's LUT, or none."""
    if row.get("lambda") not in (None, 0.0):
        return f"λ={row['lambda']:g}" + (", LUT" if row.get("lut") else ", MACs")
    return "LUT planner" if row.get("lut") else "none"


if __name__ == "__main__":
    main()
