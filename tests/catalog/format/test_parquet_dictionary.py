"""Low-cardinality string columns are decoded as dictionaries and handed on in their table type."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from catalog.format import parquet
from catalog.format.base_file import BaseFileRead
from catalog.format.parquet import dictionary_columns, read_parquet
from catalog.storage import Storage

ROWS = 40_000
GROUP = 12_000
SCHEMA = pa.schema([
    ("commit_time", pa.string()),
    ("key", pa.string()),
    ("city", pa.large_string()),
    ("blob", pa.binary()),
    ("n", pa.int64()),
    ("nested", pa.struct([("zone", pa.string())])),
])


def _write(path: Path) -> pa.Table:
    """Row groups of ``GROUP`` rows (not a divisor of the batch size), each with its own dictionary."""
    table = pa.table({
        "commit_time": [f"2025010100000{i // GROUP}" for i in range(ROWS)],
        "key": [f"key-{i:08d}" for i in range(ROWS)],
        "city": [None if i % 7 == 0 else f"city-{i % 5}-{i // GROUP}" for i in range(ROWS)],
        "blob": [bytes([i % 3]) * 4 for i in range(ROWS)],
        "n": list(range(ROWS)),
        "nested": [{"zone": f"z{i % 2}"} for i in range(ROWS)],
    }, schema=SCHEMA)
    pq.write_table(table, path, row_group_size=GROUP)
    return table


def test_only_small_dictionaries_are_chosen(tmp_path: Path) -> None:
    _write(tmp_path / "f.parquet")
    meta = pq.read_metadata(tmp_path / "f.parquet")
    columns = SCHEMA.names
    assert dictionary_columns(meta, SCHEMA, columns, None) == ["commit_time", "city", "blob"]
    assert dictionary_columns(meta, SCHEMA, columns, [0, 1, 2], exclude=["city"]) == ["commit_time", "blob"]
    assert dictionary_columns(meta, SCHEMA, columns, [3]) == []  # 4,000 rows: not worth a second open
    assert dictionary_columns(meta, SCHEMA, columns, []) == []


def test_unencoded_columns_stay_dense(tmp_path: Path) -> None:
    table = _write_plain(tmp_path / "plain.parquet")
    assert dictionary_columns(pq.read_metadata(tmp_path / "plain.parquet"), table.schema, table.schema.names, None) == []


def _write_plain(path: Path) -> pa.Table:
    table = pa.table({"city": ["a", "b"] * 20_000})
    pq.write_table(table, path, use_dictionary=False)
    return table


@pytest.mark.parametrize("native", [True, False], ids=["arrow-filesystem", "fsspec"])
@pytest.mark.parametrize("batch_size", [10_000, 65_536])
def test_rows_and_types_are_those_of_dense_decoding(tmp_path: Path, native: bool, batch_size: int) -> None:
    expected = _write(tmp_path / "f.parquet")
    storage = Storage(str(tmp_path))
    formats = parquet._dictionary_format.cache_info()
    batches = list(read_parquet(storage, BaseFileRead("f.parquet", SCHEMA), native=native, batch_size=batch_size))
    if native:  # the dictionary decoding was used
        assert parquet._dictionary_format.cache_info().hits + parquet._dictionary_format.cache_info().misses > (
            formats.hits + formats.misses)
    assert all(b.schema.equals(SCHEMA) for b in batches)
    assert pa.Table.from_batches(batches, SCHEMA).equals(expected)
    some = list(read_parquet(storage, BaseFileRead("f.parquet", SCHEMA, row_groups=(0, 2, 3)), native=native,
                             batch_size=batch_size))
    assert pa.Table.from_batches(some, SCHEMA).equals(pa.concat_tables([expected.slice(0, GROUP),
                                                                        expected.slice(2 * GROUP)]))


@pytest.mark.parametrize("native", [True, False], ids=["arrow-filesystem", "fsspec"])
def test_a_filter_on_a_dictionary_candidate_is_exact(tmp_path: Path, native: bool) -> None:
    expected = _write(tmp_path / "f.parquet")
    storage = Storage(str(tmp_path))
    expr = pc.field("city") == "city-1-2"
    file = BaseFileRead("f.parquet", SCHEMA, filter=expr, filter_columns=("city",))
    batches = list(read_parquet(storage, file, native=native))
    got = pa.Table.from_batches(batches, SCHEMA)
    assert got.schema.equals(SCHEMA)
    assert got.equals(expected.filter(expr)) and got.num_rows > 0
