"""Tables written by Hudi's own Spark writer, read by us, compared with what Hudi's Spark datasource
answered for the same query (``tests/data/tables``, made by ``make tables``; no Java needed here).

Every stored query is checked: snapshot, read-optimized, time travel to each instant, incremental
ranges. Hudi 1.2's Lance tables (VECTOR and BLOB columns) are compared the same way, BLOB
descriptors with their ``external_path`` taken relative to the table (Hudi names the base file
where the writer put it). CDC queries are compared in ``tests/catalog/test_cdc.py``.
"""

from __future__ import annotations

import contextlib
import json
import re
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator
from urllib.parse import unquote

import adbc_driver_flightsql.dbapi as adbc
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight
import pytest

from catalog import HudiTable, UnsupportedTableError
from catalog.errors import MetadataTableFallbackWarning
from catalog.format.hudi_types import BLOB_FIELDS, is_vector
from catalog.table.bootstrap import METADATA_BOOTSTRAP_INSTANT
from tests.catalog.test_hudi_written_unread import unread_by_hudi
from tests.data.factory.archive import Query, read_result
from tests.data.factory.oracle import SCHEMA_ON_READ
from tests.data.factory.specs import BASIC_SCHEMA, CDC_MODES, RELEASES, TABLE_VERSIONS, Write, row, specs_for
from tests.support.compare import assert_same_rows, hudi_read, rows
from tests.support.planning import planned_partitions
from tests.support.servers import serving_tables
from tests.support.written import WRITTEN_DIR, WrittenTable, base_file_rows, written_queries, written_tables

QUERIES = [(t, q) for t, q in written_queries() if q.query_type != "cdc"]  # CDC: test_cdc.py
#: ``release/name:query type`` -> the error of a Hudi reader bug: Hudi refuses queries we answer,
#: checked against what Hudi's own reads and the stored files say (``test_where_hudi_fails_we_answer``)
HUDI_READ_BUGS = {
    # HUDI-7709: Hudi 0.15 (and 0.13) puts the partition path (a string) in the long ``ts`` column of
    # a table partitioned by the timestamp key generator, and its read-optimized reader fails on the cast
    "0.13.1/mor_keygen_timestamp:read_optimized": "ClassCastException: class java.lang.Long cannot be cast",
    "0.15.0/mor_keygen_timestamp:read_optimized": "ClassCastException: class java.lang.Long cannot be cast",
    # Hudi 0.15 reads a merge-on-read instant older than the first internal schema (schema on read)
    # with the latest schema by name: its time travel fails on the renamed column (see
    # ``BEFORE_SCHEMA_HISTORY`` for its incremental query)
    "0.15.0/mor_schema_evolution:snapshot": "cannot prune col: name which does not exist in hudi table",
    # Hudi 0.15's incremental query of the range holding only the deletes an ``AWSDmsAvroPayload``
    # write marked (``Op`` = ``D``) fails on the empty record each delete merges to
    "0.15.0/mor_payload_aws_dms:incremental": "NoSuchElementException: No value present in Option",
}
#: tables whose incremental query ending at the first commit (older than the first internal schema)
#: Hudi answers with the renamed columns null (by name, as above); checked against Hudi's time
#: travel to a later instant with the same rows instead (``_same_rows_later``)
BEFORE_SCHEMA_HISTORY = {"0.13.1/mor_schema_evolution", "0.15.0/mor_schema_evolution"}
#: the table whose every query reaching its delete Hudi 0.15's Spark-native merger
#: (``HoodieSparkRecordMerger``) fails: ``test_hudi_0_15_spark_merger_fails_after_a_delete``
SPARK_MERGER_AFTER_DELETE = "0.15.0/mor_spark_record_merger"
#: queries Hudi refused on a table we read (Lance tables are refused whole, CDC belongs to its feature)
#: (tables Hudi writes but cannot read at all are checked against the writer's input instead:
#: ``test_hudi_written_unread.py``)
REFUSED = [(t, q) for t in written_tables() for q in t.manifest().queries
           if q.error is not None and q.query_type != "cdc" and "lance" not in t.manifest().features
           and f"{t.key}:{q.query_type}" not in HUDI_READ_BUGS and t.key != SPARK_MERGER_AFTER_DELETE
           and not unread_by_hudi(q.error)]
BUGGED = [(t, q) for t in written_tables() for q in t.manifest().queries
          if q.error is not None and f"{t.key}:{q.query_type}" in HUDI_READ_BUGS]
SNAPSHOTS = [(t, q) for t, q in QUERIES if q.name == "snapshot"]

#: tables whose metadata table the reader cannot use, so it plans by listing storage and warns
#: (MetadataTableFallbackWarning): after a savepoint restore Hudi's metadata table keeps a
#: deltacommit of an instant the restore removed; Hudi 0.15's rollback leaves a metadata log file
#: without the block of its deltacommit
FALLS_BACK = {"0.15.0/cow_savepoint_restore", "1.0.2/cow_savepoint_restore", "1.1.1/cow_savepoint_restore",
              "1.2.0/cow_savepoint_restore", "0.15.0/mor_rollback"}


