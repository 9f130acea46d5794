# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# Every install step lives here, because CI runs on a clean clone with nothing installed by hand.

PYTHON      ?= python3
VENV        ?= .venv
# The CPU build of torch lies on this machine's disk; a bare `torch` would pull a multi-GB CUDA build.
TORCH_SPEC  ?= torch==2.13.0
PIP_FLAGS   ?= --disable-pip-version-check --quiet
PYTEST_ARGS ?=
# make test runs the suite on this many pytest-xdist workers, a whole test file per worker (0: one process). More
# workers than the 2 cores: a test process spends about half its time waiting (for a browser, a server it started,
# PostgreSQL, a subprocess), so with 2 workers the cores idled a third of the time (2026-12-03: 21.7 CPU-minutes
# in 16 minutes with 3 workers).
TEST_WORKERS ?= 4
# make test-fast's workers: its tests rarely wait, and each worker collects the whole suite again (about 18 s of
# CPU), so two workers on two cores are as fast as four for less CPU (2026-12-03: 2 min 3 s and 195 s of CPU
# against 2 min 9 s and 238 s).
FAST_WORKERS ?= 2

# Python caches compiled modules, pytest its assertion-rewritten test modules, in __pycache__ (ignored by git).
# A machine whose environment sets PYTHONDONTWRITEBYTECODE (this one does) has every process compile them again:
# each of the 4 test workers then spent 33 s of CPU collecting the inner loop's tests instead of 18 s, and every
# `serve` or CLI subprocess a test starts compiled the project again.
unexport PYTHONDONTWRITEBYTECODE

BIN := $(VENV)/bin
UV_SPEC ?= uv==0.13.9
UV := $(BIN)/uv
UV_INSTALL := $(BIN)/python scripts/uv_install.py $(if $(filter --quiet,$(PIP_FLAGS)),--quiet)
STAMP := $(VENV)/.installed
LINKED := $(VENV)/.linked
BYTECODE := $(VENV)/.bytecode
ROOM_FILES := $(VENV)/.room-files

UI_DIR := tasks/webapp
UI_BUNDLE := $(UI_DIR)/dist/local/task.js

# The crowd environment (Mephisto 1.1.1 imports only on Python 3.10; see ../shared/notes/mephisto-1.1.1.md).
# CROWD_PYTHON: a Python 3.10 interpreter; empty means: python3.10 on PATH, else pyenv's 3.10.
CROWD_PYTHON ?=
CROWD_VENV   ?= .venv-crowd
CROWD_STAMP  := $(CROWD_VENV)/.installed
CROWD_BUNDLE := $(UI_DIR)/dist/mephisto/task.js

.PHONY: demo test test-fast lint venv ui crowd system-deps clean help mutation FORCE

help:
	@echo "make demo   - set up (if needed) and run the demo on the bundled ED sample"
	@echo "make test   - set up (if needed), check the rooms and habits (make lint) and run the whole test suite"
	@echo "make test-fast - the inner loop: tests not marked slow or postgres, no lint (NOT the full suite)"
	@echo "make crowd  - set up the Mephisto crowd environment (.venv-crowd, Python 3.10) and its task bundle"

venv: $(LINKED)

# Re-installs only when the project's requirements change; a second run costs a stat().
# The installer is uv (UV_SPEC, from the package registry), run by scripts/uv_install.py with pip's package sources
# on this machine: a fresh .venv took 89 s with pip, 17 s with uv (2026-12-04, 2 cores). uv does not compile the
# modules to bytecode as pip does (all 20,754 of them: 35 s more on 2 cores), and Python compiles a module when it
# is first imported. make test compiles the fifth that collecting the tests imports first ($(BYTECODE)), so that
# its four workers do not each compile them.
$(UV): Makefile
	@# pip is the last thing venv writes: a creation killed half-way (python there, pip not) is made again.
	@test -x $(BIN)/pip || $(PYTHON) -m venv --clear $(VENV)
	$(BIN)/pip install $(PIP_FLAGS) "$(UV_SPEC)"
	@touch $(UV)

$(STAMP): pyproject.toml setup.py Makefile scripts/uv_install.py $(UV)
	$(UV_INSTALL) --python $(BIN)/python -e ".[backend,dev]" "$(TORCH_SPEC)" "setuptools>=64" wheel \
	  -C editable_mode=strict
	@touch $(STAMP)

# Once per install: collecting the suite in one process compiles the modules it imports (and pytest's rewritten
# test modules), which four workers collecting at once would each compile again. Collection errors are left for
# pytest itself to report.
$(BYTECODE): $(LINKED)
	-@$(BIN)/python -m pytest --collect-only -q -p no:cacheprovider >/dev/null 2>&1
	@touch $(BYTECODE)

# The one import name: setup.py maps the rooms under `empeval`, and the install is editable in setuptools' strict
# mode, a tree of links (build/__editable__.*/empeval/) that mypy and import-linter read as a real package. A new
# or removed file in a room needs the tree made again: ROOM_FILES changes then, and so does the link step.
$(ROOM_FILES): FORCE
	@mkdir -p $(VENV)
	@git ls-files -co --exclude-standard -- entry server tasks analysis training | grep -v -e node_modules -e '/dist/' \
	  | sort > $@.new; cmp -s $@.new $@ || mv $@.new $@; rm -f $@.new

# uv rebuilds the link tree as pip did (2.6 s against 4.7 s); --reinstall-package, because uv would otherwise keep
# the tree it built before, which lacks a file added since.
$(LINKED): $(STAMP) $(ROOM_FILES)
	$(UV_INSTALL) --python $(BIN)/python --no-deps --no-build-isolation --reinstall-package empeval -e . \
	  -C editable_mode=strict
	@touch $(LINKED)

