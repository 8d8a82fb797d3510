# Two entry points for a fresh clone (Python >= 3.11 only): `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test install install-dev lint bench calibrate fuzz clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install -e .

install-dev: $(BIN)/python
	$(BIN)/python -m pip install -e '.[dev]'

## Install and start the workbench on http://localhost:8501
run: install
	$(BIN)/streamlit run app.py

## Install everything and run the whole suite CI runs: lint, types, tests (unit, app, e2e browser)
test: install-dev
	bash tools/ensure_chromium.sh
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -m "not benchmark"

## Refit data/calibration.csv from ../shared/reference/perf when present, then check the held-out errors
REFERENCE ?= ../shared/reference
calibrate: install-dev
	@if [ -d "$(REFERENCE)/perf" ]; then \
		$(BIN)/python tools/calibrate_perf.py --reference $(REFERENCE) && \
		$(BIN)/python tools/check_calibration.py --reference $(REFERENCE) && \
		$(BIN)/python -m benchmarks.bench_fidelity --write-bands --plot docs/perf-fidelity.svg; \
	else echo "no $(REFERENCE)/perf: keeping the committed data/calibration.csv"; fi

bench: install-dev
	$(BIN)/python -m pytest -m benchmark -s

## Hostile-input fuzzing: >= 10,000 mutated scenarios/import files + ~60 CLI calls; prints a report, fails on a crash
fuzz: install-dev
	$(BIN)/python tools/fuzz.py --cases 10000

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
