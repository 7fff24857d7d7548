"""Lance base files (Hudi 1.2): the footer facts the planner uses, the fsspec route for every
filesystem that is not the local one, a missing ``lance`` extra, damaged files and the splits.

Row equality with the ``hudi`` package on the six Lance fixtures lives in test_conformance_*.py.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import lance.file
import pytest

from catalog import HudiTable, MissingExtraError
from catalog.errors import CorruptTableError
from catalog.format.base_file import BaseFileRead
from catalog.format.lance import read_lance_footer
from catalog.plan.options import ReadOptions
from catalog.storage import Storage
from tests.support.compare import assert_same_rows
from tests.support.counting_fs import CountingFileSystem, register
from tests.support.fixtures import all_table_names, is_lance, is_mor

LANCE = [n for n in all_table_names() if is_lance(n)]
MOR_LANCE = next(n for n in LANCE if is_mor(n))
COW_LANCE = "sample_table/cow/v9_lance_txns_simple"


def _lance_files(path: str) -> list[Path]:
    return sorted(p for p in Path(path).rglob("*.lance") if ".hoodie" not in p.parts)


@pytest.mark.parametrize("name", LANCE)
def test_footer_row_count_is_pylances_in_three_small_reads(fixture_table, name):
    path = fixture_table(name)
    storage = Storage(path)
    files = _lance_files(path)
    assert files
    for file in files:
        storage.stats.reset()
        footer = read_lance_footer(storage, str(file.relative_to(path)), file.stat().st_size)
        assert footer.num_rows == lance.file.LanceFileReader(str(file)).num_rows()
        assert footer.version == (0, 3)  # Hudi 1.2.0 writes Lance file format 2.0
        stats = storage.stats.snapshot()
        # The file descriptor holds a bloom filter of ~430 KB: it is skipped, not read.
        assert stats["read"] == 3 and stats["bytes_read"] < 4096 + 64, stats


def test_a_registered_filesystem_sees_every_lance_read(fixture_table, monkeypatch, tmp_path):
    """A caller-registered filesystem serves every byte of every Lance file; pylance only ever
    opens private temporary copies, which are gone after the read."""
    register()
    path = fixture_table(MOR_LANCE)
    local = HudiTable.open(path)
    options = dict(columns=["rider", "fare", "city"], filters=[("fare", ">", 20.0)])
    expected = local.read(**options)
    opened: list[str] = []
    real = lance.file.LanceFileReader

    def spy(local: str, *args, **kwargs):
        opened.append(local)
        return real(local, *args, **kwargs)

    monkeypatch.setattr(lance.file, "LanceFileReader", spy)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    remote = HudiTable.open(f"countfs://{path}")
    CountingFileSystem.reset()
    assert_same_rows(remote.read(**options), expected, "countfs snapshot")
    calls = CountingFileSystem.reset()
    read_lance = {p for kind, p in calls if kind == "read" and p.endswith(".lance")}
    assert read_lance, calls
    assert opened and all(p.startswith(str(tmp_path)) for p in opened), opened
    assert not os.listdir(tmp_path)  # every temporary copy removed
    # Read-optimized and time travel take the same route.
    first = local.timeline.commits[0].requested_time
    assert_same_rows(remote.read(as_of=first), local.read(as_of=first), "countfs as_of")
    assert_same_rows(remote.read(query_type="read_optimized"), local.read(query_type="read_optimized"), "countfs ro")


def test_local_tables_hand_pylance_the_file_itself(fixture_table, monkeypatch):
    path = fixture_table(COW_LANCE)
    opened: list[str] = []
    real = lance.file.LanceFileReader
    monkeypatch.setattr(lance.file, "LanceFileReader", lambda p, *a, **k: opened.append(p) or real(p, *a, **k))
    table = HudiTable.open(path)
    rows = table.read(columns=["txn_id"])
    assert rows.num_rows > 0
    assert opened and all(p.startswith(path) and p.endswith(".lance") for p in opened)
    table.storage.stats.reset()
    table.read(columns=["txn_id"])
    assert table.storage.stats.snapshot().get("open", 0) >= 1  # still counted as requests


def test_a_missing_lance_extra_is_named(fixture_table, monkeypatch):
    path = fixture_table(COW_LANCE)
    opened_before = HudiTable.open(path)  # e.g. a server that opened it earlier
    monkeypatch.setitem(sys.modules, "lance", None)
    monkeypatch.setitem(sys.modules, "lance.file", None)
    with pytest.raises(MissingExtraError, match=r"Lance base files needs the 'lance' extra: pip install 'hudi-flight\[lance\]'"):
        HudiTable.open(path)
    with pytest.raises(MissingExtraError, match=r"hudi-flight\[lance\]"):
        opened_before.read()
    # Parquet tables need nothing of it.
    assert HudiTable.open(fixture_table("sample_table/cow/v8_nonpartitioned")).read().num_rows > 0


def _damaged_copy(fixture_table, tmp_path: Path, damage) -> tuple[str, Path]:
    path = tmp_path / "t"
    shutil.copytree(fixture_table(COW_LANCE), path)
    table = HudiTable.open(str(path))
    latest = {s.file_slice.base_file_path for s in table.scan(ReadOptions()).splits}
    victim = path / sorted(latest)[0]
    data = victim.read_bytes()
    victim.write_bytes(damage(data))
    return str(path), victim


@pytest.mark.parametrize("damage", [lambda b: b[:-100], lambda b: b"\0" * len(b)], ids=["truncated", "zeroed"])
def test_a_damaged_lance_file_is_a_clean_error_naming_it(fixture_table, tmp_path, damage):
    path, victim = _damaged_copy(fixture_table, tmp_path, damage)
    with pytest.raises(CorruptTableError) as err:
        HudiTable.open(path).read()
    message = str(err.value)
    assert victim.name in message and "Lance" in message
    assert ".rs:" not in message  # no trace of pylance's build machine


def test_a_lance_file_cleaned_after_planning_is_missing_not_corrupt(fixture_table, tmp_path):
    path, victim = _damaged_copy(fixture_table, tmp_path, lambda b: b)
    table = HudiTable.open(path)
    scan = table.scan(ReadOptions())
    victim.unlink()
    from catalog.read.split_reader import read_split

    with pytest.raises(FileNotFoundError, match="base file missing"):
        for split in scan.splits:
            list(read_split(scan.context, split))


@pytest.mark.parametrize("name", LANCE)
def test_one_split_per_lance_file_with_its_footer_rows(fixture_table, name):
    path = fixture_table(name)
    table = HudiTable.open(path)
    splits = list(table.scan(ReadOptions(query_type="read_optimized" if is_mor(name) else "snapshot")).splits)
    lance_splits = [s for s in splits if s.file_slice.base_file is not None]
    assert lance_splits
    for split in lance_splits:
        assert split.row_groups is None and split.start == 0 and split.length is None
        assert split.estimated_rows == lance.file.LanceFileReader(str(Path(path) / split.file_slice.base_file_path)).num_rows()
    if not is_mor(name):  # base files only: the estimates are exact
        assert sum(s.estimated_rows for s in splits) == table.read().num_rows


def test_count_reads_no_column(fixture_table):
    table = HudiTable.open(fixture_table(COW_LANCE))
    assert table.read(columns=[]).num_rows == table.read().num_rows > 0


def test_hudi_1_2_columns_in_a_lance_file(tmp_path):
    """VECTOR as Arrow-native fixed-size lists and VARIANT/BLOB structs come out in the table
    schema (docs/reading.md), with projection, absent columns and a row filter."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from catalog.format.avro import avro_to_arrow_schema
    from catalog.format.lance import read_lance
    from tests.catalog.format.test_hudi_types import BLOB, VARIANT, VECTOR_FLOAT_4, _table_schema

    schema = avro_to_arrow_schema(_table_schema(emb=VECTOR_FLOAT_4, v=VARIANT, doc=BLOB, added=VECTOR_FLOAT_4))
    written = pa.table({
        "id": pa.array([1, 2, 3], pa.int32()),
        "emb": pa.array([[1.0, 2.0, 3.0, 4.0], None, [0.5] * 4], pa.list_(pa.float32(), 4)),
        "v": pa.array([{"metadata": b"\x01", "value": b"\x0c\x01"}] * 3, schema.field("v").type),
        "doc": pa.array([{"type": "OUT_OF_LINE", "data": None, "reference": {
            "external_path": "s3://b/x.bin", "offset": 8, "length": 16, "managed": False}}] * 3,
            schema.field("doc").type),
    })
    with lance.file.LanceFileWriter(str(tmp_path / "f.lance")) as writer:
        writer.write_batch(written)
    wanted = pa.schema([schema.field(n) for n in ("emb", "id", "v", "doc", "added")])
    file = BaseFileRead("f.lance", wanted, filter=pc.field("id") >= 2)
    got = pa.Table.from_batches(list(read_lance(Storage(str(tmp_path)), file)), schema=wanted)
    assert got.column("id").to_pylist() == [2, 3]
    assert got.column("emb").to_pylist() == [None, [0.5] * 4]
    assert got.column("v").to_pylist() == [{"metadata": b"\x01", "value": b"\x0c\x01"}] * 2
    assert got.column("doc").to_pylist()[0]["reference"]["external_path"] == "s3://b/x.bin"
    assert got.column("added").null_count == 2  # a column the file lacks


