# hudi-flight: every target sets up its own virtual environment from pyproject.toml.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: venv system-deps lint test demo bench bench-quick clean protocol

# PostgreSQL (registry tests run against a real server on loopback) and Java (Spark).
system-deps:
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || ! command -v java >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql default-jre-headless >/dev/null; \
	fi

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[all,dev,spark]"
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(PY) -m ruff check catalog flight_server hudi_generator schemas tests bench
	$(PY) -m mypy catalog flight_server

test: $(STAMP) system-deps
	$(PY) -m pytest -n 2 -q $(PYTEST_ARGS)

demo: $(STAMP)
	$(VENV)/bin/hudi-flight demo

bench: $(STAMP)
	$(PY) -m bench --size full

bench-quick: $(STAMP)
	$(PY) -m bench --size quick

clean:
	rm -rf $(VENV) build *.egg-info

# Regenerate the Flight SQL message classes from flight_server/protocol/flight_sql.proto.
protocol: $(STAMP)
	cd flight_server/protocol && ../../$(PY) -m grpc_tools.protoc -I. --python_out=. --pyi_out=. flight_sql.proto
