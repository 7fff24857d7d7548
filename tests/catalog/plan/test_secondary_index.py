"""Pruning by MDT secondary indexes: only the file groups holding the value's rows are planned,
the rows equal a read without the metadata table, and anything unusable falls back to no pruning."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from catalog.errors import MetadataTableFallbackWarning
from catalog.hudi_table import HudiTable
from catalog.listing.metadata_table import MetadataTable
from catalog.plan.filters import BoundFilter, bind_filters
from catalog.plan.options import ReadOptions
from catalog.plan.planner import file_slices
from catalog.plan.prune import SecondaryIndexPruner, index_pruners
from catalog.plan.secondary_index import SecondaryIndex, escaped, record_key_of, record_keys, secondary_indexes
from tests.data.factory.archive import read_result
from tests.support.written import WrittenTable

FIXTURES = [
    "sample_table/cow/v9_txns_simple_meta",
    "sample_table/cow/v9_txns_complex_meta",
    "sample_table/mor/avro/v9_txns_simple_meta",
    "sample_table/mor/avro/v9_txns_nonpart_meta",
]
WRITTEN = {"1.0.2": 1, "1.1.1": 2}  # release -> index version of its mor_secondary_index table
KEYS = ("_hoodie_record_key", "_hoodie_partition_path")


def planned(path: str, filters, **open_options) -> tuple[pa.Table, int]:
    """(rows sorted by key, file groups planned), failing on any metadata-table fallback."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", MetadataTableFallbackWarning)
        table = HudiTable.open(path, **open_options)
        groups = len(list(file_slices(table.state, ReadOptions(filters=filters))))
        rows = table.read(filters=filters)
    return rows.sort_by([(k, "ascending") for k in KEYS]), groups


def located(path: str, filters, **open_options) -> set[tuple[str, str]] | None:
    """What the secondary-index pruner of a table finds for ``filters`` (``None``: not used)."""
    table = HudiTable.open(path, **open_options)
    for pruner in index_pruners(table.state.metadata_table, True, table.state.use_record_index)[1]:
        if isinstance(pruner, SecondaryIndexPruner):
            return pruner.located(bind_filters(filters, table.schema))
    return None


def check(path: str, filters, pruned: int | None, **open_options) -> None:
    """Same rows as a read without the metadata table; ``pruned``: the file groups expected
    (``None``: the secondary index is not used)."""
    rows, groups = planned(path, filters, **open_options)
    plain, all_groups = planned(path, filters, use_metadata_table=False)
    assert rows.equals(plain)
    full = HudiTable.open(path, use_metadata_table=False)
    mask = None
    for f in bind_filters(filters, full.schema):
        mask = f.expression() if mask is None else mask & f.expression()
    assert rows.num_rows == full.read().filter(mask).num_rows
    if pruned is None:
        assert located(path, filters, **open_options) is None
    else:
        assert groups == pruned < all_groups
        assert len(located(path, filters, **open_options) or ()) == pruned


FIXTURE_CASES = [
    # (filters, file groups holding the rows in cow simple / cow complex; the merge-on-read
    # tables' indexes are not used: None)
    ([("merchant_name", "=", "Uber")], (1, 1, None, None)),
    ([("merchant_name", "in", ["Uber", "Spotify", "Grab"])], (3, 3, None, None)),
    ([("merchant_name", "is null", None)], (1, 1, None, None)),
    ([("txn_date", "=", "2024-01-21")], (2, 2, None, None)),  # dates: epoch days
    ([("txn_date", "in", ["2024-01-15", "2024-01-16"])], (2, 2, None, None)),
    ([("merchant_name", "=", "Nobody")], (0, 0, None, None)),  # a missing value: nothing to read
    ([("merchant_name", "=", "A$B\\C")], (0, 0, None, None)),  # escaped, still missing
]


@pytest.mark.parametrize("index", range(len(FIXTURES)), ids=[n.split("/", 1)[1] for n in FIXTURES])
@pytest.mark.parametrize("filters,groups", FIXTURE_CASES, ids=[str(c[0]) for c in FIXTURE_CASES])
def test_fixture_tables_prune_to_the_groups_of_the_value(fixture_table, index, filters, groups):
    path = fixture_table(FIXTURES[index])
    # later plain INSERTs: keys are not provably unique, so the record index (and with it the
    # secondary index) is opted into
    check(path, filters, groups[index], use_record_index=True)