def test_blob_descriptors_refuse_a_layout_they_do_not_know(tmp_path):
    """A BLOB whose pairs cannot be located exactly (here: a schema whose column count does not
    match the file's) is refused by name instead of guessed."""
    from types import SimpleNamespace

    import pyarrow as pa

    from catalog import UnsupportedTableError
    from catalog.format.lance_blob import blob_columns, blob_descriptors

    blob = pa.field("payload", pa.struct([("type", pa.string()), ("data", pa.large_binary()),
                                          ("reference", pa.struct([("external_path", pa.string())]))]),
                    metadata={b"hudi_type": b"BLOB"})
    schema = pa.schema([pa.field("id", pa.int32()), blob])
    assert blob_columns(schema) == ["payload"]
    metadata = SimpleNamespace(schema=schema, columns=[SimpleNamespace(pages=[])] * 3, num_rows=1)
    with pytest.raises(UnsupportedTableError, match="BLOB column 'payload'.*not supported"):
        blob_descriptors(str(tmp_path / "none.lance"), metadata, "payload")


def _lance_tables(fixture_table, written_table) -> list[str]:
    from tests.support.written import WrittenTable

    return [fixture_table(n) for n in LANCE] + [written_table(WrittenTable("1.2.0", n)) for n in ("cow_lance", "mor_lance")]


