# Two entry points for a fresh clone: `make run` and `make test`. Both install exactly what uv.lock pins (one
# universal resolution for Python 3.11-3.14 on Linux x86_64/aarch64 and macOS arm64), with uv, a single wheel
# that pip bootstraps into the venv at the version and hashes of tools/uv-requirements.txt.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
UV ?= $(BIN)/uv
# what a sync needs first: the bootstrapped uv, or with `UV=uv` (yours) just the venv
UV_READY := $(if $(filter $(BIN)/uv,$(UV)),$(BIN)/uv,$(BIN)/python)
# uv installs into $(VENV), not into a venv of its own choosing
export UV_PROJECT_ENVIRONMENT := $(abspath $(VENV))
# and with the interpreter of $(VENV): uv never downloads a Python of its own
export UV_PYTHON_DOWNLOADS := never
# `--locked` fails, naming `uv lock`, when pyproject.toml asks for something uv.lock does not pin. A sync is exact
# (it removes what the lock's set for that target lacks; pip and uv stay) except where marked `--inexact`: `make
# run` and `make install-ray` add to a venv and leave the dev tools a developer has in it.
# `--compile-bytecode`: every installed module is compiled once here, and OWN_BYTECODE compiles the package's own
# (editable: not in site-packages). A fresh process then reads bytecode instead of compiling its ~800 modules
# again, which is what happens in every process where PYTHONDONTWRITEBYTECODE is set (containers, CI, sandboxes:
# Python never writes the cache there): 2.0-2.5 CPU-s of a fresh `planning solve` and of each pool worker
# (docs/benchmarks.md, "The fresh process"). It adds ~15 s to a first install, under a second to a no-op sync.
SYNC := $(UV) sync --locked --compile-bytecode
OWN_BYTECODE := $(BIN)/python -m compileall -q planning ui views app.py
PYTEST_DEFAULT := not benchmark and not ray and not skypilot and not guidellm and not guidellm08
# `make test` runs the suite on this many processes (pytest-xdist, one test file to a process: a file's fixtures
# are made once); 2 fills a CI runner's two cores, 0 runs it in this one process. Files are handed out in the
# collection's order, the longest first (tests/conftest.py::SLOW_FILES), not xdist's most-tests-first
PYTEST_WORKERS ?= 2

.PHONY: run test test-ray test-skypilot test-guidellm test-guidellm08 install install-dev install-ray install-skypilot \
	install-guidellm install-guidellm08 lock skypilot-schema guidellm-fixtures guidellm08-fixtures install-vllmbench vllm-fixtures \
	bench bench-setup calibrate fuzz clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; v = sys.version_info[:2]; sys.exit(0 if (3, 11) <= v < (3, 15) else \
		"planning installs from uv.lock, which covers Python 3.11-3.14; $(PYTHON) is %d.%d. " \
		"Name another interpreter: make PYTHON=python3.12 ..." % v)'
	$(PYTHON) -m venv $(VENV)

$(BIN)/uv: tools/uv-requirements.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes \
		-r tools/uv-requirements.txt

## The runtime set of uv.lock (the product's stack, no extras) and the package, editable
install: $(UV_READY)
	$(SYNC) --inexact
	$(OWN_BYTECODE)

## The runtime set plus the dev extra (lint, types, tests): no SkyPilot, no Ray
install-dev: $(UV_READY)
	$(SYNC) --extra dev
	$(OWN_BYTECODE)

## The optional Ray backend (the [ray] extra, from the same lock)
install-ray: $(UV_READY)
	$(SYNC) --inexact --extra ray

## SkyPilot (the `sky` CLI, to launch exported task YAML) with planning and its dev set, in an environment of its
## own from tools/skypilot/uv.lock: its version caps would hold the workbench's stack back (tools/skypilot)
SKY_VENV ?= .venv-skypilot
install-skypilot: $(UV_READY)
	UV_PROJECT_ENVIRONMENT=$(abspath $(SKY_VENV)) $(UV) sync --locked --project tools/skypilot --python $(BIN)/python

## GuideLLM 0.3.1 (the newest without torch) with planning and its dev set, in an environment of its own from
## tools/guidellm/uv.lock: its cap click < 8.2 would hold the workbench's click back (tools/guidellm)
GUIDELLM_VENV ?= .venv-guidellm
install-guidellm: $(UV_READY)
	UV_PROJECT_ENVIRONMENT=$(abspath $(GUIDELLM_VENV)) $(UV) sync --locked --project tools/guidellm --python $(BIN)/python

## GuideLLM 0.8.1 with planning and its dev set, from tools/guidellm08/uv.lock, in a venv of Debian's Python 3.11
## that sees Debian's CPU python3-torch (GuideLLM 0.8 imports torch; PyPI's Linux torch is the CUDA build). Linux + apt
GUIDELLM08_VENV ?= .venv-guidellm08
DEBIAN_PYTHON ?= /usr/bin/python3.11
install-guidellm08: $(UV_READY)
	@$(DEBIAN_PYTHON) -c 'import torch' 2>/dev/null || { apt-get update -q && apt-get install -y -q python3-torch; }
	$(UV) venv --allow-existing --system-site-packages --python $(DEBIAN_PYTHON) $(GUIDELLM08_VENV)
	UV_PROJECT_ENVIRONMENT=$(abspath $(GUIDELLM08_VENV)) $(UV) sync --locked --project tools/guidellm08 \
		--python $(GUIDELLM08_VENV)/bin/python