@pytest.mark.parametrize("index", range(len(FIXTURES)), ids=[n.split("/", 1)[1] for n in FIXTURES])
def test_fixture_tables_intersect_indexed_filters(fixture_table, index):
    """Two indexed filters intersect (copy-on-write; merge-on-read tables use no secondary index)."""
    path = fixture_table(FIXTURES[index])
    both = [("merchant_name", "=", "Uber"), ("txn_date", "=", "2024-01-21")]
    if "/mor/" in FIXTURES[index]:
        assert located(path, both, use_record_index=True) is None
    else:
        assert located(path, both[:1], use_record_index=True)
        assert located(path, both, use_record_index=True) == set()
    rows, _ = planned(path, both, use_record_index=True)
    assert rows.num_rows == 0 and rows.equals(planned(path, both, use_metadata_table=False)[0])


def test_fixture_tables_do_not_prune_without_the_record_index(fixture_table):
    path = fixture_table(FIXTURES[0])
    check(path, [("merchant_name", "=", "Uber")], None)  # keys not provably unique
    check(path, [("merchant_name", "=", "Uber")], None, use_record_index=False)


WRITTEN_CASES = [
    [("name", "=", "name8_v2")],  # updated in a log file: the index's log blocks say so
    [("name", "=", "name8_v1")],  # the value before the update: deleted from the index
    [("name", "in", ["name8_v2", "name4_v1"])],
    [("name", "=", "name1_v1")],  # a deleted record
    [("name", "=", "missing")],
]


def _index_keys(path: str, filters) -> set[str] | None:
    """The record keys the table's secondary index on ``filters``' column finds (``None``: it
    cannot answer them)."""
    table = HudiTable.open(path)
    mdt = table.state.metadata_table
    assert mdt is not None
    bound = bind_filters(filters, table.schema)[0]
    index = secondary_indexes(mdt)[bound.column]
    prefixes = index.prefixes(bound)
    return None if prefixes is None else record_keys(mdt, index, prefixes)


def _keys_of(path: str, filters) -> set[str]:
    rows = HudiTable.open(path, use_metadata_table=False).read(filters=filters, columns=["_hoodie_record_key"])
    return set(rows["_hoodie_record_key"].to_pylist())


@pytest.mark.parametrize("release", sorted(WRITTEN))
@pytest.mark.parametrize("filters", WRITTEN_CASES, ids=[str(c) for c in WRITTEN_CASES])
def test_hudi_written_merge_on_read_indexes_are_read_but_not_used(written_table, release, filters):
    """Hudi 1.0.2 writes a version 1 index (no version in index.json), Hudi 1.1.1 version 2. The
    lookup finds exactly the record keys of the rows (log blocks of the index merged), but a
    merge-on-read table does not prune by it (``test_hudi_1_1_typed_indexes_render_like_us_and_miss_log_writes``)."""
    path = written_table(WrittenTable(release, "mor_secondary_index"))
    table = HudiTable.open(path)
    indexes = secondary_indexes(table.state.metadata_table)
    assert indexes == {"name": SecondaryIndex("secondary_index_idx_name", "name", WRITTEN[release])}
    assert _index_keys(path, filters) == _keys_of(path, filters)
    check(path, filters, None)


@pytest.mark.parametrize("release", sorted(WRITTEN))
def test_null_is_looked_up_in_version_2_only(written_table, release):
    """Hudi 1.0 writes no key for a null value: a version 1 index cannot answer ``is null``."""
    path = written_table(WrittenTable(release, "mor_secondary_index"))
    filters = [("name", "is null", None)]
    assert _index_keys(path, filters) == (_keys_of(path, filters) if WRITTEN[release] == 2 else None)


@pytest.mark.parametrize("release", sorted(WRITTEN))
def test_version_2_reads_one_shard_version_1_all(written_table, monkeypatch, release):
    path = written_table(WrittenTable(release, "mor_secondary_index"))
    read: list[str] = []
    real = MetadataTable.read_slice

    def spy(self, fs, selection):
        if fs.partition.startswith("secondary_index_"):
            read.append(fs.file_id)
        return real(self, fs, selection)

    monkeypatch.setattr(MetadataTable, "read_slice", spy)
    assert _index_keys(path, [("name", "=", "name8_v2")])
    shards = len(HudiTable.open(path).state.metadata_table.file_slices("secondary_index_idx_name"))
    assert shards == 10
    assert len(set(read)) == (1 if WRITTEN[release] == 2 else shards)


