# gpubench: `make install` once, then `make run` (quick matrix) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RUN_ARGS ?=
# the pip extras of gpubench installed (pyproject.toml): dev for the tests; the nightly workflow takes
# postgres,llm. A change needs a fresh .venv (make clean).
EXTRAS ?= dev
BENCH_OUT ?= results/bench
BENCH_PARTS ?=  # empty: every part (validation/run_all.py's --parts default)
BENCH_LIMIT ?=

.PHONY: install run test test-heavy test-validation test-gpu lint mutation bench clean

# CONSTRAINTS=constraints/h200-2026-11.txt installs the versions behind the published H200 results
# (pip -c; on a CUDA machine); set, it reinstalls even when .venv is up to date.
CONSTRAINTS ?=
PIP_C := $(if $(CONSTRAINTS),-c $(CONSTRAINTS))

install: $(STAMP)

$(STAMP): pyproject.toml setup.py tools/torch_spec.py $(if $(CONSTRAINTS),$(CONSTRAINTS) FORCE)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(PIP_C) "$$($(PYTHON) tools/torch_spec.py)"
	$(BIN)/python -m pip install -q $(PIP_C) -e ".[$(EXTRAS)]"
	touch $(STAMP)

FORCE:

run: install
	$(BIN)/gpubench run --matrix quick $(RUN_ARGS)

# Three pytest-xdist processes, a test file each at a time: most tests start real subprocesses and
# wait on them (on an idle 2-core machine: 8 min in one process, about 5 with 2 or 3).
TEST_JOBS ?= 3
test: install
	$(BIN)/python -m pytest -m "not gpu and not validation and not heavy" -q -n $(TEST_JOBS) --dist loadfile

# The second tier: the multi-process, multi-run end-to-end tests (tests/conftest.py's HEAVY_*);
# .ci/run runs it after `make test`.
test-heavy: install
	$(BIN)/python -m pytest -m "heavy and not gpu and not validation" -q -n $(TEST_JOBS) --dist loadfile

# End-to-end runs of the validation scripts (validation/) on the CPU with the tiny model.
test-validation: install
	$(BIN)/python -m pytest -m validation -q

test-gpu: install
	$(BIN)/python -m pytest -m gpu -q

lint: install
	$(BIN)/ruff check bench tests tools validation
	$(BIN)/ruff format --check bench tests tools validation
	$(BIN)/mypy bench validation

# Would the tests notice a wrong figure? An AST mutation test of the modules that compute judged
# figures, each against its own fast unit tests, one process (tools/mutate.py; docs/validation.md,
# "Mutation score"). Not part of `make test`. MUTATION_SAMPLE=0 runs every mutant (slow).
MUTATION_SAMPLE ?= 50
mutation: install
	$(BIN)/python tools/mutate.py --sample $(MUTATION_SAMPLE)

# The published GPU results (results/README.md); resumable, run again until it reports all parts done.
bench: install
	$(BIN)/python -m validation.run_all --out $(BENCH_OUT) $(if $(BENCH_PARTS),--parts $(BENCH_PARTS)) $(if $(BENCH_LIMIT),--time-limit $(BENCH_LIMIT))

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
