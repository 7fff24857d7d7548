"""Filters: binding, exact row semantics, partition pruning and statistics pruning."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pyarrow.fs  # noqa: F401  (pa.fs)
import pytest

from catalog import HudiTable
from catalog.plan.filters import bind_filters, filter_table, stats_may_match, to_expression
from catalog.plan.planner import file_slices
from catalog.plan.prune import PartitionValuePruner, TimestampPathFilters
from catalog.read.split_reader import read_splits
from catalog.table.config import TableConfig
from catalog.table.partitions import PartitionScheme
from tests.support.planning import planned_partitions

SCHEMA = pa.schema(
    [
        ("i", pa.int32()),
        ("s", pa.string()),
        ("d", pa.decimal128(10, 2)),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("b", pa.bool_()),
        ("st", pa.struct([("x", pa.int32())])),
    ]
)
ROWS = pa.table(
    {
        "i": pa.array([1, 2, 3, None], pa.int32()),
        "s": ["a", "b", None, "d"],
        "d": pa.array([Decimal("1.50"), Decimal("2.00"), None, Decimal("9.99")], pa.decimal128(10, 2)),
        "day": pa.array([dt.date(2024, 1, 1), dt.date(2024, 1, 2), None, dt.date(2024, 1, 3)]),
        "ts": pa.array([dt.datetime(2024, 1, 1, 12), None, dt.datetime(2024, 1, 2), dt.datetime(2024, 1, 3)],
                       pa.timestamp("us", tz="UTC")),
        "b": [True, False, None, True],
        "st": [{"x": 1}, None, {"x": 3}, {"x": 4}],
    },
    schema=SCHEMA,
)


def _rows(*filters):
    return filter_table(ROWS, bind_filters(list(filters), SCHEMA)).column("i").to_pylist()


@pytest.mark.parametrize(
    "flt, expected",
    [
        (("i", "=", 2), [2]),
        (("i", "==", "2"), [2]),  # strings are parsed into the column type, as hudi-rs does
        (("i", "!=", 2), [1, 3]),  # null never matches a comparison
        (("i", "<", 3), [1, 2]),
        (("i", "<=", 3), [1, 2, 3]),
        (("i", ">", 1), [2, 3]),
        (("i", ">=", 1.0), [1, 2, 3]),
        (("i", "in", [1, 3, 7]), [1, 3]),
        (("i", "NOT IN", [1]), [2, 3]),
        (("i", "is null", None), [None]),
        (("i", "is not null", None), [1, 2, 3]),
        (("s", "not in", ["a"]), [2, None]),  # the null s row is dropped
        (("d", ">", "1.99"), [2, None]),
        (("d", "=", 1.5), [1]),
        (("day", ">=", "2024-01-02"), [2, None]),
        (("day", "<", dt.date(2024, 1, 2)), [1]),
        (("ts", ">", "2024-01-01T13:00:00"), [3, None]),  # no offset: read as UTC
        (("ts", "<=", "2024-01-01 12:00:00+00:00"), [1]),
        (("b", "=", True), [1, None]),
        (("st", "is null", None), [2]),
    ],
)
def test_row_semantics(flt, expected):
    assert _rows(flt) == expected


def test_filters_are_anded():
    assert _rows(("i", ">", 1), ("s", "is not null", None)) == [2]
    assert to_expression([]) is None


def test_struct_columns_only_take_null_tests():
    with pytest.raises(ValueError, match="not supported for type"):
        bind_filters([("st", "=", 1)], SCHEMA)


@pytest.mark.parametrize(
    "flt, lo, hi, nulls, count, may",
    [
        (("i", "=", 5), 1, 4, 0, 10, False),
        (("i", "=", 4), 1, 4, 0, 10, True),
        (("i", "<", 1), 1, 4, 0, 10, False),
        (("i", ">", 4), 1, 4, 0, 10, False),
        (("i", ">=", 4), 1, 4, 0, 10, True),
        (("i", "!=", 3), 3, 3, 0, 10, False),
        (("i", "in", [0, 9]), 1, 4, 0, 10, False),
        (("i", "in", [0, 2]), 1, 4, 0, 10, True),
        (("i", "not in", [3]), 3, 3, 0, 10, False),
        (("i", "is null", None), 1, 4, 0, 10, False),
        (("i", "is not null", None), None, None, 10, 10, False),
        (("i", "=", 2), None, None, None, None, True),  # unknown statistics never prune
    ],
)
def test_stats_may_match(flt, lo, hi, nulls, count, may):
    bound = bind_filters([flt], SCHEMA)
    assert stats_may_match(bound, "i", lo, hi, nulls, count) is may


def _config(props: dict[str, str]) -> TableConfig:
    base = {"hoodie.table.type": "COPY_ON_WRITE", "hoodie.table.version": "6"}
    return TableConfig.from_properties({**base, **props})


def _scheme(props: dict[str, str], schema: pa.Schema) -> PartitionScheme:
    return PartitionScheme(_config(props), schema)


def _pruner(props: dict[str, str], schema: pa.Schema) -> PartitionValuePruner:
    return PartitionValuePruner(_config(props), schema)


def test_partition_parsing_hive_multi_level_and_url_encoded():
    schema = pa.schema(
        [("_hoodie_partition_path", pa.string()), ("region", pa.string()), ("day", pa.date32()), ("n", pa.int64())]
    )
    props = {
        "hoodie.table.partition.fields": "region,day,n",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.write.partitionpath.urlencode": "true",
    }
    scheme = _scheme(props, schema)
    assert scheme.parse("region=a%2Fb/day=2024-01-02/n=7") == {"region": "a/b", "day": "2024-01-02", "n": "7"}
    assert scheme.parse("region=__HIVE_DEFAULT_PARTITION__/day=2024-01-02/n=7")["region"] is None
    assert scheme.parse("region=a/day=2024-01-02") is None  # wrong depth
    parts = ["region=a%2Fb/day=2024-01-02/n=7", "region=us/day=2024-01-03/n=8", "region=us/day=2024-01-03/n=9"]
    pruner = _pruner(props, schema)
    prune = lambda *f: pruner.prune(parts, bind_filters(list(f), schema))  # noqa: E731
    assert prune(("region", "=", "a/b")) == parts[:1]
    assert prune(("day", ">", "2024-01-02"), ("n", "in", [9])) == parts[2:]
    assert prune(("_hoodie_partition_path", "=", parts[1])) == [parts[1]]


def test_timestamp_keygen_prunes_only_on_partition_path():
    schema = pa.schema([("ts", pa.int64()), ("_hoodie_partition_path", pa.string())])
    pruner = _pruner(
        {
            "hoodie.table.partition.fields": "ts",
            "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
        },
        schema,
    )
    parts = ["2024/01/01", "2024/01/02"]
    assert pruner.prune(parts, bind_filters([("ts", "=", 5)], schema)) == parts  # not invertible: keep all
    assert pruner.prune(parts, bind_filters([("_hoodie_partition_path", ">", "2024/01/01")], schema)) == parts[1:]


def test_non_hive_values_and_custom_timestamp_fields():
    schema = pa.schema([("a", pa.int32()), ("t", pa.string())])
    props = {"hoodie.table.partition.fields": "a:SIMPLE,t:TIMESTAMP", "hoodie.table.keygenerator.type": "CUSTOM"}
    assert [f.name for f in _scheme(props, schema).value_fields] == ["a"]
    pruner = _pruner(props, schema)
    assert pruner.prune(["10/x", "20/y"], bind_filters([("a", ">", 15), ("t", "=", "x")], schema)) == ["20/y"]


def test_partition_pruning_reads_fewer_files(fixture_table):
    table = HudiTable.open(fixture_table("sample_table/cow/v6_simplekeygen_nonhivestyle"))
    assert table.partition_fields == ["byteField"]
    assert planned_partitions(table, filters=[("byteField", "=", 10)]) == ["10"]
    scan = table.scan(filters=[("byteField", "=", 10)])
    splits = list(scan.splits)  # planning reads the footers; count the opens of the read alone
    table.storage.stats.reset()
    result = pa.Table.from_batches(list(read_splits(scan.context, splits)), scan.schema)
    assert set(result.column("byteField").to_pylist()) == {10}
    assert table.storage.stats.counts["open"] == len(list(file_slices(table.state, scan.options)))
    assert planned_partitions(table) == ["10", "20", "30"]


def test_row_group_statistics_skip_data(tmp_path):
    """A filter outside a row group's min/max never decodes it (pyarrow prunes by statistics)."""
    import pyarrow.parquet as pq

    from catalog.format.base_file import BaseFileRead
    from catalog.format.parquet import read_parquet
    from catalog.storage import Storage

    data = pa.table({"k": pa.array(range(10_000), pa.int64())})
    pq.write_table(data, tmp_path / "f.parquet", row_group_size=1000)
    storage = Storage(str(tmp_path))
    schema = data.schema
    expr = to_expression(bind_filters([("k", ">=", 9500)], schema))
    batches = list(read_parquet(storage, BaseFileRead("f.parquet", schema, filter=expr, filter_columns=("k",))))
    assert sum(b.num_rows for b in batches) == 500
    # The same expression lets pyarrow drop 9 of the 10 row groups from their statistics alone.
    import pyarrow.dataset as ds

    fragment = ds.ParquetFileFormat().make_fragment(str(tmp_path / "f.parquet"), filesystem=pa.fs.LocalFileSystem())
    assert [rg.id for rg in fragment.subset(expr).row_groups] == [9]


