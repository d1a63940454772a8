#!/usr/bin/env bash
# The CUDA checks, on a machine with a GPU (repo root as working directory), with the Python there that
# already holds torch/torchvision/timm/onnxruntime (the package runs from the source tree). Each step has its
# own time limit, so whatever ran is kept under $OUT:
#   1. the CUDA tests;
#   2. MobileNetV2-1.4 DS-F merged per block vs span-merged, fp32 and fp16 channels-last, and the paper's
#      timing protocol (issue 12: benchmarks/gpu/dsf_spans.py);
#   3. one search + fine-tune at a larger scale (issue 13: benchmarks/gpu/search.sh);
#   4. the LUT's accuracy on CUDA at batch 128 (issue 14: benchmarks/gpu/lut_accuracy.sh).
# Steps can be skipped with STEPS="tests dsf search lut" (the default: all).
set -uo pipefail
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export OUT PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PY=${PY:-python3}
STEPS=${STEPS:-tests dsf search lut}
TESTS_S=${TESTS_S:-60} DSF_S=${DSF_S:-120} SEARCH_S=${SEARCH_S:-130} LUT_S=${LUT_S:-170}
{ nvidia-smi -L; $PY -c "import sys,torch,torchvision,timm,onnxruntime as o; print(sys.version.split()[0], torch.__version__, torchvision.__version__, timm.__version__, o.__version__, torch.cuda.get_device_name(0))"; } 2>&1 | tee "$OUT/env.txt"
step() { case " $STEPS " in *" $1 "*) return 0;; *) return 1;; esac; }
if step tests; then
  timeout $TESTS_S $PY -m pytest -q -p no:cacheprovider -o addopts="" -m cuda -rA --tb=short tests 2>&1 | tee "$OUT/cuda_tests.txt" | tail -n 8
fi
if step dsf; then
  timeout $DSF_S $PY benchmarks/gpu/dsf_spans.py --out "$OUT/dsf" 2>&1 | tee "$OUT/dsf.log" | grep -v Warning | tail -n 14
fi
if step search && [ -f benchmarks/gpu/search.sh ]; then
  timeout $SEARCH_S bash benchmarks/gpu/search.sh 2>&1 | tee "$OUT/search.log" | tail -n 15
fi
if step lut && [ -f benchmarks/gpu/lut_accuracy.sh ]; then
  timeout $LUT_S bash benchmarks/gpu/lut_accuracy.sh 2>&1 | tee "$OUT/lut.log" | tail -n 15
fi
ls -laR "$OUT" | head -40