@contextlib.contextmanager
def _fallback_expected_of(table: WrittenTable) -> Iterator[None]:
    """Planning by storage listing is said (warned) for the FALLS_BACK tables only; other warnings
    pass through."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", MetadataTableFallbackWarning)
        yield
    fell_back = [str(w.message) for w in caught if issubclass(w.category, MetadataTableFallbackWarning)]
    for w in caught:
        if not issubclass(w.category, MetadataTableFallbackWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    assert not fell_back or table.key in FALLS_BACK, fell_back


def _id(case: tuple[WrittenTable, Query]) -> str:
    table, query = case
    return f"{table.key}:{query.name}"


def test_the_factory_tables_are_committed():
    """Every release has its core and CDC tables, 1.2.0 its Lance tables, no table is both
    written and listed as refused, and every spec of the factory's matrix is one or the other."""
    keys = {t.key for t in written_tables()}
    core = {"cow_core", "mor_core"} | {f"{p}_cdc_{m.lower()}" for p in ("cow", "mor") for m in CDC_MODES}
    for release in RELEASES:
        assert {f"{release}/{name}" for name in core} <= keys, release
        refused = json.loads((WRITTEN_DIR / release / "refused.json").read_text())
        assert not {f"{release}/{name}" for name in refused} & keys, release
        written = {k.split("/", 1)[1] for k in keys if k.startswith(f"{release}/")}
        assert {s.name for s in specs_for(release)} == written | set(refused), release
    assert {"1.2.0/cow_lance", "1.2.0/mor_lance"} <= keys


def test_schema_on_read_tables_were_asked_with_schema_on_read():
    """Hudi matches columns by name unless the read enables schema on read too: the stored answers
    of every schema-evolution table come from reads that enabled it."""
    evolved = [t for t in written_tables() if "schema_evolution" in t.manifest().features]
    assert evolved
    for table in evolved:
        for query in table.manifest().queries:
            assert SCHEMA_ON_READ.items() <= query.spark_options.items(), (table.key, query.name)


@pytest.mark.parametrize("case", QUERIES, ids=_id)
def test_reads_equal_hudi(written_table, case):
    table, query = case
    manifest = table.manifest()
    path = written_table(table)
    expected = read_result(table.expected, query)
    what = f"{table.key} {query.name} {query.read_kwargs()}"
    try:
        with _fallback_expected_of(table):
            ours = HudiTable.open(path).read(**_as_hudi_read_it(table, query))
    except UnsupportedTableError as refused:
        # a feature we refuse by name (listed in OUR_REFUSALS) instead of answering wrongly
        assert any(f in manifest.features and any(text in str(refused) for text in texts)
                   for f, texts in OUR_REFUSALS.items()), refused
        return
    if _hudi_1_0_scanned_the_table(table, query, expected):
        expected = _incremental_from_hudi_reads(table, path, query)
        with _fallback_expected_of(table):
            ours = HudiTable.open(path).read(**query.read_kwargs())  # that answer means (start, end]
    if table.key in BEFORE_SCHEMA_HISTORY and query.query_type == "incremental" and query.end == manifest.instants[0]["completed"]:
        expected = _in_range(table, _stored(table, f"as_of_{_same_rows_later(table, query.end)}"), query.start, query.end)
    expected = _in_order(table, expected, ours.column_names)
    if _only_log_compaction(table, path, query):
        expected = expected.slice(0, 0)  # Hudi 1.1's legacy log scan: pinned below
    if _hudi_0_15_drops_bootstrap_data(table, query):
        expected = _with_data_of(expected, ours)
    expected = _dropped_partition_values_from_paths(table, query, path, expected)
    expected = _decoded_partition_values(table, query, expected)
    ours, expected = _without_partition_path_values(table, query, path, ours, expected)
    ours, expected = _vector_and_blob_types_alike(ours, expected, table)
    assert_same_rows(_blob_paths_in_table(ours, table), _blob_paths_in_table(expected, table), what)


#: the words of our refusal of a merge we do not carry: a payload class of its own (table versions
#: 5, 6 and 8; table version 9 records such payloads as a merge mode and partial update mode, which
#: we read)
_CUSTOM_MERGE = ("custom record merge mode / payload is not supported",)
#: table feature -> the words of our reader's refusal of some of its queries (never wrong rows)
OUR_REFUSALS = {"custom_payload": _CUSTOM_MERGE, "payload_partial_update": _CUSTOM_MERGE}


#: Hudi releases whose Spark reader moves partition columns to the end of some answers
PARTITION_COLUMNS_LAST_RELEASES = ("0.13.1", "0.15.0")


def _in_order(table: WrittenTable, expected: pa.Table, names: list[str]) -> pa.Table:
    """Hudi 0.13's and 0.15's Spark readers return partition columns last in copy-on-write and
    read-optimized answers; we (like Hudi 1.x and the ``hudi`` package) keep the table schema's order. The same
    columns are compared in our order; ``test_hudi_0_13_and_0_15_put_partition_columns_last`` pins it."""
    if table.release in PARTITION_COLUMNS_LAST_RELEASES and sorted(expected.column_names) == sorted(names):
        return expected.select(names)
    return expected


#: ``release/name`` -> the column Hudi 0.15's snapshot and time travel answer with the value of its
#: partition path segment (``1970010100``) instead of the stored value (its incremental query reads
#: the stored value): a custom key generator's timestamp partition
#: (HUDI-7709 passes partition paths as partition column values; Hudi 1.0 reads the column from the
#: file, HUDI-8098/HUDI-8187, and so do we and the ``hudi`` package)
PARTITION_PATH_VALUE_COLUMNS = {"0.15.0/cow_keygen_custom": "ts"}


def _without_partition_path_values(table: WrittenTable, query: Query, path: str, ours: pa.Table,
                                   expected: pa.Table) -> tuple[pa.Table, pa.Table]:
    """For a table in ``PARTITION_PATH_VALUE_COLUMNS``: check that Hudi's value of the column is
    the last segment of each row's partition path and ours the value stored in the base file that
    row comes from, then leave the column out of the comparison (every other column is compared)."""
    column = PARTITION_PATH_VALUE_COLUMNS.get(table.key)
    if column is None or query.query_type != "snapshot":
        return ours, expected
    from_path = [int(p.rsplit("/", 1)[-1]) for p in expected["_hoodie_partition_path"].to_pylist()]
    assert expected[column].to_pylist() == from_path
    stored = base_file_rows(path)
    stored_value = dict(zip(zip(stored["_hoodie_record_key"].to_pylist(), stored["_hoodie_commit_seqno"].to_pylist()),
                            stored[column].to_pylist()))
    our_keys = zip(ours["_hoodie_record_key"].to_pylist(), ours["_hoodie_commit_seqno"].to_pylist())
    assert ours[column].to_pylist() == [stored_value[key] for key in our_keys]
    assert ours[column].to_pylist() != [int(p.rsplit("/", 1)[-1]) for p in ours["_hoodie_partition_path"].to_pylist()]
    return ours.drop_columns([column]), expected.drop_columns([column])


