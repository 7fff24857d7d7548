"""Avro -> Arrow types and records (format doc 9.1)."""

from __future__ import annotations

import datetime as dt
import io
from decimal import Decimal

import fastavro
import pyarrow as pa
import pytest

from catalog.errors import CorruptTableError
from catalog.format.avro import META_COLUMNS, avro_to_arrow_schema, records_to_arrow, with_meta_columns

SCHEMA = {
    "type": "record",
    "name": "r",
    "namespace": "ns",
    "fields": [
        {"name": "i", "type": ["null", "int"]},
        {"name": "l", "type": ["long", "null"]},
        {"name": "s", "type": "string"},
        {"name": "dec_fixed", "type": ["null", {"type": "fixed", "name": "fixed", "size": 7,
                                                  "logicalType": "decimal", "precision": 15, "scale": 2}]},
        {"name": "dec_bytes", "type": {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 3}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "ts_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "local_ts", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "t", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "BLUE"]}},
        {"name": "arr", "type": {"type": "array", "items": ["null", {"type": "record", "name": "item",
                                                                    "fields": [{"name": "x", "type": "int"}]}]}},
        {"name": "again", "type": ["null", "item"]},  # reference to a named type
        {"name": "m", "type": {"type": "map", "values": ["null", "double"]}},
        {"name": "b", "type": "bytes"},
        {"name": "fx", "type": {"type": "fixed", "name": "f4", "size": 4}},
    ],
}


def test_types():
    s = avro_to_arrow_schema(SCHEMA)
    expect = {
        "i": pa.int32(), "l": pa.int64(), "s": pa.string(), "dec_fixed": pa.decimal128(15, 2),
        "dec_bytes": pa.decimal256(40, 3), "day": pa.date32(), "ts": pa.timestamp("us", tz="UTC"),
        "ts_ms": pa.timestamp("ms", tz="UTC"), "local_ts": pa.timestamp("us"), "t": pa.time64("us"),
        "e": pa.string(), "b": pa.binary(), "fx": pa.binary(4),
    }
    for name, dtype in expect.items():
        assert s.field(name).type == dtype, name
    assert s.field("i").nullable and s.field("l").nullable and not s.field("s").nullable
    assert s.field("arr").type == pa.list_(pa.field("element", pa.struct([pa.field("x", pa.int32(), False)])))
    assert s.field("again").type == pa.struct([pa.field("x", pa.int32(), False)])
    assert s.field("m").type == pa.map_(pa.string(), pa.float64())


def test_meta_columns_first():
    s = with_meta_columns(avro_to_arrow_schema(SCHEMA))
    assert s.names[:5] == list(META_COLUMNS) and s.names[5] == "i"


def test_bad_schemas():
    with pytest.raises(CorruptTableError, match="JSON"):
        avro_to_arrow_schema("{not json")
    with pytest.raises(CorruptTableError, match="unknown type"):
        avro_to_arrow_schema({"type": "record", "name": "x", "fields": [{"name": "a", "type": "Missing"}]})


def test_records_round_trip():
    record = {
        "i": None, "l": 5, "s": "x", "dec_fixed": Decimal("1234.56"), "dec_bytes": Decimal("-1.500"),
        "day": dt.date(2024, 1, 2), "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone.utc),
        "ts_ms": dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc), "local_ts": dt.datetime(2024, 1, 2, 3),
        "t": dt.time(1, 2, 3, 4), "e": "BLUE", "arr": [{"x": 1}, None], "again": {"x": 2},
        "m": {"a": 1.5, "b": None}, "b": b"\x00\x01", "fx": b"abcd",
    }
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(SCHEMA), [record])
    buf.seek(0)
    decoded = list(fastavro.reader(buf))
    table = records_to_arrow(decoded, avro_to_arrow_schema(SCHEMA))
    [row] = table.to_pylist()
    assert row["dec_fixed"] == Decimal("1234.56") and row["dec_bytes"] == Decimal("-1.500")
    assert row["ts"] == record["ts"] and row["local_ts"] == record["local_ts"] and row["day"] == record["day"]
    assert row["m"] == [("a", 1.5), ("b", None)] and row["arr"] == [{"x": 1}, None]
    assert row["e"] == "BLUE" and row["fx"] == b"abcd" and row["i"] is None
