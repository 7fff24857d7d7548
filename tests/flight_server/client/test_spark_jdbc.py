"""Spark's JDBC source through the Arrow Flight SQL JDBC driver against a real server: counts,
column pruning, filters, limits and partitioned reads give what the Python data source gives.
Spark runs in a subprocess (one JVM for the module, the driver jar on ``spark.jars``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from catalog import HudiTable
from flight_server.server.config import ServerConfig
from tests.support.jdbc import driver_jar
from tests.support.servers import running_server

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

TABLE = "sample_table_cow.v9_txns_simple_meta"


@pytest.fixture(scope="module")
def results(tables, tmp_path_factory):
    registry, _ = tables
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("spark-jdbc")), sql_threads=1)
    with running_server(config, registry=registry) as srv:
        command = [sys.executable, "-m", "tests.support.spark_jdbc", str(driver_jar()),
                   f"grpc://127.0.0.1:{srv.port}", TABLE, "txn_ts"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, env={**os.environ})
    if done.returncode != 0:
        pytest.fail("Spark over JDBC failed: " + "\n".join(line for line in done.stderr.splitlines() if "Exception" in line or "Error" in line)[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_jdbc_source_reads_what_the_python_source_reads(results, tables):
    expected = HudiTable.open(tables[1][TABLE]).read()
    assert results["columns"] == results["python_columns"] == expected.schema.names
    assert results["count"] == results["count_aggregate_pushed"] == results["python_count"] == expected.num_rows
    assert results["pruned"] == results["python_pruned"] == sorted(expected.column("txn_id").to_pylist())
    assert results["rows"] == results["python_rows"]  # every column, every row


def test_column_types_as_spark_maps_them(results):
    """Pinned: the driver reports no column as signed, so Spark's JDBC source widens BIGINT to
    decimal(20,0) (values equal); zoned timestamps are read through a CAST to TIMESTAMP."""
    assert results["python_types"]["txn_ts"] == "bigint" and results["types"]["txn_ts"] == "decimal(20,0)"
    assert results["types"]["txn_datetime"] == results["python_types"]["txn_datetime"] == "timestamp"
    assert results["types"]["amount"] == results["python_types"]["amount"] == "decimal(15,2)"


def test_filters_limits_and_partitions(results):
    assert results["filtered"] == results["python_filtered"] and results["filtered"]
    assert results["limited"] == 3
    assert results["partitions"] == 3
    assert results["partitioned"] == results["pruned"]
