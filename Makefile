# hudi-flight: every target sets up its own virtual environment from pyproject.toml.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: venv system-deps lint test demo bench bench-quick clean protocol jdbc-driver spark-dialect spark-connector tables hudi-writer wheel

# PostgreSQL (registry tests run against a real server on loopback), a JDK (Spark; javac builds the
# Spark JDBC dialect), Maven (fetches the JDBC driver) and Chromium (the web console's browser tests,
# driven by Playwright at /usr/bin/chromium).
system-deps:
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1 \
			|| ! command -v mvn >/dev/null 2>&1 || ! test -x /usr/bin/chromium; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql default-jdk-headless maven \
			chromium >/dev/null; \
	fi

$(STAMP): pyproject.toml
	@echo "installing hudi-flight and its dependencies (pyarrow, duckdb, grpc, pyspark, ...) into $(VENV):"
	@echo "about 4 to 5 minutes on the first run, quiet unless something fails..."
	@$(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --upgrade pip
	@$(PY) -m pip install --quiet -e ".[all,dev,spark]"
	@touch $(STAMP)
	@echo "installed into $(VENV)"

venv: $(STAMP)

lint: $(STAMP)
	$(PY) -m ruff check catalog flight_server hudi_generator schemas tests bench
	$(PY) -m mypy catalog flight_server

test: $(STAMP) system-deps spark-connector
	$(PY) -m pytest -n 2 --dist loadgroup -q $(PYTEST_ARGS)

demo: $(STAMP)
	$(VENV)/bin/hudi-flight demo

bench: $(STAMP) hudi-writer jdbc-driver
	$(PY) -m bench --size full

bench-quick: $(STAMP)
	$(PY) -m bench --size quick

clean:
	rm -rf $(VENV) build *.egg-info spark-connector/target $(SPARK_CONNECTOR)

# The Spark DataSource V2 connector (spark-connector/, docs/spark.md): Maven compiles it against the
# venv's own PySpark jars (their Spark and Scala versions) and bundles the Arrow Flight client,
# relocated, into one jar: package data that flight_server.spark.connector_jar() returns.
SPARK_CONNECTOR := flight_server/jars/hudi-flight-spark-connector.jar

spark-connector: $(SPARK_CONNECTOR)

$(SPARK_CONNECTOR): spark-connector/pom.xml $(shell find spark-connector/src -type f 2>/dev/null) | $(STAMP)
	@jars="$$($(PY) -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"; \
	spark="$$($(PY) -c 'import pyspark; print(pyspark.__version__)')"; \
	scala="$$(basename $$jars/scala-library-*.jar .jar | sed 's/^scala-library-//')"; \
	mvn -q -f spark-connector/pom.xml package -Dpyspark.jars="$$jars" -Dspark.version="$$spark" -Dscala.version="$$scala"
	@mkdir -p $(dir $@)
	cp spark-connector/target/hudi-flight-spark-connector.jar $@.tmp && mv -f $@.tmp $@  # a new file: running JVMs keep the old one

# A wheel of hudi-flight into dist/, carrying the Spark connector's jar (built first into
# flight_server/jars/, the package data flight_server.spark.connector_jar() returns).
wheel: $(STAMP) spark-connector
	$(PY) -m pip wheel --quiet --no-deps --no-build-isolation -w dist .

# Regenerate the Flight SQL and Flight session message classes from flight_server/protocol/*.proto.
protocol: $(STAMP)
	cd flight_server/protocol && ../../$(PY) -m grpc_tools.protoc -I. --python_out=. --pyi_out=. flight_sql.proto flight_session.proto

MVN_DEPENDENCY := mvn -q org.apache.maven.plugins:maven-dependency-plugin:3.6.1

# The Arrow Flight SQL JDBC driver (one shaded jar), fetched by Maven into the ignored .cache/ folder;
# the JDBC and Spark-over-JDBC tests and bench/spark_scan.py call this target.
JDBC_DRIVER_VERSION ?= 18.3.0
JDBC_DRIVER := .cache/jdbc/flight-sql-jdbc-driver-$(JDBC_DRIVER_VERSION).jar

jdbc-driver: $(JDBC_DRIVER)

$(JDBC_DRIVER):
	$(MVN_DEPENDENCY):copy \
		-Dartifact=org.apache.arrow:flight-sql-jdbc-driver:$(JDBC_DRIVER_VERSION) -DoutputDirectory=.cache/jdbc

# Tables written by Hudi's own Spark writer, with Spark's Hudi read results beside them
# (tests/data/tables/<release>/); see tests/data/factory. Needs Java 17 and Maven; the writer gets
# its own venv (pyspark 3.5; pyspark 3.2 for Hudi 0.13, whose newest bundle is for Spark 3.2) and
# Hudi's Spark bundles. TABLES=a,b limits it to those specs.
SPARK_VENV := .cache/spark35
SPARK_PY := $(SPARK_VENV)/bin/python
JARS := .cache/jars
HUDI_RELEASES ?= 0.13.1 0.15.0 1.0.2 1.1.1 1.2.0
TABLES ?=
# a Hudi release's writer venv and Spark bundle (as specs.spark_bundle): Spark 3.2 for 0.13, else 3.5
venv_of = .cache/spark$(if $(filter 0.13.%,$(1)),32,35)
bundle_of = $(JARS)/hudi-spark$(if $(filter 0.13.%,$(1)),3.2,3.5)-bundle_2.12-$(1).jar

.cache/spark35.installed: tests/data/factory/requirements.txt
	$(PYTHON) -m venv $(SPARK_VENV)
	$(SPARK_PY) -m pip install --quiet -r $<
	touch $@

.cache/spark32.installed: tests/data/factory/requirements-spark32.txt
	$(PYTHON) -m venv .cache/spark32
	.cache/spark32/bin/python -m pip install --quiet -r $<
	touch $@

# Hudi's writer and reader for bench/spark_hudi.py (the JVM peer)
hudi-writer: .cache/spark35.installed $(JARS)/hudi-spark3.5-bundle_2.12-1.1.1.jar

$(JARS)/hudi-spark3.5-bundle_2.12-%.jar:
	$(MVN_DEPENDENCY):copy -Dartifact=org.apache.hudi:hudi-spark3.5-bundle_2.12:$* -DoutputDirectory=$(JARS)

$(JARS)/hudi-spark3.2-bundle_2.12-%.jar:
	$(MVN_DEPENDENCY):copy -Dartifact=org.apache.hudi:hudi-spark3.2-bundle_2.12:$* -DoutputDirectory=$(JARS)

# Hudi 1.2's Lance writer needs lance-core and its Arrow, which the bundle leaves out.
$(JARS)/lance/.fetched: tests/data/factory/lance-jars.pom.xml
	$(MVN_DEPENDENCY):copy-dependencies -f $< -DoutputDirectory=$(abspath $(JARS))/lance -DincludeScope=runtime
	touch $@

tables: $(sort $(foreach r,$(HUDI_RELEASES),$(call venv_of,$(r)).installed)) $(JARS)/lance/.fetched \
		$(foreach r,$(HUDI_RELEASES),$(call bundle_of,$(r)))
	set -e; $(foreach r,$(HUDI_RELEASES),\
		SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$(abspath $(call venv_of,$(r)))/bin/python PYTHONPATH=$(CURDIR) \
		$(call venv_of,$(r))/bin/python -m tests.data.factory.writer --release $(r) --out tests/data/tables \
		$(if $(TABLES),--tables $(TABLES));)

# The Spark JDBC dialect of the Arrow Flight SQL JDBC driver (jdbc-dialect/, docs/sql.md), compiled
# against the venv's PySpark jars into the ignored .cache/ folder (needs a JDK: javac and jar).
SPARK_DIALECT := .cache/jdbc/hudi-flight-spark-dialect.jar

spark-dialect: $(SPARK_DIALECT)

$(SPARK_DIALECT): jdbc-dialect/HudiFlightJdbcDialect.java
	rm -rf .cache/jdbc/dialect-classes
	javac --release 17 -d .cache/jdbc/dialect-classes \
		-cp "$$($(PY) -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')/jars/*" $<
	jar cf $@ -C .cache/jdbc/dialect-classes .
	rm -rf .cache/jdbc/dialect-classes
