"""Schema evolution on read: generated tables whose schema history (``.hoodie/.schema`` and
``latest_schema``) renames, adds, promotes and drops columns; old files are read by field id."""

from __future__ import annotations

import pickle
from pathlib import Path

import pyarrow as pa
import pytest

from catalog import HudiTable
from catalog.table.internal_schema import (
    InternalField,
    InternalSchema,
    SchemaHistory,
    file_columns,
    rename_columns,
    rename_nested,
)
from hudi_generator.generator import COPY_ON_WRITE, MERGE_ON_READ, GeneratorSpec, expected_table
from tests.support.compare import assert_same_rows, hudi_read


def _spec(table_type: str, **kw) -> GeneratorSpec:
    return GeneratorSpec(rows=120, partitions=2, files_per_partition=8, commits=5, evolve_schema=True,
                         table_type=table_type, update_fraction=0.05, delete_fraction=0.02, workers=1, **kw)


def _schema(version: str, *fields: tuple) -> InternalSchema:
    def field(spec: tuple) -> InternalField:
        fid, name, *nested = spec
        return InternalField(fid, name, tuple(field(n) for n in nested[0]) if nested else None)

    return InternalSchema(version, tuple(field(f) for f in fields))


def test_column_map_by_id():
    v1 = _schema("1", (0, "a"), (1, "b"), (2, "c"))
    v2 = _schema("2", (0, "a"), (1, "b2"), (3, "c"))  # b renamed; c dropped and re-added
    history = SchemaHistory.of([v1], v2)
    assert history.column_map("1") == {"a": ("a", None), "b": ("b2", None), "c": (None, None)}
    assert history.column_map("2") is None
    assert history.column_map("0") == history.column_map("1")  # older than every version: the oldest
    assert history.as_of("1").column_map("2") == {"a": ("a", None), "b2": ("b", None), "c": (None, None)}
    mapping = history.column_map("1")
    assert file_columns(["a", "b2", "c"], mapping) == {"a": "a", "b2": "b"}
    t = rename_columns(pa.table({"a": [1], "b": [2], "c": [3]}), mapping)
    assert t.column_names == ["a", "b2"]
    assert pickle.loads(pickle.dumps(history)) == history


def test_nested_fields_map_by_id():
    """A nested field renamed, one dropped and another added under the dropped one's name: matched
    by id at every depth, never by name."""
    v1 = _schema("1", (0, "k"), (1, "s", ((2, "x"), (3, "y"), (4, "t", ((5, "deep"),)))))
    v2 = _schema("2", (0, "k"), (1, "s", ((2, "x2"), (6, "y"), (4, "t", ((5, "deeper"),)))))
    mapping = SchemaHistory.of([v1], v2).column_map("1")
    assert mapping["s"] == ("s", {"x": ("x2", None), "y": (None, None), "t": ("t", {"deep": ("deeper", None)})})
    struct = pa.StructArray.from_arrays(
        [pa.array([1.0, None]), pa.array(["old", "old"]),
         pa.StructArray.from_arrays([pa.array([7, 8])], names=["deep"])],
        names=["x", "y", "t"], mask=pa.array([False, True]))
    t = rename_columns(pa.table({"k": ["a", "b"], "s": struct}), mapping)
    assert t.schema.field("s").type == pa.struct([("x2", pa.float64()), ("t", pa.struct([("deeper", pa.int64())]))])
    assert t.column("s").to_pylist() == [{"x2": 1.0, "t": {"deeper": 7}}, None]
    batch = rename_nested(pa.table({"k": ["a", "b"], "s": struct}).to_batches()[0], mapping)
    assert batch.schema.field("s").type == t.schema.field("s").type