def test_every_pinned_hudi_read_bug_is_met():
    assert {f"{t.key}:{q.query_type}" for t, q in BUGGED} == set(HUDI_READ_BUGS)


@pytest.mark.parametrize("case", BUGGED, ids=_id)
def test_where_hudi_fails_we_answer(written_table, case):
    """A query a Hudi release fails on by a bug of its reader (``HUDI_READ_BUGS``): our answer is
    the newest base file of each file group read straight from storage (read-optimized), the base
    files the first commit wrote (time travel to it), or the rows of Hudi's own time travel to
    ``end`` written in ``(start, end]`` (incremental)."""
    table, query = case
    assert query.error is not None and HUDI_READ_BUGS[f"{table.key}:{query.query_type}"] in query.error
    path = written_table(table)
    ours = HudiTable.open(path).read(**query.read_kwargs())
    if query.query_type == "read_optimized":
        expected = base_file_rows(path, latest_only=True)
    elif query.as_of is not None:
        # time travel to the table's first commit, an insert: the base files it wrote, as stored
        assert query.as_of == table.manifest().instants[0]["requested"]
        expected = base_file_rows(path, instants=[query.as_of])
    else:
        assert query.query_type == "incremental" and query.end is not None
        end = next(i["requested"] for i in table.manifest().instants if i["completed"] == query.end)
        expected = _in_range(table, _stored(table, f"as_of_{end}"), query.start, query.end)
    assert_same_rows(ours, expected.select(ours.column_names), f"{table.key} {query.name}")


def test_hudi_0_15_spark_merger_fails_after_a_delete(written_table):
    """Hudi 0.15's Spark-native merger fails every query whose range reaches the table's last
    commit, a delete ("Ordering value is null for record: null"). Ours: Hudi's own time travel to
    the commit before, less the keys the spec deleted (the range of the delete alone: no rows)."""
    table = WrittenTable(*SPARK_MERGER_AFTER_DELETE.split("/"))
    manifest = table.manifest()
    before, last = manifest.instants[-2], manifest.instants[-1]
    failed = [q for q in manifest.queries if q.error is not None]
    assert {q.name for q in failed} == {"snapshot", f"as_of_{last['requested']}", f"incremental_000_{last['completed']}",
                                        f"incremental_{before['completed']}_{last['completed']}"}
    assert all("Ordering value is null for record: null" in q.error for q in failed)  # type: ignore[operator]
    (spec,) = specs_for(table.release, [table.name])
    assert isinstance(spec.steps[-1], Write) and spec.steps[-1].operation == "delete"
    deleted = pa.array([row(i, spec.steps[-1].version, BASIC_SCHEMA)[0] for i in spec.steps[-1].ids])
    previous = _stored(table, f"as_of_{before['requested']}")
    remaining = previous.filter(pc.invert(pc.is_in(previous["id"], value_set=deleted)))
    assert 0 < remaining.num_rows < previous.num_rows
    opened = HudiTable.open(written_table(table))
    for query in failed:
        ours = opened.read(**query.read_kwargs())
        expected = remaining.slice(0, 0) if query.start == before["completed"] else remaining
        assert_same_rows(ours, expected.select(ours.column_names), f"{table.key} {query.name}")


@pytest.mark.parametrize("case", REFUSED, ids=_id)
def test_what_hudi_refuses_we_refuse(written_table, case):
    """Never a silent answer where Hudi has none: time travel to an instant the cleaner cleaned, an
    incremental query of a table without meta fields (virtual keys: no commit times to range over)."""
    table, query = case
    assert query.error is not None
    meta_fields = "not supported when meta fields are disabled"
    with pytest.raises(Exception, match=meta_fields if meta_fields in query.error else "clean"):
        HudiTable.open(written_table(table)).read(**query.read_kwargs())


def _vector_and_blob_types_alike(ours: pa.Table, expected: pa.Table, table: WrittenTable) -> tuple[pa.Table, pa.Table]:
    """Spark has no fixed-size array, and Hudi 1.2's Spark type of a BLOB descriptor makes every
    field nullable: its reader answers a VECTOR column as ``list<element not null>`` where we answer
    the ``fixed_size_list`` of the declared dimension, and a BLOB descriptor with nullable fields
    where ours keeps the required ones of the table's Avro schema. Those two departures (and no
    other) are checked here; then the VECTOR columns are compared in our type, the BLOB columns in
    Hudi's."""
    if not {"vector", "blob"} & set(table.manifest().features):
        return ours, expected
    mine, theirs = [], []
    for field in ours.schema:
        column, other = ours.column(field.name), expected.column(field.name)
        if is_vector(field.type):
            assert other.type == pa.list_(pa.field("element", field.type.value_type, nullable=False)), other.type
            other = other.cast(field.type)
        elif not other.type.equals(field.type):
            assert pa.types.is_struct(field.type) and [f.name for f in field.type] == list(BLOB_FIELDS)
            assert other.type.equals(_all_nullable(field.type)), (other.type, field.type)
            column = column.cast(other.type)
        mine.append(column)
        theirs.append(other)
    return pa.table(mine, names=ours.column_names), pa.table(theirs, names=ours.column_names)


def _all_nullable(dtype: pa.DataType) -> pa.DataType:
    if not pa.types.is_struct(dtype):
        return dtype
    return pa.struct([pa.field(f.name, _all_nullable(f.type), nullable=True) for f in dtype])


