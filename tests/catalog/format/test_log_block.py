"""Decoding of Avro / Parquet data blocks, delete blocks and command blocks (format doc 4.4)."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest

from catalog.errors import CorruptTableError, UnsupportedTableError
from catalog.format.log_block import (
    decode_avro_block,
    decode_data_block,
    decode_delete_block,
    decode_parquet_block,
    rollback_target,
)
from catalog.format.log_file import BlockType, LogBlock, iter_log_blocks, iter_log_blocks_in
from catalog.storage import Storage
from hudi_generator import log_writer
from hudi_generator.hfile_writer import HFileWriter
from tests.support.fixtures import FIXTURES_DIR

LOGS = FIXTURES_DIR / "log_files"


def _block(kind: str) -> LogBlock:
    (path,) = [p for p in (LOGS / kind).iterdir() if p.name.startswith(".")]
    (block,) = iter_log_blocks(Storage(str(path.parent)), path.name)
    return block


def test_avro_and_parquet_blocks_hold_the_same_trip():
    avro = decode_avro_block(b := _block("valid_log_avro_data"), b.content)
    parquet = decode_parquet_block(p := _block("valid_log_parquet_data"), p.content)
    assert avro.num_rows == parquet.num_rows == 1
    a, q = avro.to_pylist()[0], parquet.to_pylist()[0]
    assert a["_hoodie_record_key"] == q["_hoodie_record_key"] == "334e26e9-8355-45cc-97c6-c31daf0df330"
    assert a["_hoodie_commit_time"] == "20250316025828811"
    assert a["rider"] == "rider-A" and isinstance(a["ts"], int) and isinstance(a["fare"], float)
    # Types come from the block's SCHEMA header (Avro long/double -> int64/float64).
    assert avro.schema.field("ts").type == pa.int64() and avro.schema.field("fare").type == pa.float64()


def test_delete_block_keys_and_default_ordering():
    deletes = decode_delete_block(b := _block("valid_log_delete"), b.content)
    assert deletes.record_keys.to_pylist() == [
        "e96c4396-3fad-413a-a942-4cb36106d721",
        "9909a8b1-2d15-4d3d-8ec9-efc48c536a00",
        "334e26e9-8355-45cc-97c6-c31daf0df330",
    ]
    assert deletes.partition_paths.to_pylist() == ["city=san_francisco"] * 3
    assert deletes.ordering_values == [0, 0, 0]  # IntWrapper(0): Hudi's "no ordering" default


@pytest.mark.parametrize("value,expected", [(1700000000123, 1700000000123), ("b", "b"), (2.5, 2.5), (None, None)])
def test_delete_block_wrapper_union_values(value, expected):
    # The writer puts orderingVal into a union of wrapper records (LongWrapper, StringWrapper, ...).
    branch = {int: "LongWrapper", str: "StringWrapper", float: "DoubleWrapper"}.get(type(value))
    ordering = None if value is None else (f"org.apache.hudi.avro.model.{branch}", {"value": value})
    buf = io.BytesIO()
    fastavro.schemaless_writer(
        buf,
        log_writer.DELETE_RECORD_LIST_SCHEMA,
        {"deleteRecordList": [{"recordKey": "k1", "partitionPath": "p", "orderingVal": ordering}]},
    )
    payload = buf.getvalue()
    block = LogBlock("x", 0, 0, BlockType.DELETE, {"INSTANT_TIME": "1"})
    decoded = decode_delete_block(block, struct.pack(">ii", 3, len(payload)) + payload)
    assert decoded.record_keys.to_pylist() == ["k1"] and decoded.ordering_values == [expected]


def test_delete_block_unknown_version_is_refused():
    block = LogBlock("x", 0, 0, BlockType.DELETE, {})
    with pytest.raises(UnsupportedTableError, match="delete block version 4"):
        decode_delete_block(block, struct.pack(">ii", 4, 0))


def test_kryo_delete_block_versions_1_and_2():
    """Delete block versions 1 and 2 (Kryo, Hudi <= 0.13) decode to keys and ordering values
    (payloads from catalog/format tests' Kryo 4.0.3 vectors, see test_kryo.py)."""
    from tests.catalog.format.test_kryo import VECTORS

    block = LogBlock("x", 0, 0, BlockType.DELETE, {})
    _, payload, _ = VECTORS["v1_keys_2"]
    d1 = decode_delete_block(block, struct.pack(">ii", 1, len(payload)) + payload)
    assert d1.record_keys.to_pylist() == ["k1", "k2"]
    assert d1.partition_paths.to_pylist() == ["2018/08/31", None]
    assert d1.ordering_values == [None, None]
    _, payload, _ = VECTORS["v2_long_str"]
    d2 = decode_delete_block(block, struct.pack(">ii", 2, len(payload)) + payload)
    assert d2.record_keys.to_pylist() == ["key-\u00e9", "k2", "k3"]
    assert d2.ordering_values == [1234567890123, "abc", None]


def test_truncated_avro_content_raises_clearly():
    b = _block("valid_log_avro_data")
    with pytest.raises(CorruptTableError, match="cannot decode Avro records"):
        decode_avro_block(b, b.content[:-30])


def test_data_block_without_schema_raises():
    b = _block("valid_log_avro_data")
    headerless = LogBlock(b.path, 0, b.size, b.block_type, {"INSTANT_TIME": "1"}, content=b.content)
    with pytest.raises(CorruptTableError, match="without a SCHEMA header"):
        decode_data_block(headerless, b.content)


def test_corrupt_parquet_content_raises():
    b = _block("valid_log_parquet_data")
    with pytest.raises(CorruptTableError, match="cannot read Parquet block"):
        decode_parquet_block(b, b.content[:100])


def test_rollback_command_target():
    assert rollback_target(_block("valid_log_rollback")) == "20250126040826878"
    odd = LogBlock("x", 0, 0, BlockType.COMMAND, {"COMMAND_BLOCK_TYPE": "7", "TARGET_INSTANT_TIME": "1"})
    with pytest.raises(CorruptTableError, match="unknown command block"):
        rollback_target(odd)


def test_round_trip_with_generator_writer(tmp_path: Path):
    schema = {
        "type": "record",
        "name": "r",
        "fields": [{"name": "_hoodie_record_key", "type": ["null", "string"]}, {"name": "v", "type": "long"}],
    }
    raw = log_writer.avro_data_block("20250101000000000", schema, [{"_hoodie_record_key": f"k{i}", "v": i} for i in range(50)])
    path = tmp_path / "log"
    path.write_bytes(raw + log_writer.delete_block("20250101000000001", [("k3", "")]))
    data, delete = iter_log_blocks(Storage(str(tmp_path)), "log")
    table = decode_data_block(data, data.content)
    assert table.column("v").to_pylist() == list(range(50))
    assert decode_delete_block(delete, delete.content).record_keys.to_pylist() == ["k3"]


def _fixture_avro_blocks(fixture_table) -> list[tuple[LogBlock, bytes]]:
    from tests.support.fixtures import all_table_names

    out = []
    for name in all_table_names():
        if "/mor/avro/" not in name:
            continue
        root = Path(fixture_table(name))
        for log in root.rglob(".*.log.*"):
            if ".hoodie" in log.parts:
                continue
            for block in iter_log_blocks(Storage(str(log.parent)), log.name):
                if block.block_type is BlockType.AVRO_DATA:
                    out.append((block, block.content))
    return out


def test_native_and_fastavro_decoders_agree(fixture_table, generated_table, monkeypatch):
    """The polars fast path must give exactly the fastavro result (types and values)."""
    import catalog.format.log_block as lb

    pytest.importorskip("polars")
    cases = _fixture_avro_blocks(fixture_table)
    # The generator's schema adds decimal-as-fixed, timestamp-micros and a nested record.
    from hudi_generator.generator import MERGE_ON_READ, GeneratorSpec

    gen = Path(generated_table(GeneratorSpec(rows=200, partitions=1, commits=2, table_type=MERGE_ON_READ,
                                             metadata_table=False, workers=1)))
    for log in gen.rglob(".*.log.*"):
        cases += [(b, b.content) for b in iter_log_blocks(Storage(str(log.parent)), log.name)
                  if b.block_type is BlockType.AVRO_DATA]
    assert len(cases) > 20
    fast = [decode_avro_block(b, c) for b, c in cases]
    assert all(lb._polars_can_decode(lb.parse_avro_schema(b.header["SCHEMA"])) for b, _ in cases)
    monkeypatch.setattr(lb, "_polars_can_decode", lambda node: False)
    slow = [decode_avro_block(b, c) for b, c in cases]
    for (block, _), a, b in zip(cases, fast, slow):
        assert a.schema.equals(b.schema), block.path
        assert a.to_pylist() == b.to_pylist(), block.path


def test_types_outside_the_fast_path_use_fastavro():
    import catalog.format.log_block as lb

    assert not lb._polars_can_decode({"type": "map", "values": "string"})
    assert not lb._polars_can_decode({"type": "enum", "name": "e", "symbols": ["A"]})
    assert not lb._polars_can_decode(["null", "int", "string"])
    assert not lb._polars_can_decode({"type": "long", "logicalType": "timestamp-millis"})
    assert lb._polars_can_decode({"type": "record", "name": "r", "fields": [
        {"name": "a", "type": ["null", {"type": "fixed", "name": "f", "size": 6, "logicalType": "decimal",
                                        "precision": 12, "scale": 2}]}]})


def _hfile_block(records: list[dict], schema: dict, block_size: int = 64 * 1024) -> LogBlock:
    """An HFILE_DATA block of a data table: cells (record key, the record's schemaless Avro)."""
    parsed = fastavro.parse_schema(schema)
    writer = HFileWriter(block_size=block_size)
    for record in sorted(records, key=lambda r: r["id"]):
        body = io.BytesIO()
        fastavro.schemaless_writer(body, parsed, record)
        writer.add(record["id"].encode(), body.getvalue())
    framed = log_writer.hfile_data_block("20240101000000000", json.dumps(schema), writer.to_bytes())
    (block,) = iter_log_blocks_in(framed, "p0/.f1-0_20240101000000000.log.1_0-1-1")
    return block


_HFILE_SCHEMA = {"type": "record", "name": "r", "fields": [
    {"name": "id", "type": "string"}, {"name": "price", "type": ["null", "double"], "default": None},
    {"name": "tags", "type": {"type": "array", "items": "string"}}]}


@pytest.mark.parametrize("block_size", [64 * 1024, 64], ids=["one data block", "many data blocks"])
def test_hfile_data_blocks_of_a_data_table_hold_its_records(block_size):
    records = [{"id": f"id{n:03d}", "price": None if n == 3 else n * 1.5, "tags": [f"t{n}"] * (n % 3)} for n in range(40)]
    block = _hfile_block(records, _HFILE_SCHEMA, block_size)
    assert block.block_type is BlockType.HFILE_DATA
    table = decode_data_block(block, block.content)
    assert table.to_pylist() == records  # in key order, as the HFile keeps them
    assert table.schema.field("price").type == pa.float64()


def test_a_damaged_hfile_data_block_is_reported_not_decoded():
    block = _hfile_block([{"id": "a", "price": 1.0, "tags": []}], _HFILE_SCHEMA)
    with pytest.raises(CorruptTableError):
        decode_data_block(block, block.content[: len(block.content) // 2])
