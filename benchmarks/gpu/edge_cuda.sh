#!/usr/bin/env bash
# The edge runner's CUDA paths on a GPU machine (repo root as working directory, python3 with torch and
# onnxruntime; about 3 minutes): export MobileNetV2 (224 px, batch 64, the paper's edge-GPU batch) as a
# TorchScript bundle, time it with the bundle runner (`--runtime torchscript --device cuda`: CUDA events,
# as on a Jetson with NVIDIA's PyTorch), import it, time the same workloads with `dsprof measure --device
# cuda`, and print runner / measure per LUT entry (median, range). Files: $OUT/edge_cuda.tgz.
set -uo pipefail
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PY=${PY:-python3} BUDGET=${BUDGET:-0.2}
W=$(mktemp -d)
{ nvidia-smi -L; $PY -c "import sys,torch; print(sys.version.split()[0], torch.__version__, torch.cuda.get_device_name(0))"; } 2>&1 | tee "$OUT/edge_env.txt"
timeout 90 $PY -m dsprof export --model mobilenet_v2 --batch 64 --format torchscript --budget $BUDGET --out "$W/bundle" --quiet
timeout 120 $PY "$W/bundle/run_bundle.py" --runtime torchscript --device cuda --threads 1 --out "$W/runner.jsonl" --quiet
timeout 30 $PY -m dsprof import "$W/bundle" "$W/runner.jsonl" --out "$W/imported"
timeout 90 $PY -m dsprof measure --model mobilenet_v2 --device cuda --batch 64 --threads 1 --budget $BUDGET --out "$W/direct" --no-progress | tail -n 3
timeout 30 $PY - "$W" <<'PYEOF' 2>&1 | tee "$OUT/edge_cuda.txt"
import statistics, sys
from pathlib import Path
from dsprof.lut import build_lut
w = Path(sys.argv[1])
def med(p):
    f = build_lut([p]).to_dataframe()
    return {(r.scope, r.workload, r.variant): r.median_s for r in f.itertuples()}
a, b = med(w / "imported"), med(w / "direct")
common = sorted(set(a) & set(b))
print(f"runner entries {len(a)}, measure entries {len(b)}, common {len(common)} (same keys: {set(a) == set(b)})")
for scope in ("block", "model", "stem", "head", None):
    r = [a[k] / b[k] for k in common if scope is None or k[0] == scope]
    if r:
        print(f"{scope or 'all'}: runner/measure median {statistics.median(r):.3f}, range {min(r):.2f}-{max(r):.2f}, "
              f"within 10 %: {sum(abs(x - 1) <= 0.1 for x in r)}/{len(r)}")
for k in common:
    if k[0] == "model":
        print(k[2], f"runner {a[k] * 1e3:.3f} ms, measure {b[k] * 1e3:.3f} ms per batch of 64")
PYEOF
tar czf "$OUT/edge_cuda.tgz" -C "$W" runner.jsonl imported direct
ls -la "$OUT"
