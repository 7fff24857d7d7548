"""The one instant grammar on the surfaces that are not the library: the JSON command, the Spark
options and the Polars source (the CLI's and SQL's are in their own tests), with one message."""

from __future__ import annotations

import pytest

from catalog import InvalidInstantError
from catalog.plan.options import INSTANT_FORMS
from flight_server.server.query.wire import command_from_json

FORMS = [
    ("20250101000010000", "20250101000010000"),
    ("20250101000010", "20250101000010"),
    ("2025-01-01", "20250101000000000"),
    ("2025-01-01T00:00:10.5", "20250101000010500"),
    ("2025-01-01T08:00:10+08:00", "2025-01-01T08:00:10.000+08:00"),  # converted at planning
]


@pytest.mark.parametrize("text, canonical", FORMS)
def test_json_command(text, canonical):
    assert command_from_json({"table": "ns.t", "as_of": text}).options.as_of == canonical
    inc = command_from_json({"table": "ns.t", "query_type": "incremental", "start": text, "end": text})
    assert (inc.options.start, inc.options.end) == (canonical, canonical)


def test_json_command_refuses_with_the_one_message():
    with pytest.raises(InvalidInstantError) as err:
        command_from_json({"table": "ns.t", "as_of": "2025-02-30"})
    assert str(err.value) == f"malformed as_of '2025-02-30' (day is out of range for month): expected {INSTANT_FORMS}"


@pytest.mark.parametrize("text, canonical", FORMS)
def test_spark_options(text, canonical):
    pytest.importorskip("pyspark")
    from flight_server.client.spark import _Query

    query = _Query.from_options({"uri": "grpc://127.0.0.1:1", "path": "ns.t", "as_of": text})
    assert query.options.as_of == canonical


def test_spark_options_refuse_with_the_one_message():
    pytest.importorskip("pyspark")
    from flight_server.client.spark import _Query

    with pytest.raises(ValueError, match=r"hudi-flight: malformed as_of '2025-13-01' \(month must be in 1\.\.12\)"):
        _Query.from_options({"uri": "grpc://127.0.0.1:1", "path": "ns.t", "as_of": "2025-13-01"})


def test_polars_source_refuses_before_connecting():
    pytest.importorskip("polars")
    from flight_server.client.polars import scan_hudi

    with pytest.raises(InvalidInstantError, match=r"malformed as_of '2025-01-01T24:00'"):
        scan_hudi("grpc://127.0.0.1:1", "ns.t", as_of="2025-01-01T24:00")


def test_spark_stream_refuses_a_zoned_start():
    """A stream's offsets are compared on the driver, which cannot know a LOCAL timeline's zone."""
    pytest.importorskip("pyspark")
    from pyspark.sql.types import StructType

    from flight_server.client.spark import HudiFlightStreamReader, _Query

    naive = _Query.from_options({"uri": "grpc://127.0.0.1:1", "path": "ns.t", "query_type": "incremental",
                             "start": "2025-01-01T00:00:10"})
    assert HudiFlightStreamReader(naive, StructType([]), 1).initialOffset() == {"instant": "20250101000010000"}
    zoned = _Query.from_options({"uri": "grpc://127.0.0.1:1", "path": "ns.t", "query_type": "incremental",
                             "start": "2025-01-01T00:00:10Z"})
    with pytest.raises(ValueError, match="a stream's start option takes yyyyMMddHHmmss"):
        HudiFlightStreamReader(zoned, StructType([]), 1)