FORCE:

# The task UI bundle (React, built with esbuild from the npm registry; package-lock.json pins it).
ui: $(UI_BUNDLE)

$(UI_BUNDLE): $(UI_DIR)/package.json $(UI_DIR)/package-lock.json $(UI_DIR)/build.mjs $(wildcard $(UI_DIR)/src/*) $(wildcard $(UI_DIR)/src/kinds/*)
	cd $(UI_DIR) && npm ci --no-audit --no-fund --loglevel=error && npm run build

# The Mephisto flavour of the task bundle is built by the same build.mjs as the local one.
$(CROWD_BUNDLE): $(UI_BUNDLE)
	@test -f $@ || (cd $(UI_DIR) && npm run build)

crowd: $(CROWD_STAMP) $(CROWD_BUNDLE)

# Mephisto goes in with --no-deps (its `detoxify` requirement pulls a multi-GB torch); the rest is pinned.
$(CROWD_STAMP): tasks/crowd-requirements.txt Makefile scripts/uv_install.py $(UV)
	@py="$(CROWD_PYTHON)"; \
	if [ -z "$$py" ]; then \
	  for c in "$$(command -v python3.10)" "$$(pyenv root 2>/dev/null)"/versions/3.10*/bin/python3.10 \
	           "$$HOME"/.pyenv/versions/3.10*/bin/python3.10 /usr/local/bin/python3.10 /usr/bin/python3.10; do \
	    if [ -n "$$c" ] && "$$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))' 2>/dev/null; then py="$$c"; break; fi; \
	  done; \
	fi; \
	if [ -z "$$py" ] || ! "$$py" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))' 2>/dev/null; then \
	  echo "error: the crowd environment needs Python 3.10 (Mephisto 1.1.1 does not import on 3.11+)," >&2; \
	  echo "       and none was found$${py:+ at $$py}. Install one (e.g. pyenv install 3.10) or pass" >&2; \
	  echo "       make crowd CROWD_PYTHON=/path/to/python3.10" >&2; \
	  exit 1; \
	fi; \
	echo "crowd environment: $(CROWD_VENV) with $$py"; \
	test -x $(CROWD_VENV)/bin/pip || "$$py" -m venv --clear $(CROWD_VENV)
	$(UV_INSTALL) --python $(CROWD_VENV)/bin/python --compile-bytecode -r tasks/crowd-requirements.txt
	$(UV_INSTALL) --python $(CROWD_VENV)/bin/python --compile-bytecode --no-deps mephisto==1.1.1
	@touch $(CROWD_STAMP)

# System packages the tests meet for real (PostgreSQL server, Chromium). Installed only when missing.
system-deps:
	@bash scripts/system-deps.sh

demo:
	@$(MAKE) --no-print-directory -j2 -O $(LINKED) $(UI_BUNDLE)
	$(BIN)/empeval demo

# The habits the suite holds the code to: import contracts between rooms, ruff, mypy (see pyproject.toml).
lint: $(LINKED)
	$(BIN)/lint-imports --no-cache
	$(BIN)/ruff check .
	$(BIN)/mypy

# The set-up steps run side by side (-j): the bytecode step and mypy use one core each, npm and uv wait on the
# network part of the time. The task bundle, the system packages and (once uv is in .venv) the crowd environment
# do not wait for .venv to be complete: on a fresh clone the set-up took 59 s before pytest started, 14 of them
# with one core idle while .venv alone was made (2026-12-04).
test:
	@$(MAKE) --no-print-directory -j4 -O $(LINKED) $(UI_BUNDLE) system-deps crowd lint $(BYTECODE)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The inner loop while editing, NOT the full suite: no test marked `slow` (Mephisto runs, the demo, MiniLM and
# training), `postgres` or `full_data`, none that drives Chromium (the task and admin pages), no schema fuzzing and
# property runs of hundreds of generated bodies, no fresh install, none of the tests measured heavy (tests/heavy_tests.txt,
# made by tests/heavy_list.py); no lint, no crowd environment or system packages.
# `make test` is what a change must pass before it is merged. One room: make test-fast PYTEST_ARGS=tests/backend
FAST_DESELECT := -m "not slow and not postgres and not full_data and not heavy" --ignore-glob='*browser*' --ignore-glob='*test_page_*' \
  --ignore-glob='*accessibility*' --ignore-glob='*request_schemas*' --ignore-glob='*openapi_fuzz*' \
  --ignore=tests/hostile --ignore=tests/test_annotation_only_install.py
test-fast: $(LINKED) $(UI_BUNDLE)
	$(BIN)/python -m pytest -n $(FAST_WORKERS) --dist loadfile --no-loadscope-reorder $(FAST_DESELECT) $(PYTEST_ARGS)

# Mutation testing (mutmut) of the critical modules listed in mutation/modules.toml, each against its own fast
# tests, in scratch copies under mutation/work/ (the working tree is never mutated): a seeded sample of 150
# mutants per module. Prints killed / survived / timed out / equivalent and the score per module; fails when a
# module scores below 90%. Not part of `make test` (minutes, not seconds). All mutants, one module, the diffs
# of survivors: `.venv/bin/python mutation/run.py --help`.
mutation: $(LINKED)
	$(BIN)/python mutation/run.py --sample 150 --seed 0

clean:
	rm -rf build $(VENV) $(CROWD_VENV) $(UI_DIR)/node_modules $(UI_DIR)/dist .pytest_cache empeval.db empeval.db-wal empeval.db-shm
