# The user's entry points. `make run` and `make test` each do their own set-up.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
LFC    := $(VENV)/bin/lfc
STAMP  := $(VENV)/.installed
MAIN   ?= CartPolePPO
LF_FILES = $(shell find lf_src -name '*.lf' | sort)
# The programs among them, as the compiler sees them (a file with a main reactor).
LIST_PROGRAMS = $(LFC) --list-programs $(LF_FILES)
# A pipeline fails when any of its commands fails (pip's status survives the filter below).
SHELL := bash
.SHELLFLAGS := -o pipefail -c
# pip warns once per package about each local index of a machine's pip configuration that has
# no folder for it ("WARNING: Location 'file:///...' is ignored: it is neither a file nor a
# directory."); those lines alone are dropped, everything else pip prints stays.
PIP_NOISE := ^WARNING: Location 'file://[^']*' is ignored: it is neither a file nor a directory\.$$
DEV_EXTRAS := rl,test,native,atari,cluster,docs
pip_install = @echo "pip install $(1)"; $(PY) -m pip install -q $(1) 2>&1 | { grep -v "$(PIP_NOISE)" || true; }

.PHONY: install native build run test lint bench graph docs clean

install: $(STAMP)

# The runtime's per-tag modules compiled by mypyc (reactors.native) when their sources changed;
# where that fails (no C compiler), the runtime runs from its sources, with the same results.
native: install
	@$(PY) -c "from reactors.native import main; raise SystemExit(main(['build']))" > build-native.log 2>&1 \
	  && { grep "^reactors.native:" build-native.log || true; rm -f build-native.log; } \
	  || echo "make: the runtime's compiled modules did not build (see build-native.log); it runs from its sources"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(call pip_install,--upgrade pip)
	$(call pip_install,torch==2.13.0)
	$(call pip_install,-e '.[$(DEV_EXTRAS)]')
	touch $(STAMP)

# lfc builds a program only when its inputs changed (its .lf files and the files they import,
# the compiler's source, the options; src-gen/<Name>/lfc-stamp.json) and says so otherwise.
build: install native
	@programs=$$($(LIST_PROGRAMS)) && $(LFC) --if-changed $$programs

run: build
	./bin/$(MAIN)

.PHONY: run-dqn
run-dqn: build
	./bin/CartPoleDQN

.PHONY: run-pendulum
run-pendulum: build
	./bin/PendulumPPO

.PHONY: run-sac
run-sac: build
	./bin/PendulumSAC

# Multi-agent: MAPPO on mpe2's simple_spread (3 agents), to a team return of -60 (~20 s)
.PHONY: run-mappo
run-mappo: build
	./bin/SpreadMAPPO

# AtariPPO on Pong for a short budget (the target, a mean return of 20, takes ~10M steps):
# the progress lines show steps/s and the mean return; the run ends with the logger's line
# "stopped at its step budget", its exit status 1 taken as the expected end.
ATARI_STEPS ?= 20000

.PHONY: run-atari
run-atari: build
	@log=$$(mktemp); status=0; \
	./bin/AtariPPO --max_steps $(ATARI_STEPS) 2>&1 | tee $$log || status=$$?; \
	if [ $$status -eq 1 ] && grep -q "stopped at its step budget" $$log; then status=0; \
	  echo "make run-atari: $(ATARI_STEPS) steps spent, as asked (exit status 1 above is expected)"; fi; \
	rm -f $$log; exit $$status

# GRPO post-training of a tiny transformer on a task it generates (lf_src/GRPO.lf): a supervised
# warm start, then GRPO until the held-out accuracy reaches 0.9 (exit 0) or max_updates (exit 1);
# the curve is accuracy.csv and charts/accuracy of the run directory. GRPO_ARGS="--staleness 1":
# the asynchronous layout.
GRPO_ARGS ?=

.PHONY: run-grpo
run-grpo: build
	./bin/GRPO $(GRPO_ARGS)

test: install native lint
	$(PY) -m pytest -q -n auto --dist loadgroup tests

# Architecture and style kept by tools (configured in pyproject.toml): the runtime never imports
# the compiler, rl_algos imports neither, no import cycles; ruff lint and format; mypy.
lint: install
	$(VENV)/bin/ruff check codegen reactors rl_algos bench tests lf_src
	$(VENV)/bin/ruff format --check -q codegen reactors rl_algos bench tests lf_src
	$(VENV)/bin/lint-imports --no-logo --no-cache
	$(VENV)/bin/mypy

bench: install native
	$(call pip_install,-e '.[bench]') || echo "make bench: the bench extras did not install; their rows will say FAILED"
	$(PY) -m bench $(BENCH_ARGS)

graph: build
	@programs=$$($(LIST_PROGRAMS)) && for f in $$programs; do $(VENV)/bin/lfc-graph src-gen/$$(basename $$f .lf)/graph.json || exit 1; done

# The documentation site, from docs/ (mkdocs.yml) into site/; open site/index.html. A broken
# link or anchor, or a page left out of the nav, stops it (tests/test_site.py checks the same).
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

clean:
	rm -rf bin src-gen runs .pytest_cache build site
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
