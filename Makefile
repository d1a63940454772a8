# Two entry points: `make demo` (the main job on this machine's CPU) and `make test`.
# Both create .venv inside the repository on first use and reuse it afterwards.
# `make demo` installs dsprof's core only (no TensorFlow); `make test` adds the test and TFLite extras.
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

# The test and TFLite extras (pytest, hypothesis; TensorFlow, onnx2tf, LiteRT), on top of the core.
$(VENV)/.installed-test: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[test,tflite]'
	touch $@

demo: venv
	$(VENV)/bin/dsprof blocks --model mobilenet_v2 --csv $(RESULTS)/mobilenet_v2_blocks.csv
	$(VENV)/bin/dsprof measure --model mobilenet_v2 --out $(RESULTS)/measurements --overwrite --no-progress
	$(VENV)/bin/dsprof build-lut $(RESULTS)/measurements -o $(RESULTS)/lut.csv
	$(VENV)/bin/dsprof report $(RESULTS)/measurements --lut $(RESULTS)/lut.csv --plans mbv2-ds-a -o $(RESULTS)/report

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
