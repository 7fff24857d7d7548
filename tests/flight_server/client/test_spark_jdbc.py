"""Spark's JDBC source through the Arrow Flight SQL JDBC driver against a real server: counts,
column pruning, filters, limits and partitioned reads give what the Python data source gives;
with the project's dialect every fixture table reads by its name, as the library reads it.
Spark runs in a subprocess (one JVM for the module, the driver's and the dialect's jars on
``spark.jars``)."""

from __future__ import annotations

import base64
import datetime
import json
import os
import subprocess
import sys
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from catalog import HudiTable
from flight_server.server.config import ServerConfig
from tests.support.jdbc import dialect_jar, driver_jar
from tests.support.servers import running_server

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

TABLE = "sample_table_cow.v9_txns_simple_meta"


@pytest.fixture(scope="module")
def results(tables, tmp_path_factory):
    registry, _ = tables
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("spark-jdbc")), sql_threads=1)
    with running_server(config, registry=registry) as srv:
        jars = f"{driver_jar()},{dialect_jar()}"
        command = [sys.executable, "-m", "tests.support.spark_jdbc", jars,
                   f"grpc://127.0.0.1:{srv.port}", TABLE, "txn_ts", *sorted(tables[1])]
        done = subprocess.run(command, capture_output=True, text=True, timeout=1200, env={**os.environ})
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


# -- by table name, through the dialect ----------------------------------------------------------


def _from_spark(value: Any, dtype: pa.DataType) -> Any:
    """A value of Spark's JSON row (``DataFrame.toJSON``; numbers parsed as Decimal) as
    ``to_pylist`` gives the library's ``dtype`` value; nested values are the driver's JSON text."""
    if value is None:
        return None
    if pa.types.is_nested(dtype):
        return _nested(json.loads(value, parse_float=Decimal) if isinstance(value, str) else value, dtype)
    if pa.types.is_timestamp(dtype):
        value = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        value = value if dtype.tz else value.replace(tzinfo=None)
    elif pa.types.is_date(dtype):
        value = datetime.date.fromisoformat(value)
    elif pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        value = base64.b64decode(value)
    elif pa.types.is_floating(dtype):
        value = float(value)
    return pa.array([value], dtype).to_pylist()[0]


def _nested(value: Any, dtype: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_struct(dtype):
        return {f.name: _nested(value.get(f.name), f.type) for f in dtype}
    if pa.types.is_map(dtype):
        return [(_nested(k, dtype.key_type), _nested(v, dtype.item_type)) for k, v in value.items()]
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype):
        return [_nested(v, dtype.value_type) for v in value]
    if pa.types.is_integer(dtype) and isinstance(value, str):
        value = int(value)  # a JSON object key
    return _from_spark(value, dtype)


def _sorted_rows(rows: list[dict]) -> list[str]:
    return sorted(json.dumps(r, default=str, sort_keys=True) for r in rows)


def test_every_fixture_table_reads_by_name(results, tables):
    """``spark.read.jdbc(url, "ns.t")`` on every fixture table (zoned timestamps, structs, maps,
    lists, Lance, merge-on-read): the library's rows; nested columns as the driver's JSON text."""
    for name, path in sorted(tables[1].items()):
        got = results["by_name"][name]
        expected = HudiTable.open(path).read()
        assert [c for c, _ in got["types"]] == expected.schema.names, name
        schema = expected.schema
        rows = [{f.name: _from_spark(r.get(f.name), f.type) for f in schema}
                for r in (json.loads(line, parse_float=Decimal) for line in got["rows"])]
        assert _sorted_rows(rows) == _sorted_rows(expected.to_pylist()), name
        assert got["count"] == got["counted"] == expected.num_rows, name


def test_dialect_types_zoned_timestamps_nested_columns_and_counts(results, tables):
    """Types Spark's generic mapping refuses (zoned timestamps, nested) or widens (BIGINT, counts:
    decimal(20,0)) are timestamp, string and bigint through the dialect."""
    for name, path in sorted(tables[1].items()):
        got = dict(results["by_name"][name]["types"])
        for f in HudiTable.open(path).schema:
            if pa.types.is_timestamp(f.type):
                assert got[f.name] == "timestamp", (name, f.name)
            elif pa.types.is_nested(f.type):
                assert got[f.name] == "string", (name, f.name)
            elif f.type == pa.int64():
                assert got[f.name] == "bigint", (name, f.name)
        assert results["by_name"][name]["count_type"] == "bigint", name
    nested = dict(results["by_name"]["sample_table_cow.v6_nonpartitioned"]["types"])
    assert (nested["timestampField"], nested["structField"], nested["longField"]) == ("timestamp", "string", "bigint")


def test_registering_needs_a_session_with_a_jvm():
    from flight_server.client.spark_jdbc import register_jdbc_dialect

    with pytest.raises(RuntimeError, match="classic SparkSession"):
        register_jdbc_dialect(object())  # a Spark Connect session has no _jvm
