#!/usr/bin/env bash
# The CUDA checks, on a machine with a GPU (repo root as working directory), with the Python there
# that already holds torch/torchvision/timm/onnxruntime (the package runs from the source tree):
#   1. the CUDA tests; 2. `dsprof measure --device cuda --batch 128` for MobileNetV2;
#   3. benchmarks/reproduce_paper.py --device cuda (batch 128, 224 px).
# Each step has its own time limit so that whatever was measured is packed into ${OUT}/gpu.tgz.
# Turn a cut-short run's files into tables anywhere with `reproduce_paper.py --report-only`.
set -uo pipefail
OUT=${OUT:-gpu-out}; mkdir -p "$OUT/m" "$OUT/paper"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PY=${PY:-python3}
TESTS_S=${TESTS_S:-60} MEASURE_S=${MEASURE_S:-45} PAPER_S=${PAPER_S:-170} BUDGET=${BUDGET:-0.2}
{ nvidia-smi -L; $PY -c "import sys,torch,torchvision,timm,onnxruntime as o; print(sys.version.split()[0], torch.__version__, torchvision.__version__, timm.__version__, o.__version__, torch.cuda.get_device_name(0))"; } 2>&1 | tee "$OUT/env.txt"
# The tests marked `cuda` (pytest-timeout is not needed: `timeout` bounds the step).
timeout $TESTS_S $PY -m pytest -q -p no:cacheprovider -o addopts="" -rA --tb=short -m cuda \
  tests/test_profiler_measure.py tests/test_lut.py 2>&1 | tee "$OUT/cuda_tests.txt" | tail -n 25
timeout $MEASURE_S $PY -m dsprof measure --device cuda --batch 128 --budget $BUDGET --out "$OUT/m" --no-progress 2>&1 | tail -n 25
timeout $PAPER_S $PY benchmarks/reproduce_paper.py --device cuda --budget $BUDGET --no-progress --out "$OUT/paper" 2>&1 \
  | tee "$OUT/paper.log" | grep -v "^|" | tail -n 30
tar czf "$OUT/gpu.tgz" -C "$OUT" m paper && rm -rf "$OUT/m" "$OUT/paper"
ls -la "$OUT"