def test_projections_through_fsspec_fetch_only_what_they_read_and_read_it_right(fixture_table, written_table):
    """Each column alone, through a registered filesystem (the copy holds the file's metadata and
    that column's pages; the rest are zeros never read), equals the local read: on the six
    fixtures and the two Lance tables Hudi 1.2 wrote (VECTOR and BLOB columns)."""
    import pyarrow as pa

    register()
    for path in _lance_tables(fixture_table, written_table):
        local, remote = HudiTable.open(path), HudiTable.open(f"countfs://{path}")
        for column in local.schema.names:
            for query_type in ("snapshot", "read_optimized") if local.table_type == "MERGE_ON_READ" else ("snapshot",):
                expected = local.read(columns=[column], query_type=query_type).column(0).to_pylist()
                got = remote.read(columns=[column], query_type=query_type).column(0).to_pylist()
                if pa.types.is_struct(local.schema.field(column).type):  # BLOB descriptors name the file by its URL
                    got = [{**v, "reference": {**v["reference"], "external_path": v["reference"][
                        "external_path"].replace("countfs://", "file:")}} if v and v.get("reference") else v for v in got]
                assert sorted(map(repr, got)) == sorted(map(repr, expected)), (path, column, query_type)


def test_a_one_column_read_through_fsspec_fetches_that_columns_pages(tmp_path):
    import pyarrow as pa

    from catalog.format.lance import read_lance

    register()
    big = pa.table({"a": pa.array(range(200_000), pa.int64()), "b": pa.array([f"text-{i}" * 8 for i in range(200_000)])})
    # Lance file format 2.0, as Hudi 1.2 writes it (other versions are fetched whole)
    with lance.file.LanceFileWriter(str(tmp_path / "f.lance"), version="2.0") as writer:
        writer.write_batch(big)
    size = (tmp_path / "f.lance").stat().st_size
    storage = Storage(f"countfs://{tmp_path}")
    got = pa.Table.from_batches(list(read_lance(storage, BaseFileRead("f.lance", pa.schema([big.schema.field("a")])))))
    assert got.column("a").equals(big.column("a"))
    assert storage.stats.snapshot()["bytes_read"] < size // 4  # b's pages (most of the file) stay home
    storage.stats.reset()
    both = pa.Table.from_batches(list(read_lance(storage, BaseFileRead("f.lance", big.schema))))
    assert both.equals(big) and storage.stats.snapshot()["bytes_read"] >= size * 0.9