def test_key_encoding_round_trips():
    assert escaped("a$b\\c\x00d") == "a\\$b\\\\c\\\x00d"
    assert escaped(None) == "\x00"
    for value in ("plain", "a$b", "a\\$", "\\", "$", "x\x00y"):
        for record_key in ("TXN-1", "k$1", "k\\2", "txn_id:TXN-1,account_id:A"):
            key = escaped(value) + "$" + escaped(record_key)
            assert key.startswith(escaped(value) + "$")
            assert record_key_of(key) == record_key
    assert record_key_of("\x00$TXN-003") == "TXN-003"


def test_only_values_rendered_like_hudi_are_looked_up():
    v1, v2 = SecondaryIndex("secondary_index_i", "c", 1), SecondaryIndex("secondary_index_i", "c", 2)
    schema = pa.schema([("c", pa.string())])

    def prefixes(index, *filters):
        return index.prefixes(bind_filters(list(filters), schema)[0])

    assert prefixes(v2, ("c", "=", "a$b")) == {"a\\$b$"}
    assert prefixes(v2, ("c", "is null", None)) == {"\x00$"}
    assert prefixes(v1, ("c", "in", ["x", "y"])) == {"x$", "y$"}
    assert prefixes(v1, ("c", "is null", None)) is None  # Hudi 1.0: no key for null
    with_null = BoundFilter("c", "in", pa.array(["x", None]), pa.string())  # not from the binder
    assert v2.prefixes(with_null) == {"x$", "\x00$"} and v1.prefixes(with_null) is None
    assert prefixes(v1, ("c", "=", "x\x00")) is None  # Hudi 1.0 leaves NUL unescaped
    assert prefixes(v2, ("c", "!=", "x")) is None
    assert prefixes(v2, ("c", ">", "x")) is None

    def typed(dtype, value, index=v2):
        return index.prefixes(bind_filters([("c", "=", value)], pa.schema([("c", dtype)]))[0])

    # as Hudi 1.1.1 wrote them through Spark (dates and strings are also in the fixture tables)
    assert typed(pa.int32(), -7) == {"-7$"} and typed(pa.int64(), 123456789012) == {"123456789012$"}
    assert typed(pa.date32(), "2024-01-21") == {"19743$"} and typed(pa.date32(), "1960-01-01") == {"-3653$"}
    assert typed(pa.timestamp("us", "UTC"), "2024-01-02T03:04:05.123456") == {"1704164645123456$"}
    assert typed(pa.timestamp("us", "UTC"), "1969-12-31T23:59:59") == {"-1000000$"}
    for dtype, value in (
        (pa.float64(), 1.5),  # Java's Double.toString
        (pa.bool_(), True),
        (pa.timestamp("us"), "2024-01-02"),  # no zone: not checked
        (pa.timestamp("ms", "UTC"), "2024-01-02"),
        (pa.decimal128(10, 2), "1.50"),
        (pa.binary(), b"x"),
    ):
        assert typed(dtype, value) is None, dtype
    for dtype, value in ((pa.int64(), 5), (pa.date32(), "2024-01-21"), (pa.timestamp("us", "UTC"), "2024-01-02")):
        assert typed(dtype, value, v1) is None, dtype  # not checked against Hudi 1.0


def _copy(path: str, tmp_path: Path) -> str:
    dest = tmp_path / "t"
    shutil.copytree(path, dest)
    return str(dest)


def _edit_properties(base: str, old: str, new: str) -> None:
    props = Path(base) / ".hoodie" / "hoodie.properties"
    text = props.read_text()
    assert old in text
    props.write_text(text.replace(old, new))


#: a copy-on-write table Hudi 1.1.1 wrote with four secondary indexes (its string index created last)
COW_VALUES = WrittenTable("1.1.1", "cow_secondary_index_values")
PLAIN = [("name", "=", "plain")]


