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

.PHONY: help schema setup setup-webgpu test-webgpu setup-neon neon-kernels setup38 setup-browser test-browser test test-core test38 conformance conformance-report demo bench operators op-modules clean

help:  ## list the targets
	@echo "onnxedge — make targets:"
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | awk -F'\t' '{printf "  %-20s %s\n", $$1, $$2}'

setup: $(STAMP)/venv $(STAMP)/venv38 setup-browser setup-neon $(STAMP)/apt-flatc setup-webgpu $(STAMP)/venv-pyodide  ## install everything missing (venvs for Python 3.11 and 3.8)

$(STAMP)/venv-demo: pyproject.toml
	@mkdir -p $(STAMP)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "== installing onnxedge and what the demo needs (onnx, scikit-learn) into $(VENV)"
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install --progress-bar off -e '.[demo]' | grep -v '^Requirement already satisfied' || true
	$(PY) -c "import onnxedge, onnx, sklearn"
	@touch $@

$(STAMP)/venv: $(STAMP)/venv-demo pyproject.toml
	@echo "== installing the test and benchmark tools into $(VENV) (onnxruntime, torch CPU, transformers, scikit-learn converters, playwright, coremltools: a few minutes the first time)"
	$(PY) -m pip install --progress-bar off -e '.[test,bench]' | grep -v '^Requirement already satisfied' || true
	$(PY) -c "import onnxruntime, pytest"
	@touch $@

$(STAMP)/apt-flatc:
	@mkdir -p $(STAMP)
	command -v flatc >/dev/null || { apt-get update -q && apt-get -o DPkg::Lock::Timeout=900 install -y -q flatbuffers-compiler; }
	@touch $@

schema: $(STAMP)/apt-flatc  ## regenerate the .oxe FlatBuffers code (core/format/fb/) from core/format/oxe.fbs
	sh core/format/gen_schema.sh core/format/fb

setup38: $(STAMP)/venv38  ## the Python 3.8 + numpy 1.17.5 venv (what Pyodide 0.17.1 runs)

$(STAMP)/venv38: pyproject.toml
	@mkdir -p $(STAMP)
	@test -x "$(PY38_BASE)" || { echo "Python 3.8.18 not found at '$(PY38_BASE)': install it with pyenv (pyenv install 3.8.18) or set PY38_BASE=/path/to/python3.8"; exit 1; }
	test -x $(PY38) || $(PY38_BASE) -m venv $(VENV38)
	$(PY38) -m pip install -q -e '.[test]'
	@touch $@

PY313_BASE  ?= $(lastword $(sort $(wildcard $(shell pyenv root 2>/dev/null)/versions/3.13.*/bin/python)))

.PHONY: setup-pyodide-build
setup-pyodide-build: $(STAMP)/venv-pyodide  ## pyodide-build 0.39.2 (Python 3.13) for `onnxedge web build --pyodide DIR` (lockfile, py-compile)

$(STAMP)/venv-pyodide:
	@mkdir -p $(STAMP)
	@test -x "$(PY313_BASE)" || { echo "Python 3.13 not found under pyenv: install it (pyenv install 3.13) or set PY313_BASE=/path/to/python3.13"; exit 1; }
	test -x .venv-pyodide/bin/python || $(PY313_BASE) -m venv .venv-pyodide
	.venv-pyodide/bin/pip install -q pyodide-build==0.39.2 pkginfo
	@touch $@

# --- WebGPU natively: wgpu-py (the test extra) on Mesa's lavapipe (CPU Vulkan) ---------------
setup-webgpu: $(STAMP)/apt-vulkan  ## Mesa's Vulkan drivers (lavapipe) for the WebGPU provider's tests

$(STAMP)/apt-vulkan:
	@mkdir -p $(STAMP)
	dpkg -s mesa-vulkan-drivers libvulkan1 >/dev/null 2>&1 || { apt-get update -q && apt-get -o DPkg::Lock::Timeout=900 install -y -q mesa-vulkan-drivers libvulkan1; }
	@touch $@

test-webgpu: setup  ## the WebGPU provider's tests (kernels, the three models, its node-suite cases in tests/conformance) on lavapipe
	$(PY) -m pytest -q $(PYTEST_ARGS) tests/webgpu tests/conformance/test_node_suite.py -k 'not ExecutionProvider/ or WebGpuExecutionProvider/'