def test_index_pruners_are_called(fixture_table, monkeypatch):
    """The planner runs the partition and slice pruners of ``catalog.plan.prune.index_pruners``."""
    import catalog.plan.planner as planner

    calls = []

    class PartitionPruner:
        def prune(self, partitions, filters):
            calls.append(("partitions", list(partitions), [f.column for f in filters]))
            return [p for p in partitions if p != "30"]

    class SlicePruner:
        def prune(self, slices, filters):
            calls.append(("slices", len(slices)))
            return slices[:1]

    def index_pruners(mdt, at_latest, use_record_index, read_optimized=False):
        calls.append(("at_latest", at_latest))
        return [PartitionPruner()], [SlicePruner()]

    monkeypatch.setattr(planner, "index_pruners", index_pruners)
    table = HudiTable.open(fixture_table("sample_table/cow/v6_simplekeygen_nonhivestyle"))
    plain = table.read()
    assert [c for c in calls if c[0] != "at_latest"] == []  # no filters: no pruning
    calls.clear()
    result = table.read(filters=[("id", "is not null", None)])
    assert calls[0] == ("at_latest", True)  # the query reads the latest commit
    assert calls[1] == ("partitions", ["10", "20", "30"], ["id"])
    assert calls[2][0] == "slices" and result.num_rows < plain.num_rows