@pytest.mark.parametrize("table_type", [COPY_ON_WRITE, MERGE_ON_READ])
def test_time_travel_at_every_commit(generated_table, table_type):
    spec = _spec(table_type)
    table = HudiTable.open(generated_table(spec))
    assert table.state.schema_history is not None
    for k, (requested, _) in enumerate(spec.instants(), start=1):
        expected = expected_table(spec, as_of=k)
        ours = table.read(as_of=requested)
        # time travel returns the columns of that commit's schema (as Java does)
        assert [c for c in ours.column_names if not c.startswith("_hoodie")] == expected.column_names, k
        assert_same_rows(ours.select(expected.column_names), expected, f"as_of commit {k}")


@pytest.mark.parametrize("table_type", [COPY_ON_WRITE, MERGE_ON_READ])
def test_incremental_between_consecutive_commits(generated_table, table_type):
    spec = _spec(table_type)
    table = HudiTable.open(generated_table(spec))
    latest = expected_table(spec).column_names
    times = spec.instants()
    for k in range(2, spec.commits + 1):
        ours = table.read(columns=latest, query_type="incremental", start=times[k - 2][1], end=times[k - 1][1])
        expected = expected_table(spec, since=k - 1, as_of=k)
        # incremental reads use the latest schema: columns added later are null, dropped ones gone
        for name in latest:
            if name not in expected.column_names:
                expected = expected.append_column(name, pa.nulls(expected.num_rows, ours.schema.field(name).type))
        # the generator's rows are in the types of the commit that wrote them, the read's in the
        # latest schema's (a promoted int, a nested field swapped): compared in the latest types
        assert_same_rows(ours, expected.select(latest), f"incremental into commit {k}", exact_types=False)


def test_filters_on_renamed_and_added_columns(generated_table):
    spec = _spec(COPY_ON_WRITE)
    table = HudiTable.open(generated_table(spec))
    expected = expected_table(spec)
    ours = table.read(columns=expected.column_names, filters=[("driver_name", "is not null"), ("tip", "is null")])
    mask = pa.compute.and_(pa.compute.is_valid(expected.column("driver_name")), pa.compute.is_null(expected.column("tip")))
    assert_same_rows(ours, expected.filter(mask), "filters")


def test_hudi_package_on_evolved_tables(generated_table):
    """The ``hudi`` package (hudi-rs) agrees on the latest copy-on-write snapshot (renamed, added and
    dropped columns of old files included). It departs from Java elsewhere, pinned here: time travel
    returns the latest schema's columns (Java and ours: the schema of that commit), and merge-on-read
    reads fail on the evolved columns (the promoted one or the nested record that lost a field)."""
    spec = _spec(COPY_ON_WRITE, metadata_table=False)
    cow = generated_table(spec)
    expected = expected_table(spec)
    ours = HudiTable.open(cow).read(columns=expected.column_names)
    assert_same_rows(ours, hudi_read(cow, columns=expected.column_names), "hudi latest snapshot")
    assert_same_rows(ours, expected, "ours on the same table")
    first = spec.instants()[0][0]
    theirs = hudi_read(cow, as_of=first)
    assert theirs is not None and "tip" in theirs.column_names and "rider" not in theirs.column_names
    assert "rider" in HudiTable.open(cow).read(as_of=first).column_names
    mor = generated_table(_spec(MERGE_ON_READ, metadata_table=False))
    with pytest.raises(Exception, match="trip_count|location"):
        hudi_read(mor)


def test_history_named_with_its_completion_time(generated_copy):
    """Table version 8+ names the history ``<requested>_<completed>.schemacommit`` (Hudi 1.x): it
    is found as the version 6 name ``<requested>.schemacommit`` is, so old files still map by id."""
    spec = _spec(COPY_ON_WRITE)
    path = Path(generated_copy(spec))
    before = HudiTable.open(str(path)).read()
    history = sorted((path / ".hoodie" / ".schema").glob("*.schemacommit"))
    assert history
    for file in history:
        file.rename(file.with_name(f"{file.stem}_{int(file.stem) + 1}.schemacommit"))
    table = HudiTable.open(str(path))
    assert table.state.schema_history is not None and len(table.state.schema_history.versions) > 1
    assert_same_rows(table.read(), before, "history named <requested>_<completed>")
