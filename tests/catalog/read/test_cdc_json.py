"""CDC before/after images: Java's number notation, Jackson's and Avro's JSON text, refusals."""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

from catalog.errors import UnsupportedTableError
from catalog.read.cdc_json import ImageWriter, avro_images, check_image_schema, java_double, java_float


@pytest.mark.parametrize(
    ("value", "java"),
    [
        (1.0, "1.0"),
        (1.5, "1.5"),
        (-2.5, "-2.5"),
        (100.0, "100.0"),
        (1234567.0, "1234567.0"),
        (1.0e7, "1.0E7"),
        (12345678.9, "1.23456789E7"),
        (0.001, "0.001"),
        (1.0e-4, "1.0E-4"),
        (0.00012, "1.2E-4"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1e21, "1.0E21"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (-0.0, "-0.0"),
        (0.0, "0.0"),
        (float("nan"), "NaN"),
        (float("-inf"), "-Infinity"),
    ],
)
def test_java_double_notation(value, java):
    assert java_double(value) == java


@pytest.mark.parametrize(("value", "java"), [(1.1, "1.1"), (0.1, "0.1"), (1.0e10, "1.0E10"), (3.25, "3.25")])
def test_java_float_notation(value, java):
    assert java_float(value) == java


def test_jackson_images_leave_nulls_out_in_schema_order():
    schema = pa.schema([("id", pa.string()), ("price", pa.float64()), ("qty", pa.int32()), ("ok", pa.bool_()),
                        ("day", pa.date32()), ("at", pa.timestamp("ms", "UTC"))])
    at = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    table = pa.table([["a\"é\n", None], [1.5, 1e7], [None, 3], [True, False],
                      [datetime.date(1970, 1, 3), None], [at, None]], schema=schema)
    assert ImageWriter(schema).jackson(table) == [
        '{"id":"a\\"é\\n","price":1.5,"ok":true,"day":2,"at":1704067200000000}',
        '{"price":1.0E7,"qty":3,"ok":false}',
    ]


def test_avro_images_write_nulls_and_missing_images():
    image = pa.struct([("id", pa.string()), ("price", pa.float64()), ("at", pa.timestamp("ms", "UTC"))])
    at = datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=datetime.timezone.utc)
    images = pa.array([{"id": "a\u0001\u2028/", "price": None, "at": at}, None], image)
    assert avro_images(pa.chunked_array([images])) == ['{"id": "a\\u0001\\u2028/", "price": null, "at": 1000}', "null"]


@pytest.mark.parametrize("dtype", [pa.decimal128(10, 2), pa.binary(), pa.list_(pa.string()),
                                   pa.struct([("a", pa.int32())]), pa.map_(pa.string(), pa.int32())])
def test_columns_without_a_known_spark_rendering_are_refused_by_name(dtype):
    schema = pa.schema([("id", pa.string()), ("odd", dtype)])
    with pytest.raises(UnsupportedTableError, match="'odd'"):
        check_image_schema(schema)