def _blob_paths_in_table(rows: pa.Table, table: WrittenTable) -> pa.Table:
    """BLOB descriptors' ``external_path`` relative to the table folder (Hudi's answer names the
    path the writer wrote to, ours the path the table was unpacked to); other columns as they are."""
    if "blob" not in table.manifest().features:
        return rows
    marker = f"/{table.name}/"
    records = rows.to_pylist()
    for record in records:
        for value in record.values():
            reference = value.get("reference") if isinstance(value, dict) else None
            if isinstance(reference, dict) and reference.get("external_path") and marker in reference["external_path"]:
                path = reference["external_path"]
                assert path.startswith("file:/"), path  # Hadoop's form of a local file, as Hudi writes it
                reference["external_path"] = path[path.index(marker) + len(marker):]
    return pa.Table.from_pylist(records, schema=rows.schema)


def _hudi_0_15_drops_bootstrap_data(table: WrittenTable, query: Query) -> bool:
    """Hudi 0.15's merge-on-read incremental query over just the metadata-only bootstrap commit
    returns the skeleton's ``_hoodie_*`` columns with every data column null (it does not stitch the
    source files; its snapshot, time travel and later ranges do). We return the source rows;
    ``test_hudi_0_15_mor_bootstrap_incremental_has_null_data`` pins the difference."""
    return (table.release == "0.15.0" and "bootstrap_metadata_only" in table.manifest().features
            and table.manifest().table_type == "MERGE_ON_READ" and query.query_type == "incremental"
            and query.end == METADATA_BOOTSTRAP_INSTANT)


def _with_data_of(expected: pa.Table, ours: pa.Table) -> pa.Table:
    """Hudi's rows with their (null) data columns taken from ours, matched by record key: the
    ``_hoodie_*`` columns are still compared."""
    assert all(expected.column(n).null_count == expected.num_rows for n in expected.column_names
               if not n.startswith("_hoodie_")), "Hudi 0.15 now returns the data columns: drop the departure"
    data = [n for n in ours.column_names if not n.startswith("_hoodie_")]
    by_key = {r["_hoodie_record_key"]: r for r in ours.select(["_hoodie_record_key", *data]).to_pylist()}
    rows = [{**row, **{n: by_key.get(row["_hoodie_record_key"], {}).get(n) for n in data}}
            for row in expected.to_pylist()]
    return pa.Table.from_pylist(rows, schema=ours.schema)


def test_hudi_0_15_mor_bootstrap_incremental_has_null_data(written_table):
    """The departure of ``_hudi_0_15_drops_bootstrap_data``: Hudi's 12 rows of the bootstrap commit
    carry keys and commit times but no data; ours carry the source file's values."""
    table = WrittenTable("0.15.0", "mor_bootstrap_metadata_only")
    query = next(q for q in table.manifest().queries if _hudi_0_15_drops_bootstrap_data(table, q))
    expected = read_result(table.expected, query)
    ours = HudiTable.open(written_table(table)).read(**query.read_kwargs())
    assert expected.num_rows == ours.num_rows == 12
    assert expected["name"].null_count == 12 and ours["name"].null_count == 0
    assert sorted(expected["_hoodie_record_key"].to_pylist()) == sorted(ours["id"].to_pylist())


#: Hudi releases whose copy-on-write incremental query answers the partition columns a table
#: leaves out of its data files (``hoodie.datasource.write.drop.partition.columns``) as nulls; their
#: snapshot, time travel and merge-on-read ranges fill them from the partition path, as 1.x does
NULL_DROPPED_PARTITION_COLUMNS_RELEASES = ("0.15.0",)


def _dropped_partition_values_from_paths(table: WrittenTable, query: Query, path: str, expected: pa.Table) -> pa.Table:
    """For a query of ``NULL_DROPPED_PARTITION_COLUMNS_RELEASES`` Hudi answers with null dropped
    partition columns: check they are all null, then fill each with its segment of the row's
    ``_hoodie_partition_path`` (``field=value`` when hive-style, else the field's position in
    ``hoodie.table.partition.fields``); every other column is compared as Hudi answered it."""
    manifest = table.manifest()
    if (table.release not in NULL_DROPPED_PARTITION_COLUMNS_RELEASES or "drop_partition_columns" not in manifest.features
            or manifest.table_type != "COPY_ON_WRITE" or query.query_type != "incremental"):
        return expected
    properties = dict(line.split("=", 1) for line in Path(path, ".hoodie", "hoodie.properties").read_text().splitlines()
                      if "=" in line and not line.startswith("#"))
    fields = properties["hoodie.table.partition.fields"].split(",")
    for position, field in enumerate(fields):
        assert expected[field].null_count == expected.num_rows, "Hudi now fills the column: drop the departure"
        values = [segments.split("/")[position].removeprefix(f"{field}=")
                  for segments in expected["_hoodie_partition_path"].to_pylist()]
        index = expected.schema.get_field_index(field)
        expected = expected.set_column(index, expected.schema.field(index), pa.array(values, pa.string()))
    return expected


#: Hudi releases whose copy-on-write incremental query answers the partition column of a table
#: written with ``hoodie.datasource.write.partitionpath.urlencode=true`` with its URL-encoded path
#: segment (``a b%2Fc``) instead of the value written (``a b/c``); their snapshot and time travel
#: answer the value written, as we do everywhere
ENCODED_PARTITION_VALUES_RELEASES = ("1.1.1", "1.2.0")