# --- the browser page (Chromium + Pyodide 0.17.1 from npm + wheels for micropip) -------------
setup-browser: $(STAMP)/apt-chromium $(STAMP)/npm-web $(STAMP)/wheels-web  ## Chromium; Pyodide 0.17.1, the pyodide 314 core and onnxruntime-web (npm); the page's wheels

$(STAMP)/apt-chromium:
	@mkdir -p $(STAMP)
	test -x /usr/bin/chromium || { apt-get update -q && apt-get -o DPkg::Lock::Timeout=900 install -y -q chromium chromium-driver; }
	@touch $@

$(STAMP)/npm-web: web/package.json web/package-lock.json
	@mkdir -p $(STAMP)
	cd web && npm ci --no-audit --no-fund --ignore-scripts
	@touch $@

$(STAMP)/wheels-web: $(STAMP)/venv-demo
	$(PY) -m pip download -q --no-deps --only-binary=:all: -d web/page/wheels flatbuffers==25.12.19
	@touch $@

test-browser: setup  ## the in-page tests: Pyodide 0.17.1 in headless Chromium (CPU and WebGPU)
	$(PY) -m pytest -q $(PYTEST_ARGS) tests/browser

# --- ARM NEON kernels: aarch64 cross gcc, qemu-user, clang-14 + lld-14 (wasm modules), aarch64 CPython sysroot --
setup-neon: $(STAMP)/arm-sysroot $(STAMP)/neon-kernels  ## aarch64 toolchain + qemu, the ARM python sysroot (.arm/: CPython, numpy, onnxruntime's aarch64 wheel), the C kernels

$(STAMP)/apt-neon:
	@mkdir -p $(STAMP)
	command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64 >/dev/null && command -v clang-14 >/dev/null && command -v wasm-ld-14 >/dev/null || { apt-get update -q && apt-get -o DPkg::Lock::Timeout=900 install -y -q gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user clang-14 lld-14; }
	@touch $@

$(STAMP)/arm-sysroot: $(STAMP)/apt-neon $(STAMP)/venv scripts/arm_sysroot.sh
	scripts/arm_sysroot.sh
	@touch $@

$(STAMP)/apt-clang-wasm:
	@mkdir -p $(STAMP)
	command -v clang-14 >/dev/null && command -v wasm-ld-14 >/dev/null || { echo "== installing clang-14 and lld-14 (the page's wasm kernels)"; apt-get update -q && apt-get -o DPkg::Lock::Timeout=900 install -y -q clang-14 lld-14; }
	@touch $@

