# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# Every install step lives here, because CI runs on a clean clone with nothing installed by hand.

PYTHON      ?= python3
VENV        ?= .venv
# The CPU build of torch lies on this machine's disk; a bare `torch` would pull a multi-GB CUDA build.
TORCH_SPEC  ?= torch==2.13.0
PIP_FLAGS   ?= --disable-pip-version-check --quiet
PYTEST_ARGS ?=

BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

UI_DIR := tasks/webapp
UI_BUNDLE := $(UI_DIR)/dist/local/task.js

.PHONY: demo test venv ui system-deps clean help

help:
	@echo "make demo   - set up (if needed) and run the demo on the bundled ED sample"
	@echo "make test   - set up (if needed) and run the whole test suite"

venv: $(STAMP)

# Re-installs only when the project's requirements change; a second run costs a stat().
$(STAMP): pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install $(PIP_FLAGS) --upgrade pip setuptools wheel
	$(BIN)/pip install $(PIP_FLAGS) "$(TORCH_SPEC)"
	$(BIN)/pip install $(PIP_FLAGS) -e ".[dev]" "$(TORCH_SPEC)"
	@touch $(STAMP)

# The task UI bundle (React, built with esbuild from the npm registry; package-lock.json pins it).
ui: $(UI_BUNDLE)

$(UI_BUNDLE): $(UI_DIR)/package.json $(UI_DIR)/package-lock.json $(UI_DIR)/build.mjs $(wildcard $(UI_DIR)/src/*)
	cd $(UI_DIR) && npm ci --no-audit --no-fund --loglevel=error && npm run build

# System packages the tests meet for real (PostgreSQL server, Chromium). Installed only when missing.
system-deps:
	@bash scripts/system-deps.sh

demo: $(STAMP) $(UI_BUNDLE)
	$(BIN)/empeval demo

test: $(STAMP) $(UI_BUNDLE) system-deps
	$(BIN)/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(UI_DIR)/node_modules $(UI_DIR)/dist .pytest_cache empeval.db empeval.db-wal empeval.db-shm
