# The two commands a new user runs: `make demo` and `make test`. Both set everything up first.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
export SPARK_LOCAL_IP := 127.0.0.1

.PHONY: setup demo test unit check lint typecheck wheel-check bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml tests/node/package-lock.json Makefile
	@command -v java >/dev/null 2>&1 || { echo "installing a Java runtime (apt-get)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless >/dev/null; }
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@command -v npm >/dev/null 2>&1 || { echo "installing Node.js (apt-get), for the second-client test"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }
	npm ci --prefix tests/node --no-audit --no-fund --silent
	@command -v prometheus >/dev/null 2>&1 || { echo "installing Prometheus (apt-get), for the metrics test"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; } \
		|| echo "could not install prometheus: tests/e2e/test_metrics.py skips its Prometheus test"; }
	@touch $(STAMP)

demo: setup
	$(VENV)/bin/cqlcdc run examples/quickstart.cql --data-dir $(or $(DATA_DIR),$(shell mktemp -d))

test: setup lint typecheck wheel-check
	$(PY) -m pytest -q

# the inner loop: every test that starts no Spark (no `spark` mark, no `spark` fixture: see
# tests/conftest.py), no lint; `make test` is the whole suite
unit: setup
	$(PY) -m pytest -q -m "not spark and not slow"

check: test

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/lint-imports

typecheck: setup
	$(VENV)/bin/mypy

# build the wheel, install it in a fresh venv, import every installed module, run cqlcdc --help
wheel-check: setup
	$(PY) tests/wheel_check.py

bench: setup
	$(PY) benchmarks/ingest.py

clean:
	rm -rf $(VENV) build *.egg-info
