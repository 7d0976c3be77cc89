# onnxedge — every install the project needs lives here (idempotent: stamps in .make/).
# `make demo` and `make test` work on a fresh machine of this workplace (Debian 12 + pyenv).

PYTHON      ?= python3
VENV        ?= .venv
PY          := $(VENV)/bin/python
PY38_BASE   ?= $(shell pyenv root 2>/dev/null)/versions/3.8.18/bin/python
VENV38      ?= .venv38
PY38        := $(VENV38)/bin/python
STAMP       := .make
PYTEST_ARGS ?=

.PHONY: help setup setup38 test test-unit test38 conformance conformance-report demo bench index clean

help:  ## list the targets
	@echo "onnxedge — make targets:"
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | awk -F'\t' '{printf "  %-20s %s\n", $$1, $$2}'

setup: $(STAMP)/venv $(STAMP)/venv38  ## install everything missing (venvs for Python 3.11 and 3.8)

$(STAMP)/venv: pyproject.toml
	@mkdir -p $(STAMP)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,bench]'
	@touch $@

setup38: $(STAMP)/venv38  ## the Python 3.8 + numpy 1.17.5 venv (what Pyodide 0.17.1 runs)

$(STAMP)/venv38: pyproject.toml
	@mkdir -p $(STAMP)
	@test -x "$(PY38_BASE)" || { echo "Python 3.8.18 not found at '$(PY38_BASE)': install it with pyenv (pyenv install 3.8.18) or set PY38_BASE=/path/to/python3.8"; exit 1; }
	test -x $(PY38) || $(PY38_BASE) -m venv $(VENV38)
	$(PY38) -m pip install -q -e '.[test]'
	@touch $@

test: setup  ## run every test: Python 3.11 (all) and Python 3.8 + numpy 1.17 (core + conformance)
	$(PY) tests/conformance/cases.py
	$(PY) -m pytest -q $(PYTEST_ARGS) tests
	$(MAKE) --no-print-directory test38

test38: setup38  ## the core's tests and the conformance suite under Python 3.8 + numpy 1.17.5
	$(PY38) -m pytest -q $(PYTEST_ARGS) tests/unit tests/conformance

conformance: setup  ## run the ONNX node suite and print the per-family summary
	$(PY) tests/conformance/cases.py
	$(PY) tests/conformance/run.py

conformance-report: setup  ## regenerate docs/CONFORMANCE.md (onnxedge vs onnxruntime)
	$(PY) tests/conformance/cases.py
	$(PY) tests/conformance/run.py --reference onnxruntime --report docs/CONFORMANCE.md --plot docs/conformance.png

demo: setup  ## run the default model (the MLP) through the CLI
	$(PY) demo/make_models.py
	$(VENV)/bin/onnxedge inspect demo/models/mlp.onnx
	$(VENV)/bin/onnxedge run demo/models/mlp.onnx --input input=demo/models/mlp_input.npy --repeat 20

bench: setup  ## benchmarks vs onnxruntime: JSON + PNG in benchmarks/results/
	$(PY) benchmarks/run.py

index:  ## regenerate the lazy kernel index (core/kernels/index.py)
	$(PY) -m onnxedge.kernels.registry --write-index

clean:  ## remove the venvs and caches
	rm -rf $(VENV) $(VENV38) $(STAMP) .pytest_cache build dist *.egg-info