def _decoded_partition_values(table: WrittenTable, query: Query, expected: pa.Table) -> pa.Table:
    """For a query of ``ENCODED_PARTITION_VALUES_RELEASES`` over a URL-encoded table: check that
    Hudi's partition column is each row's ``_hoodie_partition_path`` (the encoded folder), then
    compare ours with its decoded form, the value the writer was given."""
    manifest = table.manifest()
    if (table.release not in ENCODED_PARTITION_VALUES_RELEASES or "partition_urlencode" not in manifest.features
            or manifest.table_type != "COPY_ON_WRITE" or query.query_type != "incremental"):
        return expected
    (field,) = _partition_fields(table)
    paths = expected["_hoodie_partition_path"].to_pylist()
    assert expected[field].to_pylist() == paths, "Hudi now answers the values written: drop the departure"
    assert not paths or any(unquote(p) != p for p in paths)
    index = expected.schema.get_field_index(field)
    return expected.set_column(index, expected.schema.field(index), pa.array([unquote(p) for p in paths], pa.string()))


def _partition_fields(table: WrittenTable) -> list[str]:
    spec = next(s for s in specs_for(table.release, [table.name]))
    return spec.options["hoodie.datasource.write.partitionpath.field"].split(",")


#: Hudi releases whose Spark incremental read includes the commit completed exactly at ``begin``
INCLUSIVE_BEGIN_RELEASES = ("1.0.2",)


def _as_hudi_read_it(table: WrittenTable, query: Query) -> dict[str, str | None]:
    """``HudiTable.read`` arguments asking what Hudi answered. Hudi 1.0's incremental query returns
    the commits completed in ``[begin, end]``; 1.1 and later (and hudi-flight's contract: ``start``
    is exclusive) in ``(begin, end]``. On 1.0 tables we are asked ``(begin - 1 ms, end]``, the same
    commits (completion times have millisecond steps). Dropping the begin commit's rows from Hudi's
    answer would not do: the files that commit wrote are part of the range's file system view, so
    they change the merged rows of the later commits too (a late-arriving update merged with the
    begin commit's base file loses to it). ``test_hudi_1_0_incremental_begin_is_inclusive`` pins
    the difference."""
    kwargs = query.read_kwargs()
    if table.release in INCLUSIVE_BEGIN_RELEASES and query.query_type == "incremental" and query.start is not None:
        kwargs["start"] = str(int(query.start) - 1).zfill(len(query.start))
    return kwargs


#: Hudi releases whose log reader applies a log-compaction block by itself: their default is the
#: legacy scan (``hoodie.optimized.log.blocks.scan.enable=false``; 0.13 has no other), 1.2 always
#: scans optimized
LEGACY_LOG_SCAN_RELEASES = ("0.13.1", "1.1.1")


def _log_compactions(path: str) -> set[str]:
    """Requested times of the table's log-compaction instants (in ``.hoodie/``, or its ``timeline/``
    folder on table version 8+)."""
    return {p.name.split(".")[0] for folder in (Path(path, ".hoodie"), Path(path, ".hoodie", "timeline"))
            for p in folder.glob("*.logcompaction.requested")}


def _only_log_compaction(table: WrittenTable, path: str, query: Query) -> bool:
    """Whether ``query`` is an incremental range of a ``LEGACY_LOG_SCAN_RELEASES`` table whose
    only commit is a log compaction.

    The range reads the log file the log compaction wrote and nothing else (the blocks it compacted
    are in older log files). Hudi 1.2 (and we, as its optimized scan does) applies a compacted block
    only with a block it compacted, so the range has no rows; Hudi 1.1's legacy scan applies it as
    an ordinary data block and returns its records, which 1.1 stamps with the log compaction's
    instant (0.13's scan, which completes a log compaction as a deltacommit, returns them too, with
    the commit times they were written at).
    ``test_legacy_log_scan_applies_a_log_compaction_block_by_itself`` pins that difference."""
    if table.release not in LEGACY_LOG_SCAN_RELEASES or query.query_type != "incremental":
        return False
    if query.start is None or query.end is None:
        return False
    in_range = {i["requested"] for i in table.manifest().instants if query.start < i["completed"] <= query.end}
    return bool(in_range) and in_range <= _log_compactions(path)


@pytest.mark.parametrize("release", LEGACY_LOG_SCAN_RELEASES)
def test_legacy_log_scan_applies_a_log_compaction_block_by_itself(written_table, release):
    """Hudi 1.1's and 0.13's answer for the log compaction's own range is the compacted block's
    records, as their own snapshot holds them: 1.1 stamps them with the log compaction's instant,
    0.13 keeps the commit times they were written at, before the range. Ours (and Hudi 1.2's,
    and the ``hudi`` package's) is empty."""
    table = WrittenTable(release, "mor_log_compaction")
    if not table.expected.exists():
        pytest.skip("the table is not written yet (make tables)")
    path = written_table(table)
    queries = {q.name: q for q in table.manifest().queries}
    (query,) = [q for q in queries.values() if _only_log_compaction(table, path, q)]
    expected = read_result(table.expected, query)
    (compaction,) = _log_compactions(path)
    snapshot = read_result(table.expected, queries["snapshot"])
    assert expected.num_rows > 0
    same_keys = snapshot.filter(pc.is_in(snapshot["_hoodie_record_key"], expected["_hoodie_record_key"]))
    assert_same_rows(expected, same_keys, f"Hudi {release}: the log compaction's records")
    stamps = set(expected["_hoodie_commit_time"].to_pylist())
    assert stamps == {compaction} if release == "1.1.1" else max(stamps) <= str(query.start), stamps
    assert HudiTable.open(path).read(**query.read_kwargs()).num_rows == 0
    if table.manifest().table_version in HUDI_RS_TABLE_VERSIONS:
        assert hudi_read(path, start=query.start, end=query.end) is None  # no batch: no rows


def _in_range(table: WrittenTable, answer: pa.Table, start: str | None, end: str, inclusive: bool = False) -> pa.Table:
    """The rows of ``answer`` written by commits completed in ``(start, end]`` (``[start, end]``): one writer
    wrote these tables, so completion times order as requested times do, and commits before the
    active timeline (archived, absent from the manifest) are before ``start``'s."""
    requested = {i["completed"]: i["requested"] for i in table.manifest().instants}
    keep = pc.less_equal(answer["_hoodie_commit_time"], requested[end])
    if start is not None:
        after = (pc.greater_equal if inclusive else pc.greater)(answer["_hoodie_commit_time"], requested[start])
        keep = pc.and_(keep, after)
    return answer.filter(keep)


