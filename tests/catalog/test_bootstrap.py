"""Metadata-only bootstrapped tables written by Hudi (``tests/data/tables/*/*_bootstrap_*``): the
skeleton files stitched to their source files through the bootstrap index, after the lake moved.

Equality with Hudi's answers at every query type is checked by ``test_hudi_written.py``; here:
what moving the source dataset takes, projections and filters over stitched rows, time travel to
the bootstrap commit served over Flight, and the named errors when the source cannot be found.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import adbc_driver_flightsql.dbapi as adbc
import fastavro
import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq
import pytest

from catalog import HudiTable, UnsupportedTableError
from catalog.errors import CorruptTableError
from catalog.format.hfile import HFileReader
from catalog.plan.options import parse_instant
from catalog.read.bootstrap import _aligned
from catalog.table.bootstrap import FILE_ID_INDEX, METADATA_BOOTSTRAP_INSTANT
from catalog.table.files import FileSlice
from tests.data.factory.archive import SOURCE_FOLDER, read_result, relocate_bootstrap_source
from tests.support.compare import assert_same_rows
from tests.support.servers import serving_tables
from tests.support.written import WrittenTable, written_tables

BOOTSTRAPPED = [t for t in written_tables() if "bootstrap_metadata_only" in t.manifest().features]


def _id(table: WrittenTable) -> str:
    return table.key


def _copy(written_table, table: WrittenTable, tmp_path: Path) -> Path:
    """A private copy of the table and its source dataset (``<tmp>/table``, ``<tmp>/source``)."""
    base = Path(written_table(table))
    shutil.copytree(base, tmp_path / "table")
    shutil.copytree(base.parent / SOURCE_FOLDER, tmp_path / SOURCE_FOLDER)
    relocate_bootstrap_source(tmp_path / "table", tmp_path / SOURCE_FOLDER)
    return tmp_path / "table"


def _bootstrap_answer(table: WrittenTable) -> pa.Table:
    query = next(q for q in table.manifest().queries if q.as_of == METADATA_BOOTSTRAP_INSTANT)
    return read_result(table.expected, query)


def _set_property(base: Path, key: str, value: str | None) -> None:
    path = base / ".hoodie" / "hoodie.properties"
    lines = [line for line in path.read_text().splitlines() if not line.startswith(f"{key}=")]
    path.write_text("\n".join(lines + ([f"{key}={value}"] if value is not None else [])) + "\n")


def test_factory_writes_metadata_only_bootstraps_for_cow_and_mor():
    assert {(t.release, t.manifest().table_type) for t in BOOTSTRAPPED} >= {
        ("0.15.0", "COPY_ON_WRITE"), ("0.15.0", "MERGE_ON_READ")}


@pytest.mark.parametrize("table", BOOTSTRAPPED, ids=_id)
def test_index_keeps_the_writers_absolute_paths_and_we_map_them(written_table, table):
    """The index names source files by the writer's absolute paths; the unpacked table reads
    through ``hoodie.bootstrap.base.path`` (rewritten to the unpacked source) all the same."""
    base = Path(written_table(table))
    index = HFileReader.from_bytes((base / FILE_ID_INDEX).read_bytes())
    (info,) = fastavro.reader(io.BytesIO(index.info("INDEX_INFO")))
    assert info["bootstrapBasePath"].startswith("/") and str(base.parent) not in info["bootstrapBasePath"]
    ours = HudiTable.open(str(base)).read(as_of=METADATA_BOOTSTRAP_INSTANT)
    assert_same_rows(ours, _bootstrap_answer(table), table.key)


@pytest.mark.parametrize("table", BOOTSTRAPPED, ids=_id)
def test_projection_and_filter_over_stitched_rows(written_table, table):
    """Columns from the skeleton only, from the source only, none (a count), a limit, and a filter
    on a source column."""
    expected = _bootstrap_answer(table)
    opened = HudiTable.open(written_table(table))
    for columns in (["_hoodie_record_key", "_hoodie_commit_time"], ["name", "price"], ["id", "_hoodie_file_name"]):
        ours = opened.read(as_of=METADATA_BOOTSTRAP_INSTANT, columns=columns)
        assert_same_rows(ours, expected.select(columns), f"{table.key} {columns}")
    assert opened.read(as_of=METADATA_BOOTSTRAP_INSTANT, columns=[]).num_rows == expected.num_rows
    assert opened.read(as_of=METADATA_BOOTSTRAP_INSTANT, limit=5).num_rows == 5
    ours = opened.read(as_of=METADATA_BOOTSTRAP_INSTANT, columns=["id", "_hoodie_commit_time"],
                       filters=[("price", ">", 8.0)])
    wanted = sorted(r["id"] for r in expected.to_pylist() if r["price"] > 8.0)
    assert sorted(ours["id"].to_pylist()) == wanted and wanted
    assert set(ours["_hoodie_commit_time"].to_pylist()) == {METADATA_BOOTSTRAP_INSTANT}


@pytest.mark.parametrize("table", BOOTSTRAPPED[:1], ids=_id)
def test_source_not_where_the_property_says_is_a_named_error(written_table, table, tmp_path):
    """A lake moved without rewriting the property: an error naming it, never skeleton rows."""
    base = _copy(written_table, table, tmp_path)
    _set_property(base, "hoodie.bootstrap.base.path", str(tmp_path / "elsewhere"))
    with pytest.raises(FileNotFoundError, match="hoodie.bootstrap.base.path") as err:
        HudiTable.open(str(base)).read(as_of=METADATA_BOOTSTRAP_INSTANT)
    assert str(tmp_path) not in str(err.value)  # no server path in the message
    relocate_bootstrap_source(base, tmp_path / SOURCE_FOLDER)  # what the operator does
    assert_same_rows(HudiTable.open(str(base)).read(as_of=METADATA_BOOTSTRAP_INSTANT), _bootstrap_answer(table))


@pytest.mark.parametrize("table", BOOTSTRAPPED[:1], ids=_id)
def test_skeleton_without_bootstrap_base_path_is_refused_by_name(written_table, table, tmp_path):
    base = _copy(written_table, table, tmp_path)
    _set_property(base, "hoodie.bootstrap.base.path", None)
    with pytest.raises(UnsupportedTableError, match="metadata-only bootstrap"):
        HudiTable.open(str(base)).read(as_of=METADATA_BOOTSTRAP_INSTANT)


@pytest.mark.parametrize("table", BOOTSTRAPPED[:1], ids=_id)
def test_source_on_another_storage_is_refused_by_name(written_table, table, tmp_path):
    """The source is opened with the table's storage options: another protocol, or a chained URL
    (``simplecache::...``), is refused rather than tried."""
    base = _copy(written_table, table, tmp_path)
    for elsewhere in ("memory://lake/source", f"simplecache::file://{tmp_path / SOURCE_FOLDER}"):
        _set_property(base, "hoodie.bootstrap.base.path", elsewhere)
        with pytest.raises(UnsupportedTableError, match="on another storage than the table"):
            HudiTable.open(str(base)).read(as_of=METADATA_BOOTSTRAP_INSTANT)


@pytest.mark.parametrize("table", BOOTSTRAPPED[:1], ids=_id)
@pytest.mark.parametrize("change", [-1, 1])
def test_source_file_of_other_length_is_corrupt(written_table, table, tmp_path, change):
    """A source file replaced by one with fewer or more rows cannot be stitched by position:
    refused, whether or not a ``_hoodie_*`` column is read."""
    base = _copy(written_table, table, tmp_path)
    source = next((tmp_path / SOURCE_FOLDER).rglob("*.parquet"))
    rows = pq.read_table(source)
    pq.write_table(rows.slice(0, rows.num_rows - 1) if change < 0 else pa.concat_tables([rows, rows.slice(0, 1)]), source)
    for columns in (None, ["name"]):
        with pytest.raises(CorruptTableError, match="rows than its source file"):
            HudiTable.open(str(base)).read(as_of=METADATA_BOOTSTRAP_INSTANT, columns=columns)


@pytest.fixture(scope="module")
def bootstrap_server(written_table, tmp_path_factory):
    tables = {t.identifier: written_table(t) for t in BOOTSTRAPPED}
    with serving_tables(tables, str(tmp_path_factory.mktemp("bootstrap-state"))) as srv:
        yield srv


@pytest.mark.parametrize("table", BOOTSTRAPPED, ids=_id)
def test_served_time_travel_to_the_bootstrap_commit_equals_hudi(bootstrap_server, table):
    """Each endpoint's ticket carries its skeleton's source file: ``do_get`` stitches the same rows."""
    command = {"table": table.identifier, "as_of": METADATA_BOOTSTRAP_INSTANT}
    with flight.connect(f"grpc://127.0.0.1:{bootstrap_server.port}") as client:
        info = client.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(command)))
        parts = [client.do_get(endpoint.ticket).read_all() for endpoint in info.endpoints]
    assert parts
    assert_same_rows(pa.concat_tables(parts), _bootstrap_answer(table), table.key)


@pytest.mark.parametrize("table", BOOTSTRAPPED, ids=_id)
def test_flight_sql_time_travel_to_the_bootstrap_commit_equals_hudi(bootstrap_server, table):
    """Through Flight SQL: every column, the skeleton's columns alone (the engine may scan those
    files natively), a count, and a filter on a source column."""
    expected = _bootstrap_answer(table)
    at = f"{table.identifier} TIMESTAMP AS OF '{METADATA_BOOTSTRAP_INSTANT}'"
    with adbc.connect(f"grpc://127.0.0.1:{bootstrap_server.port}", autocommit=True) as conn, conn.cursor() as cursor:
        def sql(text: str) -> pa.Table:
            cursor.execute(text)
            return cursor.fetch_arrow_table()

        assert_same_rows(sql(f"SELECT * FROM {at}"), expected, table.key)
        meta = ["_hoodie_record_key", "_hoodie_file_name"]
        assert_same_rows(sql(f"SELECT {', '.join(meta)} FROM {at}"), expected.select(meta), table.key)
        assert sql(f"SELECT count(*) AS n FROM {at}")["n"].to_pylist() == [expected.num_rows]
        wanted = sorted(r["id"] for r in expected.to_pylist() if r["price"] > 8.0)
        assert sorted(sql(f"SELECT id FROM {at} WHERE price > 8.0")["id"].to_pylist()) == wanted
        assert sql(f"SELECT count(*) AS n FROM {at} WHERE price > 8.0")["n"].to_pylist() == [len(wanted)]


def test_bootstrap_instants_are_instants():
    """Hudi's bootstrap commits ``00000000000001``/``00000000000002`` are valid ``as_of`` values."""
    assert parse_instant("00000000000001") == "00000000000001"
    assert parse_instant("00000000000002") == "00000000000002"
    with pytest.raises(ValueError, match="malformed"):
        parse_instant("00000000000003")


def test_stitching_cuts_batches_of_both_files_to_equal_lengths():
    """Skeleton and source files stream batches of their own sizes; rows pair up by position."""
    fs = FileSlice("p0", "fg", METADATA_BOOTSTRAP_INSTANT, bootstrap_source="p0/s.parquet")
    left = [pa.record_batch([pa.array(range(a, b))], names=["k"]) for a, b in ((0, 3), (3, 4), (4, 10))]
    right = [pa.record_batch([pa.array(range(a, b))], names=["v"]) for a, b in ((0, 5), (5, 5), (5, 10))]
    pairs = list(_aligned(iter(left), iter(right), fs))
    assert all(lb.num_rows == rb.num_rows for lb, rb in pairs)
    assert [x for lb, _ in pairs for x in lb["k"].to_pylist()] == [x for _, rb in pairs for x in rb["v"].to_pylist()]
    assert sum(lb.num_rows for lb, _ in pairs) == 10
    with pytest.raises(CorruptTableError, match="more rows"):
        list(_aligned(iter(left), iter(right[:1]), fs))
    with pytest.raises(CorruptTableError, match="fewer rows"):
        list(_aligned(iter(left[:2]), iter(right), fs))
