"""Projection of nested fields: ``columns`` entries that are dotted paths into structs keep only
the named fields, and a Parquet read decodes only their leaves (catalog.plan.projection,
catalog.format.parquet.leaf_paths)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from catalog import HudiTable
from catalog.errors import ColumnNotFoundError
from catalog.format.base_file import BaseFileRead
from catalog.format.parquet import cast_array, leaf_paths, read_parquet
from catalog.format.parquet_ranges import FOOTER_GUESS, chunk_ranges
from catalog.plan.projection import output_schema
from catalog.storage import Storage
from tests.support.counting_fs import register

INNER = pa.struct([pa.field("d", pa.float64()), pa.field("e", pa.string())])
S = pa.struct([pa.field("a", pa.int64()), pa.field("b", pa.string()), pa.field("c", INNER)])
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("s", S), pa.field("x.y", pa.string()),
                    pa.field("l", pa.list_(S))], metadata={b"k": b"v"})


def test_paths_keep_the_named_fields_in_table_order():
    got = output_schema(SCHEMA, ["s.c.e", "id", "s.a"])
    assert got.names == ["s", "id"]  # top-level columns in the order first named
    assert got.field("s").type == pa.struct([S.field("a"), pa.field("c", pa.struct([INNER.field("e")]))])
    assert got.metadata == SCHEMA.metadata


def test_a_whole_field_absorbs_paths_under_it():
    assert output_schema(SCHEMA, ["s.c", "s.c.d"]).field("s").type == pa.struct([S.field("c")])
    assert output_schema(SCHEMA, ["s.a", "s"]).field("s").type == S
    assert output_schema(SCHEMA, ["s", "s.a"]).field("s").type == S


def test_a_dotted_top_level_name_is_taken_first():
    assert output_schema(SCHEMA, ["x.y"]).names == ["x.y"]


@pytest.mark.parametrize("column", ["s.z", "nope", "s.a.b", "l.a", "s..a", "s."])
def test_a_path_naming_no_field_is_refused_by_name(column):
    with pytest.raises(ColumnNotFoundError, match=repr(column).replace(".", r"\.")):
        output_schema(SCHEMA, ["id", column])


def test_leaf_paths_of_a_projected_struct():
    pruned = output_schema(SCHEMA, ["s.a", "s.c.e"]).field("s").type
    assert leaf_paths(pruned, S, "s") == ["s.a", "s.c.e"]
    assert leaf_paths(S, S, "s") == ["s"]  # whole
    assert leaf_paths(pa.int64(), pa.int64(), "id") == ["id"]
    older = pa.struct([S.field("b")])  # a file written before a and c were added
    assert leaf_paths(pruned, older, "s") == ["s.b"]  # none of the wanted is stored: the struct's nulls


def _file(tmp_path: Path) -> tuple[pa.Table, int]:
    rows = 20_000
    structs = [None if i % 7 == 0 else {"a": i, "b": os.urandom(40).hex(),
                                        "c": None if i % 5 == 0 else {"d": i / 2, "e": f"e{i}"}} for i in range(rows)]
    table = pa.table({"id": pa.array(range(rows), pa.int64()), "s": pa.array(structs, S)})
    pq.write_table(table, tmp_path / "f.parquet", row_group_size=5000, compression="none")
    return table, (tmp_path / "f.parquet").stat().st_size


@pytest.mark.parametrize("arrow_fs", [True, False], ids=["local", "fsspec"])
def test_a_parquet_read_decodes_only_the_named_leaves_and_keeps_struct_nulls(tmp_path, arrow_fs):
    table, size = _file(tmp_path)
    schema = output_schema(table.schema, ["id", "s.c.e", "s.a"])
    register()
    storage = Storage(str(tmp_path) if arrow_fs else f"countfs://{tmp_path}")
    assert (storage.arrow_filesystem() is not None) == arrow_fs
    file = BaseFileRead("f.parquet", schema, size=size, nested=True)
    got = pa.Table.from_batches(list(read_parquet(storage, file)), schema)
    expected = pa.table({"id": table["id"], "s": cast_array(table["s"], schema.field("s").type)})
    assert got.equals(expected)
    assert got["s"].null_count == table["s"].null_count  # the struct's own nulls, not its leaves'
    if not arrow_fs:  # only the leaves' chunks were fetched, and the tail (the footer): not b's random strings
        metadata = pq.read_metadata(tmp_path / "f.parquet")
        groups = range(metadata.num_row_groups)
        needed = sum(e - s for s, e in chunk_ranges(metadata, groups, ["id", "s.a", "s.c.e"])) + FOOTER_GUESS
        assert storage.stats.bytes_read <= needed < size / 2


def test_a_table_read_projects_nested_fields_cow_and_mor(fixture_table):
    """Hudi-written COW and MOR (log files) tables: the projected read equals the whole column cast
    to the projected type, row for row."""
    for name in ("sample_table/cow/v6_nonpartitioned", "sample_table/mor/parquet/v6_nonpartitioned"):
        table = HudiTable.open(fixture_table(name))
        columns = ["_hoodie_record_key", "structField.child_struct.child_field2", "structField.field1"]
        got = table.read(columns=columns).sort_by("_hoodie_record_key")
        full = table.read(columns=["_hoodie_record_key", "structField"]).sort_by("_hoodie_record_key")
        kept = got.schema.field("structField").type
        assert [f.name for f in kept] == ["field1", "child_struct"]
        assert [f.name for f in kept.field("child_struct").type] == ["child_field2"]
        assert got.num_rows > 0
        assert got["structField"].equals(cast_array(full["structField"], kept)), name