## Install and start the workbench on http://localhost:8501
run: install
	$(BIN)/streamlit run app.py

## Install the dev set and run the whole suite CI runs: lint, types, tests (unit, app, e2e browser)
test: install-dev
	bash tools/ensure_chromium.sh
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -m "$(PYTEST_DEFAULT)" -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder

## The Ray backend on a local two-CPU instance and on a multi-node cluster of `ray start` processes on this
## machine, a node killed mid-run included (tests marked `ray`; CI runs it after `make test`). The cluster tests run
## in their own process: after another module's local instance was shut down in the same process, the cluster's
## pricing actors died (2 of 2 CI runs; alone, 3 of 3 passed)
test-ray: $(UV_READY)
	$(SYNC) --extra dev --extra ray
	$(BIN)/python -m pytest -m ray --ignore=tests/parallel/test_ray_cluster.py
	$(BIN)/python -m pytest -m ray tests/parallel/test_ray_cluster.py

## Cross-check tests/export/skypilot_schema.json (what `make test` validates exports with) against SkyPilot itself
test-skypilot: install-skypilot
	$(SKY_VENV)/bin/python -m pytest -m skypilot

## Build GuideLLM reports with GuideLLM's own classes and import them; check the committed reports against them
test-guidellm: install-guidellm
	$(GUIDELLM_VENV)/bin/python -m pytest -m guidellm tests/measurements

## Rewrite tests/measurements/data/guidellm-0.3.1-*.json (the default suite's GuideLLM reports) with tools/guidellm's GuideLLM
guidellm-fixtures: install-guidellm
	$(GUIDELLM_VENV)/bin/python -m tests.measurements.guidellm_reports --write

## Load the committed GuideLLM 0.8.1 reports with GuideLLM 0.8.1's own report model
test-guidellm08: install-guidellm08
	$(GUIDELLM08_VENV)/bin/python -m pytest -m guidellm08 tests/measurements/test_guidellm08.py

## Rewrite tests/measurements/data/guidellm-0.8.1-*.json: `guidellm run` against GuideLLM's mock server on 127.0.0.1
guidellm08-fixtures: install-guidellm08
	$(GUIDELLM08_VENV)/bin/python -m tests.measurements.guidellm08_reports --write

## vLLM 0.33.0's benchmark client in .venv-vllmbench: tools/vllmbench/requirements.txt, the complete pinned set,
## installed --no-deps (vllm's own requirements name GPU kernels the client never imports). ~6 GB. Linux x86_64
VLLMBENCH_VENV ?= .venv-vllmbench
install-vllmbench: $(UV_READY)
	$(UV) venv --allow-existing --python 3.11 $(VLLMBENCH_VENV)
	VIRTUAL_ENV=$(abspath $(VLLMBENCH_VENV)) $(UV) pip install --no-deps -r tools/vllmbench/requirements.txt

## Rewrite tests/measurements/data/vllm-0.33.0-*.json: `vllm bench serve --save-result` against tools/vllmbench's
## fake OpenAI server on 127.0.0.1 (by hand; not part of `make test`)
vllm-fixtures: install-vllmbench
	$(VLLMBENCH_VENV)/bin/python -m tests.measurements.vllm_results --write

## Re-resolve every dependency to the newest allowed versions and re-pin uv itself; commit the five files
lock: $(UV_READY)
	$(UV) lock --upgrade
	$(UV) lock --upgrade --project tools/skypilot
	$(UV) lock --upgrade --project tools/guidellm
	$(UV) lock --upgrade --project tools/guidellm08
	echo uv | $(UV) pip compile - --no-config --universal --generate-hashes --no-header --quiet \
		-o tools/uv-requirements.txt

## Restate SkyPilot's schemas from tools/skypilot's SkyPilot (after its pin there moved), then `make test-skypilot`
skypilot-schema: install-skypilot
	$(SKY_VENV)/bin/python -m tests.export.skypilot_schema --write

## Refit data/calibration.csv from ../shared/reference/perf when present, then check the held-out errors
REFERENCE ?= ../shared/reference
calibrate: install-dev
	@if [ -d "$(REFERENCE)/perf" ]; then \
		$(BIN)/python tools/calibrate_perf.py --reference $(REFERENCE) && \
		$(BIN)/python tools/calibrate_kernels.py --reference $(REFERENCE) && \
		$(BIN)/python tools/calibrate_allreduce.py --reference $(REFERENCE) && \
		$(BIN)/python tools/check_calibration.py --reference $(REFERENCE) && \
		$(BIN)/python -m benchmarks.bench_fidelity --write-bands --plot docs/perf-fidelity.svg; \
	else echo "no $(REFERENCE)/perf: keeping the committed data/calibration.csv"; fi

bench: install-dev
	$(BIN)/python -m pytest -m benchmark -s

## Time `make run` and `make test` from a fresh clone with empty caches (docs/benchmarks.md, Setup)
bench-setup:
	bash benchmarks/bench_setup.sh

## Hostile-input fuzzing: >= 10,000 mutated scenarios/import files + ~60 CLI calls; prints a report, fails on a crash
fuzz: install-dev
	$(BIN)/python tools/fuzz.py --cases 10000

clean:
	rm -rf $(VENV) $(SKY_VENV) .pytest_cache .mypy_cache .ruff_cache
