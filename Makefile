# The user's entry points. `make run` and `make test` each do their own set-up.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
LFC    := $(VENV)/bin/lfc
STAMP  := $(VENV)/.installed
MAIN   ?= CartPolePPO
LF_PROGRAMS = $(shell grep -rl --include='*.lf' 'main reactor' lf_src)

.PHONY: install build run test lint bench graph clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[rl,test]'
	touch $(STAMP)

build: install
	@for f in $(LF_PROGRAMS); do echo "lfc $$f"; $(LFC) $$f || exit 1; done

run: build
	./bin/$(MAIN)

.PHONY: run-dqn
run-dqn: build
	./bin/CartPoleDQN

test: install lint
	$(PY) -m pytest -q -n auto tests

# Architecture and style kept by tools (configured in pyproject.toml): the runtime never imports
# the compiler, rl_algos imports neither, no import cycles; ruff lint and format; mypy.
lint: install
	$(VENV)/bin/ruff check codegen reactors rl_algos bench tests lf_src
	$(VENV)/bin/ruff format --check -q codegen reactors rl_algos bench tests lf_src
	$(VENV)/bin/lint-imports --no-logo --no-cache
	$(VENV)/bin/mypy

bench: install
	$(PY) -m pip install -q -e '.[bench]' || echo "make bench: the bench extras did not install; their rows will say FAILED"
	$(PY) -m bench $(BENCH_ARGS)

graph: build
	@for f in $(LF_PROGRAMS); do $(VENV)/bin/lfc-graph src-gen/$$(basename $$f .lf)/graph.json || exit 1; done

clean:
	rm -rf bin src-gen runs .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
