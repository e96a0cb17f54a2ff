# The two commands of the README. Each creates .venv if missing and installs what it needs.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
PYTHON ?= $(shell command -v python3.11 || command -v python3)
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint typecheck bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	@$(BIN)/python -m pip install -q --disable-pip-version-check -e ".[spark,dev]"
	@touch $(STAMP)

## make demo: the main job, an end-to-end Spark pipeline on a local-disk lake (./demo-lake)
demo: $(STAMP)
	$(BIN)/parquetry demo

## make test: lint, type check and the whole test suite (moto S3 server, Spark local[2],
## kartothek 5.3.0 in a Python 3.8 venv when pyenv has 3.8, headless Chromium when installable)
test: $(STAMP)
	@bash scripts/kartothek-venv.sh
	@bash scripts/ensure-chromium.sh
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/mypy
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts

typecheck: $(STAMP)
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .venv-kartothek demo-lake .pytest_cache .mypy_cache .ruff_cache
