#!/usr/bin/env bash
# Issue #13 on a CUDA GPU (repo root as working directory; <= 120 s on an H200): one search + fine-tune at a
# larger scale than the CPU benchmarks -- MobileNetV2-1.0 (17 blocks) at 64x64 on the generated data set
# `shapes` (dsprof.search.data.shapes: 10 classes, 2,000 train / 500 val, no files, no scikit-learn):
#   1. train the original (warm-up recipe, AMP), 2. measured-importance search (keep 10 of 17, each block
#   linearised alone and fine-tuned 1 epoch) and the differentiable search with bounded scores, 3. fine-tune
#   both plans and one random plan alike, merge the importance plan and compare outputs;
#   4. CPU repeatability on this other machine: the search_digits original (1 thread, deterministic; needs
#   scikit-learn for the digits, says so otherwise), to set beside the figure in benchmarks/RESULTS.md.
# Writes $OUT/search/{summary.json,log.txt}. A CPU dry run of the script's logic: DEVICE=cpu QUICK=1.
set -uo pipefail
OUT=${OUT:-gpu-out}; mkdir -p "$OUT/search"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PY=${PY:-python3}
{ nvidia-smi -L; $PY -c "import torch; print(torch.__version__, torch.cuda.get_device_name(0))"; } 2>&1 | tee "$OUT/search/log.txt"
timeout ${GPU_S:-85} $PY - "$OUT/search" <<'EOF' 2>&1 | grep --line-buffered -v "epoch [0-9]*/" | tee -a "$OUT/search/log.txt"
import json, os, sys, time
from pathlib import Path
import torch
from dsprof.records.plan import Plan
from dsprof.models import ModelRef
from dsprof.search import GateSettings, TrainConfig, TrainRun, finetune, random_keep, search

out = Path(sys.argv[1]); work = out / "work"; work.mkdir(exist_ok=True)
opts, res, k = {"width": 1.0}, 64, 10
device = os.environ.get("DEVICE", "cuda"); mb = 2 if os.environ.get("QUICK") else None
TrainConfig = (lambda cls: lambda **kw: cls(max_batches=mb, max_eval_batches=mb, **kw))(TrainConfig)
model = ModelRef.of("mobilenet_v2", options=opts, resolution=res); trained = ModelRef.of(model, weights=work / "orig.pt")
c = dict(data="shapes", run=TrainRun(device))
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
summary = {"gpu": torch.cuda.get_device_name(0) if device == "cuda" else "cpu (dry run)", "torch": torch.__version__,
           "data": "shapes", "model": "mobilenet_v2", "options": opts,
           "resolution": res, "keep": k, "seconds": {}}
def stage(name, fn):
    t = time.perf_counter(); r = fn(); sync(); summary["seconds"][name] = round(time.perf_counter() - t, 1)
    json.dump(summary, open(out / "summary.json", "w"), indent=1); return r
orig = stage("train original", lambda: finetune(model=model, data="shapes", run=TrainRun(device, work / "orig.pt"), check_merge=False,
             config=TrainConfig(epochs=10, lr=0.05, warmup_epochs=2, batch_size=64)))
summary["original_accuracy"] = orig.accuracy; print("original", orig.accuracy, flush=True)
tune = TrainConfig(epochs=4, lr=0.02, batch_size=64)
imp = stage("importance search", lambda: search(trained, keep=k,
            method="importance", settings=GateSettings(lam=0.0), config=TrainConfig(epochs=1, lr=0.02, seed=100), **c))
summary["importance_plan"] = "".join(map(str, imp.plan.keep)); summary["importance_drops"] = imp.plan.search["importance"]["drops"]
print("importance plan", summary["importance_plan"], flush=True)
dif = stage("differentiable search", lambda: search(trained, keep=k, settings=GateSettings(lam=0.0,
            score_lr=0.05, score_normalize=True, score_bound=1.0, anneal_epochs=2.0), config=TrainConfig(epochs=4, lr=0.01), **c))
summary["differentiable_plan"] = "".join(map(str, dif.plan.keep)); summary["differentiable_scores"] = dif.scores
print("differentiable plan", summary["differentiable_plan"], flush=True)
plans = {"importance": imp.plan, "differentiable": dif.plan,
         "random": Plan("mobilenet_v2", random_keep(len(imp.plan.keep), k, 0), opts)}
for name, plan in plans.items():
    r = stage(f"fine-tune {name}", lambda: finetune(plan, model=trained, config=tune, check_merge=name == "importance", **c))
    summary[f"{name}_accuracy"] = r.accuracy
    if name == "importance":
        summary["merged_accuracy"], summary["merged_max_abs_diff"] = r.merged_accuracy, r.merged_max_abs_diff
    print(name, r.accuracy, flush=True)
json.dump(summary, open(out / "summary.json", "w"), indent=1)
EOF
# 4. CPU repeatability on this machine's CPU (search_digits' original: 24 px, 12 epochs, 1 thread, deterministic)
timeout ${CPU_S:-30} $PY - <<'EOF' 2>&1 | tee -a "$OUT/search/log.txt"
import platform, torch
torch.set_num_threads(1); torch.use_deterministic_algorithms(True)
from dsprof.models import ModelRef
from dsprof.search import TrainConfig, TrainRun, finetune
r = finetune(model=ModelRef.of("mobilenet_v2", options={"width": 0.35, "depths": [1, 2, 2, 2, 1, 1, 1]}, resolution=24),
             data="digits", run=TrainRun("cpu"), check_merge=False, config=TrainConfig(epochs=12, lr=0.05, warmup_epochs=2, batch_size=64))
print(f"CPU repeatability ({platform.processor() or platform.machine()}, {torch.backends.cpu.get_cpu_capability()}, "
      f"torch {torch.__version__}): search_digits original accuracy {r.accuracy:.4f}")
EOF
rm -rf "$OUT/search/work"
ls -la "$OUT/search"
