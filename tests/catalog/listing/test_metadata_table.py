"""Metadata-table record decoding, merging, key encodings and index lookups (format doc 6)."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pytest

from catalog.format.hfile import HFileReader
from catalog.hudi_table import HudiTable
from catalog.listing.metadata_table import (
    ALL_PARTITIONS_KEY,
    KeySelection,
    MetadataTable,
    column_hash,
    column_stats_key,
    file_hash,
    java_string_hash,
    live_files,
    merge_record,
    partition_hash,
    partition_stats_key,
    record_file_id,
    shard_of,
    stats_value,
)
from catalog.plan.options import ReadOptions
from catalog.plan.planner import file_slices

MOR = "sample_table/mor/avro/v9_txns_simple_meta"


def mdt_of(path: str) -> MetadataTable:
    table = HudiTable.open(path, use_metadata_table=False)
    return MetadataTable(table.storage, table.config, table.timeline)


def test_key_hashes_match_the_format_doc():
    assert column_hash("currency") == "/m6lxu4Dh5w="
    assert partition_hash("region=us") == "431THTTwO5Q="
    assert partition_hash("") == "FXThHwelITM="  # non-partitioned tables hash "."
    assert len(column_stats_key("a", "b", "c.parquet")) == 48
    assert partition_stats_key("currency", "region=us") == "/m6lxu4Dh5w=431THTTwO5Q="


def test_java_string_hash():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648  # Integer.MIN_VALUE
    assert shard_of("polygenelubricants", 10) == 8
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # hashed as two UTF-16 units


def test_record_file_id_forms():
    uuid_info = {
        "fileIdEncoding": 0,
        "fileIdHighBits": -4344318094604173371,
        "fileIdLowBits": -5687226549019065704,
        "fileIndex": 0,
    }
    fid = record_file_id(uuid_info)
    assert fid.endswith("-0") and len(fid) == 38
    assert record_file_id({**uuid_info, "fileIndex": -1}) == fid[:-2]
    assert record_file_id({"fileIdEncoding": 1, "fileId": "my-file-7"}) == "my-file-7"


def test_stats_values():
    dec = ("org.apache.hudi.avro.model.BytesWrapper", {"value": (125000).to_bytes(3, "big", signed=True)})
    assert stats_value(dec, {"typeOrdinal": 10, "additionalInfo": "15,2"}, pa.decimal128(15, 2)) == decimal.Decimal("1250.00")
    neg = ("BytesWrapper", {"value": (-5).to_bytes(1, "big", signed=True)})
    assert stats_value(neg, {"typeOrdinal": 10, "additionalInfo": "10,2"}, pa.decimal128(10, 2)) == decimal.Decimal("-0.05")
    assert stats_value(("IntWrapper", {"value": 19737}), {"typeOrdinal": 12}, pa.date32()) == datetime.date(2024, 1, 15)
    assert stats_value(("x.DateWrapper", {"value": 1}), None, pa.date32()) == datetime.date(1970, 1, 2)
    ts = ("LongWrapper", {"value": 1705336200000})
    assert stats_value(ts, {"typeOrdinal": 15}, pa.timestamp("us", "UTC")) == 1705336200000000
    with pytest.raises(ValueError):
        stats_value(ts, {"typeOrdinal": 15}, pa.int64())
    assert stats_value(("StringWrapper", {"value": "USD"}), {"typeOrdinal": 7}, pa.string()) == "USD"
    assert stats_value(None, None, pa.string()) is None


def test_files_merge_rule():
    def rec(**files):
        return {"filesystemMetadata": {n: {"size": s, "isDeleted": d} for n, (s, d) in files.items()}}

    base = rec(a=(10, False), b=(20, False), c=(5, True))
    delta = rec(a=(12, False), b=(0, True), c=(7, False), d=(1, True))
    merged = merge_record(base, delta)
    assert live_files(merged) == {"a": 12, "c": 7}
    # a tombstone stays a tombstone; a smaller re-add keeps the larger size
    assert merged["filesystemMetadata"]["d"]["isDeleted"]
    assert live_files(merge_record(rec(a=(12, False)), rec(a=(3, False)))) == {"a": 12}
    assert merge_record(None, delta) is delta


def test_files_partition_merges_base_and_logs(fixture_table):
    mdt = mdt_of(fixture_table(MOR))
    records = mdt.read("files")
    assert set(live_files(records[ALL_PARTITIONS_KEY])) == {"region=apac", "region=eu", "region=us"}
    counts = {p: len(live_files(records[p])) for p in ("region=apac", "region=eu", "region=us")}
    assert counts == {"region=apac": 5, "region=eu": 7, "region=us": 7}  # format doc 6.11
    only = mdt.read("files", KeySelection(keys=frozenset({"region=eu"})))
    assert set(only) == {"region=eu"} and live_files(only["region=eu"]) == live_files(records["region=eu"])


def test_column_stats_keys_recompute(fixture_table):
    mdt = mdt_of(fixture_table(MOR))
    files = mdt.read("files")
    where = {name: p for p in live_files(files[ALL_PARTITIONS_KEY]) for name in live_files(files[p])}
    stats = mdt.read("column_stats")
    assert stats
    checked = 0
    for key, rec in stats.items():
        info = rec["ColumnStatsMetadata"]
        if info["fileName"] in where:
            assert key == column_stats_key(info["columnName"], where[info["fileName"]], info["fileName"])
            checked += 1
    assert checked > 10
    assert all(k[24:] == file_hash(r["ColumnStatsMetadata"]["fileName"]) for k, r in stats.items())
    pstats = mdt.read("partition_stats")
    for key, rec in pstats.items():
        info = rec["ColumnStatsMetadata"]
        assert key == partition_stats_key(info["columnName"], info["fileName"])


def test_record_index_locates_keys_and_honours_deletes(fixture_table):
    path = fixture_table(MOR)
    mdt = mdt_of(path)
    table = HudiTable.open(path, use_metadata_table=False)
    data = table.read(columns=["_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name"]).to_pylist()
    keys = [r["_hoodie_record_key"] for r in data]
    located = mdt.record_locations(keys + ["TXN-005", "no-such-key"])
    assert located is not None
    assert "TXN-005" not in located and "no-such-key" not in located  # deleted / never written
    # TXN-004 and TXN-006 are in their shard's base HFile and removed by a DELETE log block
    slices = mdt.file_slices("record_index")
    for key in ("TXN-004", "TXN-006"):
        fs = slices[shard_of(key, len(slices))]
        base = HFileReader.from_storage(mdt.storage, fs.base_file_path)
        assert base.get(key) is not None
        assert key not in mdt.read_slice(fs, KeySelection(keys=frozenset({key})))
        assert key not in located and key not in keys
    live_groups = {(s.partition, s.file_id) for s in file_slices(table.state, ReadOptions())}
    for row in data:
        partition, file_id = located[row["_hoodie_record_key"]]
        assert partition == row["_hoodie_partition_path"]
        assert (partition, file_id) in live_groups
    # every stored key sits in the shard its hash names
    for i, fs in enumerate(slices):
        for key in mdt.read_slice(fs, KeySelection()):
            assert shard_of(key, len(slices)) == i


def test_valid_instants_exclude_pending_data_instants(fixture_table):
    mdt = mdt_of(fixture_table(MOR))
    done = {i.requested_time for i in mdt.data_timeline.completed}
    assert done <= mdt.valid_instants
    assert "00000000000000000" in mdt.valid_instants
    for inst in mdt.data_timeline.pending:
        assert inst.requested_time not in mdt.valid_instants


def test_blocks_kept_by_record_index_lookups_count_in_its_size(fixture_table):
    """Log-block HFiles keep the blocks their lookups walked: the table cache's bound sees them."""
    mdt = mdt_of(fixture_table(MOR))
    before = mdt.estimated_bytes()
    assert mdt.record_locations(["TXN-001"]) is not None
    kept = sum(r.cached_bytes for blocks in mdt._log_blocks.values() for _, r in blocks if r is not None)
    assert kept > 0
    assert mdt.estimated_bytes() >= before + kept
