# tokenledger: the two commands a newcomer needs are `make demo` and `make test`; both set everything up.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
DEMO_HOME ?= $(CURDIR)/.home
DEMO_START ?= 2026-11-16
DEMO_END ?= 2026-11-22
DEMO_DAYS ?= 7
DEMO_REQUESTS_PER_DAY ?= 200000
DEMO_SEED ?= 7

.PHONY: demo test test-distributed test-wheel ui bench lint docs constraints clean review-png

# The environment: pinned versions (constraints.txt) installed into .venv, the project editable.
$(BIN)/.installed-dev: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install -qq -c constraints.txt -e '.[dev]'
	touch $@

demo: $(BIN)/.installed-dev
	$(BIN)/tokenledger generate --home $(DEMO_HOME) --start $(DEMO_START) --days $(DEMO_DAYS) \
		--requests-per-day $(DEMO_REQUESTS_PER_DAY) --seed $(DEMO_SEED) --with-loadtest
	$(BIN)/tokenledger run --home $(DEMO_HOME) --start $(DEMO_START) --end $(DEMO_END)

# The Dagster definitions must load (what `dagster definitions validate` checks), the code must lint clean and keep
# its layers (lint-imports on the package as installed: tools/lint_imports.py), then the tests.
test: $(BIN)/.installed-dev
	$(BIN)/dagster definitions validate -m tokenledger.pipelines.definitions
	$(BIN)/ruff check .
	$(BIN)/python -m tools.lint_imports
	$(BIN)/python -m pytest -q -m "not distributed"

# The tests that start real Dagster daemons, run workers, Celery workers and brokers (pytest -m distributed): a step
# of .ci/run of its own, as they take minutes.
test-distributed: $(BIN)/.installed-dev
	$(BIN)/python -m pytest -q -m distributed

# tokenledger as a user or the image installs it (tools/wheel_check.py): the wheel built, installed (not editable) by
# tools/install.sh, the Dockerfile's install script, into a new virtualenv outside the clone on each Python, and a
# day generated and run from another folder; its published tables equal to the editable checkout's
# (tools/compare_homes.py). A step of .ci/run; WHEEL_PYTHONS=3.11 for one Python only.
WHEEL_PYTHONS ?= 3.11,3.12,3.13
test-wheel: $(BIN)/.installed-dev
	$(BIN)/python tools/wheel_check.py --pythons $(WHEEL_PYTHONS)

# The demo's first review as the reader's first screen: headless Chromium at 1400 x 900 (apt-get install chromium);
# prints whether the verdict table is above the fold.
review-png: $(BIN)/.installed-dev
	$(BIN)/python -m tools.screenshot --home $(DEMO_HOME) --day $(DEMO_START) --width 1400 --height 900

ui: $(BIN)/.installed-dev
	$(BIN)/tokenledger ui --home $(DEMO_HOME)

# A 1M- and a 10M-request day end to end beside DuckDB's bare read and a pandas peer, the fixed cost of a day,
# a 30-day backfill both ways and 8 days through 1 worker and 2, each pinned to a core; a smoke run:
# make bench BENCH_ARGS="--sizes 2000 --fixed-days 2 --backfill-days 2 --backfill-requests 2000 --fanout-days 2 --fanout-requests 2000"
# and the fan-out alone (it rewrites its own section of docs/performance.md): make bench BENCH_ARGS="--only fanout"
BENCH_ARGS ?=
bench: $(BIN)/.installed-dev
	$(BIN)/python -m benchmarks.bench --home $(CURDIR)/.bench $(BENCH_ARGS)

lint: $(BIN)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/python -m tools.lint_imports

# docs/tables.md and the field lists of docs/inputs.md, from the contracts and the registry (after changing either).
docs: $(BIN)/.installed-dev
	$(BIN)/python -m tools.docs

# Re-resolve the pinned set from a clean environment (run after changing dependencies in pyproject.toml).
constraints:
	rm -rf /tmp/tokenledger-constraints && $(PYTHON) -m venv /tmp/tokenledger-constraints
	/tmp/tokenledger-constraints/bin/python -m pip install --quiet --upgrade pip
	/tmp/tokenledger-constraints/bin/python -m pip install --quiet -e '.[dev]'
	/tmp/tokenledger-constraints/bin/python -m pip freeze --exclude-editable > constraints.txt

clean:
	rm -rf $(VENV) .home .bench .pytest_cache .ruff_cache
