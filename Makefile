# hudi-flight: every target sets up its own virtual environment from pyproject.toml.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: venv system-deps lint test demo bench bench-quick clean protocol jdbc-driver

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

# The Arrow Flight SQL JDBC driver (one shaded jar), fetched by Maven into the ignored .cache/ folder;
# the JDBC and Spark-over-JDBC tests and bench/spark_scan.py call this target.
JDBC_DRIVER_VERSION ?= 18.3.0
JDBC_DRIVER := .cache/jdbc/flight-sql-jdbc-driver-$(JDBC_DRIVER_VERSION).jar

jdbc-driver: $(JDBC_DRIVER)

$(JDBC_DRIVER):
	mvn -q org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
		-Dartifact=org.apache.arrow:flight-sql-jdbc-driver:$(JDBC_DRIVER_VERSION) -DoutputDirectory=.cache/jdbc
