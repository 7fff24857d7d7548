"""Hudi 1.2's VECTOR, VARIANT and BLOB columns: their Avro schema forms (as Hudi 1.2.0's
``HoodieSchema.createVector/createVariant/createVariantShreddedObject/createBlob`` print them)
mapped to Arrow, and VECTOR values decoded from the bytes Parquet and Avro files hold."""

from __future__ import annotations

import json
import struct

import pyarrow as pa
import pytest

from catalog.errors import CorruptTableError, UnsupportedTableError
from catalog.format.avro import avro_to_arrow_schema, records_to_arrow
from catalog.format.parquet import cast_array, conform_batch

VECTOR_FLOAT_4 = {"type": "fixed", "name": "vector_float_4", "size": 16, "logicalType": "vector", "dimension": 4,
                  "elementType": "FLOAT", "storageBacking": "FIXED_BYTES"}
VECTOR_DOUBLE_3 = {"type": "fixed", "name": "vector_double_3", "size": 24, "logicalType": "vector", "dimension": 3,
                   "elementType": "DOUBLE", "storageBacking": "FIXED_BYTES"}
VECTOR_INT8_8 = {"type": "fixed", "name": "vector_int8_8", "size": 8, "logicalType": "vector", "dimension": 8,
                 "elementType": "INT8", "storageBacking": "FIXED_BYTES"}
VARIANT = {"type": "record", "name": "variant", "logicalType": "variant", "fields": [
    {"name": "metadata", "type": "bytes", "doc": "Variant metadata component"},
    {"name": "value", "type": "bytes", "doc": "Variant value component"}]}
SHREDDED = {"type": "record", "name": "variant", "logicalType": "variant", "fields": [
    {"name": "metadata", "type": "bytes"}, {"name": "value", "type": ["null", "bytes"], "default": None},
    {"name": "typed_value", "type": {"type": "record", "name": "typed_value", "fields": [
        {"name": "a", "type": ["null", "int"], "default": None}]}}]}
BLOB = {"type": "record", "name": "blob", "logicalType": "blob", "fields": [
    {"name": "type", "type": {"type": "enum", "name": "blob_storage_type", "symbols": ["INLINE", "OUT_OF_LINE"]}},
    {"name": "data", "type": ["null", "bytes"], "default": None},
    {"name": "reference", "type": ["null", {"type": "record", "name": "reference", "fields": [
        {"name": "external_path", "type": "string"}, {"name": "offset", "type": ["null", "long"]},
        {"name": "length", "type": ["null", "long"]}, {"name": "managed", "type": "boolean"}]}], "default": None}]}


def _table_schema(**columns) -> str:
    fields = [{"name": "id", "type": "int"}]
    fields += [{"name": name, "type": ["null", node], "default": None} for name, node in columns.items()]
    return json.dumps({"type": "record", "name": "t", "fields": fields})


def test_the_three_types_map_as_documented():
    schema = avro_to_arrow_schema(_table_schema(emb=VECTOR_FLOAT_4, emb64=VECTOR_DOUBLE_3, q=VECTOR_INT8_8,
                                                v=VARIANT, doc=BLOB))
    assert schema.field("emb").type == pa.list_(pa.float32(), 4)
    assert schema.field("emb64").type == pa.list_(pa.float64(), 3)
    assert schema.field("q").type == pa.list_(pa.int8(), 8)
    assert schema.field("v").type == pa.struct([pa.field("metadata", pa.binary(), nullable=False),
                                                pa.field("value", pa.binary(), nullable=False)])
    blob = schema.field("doc").type
    assert [blob.field(i).name for i in range(blob.num_fields)] == ["type", "data", "reference"]
    assert blob.field("type").type == pa.string() and blob.field("data").type == pa.binary()
    ref = blob.field("reference").type
    assert [(ref.field(i).name, ref.field(i).type) for i in range(ref.num_fields)] == [
        ("external_path", pa.string()), ("offset", pa.int64()), ("length", pa.int64()), ("managed", pa.bool_())]


@pytest.mark.parametrize("node, message", [
    (SHREDDED, "shredded VARIANT"),
    ({**VECTOR_FLOAT_4, "storageBacking": "LIST"}, "storage backing 'LIST'"),
    ({**VECTOR_FLOAT_4, "elementType": "BFLOAT16"}, "element type 'BFLOAT16'"),
    ({**BLOB, "fields": BLOB["fields"][:2]}, "BLOB with fields"),
])
def test_what_is_not_carried_is_refused_by_name(node, message):
    with pytest.raises(UnsupportedTableError, match=message):
        avro_to_arrow_schema(_table_schema(c=node))


def test_a_vector_whose_size_disagrees_with_its_dimension_is_corrupt():
    with pytest.raises(CorruptTableError, match="do not hold 4 FLOAT"):
        avro_to_arrow_schema(_table_schema(c={**VECTOR_FLOAT_4, "size": 12}))


def _le(fmt: str, values) -> bytes:
    return struct.pack("<" + fmt * len(values), *values)


def test_vectors_in_avro_log_records_become_fixed_size_lists():
    schema = avro_to_arrow_schema(_table_schema(emb=VECTOR_FLOAT_4, q=VECTOR_INT8_8))
    rows = [{"id": 1, "emb": _le("f", [1.5, -2.0, 0.25, 8.0]), "q": _le("b", [1, -2, 3, -4, 5, -6, 7, -8])},
            {"id": 2, "emb": None, "q": None}]
    table = records_to_arrow(rows, schema)
    assert table.schema == schema
    assert table.column("emb").to_pylist() == [[1.5, -2.0, 0.25, 8.0], None]
    assert table.column("q").to_pylist() == [[1, -2, 3, -4, 5, -6, 7, -8], None]


def test_vectors_stored_as_fixed_bytes_in_parquet_are_cast_to_lists():
    target = pa.list_(pa.float64(), 3)
    stored = pa.array([_le("d", [1.0, 2.0, 3.0]), None, _le("d", [-1.0, 0.5, 1e300])], pa.binary(24))
    assert cast_array(stored, target).to_pylist() == [[1.0, 2.0, 3.0], None, [-1.0, 0.5, 1e300]]
    # a slice keeps its offset into the shared buffer
    assert cast_array(stored.slice(2), target).to_pylist() == [[-1.0, 0.5, 1e300]]
    batch = pa.record_batch([pa.chunked_array([stored]).combine_chunks()], names=["emb"])
    assert conform_batch(batch, pa.schema([pa.field("emb", target)])).column(0).type == target
    with pytest.raises(CorruptTableError, match="not 24 bytes"):
        cast_array(pa.array([b"\0" * 16], pa.binary(16)), target)


def test_vectors_already_stored_as_lists_keep_their_values():
    """Lance and other Arrow-native writers store a VECTOR as a fixed-size list already."""
    target = pa.list_(pa.float32(), 2)
    stored = pa.array([[1.0, 2.0], None], pa.list_(pa.field("element", pa.float32(), nullable=False), 2))
    assert cast_array(stored, target).to_pylist() == [[1.0, 2.0], None]
