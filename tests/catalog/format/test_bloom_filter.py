"""Hudi's record-key bloom filters, decoded from the tables Hudi's Spark writer wrote: every key of
a base file tests positive against that file's filter (its Parquet footer's, and the metadata
table's copy), keys written elsewhere mostly test negative."""

from __future__ import annotations

import base64
import struct
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from catalog import HudiTable
from catalog.errors import CorruptTableError, UnsupportedTableError
from catalog.format.bloom_filter import (
    DYNAMIC_V0,
    PARQUET_FILTER_KEY,
    PARQUET_TYPE_CODE_KEY,
    SIMPLE,
    BloomFilter,
    jenkins_lookup3,
    parse_bloom_filter,
)
from catalog.listing.bloom_filters import base_file_filters
from catalog.plan.options import ReadOptions
from catalog.plan.planner import file_slices
from tests.data.factory.bloom_specs import bloom_specs
from tests.support.written import WrittenTable, written_tables

BLOOM_TABLES = [t for t in written_tables() if t.name in {s.name for s in bloom_specs()}]


def _footer_filter(path: Path) -> BloomFilter:
    meta = pq.read_metadata(path).metadata
    code = meta.get(PARQUET_TYPE_CODE_KEY.encode())
    return parse_bloom_filter(meta[PARQUET_FILTER_KEY.encode()], code.decode() if code else None, str(path))


def _base_files(base: str) -> list[Path]:
    return sorted(p for p in Path(base).rglob("*.parquet") if ".hoodie" not in p.relative_to(base).parts)


def test_the_bloom_tables_are_committed():
    assert {t.key for t in BLOOM_TABLES} >= {"0.15.0/cow_bloom_index", "1.2.0/cow_bloom_index",
                                             "0.15.0/mor_bloom_index", "1.2.0/mor_bloom_index"}


@pytest.mark.parametrize("table", BLOOM_TABLES, ids=lambda t: t.key)
def test_every_key_of_a_base_file_is_in_its_filters(written_table, table):
    base = written_table(table)
    files = _base_files(base)
    all_keys = {k for p in files for k in pq.read_table(p, columns=["_hoodie_record_key"]).column(0).to_pylist()}
    mdt = HudiTable.open(base).state.metadata_table
    assert mdt is not None
    in_mdt = base_file_filters(mdt, [(p.parent.name, p.name) for p in files])
    negatives = tests = 0
    for path in files:
        keys = set(pq.read_table(path, columns=["_hoodie_record_key"]).column(0).to_pylist())
        footer = _footer_filter(path)
        copies = [footer] + ([in_mdt[path.parent.name, path.name]] if (path.parent.name, path.name) in in_mdt else [])
        for bloom in copies:
            assert all(bloom.might_contain(k) for k in keys), path.name
            absent = all_keys - keys
            negatives += sum(not bloom.might_contain(k) for k in absent)
            tests += len(absent)
    # Hudi sizes its filters for one false positive in a billion: keys written elsewhere test negative
    assert tests > 0 and negatives >= 0.99 * tests
    # the latest base files all have their filter in the metadata table (cleaned ones may not)
    latest = {(fs.partition, fs.base_file.name) for fs in file_slices(HudiTable.open(base).state, ReadOptions())
              if fs.base_file}
    assert latest and latest <= set(in_mdt)


@pytest.mark.parametrize("table", [t for t in BLOOM_TABLES if t.name == "cow_bloom_index"], ids=lambda t: t.key)
def test_the_dynamic_filters_grew_rows(written_table, table):
    """``cow_bloom_index`` starts its DYNAMIC_V0 filters at 2 keys a row: files of more keys hold
    several rows (whose keys the test above finds)."""
    kinds: dict[str, int] = {}
    for path in _base_files(written_table(table)):
        bloom = _footer_filter(path)
        kinds[bloom.type_code] = max(kinds.get(bloom.type_code, 0), len(bloom.rows))
    assert kinds.get(DYNAMIC_V0, 0) >= 2


def test_an_expression_index_holds_each_files_column_values(written_table):
    """Hudi 1.0's ``CREATE INDEX ... USING bloom_filters(name)``: the same filters (large
    DYNAMIC_V0 ones, Hudi's default size), of the ``name`` values, keyed like the record-key ones."""
    base = written_table(WrittenTable("1.0.2", "cow_bloom_expression_index"))
    files = _base_files(base)
    names = {p: set(pq.read_table(p, columns=["name"]).column(0).to_pylist()) for p in files}
    mdt = HudiTable.open(base).state.metadata_table
    assert mdt is not None
    found = base_file_filters(mdt, [(p.parent.name, p.name) for p in files], "expr_index_idx_bloom_name")
    assert len(found) == len(files)
    every = set().union(*names.values())
    for path, held in names.items():
        bloom = found[path.parent.name, path.name]
        assert bloom.type_code == DYNAMIC_V0 and all(bloom.might_contain(n) for n in held)
        assert not any(bloom.might_contain(n) for n in every - held)