def test_the_copy_on_write_index_prunes(written_table):
    """The fallback tests below start from this: the index is used on the unchanged table."""
    path = written_table(COW_VALUES)
    check(path, PLAIN, len(_holding(_hudi_snapshot(COW_VALUES).filter(pc.equal(pc.field("name"), "plain")))))


def _edit_name_index(base: str, **fields: str) -> None:
    """Set ``fields`` in the definition of the table's ``idx_name`` secondary index (index.json)."""
    defs = Path(base) / ".hoodie" / ".index_defs" / "index.json"
    data = json.loads(defs.read_text())
    data["indexDefinitions"]["secondary_index_idx_name"].update(fields)
    defs.write_text(json.dumps(data))


def test_an_index_not_yet_complete_is_not_used(written_table, tmp_path):
    path = _copy(written_table(COW_VALUES), tmp_path)
    _edit_properties(path, "partitions.inflight=\n", "partitions.inflight=secondary_index_idx_name\n")
    check(path, PLAIN, None)


def test_an_index_defined_on_another_function_is_not_used(written_table, tmp_path):
    path = _copy(written_table(COW_VALUES), tmp_path)
    _edit_name_index(path, indexFunction="lower")
    check(path, PLAIN, None)


def test_unreadable_definitions_warn_and_do_not_prune(written_table, tmp_path):
    path = _copy(written_table(COW_VALUES), tmp_path)
    (Path(path) / ".hoodie" / ".index_defs" / "index.json").write_text("{not json")
    table = HudiTable.open(path)
    with pytest.warns(MetadataTableFallbackWarning, match="secondary index not used"):
        assert located(path, PLAIN) is None
    with pytest.warns(MetadataTableFallbackWarning):
        assert set(table.read(filters=PLAIN)["_hoodie_record_key"].to_pylist()) == _keys_of(path, PLAIN)


def test_an_unplain_shard_layout_is_not_used(written_table, tmp_path):
    """Version 2 lookups hash to a shard: only the plain ``-NNNN-`` layout 0..N-1 is trusted."""
    path = _copy(written_table(COW_VALUES), tmp_path)
    folder = Path(path) / ".hoodie" / "metadata" / "secondary_index_idx_name"
    for f in folder.iterdir():
        if "-0009-0" in f.name:
            f.rename(f.with_name(f.name.replace("-0009-0", "-0010-0")))
    table = HudiTable.open(path)
    mdt = table.state.metadata_table
    assert mdt is not None and mdt.shards("secondary_index_idx_name") is None
    pruner = next(p for p in index_pruners(mdt, True, True)[1] if isinstance(p, SecondaryIndexPruner))
    assert pruner.located(bind_filters(PLAIN, table.schema)) is None


def test_time_travel_does_not_use_the_index(written_table):
    path = written_table(COW_VALUES)
    table = HudiTable.open(path)
    for at_latest in (True, False):
        _, slice_pruners = index_pruners(table.state.metadata_table, at_latest, True)
        assert any(isinstance(p, SecondaryIndexPruner) for p in slice_pruners) == at_latest
    first = table.timeline.commits[0].requested_time
    at_first = table.read(as_of=first, columns=["id", "name"]).to_pylist()
    (name,) = [r["name"] for r in at_first if r["id"] == "id000"]  # deleted later: gone from the index
    filters = [("name", "=", name)]
    assert "id000" not in table.read(filters=filters)["id"].to_pylist()
    old = table.read(filters=filters, as_of=first)
    assert "id000" in old["id"].to_pylist()
    assert old.equals(HudiTable.open(path, use_metadata_table=False).read(filters=filters, as_of=first))


@pytest.mark.parametrize("release", sorted(WRITTEN))
@pytest.mark.parametrize("filters", [[("name", "=", "name1_v1")], [("id", "=", "id001")]], ids=["secondary", "record"])
def test_read_optimized_queries_do_not_use_the_key_indexes(written_table, release, filters):
    """The base files still hold id001 (its delete is in a log file): a read-optimized query
    returns it, although the record and secondary indexes no longer know it."""
    path = written_table(WrittenTable(release, "mor_secondary_index"))
    options = ReadOptions(filters=filters, query_type="read_optimized", columns=["id", "name"])
    rows = HudiTable.open(path).read(options)
    assert rows.to_pylist() == [{"id": "id001", "name": "name1_v1"}]
    assert rows.equals(HudiTable.open(path, use_metadata_table=False).read(options))
    assert HudiTable.open(path).read(filters=filters).num_rows == 0  # the snapshot: deleted


