#!/usr/bin/env bash
# The CUDA checks, on a machine with a GPU (repo root as working directory), with the Python there that
# already holds torch/torchvision/timm/onnxruntime (the package runs from the source tree). Each step has its
# own time limit, so whatever ran is kept under $OUT:
#   1. the CUDA tests;
#   2. MobileNetV2-1.4 DS-F merged per block vs span-merged, fp32 and fp16 channels-last, and the paper's
#      timing protocol (issue 12: benchmarks/gpu/dsf_spans.py);
#   3. one search + fine-tune at a larger scale (issue 13: benchmarks/gpu/search.sh);
#   4. the LUT's accuracy on CUDA at batch 128 (issue 14: benchmarks/gpu/lut_accuracy.sh);
#   5. DepthShrinker under torch.compile on CUDA (issue 39, item 5): benchmarks/runtimes.py at batch 128 for PyTorch
#      eager and torch.compile (Inductor, Triton kernels), fp32 and fp16 channels-last: the LUTs, each runtime's plans
#      against the original paired in one group, the cross table. Compiling ~110 workloads per model and mode takes
#      minutes: RUNTIMES_MODELS (default mbv2-1.0) and RUNTIMES_SPAN (default 2) keep it within a session; the full
#      table is RUNTIMES_MODELS=mbv2-1.0,mbv2-1.4,effnet-lite0,resnet18 RUNTIMES_SPAN=4 with a larger RUNTIMES_S.
# Steps can be skipped with STEPS="tests dsf search lut runtimes" (the default: all).
set -uo pipefail
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export OUT PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PY=${PY:-python3}
STEPS=${STEPS:-tests dsf search lut runtimes}
TESTS_S=${TESTS_S:-60} DSF_S=${DSF_S:-120} SEARCH_S=${SEARCH_S:-130} LUT_S=${LUT_S:-170} RUNTIMES_S=${RUNTIMES_S:-240}
RUNTIMES_MODELS=${RUNTIMES_MODELS:-mbv2-1.0} RUNTIMES_SPAN=${RUNTIMES_SPAN:-2}
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
if step runtimes; then  # fp32, then fp16 channels-last; each resumes where a time limit stopped it (--out kept)
  for mode in "fp32" "fp16 --channels-last"; do
    set -- $mode
    timeout $RUNTIMES_S $PY benchmarks/runtimes.py --out "$OUT/runtimes_$1" --device cuda --batch 128 --dtype $mode \
      --runtimes torch,torch-compile --models "$RUNTIMES_MODELS" --max-span "$RUNTIMES_SPAN" --stages lut,table 2>&1 \
      | tee "$OUT/runtimes_$1.log" | grep -v Warning | tail -n 30
  done
fi
ls -laR "$OUT" | head -40