def _stored(table: WrittenTable, name: str) -> pa.Table:
    return read_result(table.expected, next(q for q in table.manifest().queries if q.name == name))


def _same_rows_later(table: WrittenTable, completed: str) -> str:
    """The requested time of the latest instant up to which nothing changed after the instant
    completed at ``completed``: Hudi's incremental answers of the ranges in between hold no rows
    (schema-only commits such as ``ALTER TABLE``), so time travel there has the same rows."""
    empty = {q.start: q.end for q in table.manifest().queries
             if q.query_type == "incremental" and q.file is not None and q.rows == 0 and q.start is not None}
    while completed in empty:
        completed = empty[completed]  # type: ignore[assignment]
    return next(i["requested"] for i in table.manifest().instants if i["completed"] == completed)


def _hudi_1_0_scanned_the_table(table: WrittenTable, query: Query, expected: pa.Table) -> bool:
    """Whether Hudi 1.0 answered an incremental query of a cleaned table by its full table scan.

    Hudi falls back to that scan when a commit of the range has files the cleaner removed; 1.0's
    range includes the commit completed at ``begin`` (see ``_as_hudi_read_it``), whose files may be
    cleaned when those of ``(begin, end]`` are not. Its scan reads the newest base files only (no
    log files on merge-on-read: the updates a deltacommit of the range logged are missing) and keeps
    the rows whose commit is in the range: exactly Hudi's own snapshot (copy-on-write) or
    read-optimized (merge-on-read) answer filtered so.
    """
    if (table.release not in INCLUSIVE_BEGIN_RELEASES or "clean" not in table.manifest().features
            or query.query_type != "incremental" or query.end is None):
        return False
    scanned = _stored(table, "read_optimized" if table.manifest().table_type == "MERGE_ON_READ" else "snapshot")
    scanned = _in_range(table, scanned, query.start, query.end, inclusive=True)
    return rows(scanned) == rows(expected)


def _incremental_from_hudi_reads(table: WrittenTable, path: str, query: Query) -> pa.Table:
    """The incremental answer of Hudi 1.1+ (and ours) built without Hudi 1.0's fallback: the rows
    of ``(start, end]`` in Hudi's own snapshot answer when the range reaches archived commits of a
    cleaned table (Hudi's full table scan, log files merged), else in the newest base file of each
    file group that a commit of the range wrote (copy-on-write, read straight from storage)."""
    assert query.end is not None
    if query.start is None and "archival" in table.manifest().features:
        return _in_range(table, _stored(table, "snapshot"), None, query.end)
    assert table.manifest().table_type == "COPY_ON_WRITE", "merge-on-read ranges read log files too"
    requested = {i["completed"]: i["requested"] for i in table.manifest().instants}
    written = [requested[c] for c in requested if c <= query.end and (query.start is None or c > query.start)]
    files = base_file_rows(path, latest_only=True, instants=written)
    return _in_range(table, files, query.start, query.end)


@pytest.mark.parametrize("table", written_tables(), ids=lambda t: t.key)
def test_table_version_and_type_match_the_release(written_table, table):
    manifest = table.manifest()
    opened = HudiTable.open(written_table(table))
    assert (opened.table_version, opened.table_type) == (TABLE_VERSIONS[table.release], manifest.table_type)
    assert manifest.table_version == TABLE_VERSIONS[table.release]


# -- the same tables served: Flight and Flight SQL answer each snapshot as Hudi does ----------------


def _we_refuse(path: str) -> bool:
    """Whether our library refuses the snapshot (a feature in ``OUR_REFUSALS``): the service must too."""
    try:
        HudiTable.open(path).read()
    except UnsupportedTableError:
        return True
    return False


@pytest.fixture(scope="module")
def written_server(written_table, tmp_path_factory):
    tables = {t.identifier: written_table(t) for t in written_tables()}
    # ADBC fetches every endpoint at once; partitioned-by-two-fields tables have dozens
    with serving_tables(tables, str(tmp_path_factory.mktemp("written-state")), sql_memory_limit="512MB",
                        max_streams_per_connection=64) as srv:
        yield srv


def _served_snapshot(server, table: WrittenTable) -> pa.Table:
    with flight.connect(f"grpc://127.0.0.1:{server.port}") as client:
        info = client.get_flight_info(flight.FlightDescriptor.for_path(*table.identifier.split(".")))
        with ThreadPoolExecutor(4) as pool:
            parts = list(pool.map(lambda ep: client.do_get(ep.ticket).read_all(), info.endpoints))
    return pa.concat_tables(parts) if parts else info.schema.empty_table()


