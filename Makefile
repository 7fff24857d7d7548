# hudi-flight: every target sets up its own virtual environment from pyproject.toml.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: venv system-deps lint test demo bench bench-quick clean protocol tables

# PostgreSQL (registry tests run against a real server on loopback) and Java (Spark).
system-deps:
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || ! command -v java >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql default-jre-headless >/dev/null; \
	fi

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev,spark]"
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

# Tables written by Hudi's own Spark writer, with Spark's Hudi read results beside them
# (tests/data/tables/<release>/); see tests/data/factory. Needs Java 17 and Maven; the writer gets
# its own venv (pyspark 3.5) and Hudi's Spark bundles. TABLES=a,b limits it to those specs.
SPARK_VENV := .cache/spark35
SPARK_PY := $(SPARK_VENV)/bin/python
JARS := .cache/jars
HUDI_RELEASES ?= 0.15.0 1.0.2 1.1.1 1.2.0
MVN_DEPENDENCY := mvn -q org.apache.maven.plugins:maven-dependency-plugin:3.6.1
TABLES ?=

.cache/spark35.installed: tests/data/factory/requirements.txt
	$(PYTHON) -m venv $(SPARK_VENV)
	$(SPARK_PY) -m pip install --quiet -r $<
	touch $@

$(JARS)/hudi-spark3.5-bundle_2.12-%.jar:
	$(MVN_DEPENDENCY):copy -Dartifact=org.apache.hudi:hudi-spark3.5-bundle_2.12:$* -DoutputDirectory=$(JARS)

# Hudi 1.2's Lance writer needs lance-core and its Arrow, which the bundle leaves out.
$(JARS)/lance/.fetched: tests/data/factory/lance-jars.pom.xml
	$(MVN_DEPENDENCY):copy-dependencies -f $< -DoutputDirectory=$(abspath $(JARS))/lance -DincludeScope=runtime
	touch $@

tables: .cache/spark35.installed $(JARS)/lance/.fetched $(foreach r,$(HUDI_RELEASES),$(JARS)/hudi-spark3.5-bundle_2.12-$(r).jar)
	for r in $(HUDI_RELEASES); do \
		SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$(abspath $(SPARK_PY)) PYTHONPATH=$(CURDIR) \
		$(SPARK_PY) -m tests.data.factory.writer --release $$r --out tests/data/tables $(if $(TABLES),--tables $(TABLES)) || exit 1; \
	done
