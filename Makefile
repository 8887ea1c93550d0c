# labkit: `make lab` to work, `make test` to check. Both set up first; the
# set-up (scripts/setup.sh) skips every step whose inputs did not change.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
export VENV
# extra arguments for `jupyter lab`, e.g. make lab LAB_ARGS="--port 8890 --no-browser"
LAB_ARGS ?=
ROOT_ARG := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: setup lab test test-fast test-fresh-clone lint demo bench clean

setup:
	@scripts/setup.sh

lab: setup
	@mkdir -p notebooks
	$(VENV)/bin/jupyter lab notebooks/ $(ROOT_ARG) $(LAB_ARGS)

# ruff (lint, complexity, format) and mypy (configured in pyproject.toml: labkit/, typed defs);
# the front end: types generated from the contract are current, tsc --checkJs over widgets/
# (widgets/tsconfig.json) and biome's lint + format check (widgets/biome.jsonc); the layer
# order, the bare-Any share per package and the class size limit (their tests, seconds)
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(PY) scripts/gen_contract_types.py --check
	cd widgets && npm run -s check
	$(PY) -m pytest -q -p no:cacheprovider tests/test_layers.py tests/test_types.py tests/test_class_size.py

# pytest in one process by default; `make test TEST_WORKERS=2` runs it on two (pytest-xdist,
# --dist loadfile: a file's tests run in order on one worker, as a browser test file that
# shares one notebook across its tests needs). On 2 cores two workers took 23 min against
# ~28 in one, but load-sensitive tests flaked there, so CI keeps one process.
TEST_WORKERS ?= 0
test: lint
	cd widgets && node --test --test-reporter=spec test/
	$(PY) -m pytest -m "not fresh_clone" -n $(TEST_WORKERS) --dist loadfile

# clone this checkout and run the README's `make demo` from nothing (new venv, npm builds):
# what CI's own fresh-clone run of `make test` also covers, so not part of `make test`
test-fresh-clone: setup
	$(PY) -m pytest -m fresh_clone tests/test_readme_fresh_clone.py

# lint + node tests + unit tests: no browser, no notebooks, nothing marked slow (a few minutes)
test-fast: lint
	cd widgets && node --test --test-reporter=dot test/
	$(PY) -m pytest -q -m "not slow" --ignore=tests/browser --ignore=tests/notebooks

demo: setup
	$(PY) -m labkit.demo --out demo-output

# every benchmarks/*.py not starting with _, or only those named: make bench BENCH="gnn optimize"
BENCH ?=
bench: setup
	@shopt -s nullglob; failed=(); \
	names="$(BENCH)"; [ -n "$$names" ] || names=$$(for f in benchmarks/[!_]*.py; do basename $$f .py; done); \
	for name in $$names; do echo "== benchmarks/$$name"; \
		$(PY) -m benchmarks.$$name || failed+=($$name); done; \
	if [ $${#failed[@]} -gt 0 ]; then echo "benchmarks that failed: $${failed[*]}"; exit 1; fi

clean:
	rm -rf .stamps labkit/views/static labkit/labextension extensions/lib \
		extensions/tsconfig.tsbuildinfo test-artifacts benchmarks/results