def _sql_snapshot(server, table: WrittenTable) -> pa.Table:
    with adbc.connect(f"grpc://127.0.0.1:{server.port}", autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {table.identifier}")
        return cursor.fetch_arrow_table()


@pytest.mark.parametrize("case", SNAPSHOTS, ids=_id)
@pytest.mark.parametrize("surface", ["flight", "flight_sql"])
def test_served_snapshot_equals_hudi(written_server, written_table, surface, case):
    table, query = case
    fetch = _served_snapshot if surface == "flight" else _sql_snapshot
    with _fallback_expected_of(table):  # the library's read here, and the server's (in this process)
        if _we_refuse(written_table(table)):
            with pytest.raises(Exception, match="not supported"):
                fetch(written_server, table)
            return
        ours = _blob_paths_in_table(fetch(written_server, table), table)
    expected = _blob_paths_in_table(_in_order(table, read_result(table.expected, query), ours.column_names), table)
    ours, expected = _vector_and_blob_types_alike(ours, expected, table)
    ours, expected = _without_partition_path_values(table, query, written_table(table), ours, expected)
    assert_same_rows(ours, expected, f"{surface} {table.key}")


#: tables whose incremental ranges merge logged updates without the older base file (a late-arriving
#: update, a log-compaction block): ``catalog/plan/incremental.py``
RANGE_TABLES = ("0.15.0/mor_payload_default", "1.2.0/mor_merge_event_time", "1.2.0/mor_log_compaction")
#: features whose tables' ranges are served too: partition columns filled from the path, ORC base
#: files, partition values URL-encoded or holding slashes in their paths, duplicate keys, deletes
#: by marker, generated keys, schemas changed by a later write
RANGE_FEATURES = ("drop_partition_columns", "orc", "partition_urlencode", "partition_slashes", "insert_duplicates",
                  "soft_delete", "payload_aws_dms", "auto_keys", "column_added", "type_promotion")
SERVED_RANGES = [(t, q) for t, q in QUERIES if q.query_type == "incremental" and q.start and (
    t.key in RANGE_TABLES or any(f in t.manifest().features for f in RANGE_FEATURES))]


def _served_range(server, table: WrittenTable, query: Query) -> pa.Table:
    asked = _as_hudi_read_it(table, query)
    command = {"table": table.identifier, "query_type": "incremental", "start": asked["start"], "end": asked["end"]}
    with flight.connect(f"grpc://127.0.0.1:{server.port}") as client:
        info = client.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(command)))
        parts = [client.do_get(ep.ticket).read_all() for ep in info.endpoints]
    return pa.concat_tables(parts) if parts else info.schema.empty_table()