#: filters Hudi 1.2.0's own classes serialized (jshell on its Spark bundle) after adding ``JAVA_KEYS``:
#: ``BloomFilterFactory.createBloomFilter(50, 1e-6, 20, "SIMPLE")`` (Murmur), and an
#: ``InternalBloomFilter(1438, 20, Hash.JENKINS_HASH)`` written with its ``write``. Keys of
#: non-ASCII UTF-8 bytes reach the hashes' signed-byte tails.
JAVA_KEYS = ("é", "ключ", "日本語キー", "a\u00ff\u0080b", "x", "id0000000001")
JAVA_MURMUR = (
    "/////wAAABQBAAAFnoAQAAABgAAYAQAAAAAAAAQCMAAAIAAAAABAAACAADACAAAAACBCgBAAIAgBAAAAAIAAAEAAAAoAAABA"
    "ABAEEAAIABEAAiAAAAgIAggAAAAAAAAEARwAQCwACgQFAAAAACAAgEQACAkAAQQAgAAgBABAAAABQAAAAAEAAAgAoYQEEAEA"
    "CAAAEIIAAAAggDAAAAQEAACECBABgAlAAAFQAABACAAAAAQARAAARCQAAAAGQAABAA=="
)
JAVA_JENKINS = (
    "/////wAAABQAAAAFngAqAACxAACAEAAAgAgAYAAUEAAgAQAEAAAAgABAIgAAAAARAACAQAEEAgAAAAkAACBQaASAAAIAAABC"
    "AEhAIAAAAAADEAQBABAIEABABAAFJAMAgAAAIAAAAAAACQAAAAIAQAAAAAAAgAAQAEACAAAACAAAKAAQIAFACAQAgQAAAAAA"
    "ogAAwEkCAAAAKIMAAAAAAIAgQIAAAEIAAAAAABA0AAAAQAAAggCAAQAAAAAIAQABEA=="
)


@pytest.mark.parametrize("serialized", [JAVA_MURMUR, JAVA_JENKINS], ids=["murmur", "jenkins"])
def test_filters_hudis_classes_wrote_hold_their_keys(serialized):
    bloom = parse_bloom_filter(serialized, SIMPLE, "java")
    assert all(bloom.might_contain(k) for k in JAVA_KEYS)
    assert not any(bloom.might_contain(k) for k in ("ê", "ключи", "日本", *(f"k{i}" for i in range(200))))


def test_jenkins_matches_lookup3s_published_values():
    # the values lookup3.c's driver prints for hashlittle
    assert jenkins_lookup3(b"", 0) & 0xFFFFFFFF == 0xDEADBEEF
    assert jenkins_lookup3(b"Four score and seven years ago", 0) & 0xFFFFFFFF == 0x17770551
    assert jenkins_lookup3(b"Four score and seven years ago", 1) & 0xFFFFFFFF == 0xCD628161


def _simple(bits: bytes, vector_size: int, hashes: int = 3, hash_type: int = 1) -> bytes:
    return struct.pack(">iibi", -1, hashes, hash_type, vector_size) + bits


def test_a_filter_of_all_ones_holds_every_key_and_of_zeros_none():
    full = parse_bloom_filter(base64.b64encode(_simple(b"\xff" * 2, 16)), SIMPLE, "test")
    empty = parse_bloom_filter(base64.b64encode(_simple(b"\x00" * 2, 16)), None, "test")
    assert full.might_contain("id001") and not empty.might_contain("id001")
    assert empty.might_contain("")  # an empty key cannot be hashed: never ruled out


@pytest.mark.parametrize("data,error", [
    (_simple(b"\x00", 16), "runs past"),  # 16 bits need 2 bytes
    (_simple(b"\x00\x00\x00", 16), "after the bloom filter"),
    (struct.pack(">ii", -2, 3), "version -2"),
    (_simple(b"\x00\x00", 16, hash_type=7), "type 7"),
    (_simple(b"\x00\x00", 16, hashes=0), "0 hashes"),
    (_simple(b"", 0), "0 bits"),
    (struct.pack(">i", -1), "truncated"),
])
def test_malformed_filters_are_refused_by_name(data, error):
    with pytest.raises(CorruptTableError, match=error):
        parse_bloom_filter(base64.b64encode(data), SIMPLE, "test")


def test_a_dynamic_filter_with_no_rows_or_bad_base64_is_refused():
    header = struct.pack(">iibi", -1, 3, 1, 16) + struct.pack(">iii", 4, 0, 0)
    with pytest.raises(CorruptTableError, match="0 rows"):
        parse_bloom_filter(base64.b64encode(header), DYNAMIC_V0, "test")
    with pytest.raises(CorruptTableError, match="not Base64"):
        parse_bloom_filter(b"not base64!", SIMPLE, "test")


def test_an_unknown_filter_kind_is_refused_by_name():
    with pytest.raises(UnsupportedTableError, match="DYNAMIC_V1"):
        parse_bloom_filter(base64.b64encode(_simple(b"\x00\x00", 16)), "DYNAMIC_V1", "test")