def test_definitions_are_read_once_per_metadata_table_version(written_table, monkeypatch):
    path = written_table(COW_VALUES)
    table = HudiTable.open(path)
    storage_class = type(table.storage)
    paths: list[str] = []
    real = storage_class.read_bytes

    def spy(self, rel):
        paths.append(rel)
        return real(self, rel)

    monkeypatch.setattr(storage_class, "read_bytes", spy)
    for value in ("plain", "a$b", "missing"):
        list(file_slices(table.state, ReadOptions(filters=[("name", "=", value)])))
    assert list(file_slices(table.state, ReadOptions(filters=[("price", ">", 0)])))  # no lookup
    assert paths.count(".hoodie/.index_defs/index.json") == 1


def test_an_index_of_an_unknown_version_is_not_used(written_table, tmp_path):
    path = _copy(written_table(COW_VALUES), tmp_path)
    _edit_name_index(path, version="V3")
    assert "name" not in secondary_indexes(HudiTable.open(path).state.metadata_table)
    check(path, PLAIN, None)


#: release -> index version of its ``mor_secondary_index_values`` table (indexes on name, code, day, at)
VALUES_WRITTEN = {"1.0.2": 1, "1.1.1": 2}
VALUE_CASES = [
    # strings whose index keys escape ``$`` and ``\\``, the empty string, an ordinary value
    ("name", "a$b"), ("name", "x\\y"), ("name", "$"), ("name", ""), ("name", "plain"), ("name", "missing"),
    ("name", "x$y"),  # missing: its escaped key is not that of "x\\y"
    # signed integers, dates and zoned timestamps around the epoch (Hudi 1.1+ renderings)
    ("code", -6), ("code", -4), ("code", -2), ("code", 0), ("code", 3), ("code", 7),
    ("day", "1969-12-31"), ("day", "1970-01-02"), ("day", "1970-01-09"),
    ("at", "1969-12-31T23:59:59"), ("at", "1970-01-01T01:00:01.500001"), ("at", "1970-01-01T00:00:02.000002"),
    ("at", "1970-01-01T01:00:00"),
]


def _file_group(file_name: str) -> str:
    """The file id in a ``_hoodie_file_name``: ``<id>_<token>_<instant>.parquet`` or a log file
    ``.<id>_<instant>.log.<n>_<token>``."""
    return file_name.removeprefix(".").split("_", 1)[0]


def _holding(rows: pa.Table) -> set[tuple[str, str]]:
    return {(part, _file_group(name)) for part, name in
            zip(rows["_hoodie_partition_path"].to_pylist(), rows["_hoodie_file_name"].to_pylist())}


def _hudi_snapshot(table: WrittenTable) -> pa.Table:
    return read_result(table.expected, next(q for q in table.manifest().queries if q.name == "snapshot"))


#: (release, table type) of the ``<type>_secondary_index_values`` tables
VALUES_TABLES = [(release, kind) for release in sorted(VALUES_WRITTEN) for kind in ("cow", "mor")]


@pytest.mark.parametrize("release,kind", VALUES_TABLES, ids=[f"{k}-{r}" for r, k in VALUES_TABLES])
@pytest.mark.parametrize("column,value", VALUE_CASES, ids=[f"{c}={v!r}" for c, v in VALUE_CASES])
def test_hudi_written_values_prune_to_the_groups_holding_them(written_table, release, kind, column, value):
    """Strings needing escapes, an ordinary string, signed integers, dates and timestamps on a table Hudi
    wrote (record key ``k$2``, values moved by an upsert into log files, a delete): the pruned read
    equals the read without the metadata table and Hudi's own snapshot filtered by the value, and
    on copy-on-write only the file groups holding those rows are planned (a version 1 index answers
    strings only). Merge-on-read tables use no secondary index (see
    ``test_hudi_1_1_typed_indexes_render_like_us_and_miss_log_writes``)."""
    written = WrittenTable(release, f"{kind}_secondary_index_values")
    path = written_table(written)
    filters = [(column, "=", value)]
    table = HudiTable.open(path)
    assert set(secondary_indexes(table.state.metadata_table)) == {"name", "code", "day", "at"}
    rows, groups = planned(path, filters)
    plain, all_groups = planned(path, filters, use_metadata_table=False)
    assert rows.equals(plain)
    bound = bind_filters(filters, table.schema)[0]
    hudi = _hudi_snapshot(written)
    expected = hudi.filter(bound.expression())
    assert sorted(rows["_hoodie_record_key"].to_pylist()) == sorted(expected["_hoodie_record_key"].to_pylist())
    found = located(path, filters)
    if kind == "mor" or (column != "name" and VALUES_WRITTEN[release] == 1):
        assert found is None
    else:
        assert found == _holding(expected) and groups == len(found) <= all_groups


