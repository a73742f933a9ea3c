# armd — the two commands a newcomer needs are `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: all venv test lint typecheck pytest bench clean

all: test

# The virtual environment is rebuilt whenever pyproject.toml changes.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $@

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest -q

test: $(STAMP)
	@scripts/ensure-mosquitto.sh --installed
	$(MAKE) --no-print-directory lint typecheck pytest

bench: $(STAMP)
	$(BIN)/python bench/kinematics.py
	$(BIN)/python bench/drivers.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
