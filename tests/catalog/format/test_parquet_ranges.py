"""Parquet reads over fsspec fetch column chunks, not files (catalog.format.parquet_ranges)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from catalog.errors import CorruptTableError
from catalog.format.base_file import BaseFileRead
from catalog.format.parquet import read_parquet
from catalog.format.parquet_ranges import SparseFile, chunk_ranges, coalesce, read_footer
from catalog.storage import Storage
from tests.support.counting_fs import CountingFileSystem, register

ROWS = 60_000


def _wide(path: Path) -> pa.Table:
    """17 columns (an ascending key, a string, 15 random doubles) in 4 row groups."""
    rng = np.random.default_rng(7)
    columns = {"key": pa.array(np.arange(ROWS)), "name": pa.array([f"n{i % 97}" for i in range(ROWS)])}
    columns.update({f"c{i:02d}": pa.array(rng.random(ROWS)) for i in range(15)})
    table = pa.table(columns)
    pq.write_table(table, path, row_group_size=ROWS // 4)
    return table


def _storage(tmp_path: Path) -> Storage:
    register()
    return Storage(f"countfs://{tmp_path}")


def test_coalesce_merges_small_holes_up_to_the_range_limit() -> None:
    assert coalesce([(95, 200), (0, 50), (60, 90)], hole=9) == [(0, 50), (60, 200)]
    assert coalesce([(0, 50), (40, 60), (60, 70)], hole=0) == [(0, 70)]  # overlapping and touching
    assert coalesce([(0, 50), (55, 100), (105, 150)], hole=10, limit=100) == [(0, 100), (105, 150)]
    assert coalesce([(5, 5), (0, 3)]) == [(0, 3)]  # empty ranges fetch nothing


def test_a_projection_with_a_filter_fetches_about_its_column_chunks(tmp_path: Path) -> None:
    table = _wide(tmp_path / "f.parquet")
    storage = _storage(tmp_path)
    size = (tmp_path / "f.parquet").stat().st_size
    schema = pa.schema([table.schema.field("key"), table.schema.field("c03")])
    expr = pc.field("key") >= ROWS // 2  # the statistics keep the last two row groups
    CountingFileSystem.reset()
    got = pa.Table.from_batches(
        read_parquet(storage, BaseFileRead("f.parquet", schema, size=size, filter=expr, filter_columns=("key",)),
                     native=False), schema
    )
    calls = CountingFileSystem.reset()

    assert got.equals(table.select(["key", "c03"]).filter(expr))
    metadata = pq.read_metadata(tmp_path / "f.parquet")
    needed = sum(e - s for s, e in chunk_ranges(metadata, [2, 3], ["key", "c03"])) + metadata.serialized_size + 8
    assert needed * 8 < size  # the point: a small part of the file
    assert storage.stats.bytes_read <= 2 * needed
    assert [kind for kind, _ in calls] == ["read"] * len(calls)  # no open, no HEAD: the size was known
    assert len(calls) <= 1 + 4  # the tail, then at most one range per chunk


def test_bytes_outside_the_computed_ranges_are_fetched_when_read(tmp_path: Path) -> None:
    """A wrong range costs a request, never a wrong answer."""
    _wide(tmp_path / "f.parquet")
    size = (tmp_path / "f.parquet").stat().st_size
    data = (tmp_path / "f.parquet").read_bytes()
    fetched: list[tuple[int, int]] = []

    def fetch(start: int, end: int) -> bytes:
        fetched.append((start, end))
        return data[start:end]

    file = SparseFile(size, fetch)
    file.hold(size - 100, data[-100:], size)
    got = pq.ParquetFile(file, pre_buffer=False).read(columns=["c07"], use_threads=False)
    assert got.column("c07").equals(pq.read_table(tmp_path / "f.parquet", columns=["c07"]).column("c07"))
    assert file.misses == len(fetched) > 0


def test_a_rewritten_file_of_another_size_is_refused_not_mixed(tmp_path: Path) -> None:
    """Base files are immutable by Hudi's contract; one rewritten under its name with a smaller
    size than listed is detected (its tail comes back short) and fails naming the file. A rewrite
    of the same size reads the new bytes (nothing here keeps bytes across reads)."""
    path = tmp_path / "f.parquet"
    _wide(path)
    storage = _storage(tmp_path)
    listed = path.stat().st_size
    schema = pa.schema([pa.field("key", pa.int64())])
    pq.write_table(pa.table({"key": pa.array([1, 2, 3])}), path)  # shorter now
    with pytest.raises(CorruptTableError, match="changed since it was listed"):
        list(read_parquet(storage, BaseFileRead("f.parquet", schema, size=listed), native=False))

    same = pa.table({"key": pa.array([4, 5, 6])})
    pq.write_table(same, path)
    got = pa.Table.from_batches(read_parquet(storage, BaseFileRead("f.parquet", schema, size=path.stat().st_size), native=False), schema)
    assert got.equals(same)


def test_a_footer_is_one_ranged_read_of_the_tail(tmp_path: Path) -> None:
    _wide(tmp_path / "f.parquet")
    storage = _storage(tmp_path)
    CountingFileSystem.reset()
    metadata = read_footer(storage, "f.parquet", (tmp_path / "f.parquet").stat().st_size)
    assert metadata.num_row_groups == 4 and metadata.num_columns == 17
    assert [kind for kind, _ in CountingFileSystem.reset()] == ["read"]


def test_a_planned_read_takes_the_footer_from_the_planners_cache(generated_table, tmp_path):
    """Planning whole files reads no footer; a read given the planner's footer cache reads each
    footer once into it, so reading one column of each one-row-group file again is one ranged read per file
    (its column chunk), not a second read of its tail."""
    import shutil

    from catalog.format.caches import ReadCaches
    from catalog.plan.options import ReadOptions
    from catalog.plan.planner import plan
    from catalog.plan.splits import FooterCache
    from catalog.read.split_reader import read_splits
    from catalog.state import TableState
    from hudi_generator.generator import GeneratorSpec

    shutil.copytree(generated_table(GeneratorSpec(rows=200, partitions=2)), tmp_path / "t")
    storage = _storage(tmp_path / "t")
    footers = FooterCache()
    state = TableState.load(storage)
    CountingFileSystem.reset()
    scan = plan(state, ReadOptions(columns=["fare"]), footers=footers)
    splits = list(scan.splits)
    assert not [p for _, p in CountingFileSystem.reset() if p.endswith(".parquet")] and len(splits) == 2
    for tails in (1, 0):  # the first read reads each footer, the second takes it from the cache
        rows = pa.Table.from_batches(list(read_splits(scan.context, splits, caches=ReadCaches(footers))), scan.schema)
        reads = [p for kind, p in CountingFileSystem.reset() if p.endswith(".parquet")]
        assert rows.num_rows == 200 and len(set(reads)) == 2
        assert len(reads) == 2 * (1 + tails)  # per file: its column chunk (and its tail, once)


def test_the_next_window_is_fetched_on_another_thread_while_this_one_decodes(tmp_path, monkeypatch):
    """Row groups read window by window: the first window's chunks on the reading thread, the
    others' on the prefetch thread (issued before the previous window is decoded); same rows."""
    import threading

    import catalog.format.parquet_ranges as ranges
    from catalog.storage import add_request_listener, remove_request_listener

    table = _wide(tmp_path / "f.parquet")
    storage = _storage(tmp_path)
    monkeypatch.setattr(ranges, "WINDOW_BYTES", 1)  # one row group per window
    schema = pa.schema([table.schema.field("c01")])
    readers: list[str] = []

    def who(kind: str, nbytes: int) -> None:
        readers.append(threading.current_thread().name)

    add_request_listener(who)
    try:
        got = pa.Table.from_batches(
            read_parquet(storage, BaseFileRead("f.parquet", schema, size=(tmp_path / "f.parquet").stat().st_size),
                         native=False), schema
        )
    finally:
        remove_request_listener(who)
    assert got.equals(table.select(["c01"]))
    here = threading.current_thread().name
    assert readers[:2] == [here, here]  # the tail, then the first window
    assert len(readers) == 5 and all(name.startswith("hudi-parquet-prefetch") for name in readers[2:])