$(STAMP)/wasm-kernels: $(STAMP)/apt-clang-wasm $(STAMP)/venv-demo $(wildcard edge/kernels/*.c edge/kernels/*.h) edge/kernels/build.py
	$(PY) edge/kernels/build.py --targets wasm
	@touch $@

$(STAMP)/apt-valgrind:
	@mkdir -p $(STAMP)
	test -f /usr/include/valgrind/callgrind.h || { apt-get update -q && apt-get -o DPkg::Lock::Timeout=900 install -y -q valgrind; }
	@touch $@

$(STAMP)/neon-kernels: $(STAMP)/apt-neon $(STAMP)/apt-valgrind $(STAMP)/venv $(wildcard edge/kernels/*.c edge/kernels/*.h edge/kernels/tools/*.c) edge/kernels/build.py
	$(PY) edge/kernels/build.py
	@touch $@

neon-kernels: $(STAMP)/apt-neon $(STAMP)/apt-valgrind  ## rebuild the C kernel libraries (host + aarch64) into edge/neon/lib/, the wasm modules into web/wasm/lib/, and the instruction counters
	$(PY) edge/kernels/build.py

test: setup  ## run every test: Python 3.11 (all) and Python 3.8 + numpy 1.17 (core + conformance)
	$(PY) tests/conformance/cases.py
	$(PY) -m pytest -q $(PYTEST_ARGS) tests
	$(MAKE) --no-print-directory test38

# --- the fast tests: the core and the node suite on CPU, with pip packages only (no `make setup`) ---
$(STAMP)/venv-core: pyproject.toml
	@mkdir -p $(STAMP)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "== installing onnxedge and the core's test tools (onnx, onnxruntime, pytest, hypothesis, ml_dtypes) into $(VENV)"
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install --progress-bar off -e '.[test-core]' | grep -v '^Requirement already satisfied' || true
	$(PY) -c "import onnxedge, onnx, onnxruntime, pytest, hypothesis, ml_dtypes"
	@touch $@

test-core: $(STAMP)/venv-core  ## the fast tests, no system packages: unit tests of the core + the ONNX node suite on CPU (tests marked needs_setup left out; a few minutes)
	$(PY) tests/conformance/cases.py
	$(PY) -m pytest -q -m "not needs_setup" $(PYTEST_ARGS) tests/unit tests/conformance

test38: setup38  ## the core's tests and the conformance suite under Python 3.8 + numpy 1.17.5
	$(PY38) -m pytest -q $(PYTEST_ARGS) tests/unit tests/conformance

conformance: setup  ## run the ONNX node suite and print the per-family summary
	$(PY) tests/conformance/cases.py
	$(PY) tests/conformance/run.py

conformance-report: setup  ## regenerate docs/CONFORMANCE.md (onnxedge vs onnxruntime, counts per provider)
	$(PY) tests/conformance/cases.py
	$(PY) tests/conformance/run.py --reference onnxruntime --providers --report docs/CONFORMANCE.md --plot docs/conformance.png

WEB_DEMO    ?= build/web-demo
WEB_PORT    ?= 8000
WEB_MODELS  := demo/models/digits.onnx demo/models/mlp.onnx

demo/models/mlp.onnx: | $(STAMP)/venv-demo
	$(PY) demo/make_models.py

demo/models/digits.onnx: | $(STAMP)/venv-demo
	$(PY) demo/digits/train.py

DEMO_SETUP := $(STAMP)/venv-demo $(STAMP)/npm-web $(STAMP)/wheels-web $(STAMP)/wasm-kernels

demo: $(DEMO_SETUP) $(WEB_MODELS)  ## the MLP through the CLI, then the in-browser demo (digit drawing + MLP) built into build/web-demo/ and served on localhost:8000
	$(VENV)/bin/onnxedge run demo/models/mlp.onnx --input input=demo/models/mlp_input.npy --repeat 20
	$(VENV)/bin/onnxedge web build $(WEB_MODELS) -o $(WEB_DEMO) --title "onnxedge demo: draw a digit"
	@echo "open http://127.0.0.1:$(WEB_PORT)/ in a browser (Ctrl-C stops the server)"
	$(VENV)/bin/onnxedge web serve $(WEB_DEMO) --port $(WEB_PORT)

.PHONY: web-build web-serve
web-build: $(DEMO_SETUP) $(WEB_MODELS)  ## build the browser bundle of the demo models into build/web-demo/ (WEB_ARGS: extra `onnxedge web build` options)
	$(VENV)/bin/onnxedge web build $(WEB_MODELS) -o $(WEB_DEMO) --title "onnxedge demo: draw a digit" $(WEB_ARGS)

web-serve:  ## serve build/web-demo/ on localhost (WEB_PORT, default 8000)
	$(VENV)/bin/onnxedge web serve $(WEB_DEMO) --port $(WEB_PORT)

.PHONY: demo-rpi
demo-rpi: setup  ## the Raspberry Pi bundle of the demo MLP (build/rpi/), installed and queried under qemu
	$(PY) demo/raspberry_pi/make_bundle.py --out build/rpi/mlp-pi --try-qemu

.PHONY: demo-mobile
demo-mobile: setup  ## slim iOS (Core ML) and Android (NNAPI) packages of the demo models in build/mobile/, checked in the reference interpreters
	$(PY) demo/mobile/make_package.py --out build/mobile

bench: setup  ## benchmarks vs onnxruntime (and onnxruntime-web in Chromium): JSON + PNG in benchmarks/results/
	$(PY) benchmarks/run.py

.PHONY: bench-browser
bench-browser: setup  ## only the browser part: onnxedge in Pyodide vs onnxruntime-web (browser.json/.png)
	$(PY) benchmarks/browser.py

.PHONY: bench-serve
bench-serve: setup  ## only `onnxedge serve`: requests/s and p99 on the MLP, 1 and 32 keep-alive clients (serve.json/.png)
	$(PY) benchmarks/serve.py

operators: $(STAMP)/venv  ## regenerate docs/OPERATORS.md (op x provider) from the providers' op-support tables
	$(PY) -m onnxedge.providers.support --write-docs

op-modules:  ## regenerate core/kernels/op_modules.py (which kernel module holds each op)
	$(PY) -m onnxedge.kernels.registry --write-op-modules

clean:  ## remove the venvs and caches
	rm -rf $(VENV) $(VENV38) $(STAMP) .pytest_cache build dist *.egg-info