def _sql_range(server, table: WrittenTable, query: Query) -> pa.Table:
    with adbc.connect(f"grpc://127.0.0.1:{server.port}", autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute(f"SELECT * FROM hudi_table_changes('{table.identifier}', 'latest_state', "
                       f"'{_as_hudi_read_it(table, query)['start']}', '{query.end}')")
        return cursor.fetch_arrow_table()


@pytest.mark.parametrize("case", SERVED_RANGES, ids=_id)
@pytest.mark.parametrize("surface", ["flight", "flight_sql"])
def test_served_range_equals_hudi(written_server, written_table, surface, case):
    table, query = case
    fetch = _served_range if surface == "flight" else _sql_range
    ours = fetch(written_server, table, query)
    expected = _in_order(table, read_result(table.expected, query), ours.column_names)
    expected = _dropped_partition_values_from_paths(table, query, written_table(table), expected)
    expected = _decoded_partition_values(table, query, expected)
    assert_same_rows(ours, expected, f"{surface} {table.key} {query.name}")


# -- the second oracle: where the ``hudi`` package departs from Hudi, Hudi is right ----------------

#: ``release/name`` -> why hudi-rs answers the snapshot differently from Hudi's Spark datasource
HUDI_RS_DEPARTURES: dict[str, str] = {
    "0.15.0/mor_merge_custom_payload": "refuses a table merging with a payload class of its own",
    "1.0.2/mor_merge_custom_payload": "refuses a table merging with a payload class of its own",
    "1.0.2/mor_bucket_consistent": "returns no rows from a consistent-hashing bucket index table",
    "1.0.2/cow_keygen_custom": "fails: takes 'part:simple' of hoodie.table.partition.fields for a column name",
    "1.1.1/mor_bucket_consistent": "returns no rows from a consistent-hashing bucket index table",
    "1.1.1/cow_keygen_custom": "fails: takes 'part:simple' of hoodie.table.partition.fields for a column name",
    "1.1.1/mor_keygen_custom": "fails: takes 'part:simple' of hoodie.table.partition.fields for a column name",
    "0.15.0/cow_schema_evolution": "no schema on read: a renamed column is null in the files written before",
    "0.15.0/mor_schema_evolution": "no schema on read: a renamed column is null in the files written before",
    "1.0.2/cow_schema_evolution": "no schema on read: a renamed column is null in the files written before",
    "1.0.2/mor_schema_evolution": "no schema on read: a renamed column is null in the files written before",
    "1.2.0/cow_keygen_custom": "fails: takes 'part:simple' of hoodie.table.partition.fields for a column name",
    "1.2.0/mor_bucket_consistent": "returns no rows from a consistent-hashing bucket index table",
    "0.15.0/mor_payload_aws_dms": "refuses a table merging with a payload class of its own",
    "0.15.0/mor_payload_partial_update": "refuses a table merging with a payload class of its own",
    "1.2.0/cow_vector_blob": "returns a VECTOR column of a Parquet file as its bytes (fixed_size_binary[12])",
    "1.2.0/mor_vector_blob": "returns a VECTOR column of a Parquet file as its bytes (fixed_size_binary[12])",
    **{key: "answers a timestamp key generator's partition field in the writer's type (int64), where "
       "Hudi 1.x's Spark reader answers its value as text (string)"
       for key in ("1.0.2/mor_keygen_timestamp", "1.1.1/mor_keygen_timestamp", "1.2.0/mor_keygen_timestamp",
                   "1.1.1/mor_keygen_timestamp_millis")},
}
#: table feature -> how the ``hudi`` package refuses every table that has it (by name)
HUDI_RS_REFUSED_FEATURES = {
    "drop_partition_columns": "Only support when `hoodie.datasource.write.drop.partition.columns` is disabled",
    "orc": "Config value 'ORC' is not supported",
}
#: the table versions the ``hudi`` package opens: it refuses Hudi 0.13's version 5 by name
HUDI_RS_TABLE_VERSIONS = (6, 8, 9)


@pytest.mark.parametrize("case", [c for c in SNAPSHOTS if "lance" not in c[0].manifest().features], ids=_id)
def test_hudi_package_snapshot_agrees_with_hudi_or_is_pinned(written_table, case):
    table, query = case
    expected = read_result(table.expected, query)
    if table.manifest().table_version not in HUDI_RS_TABLE_VERSIONS:
        with pytest.raises(Exception, match=f"Found: {table.manifest().table_version}"):
            hudi_read(written_table(table))
        return
    refused = [text for feature, text in HUDI_RS_REFUSED_FEATURES.items() if feature in table.manifest().features]
    if refused:
        with pytest.raises(Exception, match=re.escape(refused[0])):
            hudi_read(written_table(table))
        return
    if table.key in HUDI_RS_DEPARTURES:
        with pytest.raises(Exception):  # noqa: B017 - a wrong answer or an error: either departs
            theirs = hudi_read(written_table(table))
            assert_same_rows(expected, theirs, table.key)
        return
    theirs = hudi_read(written_table(table))
    if theirs is not None:
        expected = _in_order(table, expected, theirs.column_names)
        theirs, expected = _without_partition_path_values(table, query, written_table(table), theirs, expected)
    assert_same_rows(expected, theirs, f"hudi package vs Hudi: {table.key}")


def test_hudi_1_0_incremental_begin_is_inclusive(written_table):
    """Hudi 1.0.2 returns the commit completed at ``begin`` too: its answer for ``(c1, c2]`` holds
    the rows of both commits, where ours (and Hudi 1.1+'s) holds c2's only."""
    table = WrittenTable("1.0.2", "cow_core")
    manifest = table.manifest()
    query = next(q for q in manifest.queries if q.query_type == "incremental" and q.start is not None and q.rows)
    expected = read_result(table.expected, query)
    ours = HudiTable.open(written_table(table)).read(**query.read_kwargs())
    first = next(i["requested"] for i in manifest.instants if i["completed"] == query.start)
    assert first in expected["_hoodie_commit_time"].to_pylist()
    assert first not in ours["_hoodie_commit_time"].to_pylist()
    assert ours.num_rows < expected.num_rows


@pytest.mark.parametrize(("release", "name", "partition_columns"),
                         [("0.15.0", "cow_types", ["part"]), ("0.13.1", "cow_keygen_complex", ["part", "ts"])])
def test_hudi_0_13_and_0_15_put_partition_columns_last(written_table, release, name, partition_columns):
    """Hudi 0.13's and 0.15's copy-on-write snapshots return the partition columns after the
    columns declared after them; our schema (and Hudi 1.x's answer) keeps the declared order."""
    table = WrittenTable(release, name)
    expected = read_result(table.expected, next(q for q in table.manifest().queries if q.name == "snapshot"))
    ours = HudiTable.open(written_table(table)).schema.names
    width = len(partition_columns)
    assert expected.column_names[-width:] == partition_columns and ours[-width:] != partition_columns
    assert sorted(expected.column_names) == sorted(ours)


# -- filters on partition columns the data files leave out (issue 30) ------------------------------

DROPPED = [(t, q) for t, q in SNAPSHOTS if "drop_partition_columns" in t.manifest().features]
#: (column, operator, value) filters on the dropped columns, and the Spark SQL of each
DROPPED_FILTERS = [(("part", "=", "p1"), "part = 'p1'"), (("part", "!=", "p1"), "part <> 'p1'"),
                   (("part", ">", "p0"), "part > 'p0'")]
_COMPARE = {"=": pc.equal, "!=": pc.not_equal, ">": pc.greater}


@pytest.mark.parametrize("case", DROPPED, ids=_id)
@pytest.mark.parametrize(("condition", "sql"), DROPPED_FILTERS, ids=[s for _, s in DROPPED_FILTERS])
def test_filters_on_dropped_partition_columns(written_server, written_table, case, condition, sql):
    """A filter on a dropped partition column plans the partitions whose path holds a matching
    value only (never by the files' statistics, which know nothing of it) and returns exactly
    Hudi's snapshot rows that match, through the library and Flight SQL."""
    table, query = case
    path = written_table(table)
    column, op, value = condition
    snapshot = read_result(table.expected, query)
    expected = snapshot.filter(_COMPARE[op](snapshot[column], value))
    assert 0 < expected.num_rows < snapshot.num_rows
    opened = HudiTable.open(path)
    ours = opened.read(filters=[condition])
    assert_same_rows(ours, _in_order(table, expected, ours.column_names), f"{table.key} {sql}")
    wanted = set(expected["_hoodie_partition_path"].to_pylist())
    assert set(planned_partitions(opened, filters=[condition])) == wanted
    with adbc.connect(f"grpc://127.0.0.1:{written_server.port}", autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {table.identifier} WHERE {sql}")
        served = cursor.fetch_arrow_table()
    assert_same_rows(served, _in_order(table, expected, served.column_names), f"flight sql {table.key} {sql}")


# -- filters on partition values a path cannot hold as they are (issue 30) -------------------------

ODD_PARTITIONS = [(t, q) for t, q in SNAPSHOTS
                  if {"partition_urlencode", "partition_slashes"} & set(t.manifest().features)]


@pytest.mark.parametrize("case", ODD_PARTITIONS, ids=_id)
def test_filters_on_url_encoded_and_slashed_partition_values(written_table, case):
    """An equality filter on each partition value (escaped in its folder name, or one folder per
    slash-separated segment) returns exactly Hudi's snapshot rows holding it, and never plans
    away the partition those rows are in."""
    table, query = case
    (column,) = _partition_fields(table)
    snapshot = read_result(table.expected, query)
    opened = HudiTable.open(written_table(table))
    for value in sorted(set(snapshot[column].to_pylist())):
        expected = snapshot.filter(pc.equal(snapshot[column], value))
        ours = opened.read(filters=[(column, "=", value)])
        assert_same_rows(ours, _in_order(table, expected, ours.column_names), f"{table.key} {column} = {value!r}")
        assert set(expected["_hoodie_partition_path"].to_pylist()) <= set(
            planned_partitions(opened, filters=[(column, "=", value)]))
