#!/usr/bin/env bash
# LUT accuracy on CUDA (issues #14, #27): benchmarks/lut_accuracy.py with PyTorch eager on the GPU, batch 128,
# MobileNetV2-1.0 at 224 px, 20 random plans over k = 0..n and 5 of the planner's, every block also timed in context;
# the speed-up (paired check) and the latency side by side.
# Runs from the repo root with PYTHONPATH=$PWD; figures to $OUT/lut/ (log, results.json); about 100 s on
# an H200 (0.1 s of timed runs per workload); the benchmark is cut at 135 s so the script ends within 150 s. ONNX Runtime here is CPU-only: torch only.
set -uo pipefail
OUT=${OUT:-gpu-out}; mkdir -p "$OUT/lut"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PY=${PY:-python3}
{ nvidia-smi -L; $PY -c "import torch; print(torch.__version__, torch.cuda.get_device_name(0))"; } 2>&1 | tee "$OUT/lut/env.txt"
timeout ${LUT_S:-135} $PY benchmarks/lut_accuracy.py --device cuda --batch 128 --backends torch --models mobilenet_v2 \
  --model-file '' --resolution 224 --range-plans 20 --front-plans 5 --budget ${BUDGET:-0.1} --first-warmup 0.2 \
  --seed ${SEED:-14} --out "$OUT/lut/files" 2>&1 | tee "$OUT/lut/lut_accuracy.log" | tail -n 30
# keep the figures and results.json; the measurement files go into one archive
cp "$OUT/lut/files/results.json" "$OUT/lut/files/scores.json" "$OUT/lut/" 2>/dev/null
tar czf "$OUT/lut/files.tgz" -C "$OUT/lut" files 2>/dev/null && rm -rf "$OUT/lut/files"
ls -la "$OUT/lut"