def test_timestamp_keygen_equality_prunes_through_the_path(fixture_table):
    from catalog.listing.storage import StorageListing

    table = HudiTable.open(fixture_table("sample_table/cow/v9_timebasedkeygen_epochmillis"))
    rows = table.read(columns=["ts_millis", "_hoodie_partition_path"])
    translator = TimestampPathFilters(table.config, table.schema)
    # The translation reproduces the writer's path for every stored row.
    assert [translator._path(v) for v in rows.column(0).to_pylist()] == rows.column(1).to_pylist()
    value = sorted(rows.column(0).to_pylist())[-1]
    partitions = StorageListing(table.storage, table.config).list_partitions()
    pruner = PartitionValuePruner(table.config, table.schema)
    prune = lambda f: pruner.prune(partitions, bind_filters([f], table.schema))  # noqa: E731
    assert prune(("ts_millis", "=", value)) == [translator._path(value)]
    assert planned_partitions(table, filters=[("ts_millis", "=", value)]) == [translator._path(value)]
    result = table.read(filters=[("ts_millis", "=", value)])
    assert result.column("ts_millis").to_pylist() == [value] * rows.column(0).to_pylist().count(value)
    # The column is stored as a string here: text order is not time order, so ranges never prune.
    assert prune(("ts_millis", ">", value)) == partitions


def test_timestamp_keygen_ranges_on_epoch_numbers():
    schema = pa.schema([("_hoodie_partition_path", pa.string()), ("ts", pa.int64())])
    pruner = _pruner(
        {
            "hoodie.table.partition.fields": "ts",
            "hoodie.table.keygenerator.type": "TIMESTAMP",
            "hoodie.keygen.timebased.timestamp.type": "UNIX_TIMESTAMP",
            "hoodie.keygen.timebased.output.dateformat": "yyyy-MM-dd",
            "hoodie.keygen.timebased.output.timezone": "America/Chicago",
        },
        schema,
    )
    parts = ["2024-01-01", "2024-01-02", "2024-01-03"]
    noon_jan2_utc = 1704196800  # 2024-01-02 12:00 UTC = 06:00 in Chicago
    prune = lambda *f: pruner.prune(parts, bind_filters(list(f), schema))  # noqa: E731
    assert prune(("ts", "=", noon_jan2_utc)) == ["2024-01-02"]
    assert prune(("ts", ">", noon_jan2_utc)) == ["2024-01-02", "2024-01-03"]
    assert prune(("ts", "<=", noon_jan2_utc)) == ["2024-01-01", "2024-01-02"]
    assert prune(("ts", "in", [noon_jan2_utc, noon_jan2_utc + 86400])) == ["2024-01-02", "2024-01-03"]
    assert prune(("ts", "!=", noon_jan2_utc)) == parts
    # 2024-01-02 03:00 UTC is still January 1st in Chicago.
    assert prune(("ts", "=", noon_jan2_utc - 9 * 3600)) == ["2024-01-01"]


@pytest.mark.parametrize("fmt", ["dd/MM/yyyy", "yyyy/HH", "yyMMdd", "EEE yyyy", "yyyy-MM-dd'T'HH", "yyyy/M/d"])
def test_timestamp_formats_that_do_not_sort_like_time_never_prune(fmt):
    schema = pa.schema([("_hoodie_partition_path", pa.string()), ("ts", pa.int64())])
    config = _config(
        {
            "hoodie.table.partition.fields": "ts",
            "hoodie.table.keygenerator.type": "TIMESTAMP",
            "hoodie.keygen.timebased.timestamp.type": "UNIX_TIMESTAMP",
            "hoodie.keygen.timebased.output.dateformat": fmt,
        }
    )
    assert TimestampPathFilters(config, schema).field is None