@pytest.mark.parametrize("release,kind", VALUES_TABLES, ids=[f"{k}-{r}" for r, k in VALUES_TABLES])
def test_hudi_written_null_and_key_with_dollar(written_table, release, kind):
    """``is null`` is answered from a version 2 index only (copy-on-write); the record key ``k$2``
    (its value moved to the empty string) is found through its escaped index key."""
    written = WrittenTable(release, f"{kind}_secondary_index_values")
    path = written_table(written)
    hudi = _hudi_snapshot(written)
    nulls = hudi.filter(pc.is_null(hudi["name"]))
    assert nulls.num_rows > 0
    rows, _ = planned(path, [("name", "is null", None)])
    assert sorted(rows["id"].to_pylist()) == sorted(nulls["id"].to_pylist())
    answered = kind == "cow" and VALUES_WRITTEN[release] == 2
    assert located(path, [("name", "is null", None)]) == (_holding(nulls) if answered else None)
    empty = HudiTable.open(path).read(filters=[("name", "=", "")], columns=["id"])
    assert sorted(empty.column("id").to_pylist()) == ["id006", "k$2"]


@pytest.mark.parametrize("column", ["code", "day", "at"])
def test_hudi_1_1_typed_indexes_render_like_us_and_miss_log_writes(written_table, column):
    """Hudi 1.1.1's integer, date and timestamp index keys are this reader's renderings for every
    row a base file holds, but its updates and deletes written to log files never reach those
    indexes (the string index, created first, follows them; on a table written the same way with
    the string index created last, it missed them too): so merge-on-read tables use no secondary
    index."""
    written = WrittenTable("1.1.1", "mor_secondary_index_values")
    path = written_table(written)
    mdt = HudiTable.open(path).state.metadata_table
    index = secondary_indexes(mdt)[column]
    keys = set(mdt.read(index.partition))
    hudi = _hudi_snapshot(written)
    typed = SecondaryIndex(index.partition, column, 2)
    rendered = [escaped(v) + "$" + escaped(k) for v, k in
                zip(typed.rendered(hudi[column].combine_chunks()), hudi["_hoodie_record_key"].to_pylist())]
    in_base_files = [name.endswith(".parquet") for name in hudi["_hoodie_file_name"].to_pylist()]
    assert any(in_base_files) and not all(in_base_files)
    for key, in_base in zip(rendered, in_base_files):
        assert (key in keys) == in_base, key
    deleted = {"id000", "id005"}  # deleted through a log file: still in the index
    assert deleted <= {record_key_of(k) for k in keys}


def test_hudi_1_0_typed_index_keys_differ_from_version_2(written_table):
    """Hudi 1.0.2 follows log-file writes in every index, but writes dates as ISO text (Hudi 1.1:
    epoch days) and no key for a null: a version 1 index is looked up for strings only."""
    written = WrittenTable("1.0.2", "mor_secondary_index_values")
    path = written_table(written)
    mdt = HudiTable.open(path).state.metadata_table
    hudi = _hudi_snapshot(written)
    rows = list(zip(hudi["_hoodie_record_key"].to_pylist(), hudi["day"].to_pylist()))
    keys = set(mdt.read(secondary_indexes(mdt)["day"].partition))
    assert keys == {f"{day.isoformat()}${escaped(key)}" for key, day in rows}
    names = {record_key_of(k) for k in mdt.read(secondary_indexes(mdt)["name"].partition)}
    assert names == {k for k, v in zip(hudi["_hoodie_record_key"].to_pylist(), hudi["name"].to_pylist()) if v is not None}
