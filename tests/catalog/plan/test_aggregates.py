"""count, min and max from Parquet footers (catalog.plan.aggregates): every answer equals the
aggregate of the rows read, and whatever the footers do not decide exactly is refused by name."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from catalog import HudiTable, UnansweredError
from catalog.errors import ColumnNotFoundError, InvalidQueryError
from catalog.plan.aggregates import UNANSWERED, Aggregate, check_aggregates
from catalog.plan.options import ReadOptions
from hudi_generator.generator import COPY_ON_WRITE, MERGE_ON_READ, GeneratorSpec

KERNELS = {"count": pc.count, "min": pc.min, "max": pc.max}
HUDI_WRITTEN = ["sample_table/cow/v9_txns_simple_meta", "sample_table/cow/v6_nonpartitioned",
                "sample_table/cow/v8_simplekeygen_nonhivestyle"]


def _leaf(rows: pa.Table, column: str) -> pa.ChunkedArray:
    top, *rest = column.split(".")
    values = rows.column(top)
    for name in rest:
        values = pc.struct_field(values, name)
    return values


def _check_all(table: HudiTable, **options) -> tuple[int, list[str]]:
    """Every aggregate of every leaf column, one by one: answered ones equal the rows', refused
    ones say why. Returns (answered, reasons)."""
    rows = table.read(**options)
    columns = ["*"] + [f.name for f in rows.schema if not pa.types.is_nested(f.type)]
    columns += [f"{f.name}.{c.name}" for f in rows.schema if pa.types.is_struct(f.type)
                for c in f.type if not pa.types.is_nested(c.type)]
    answered, reasons = 0, []
    for column in columns:
        for function in (["count"] if column == "*" else ["count", "min", "max"]):
            aggregate = Aggregate(function, column)
            try:
                got = table.scan(**options).aggregates([aggregate]).column(0)[0].as_py()
            except UnansweredError as err:
                assert str(err).startswith(UNANSWERED)
                reasons.append(str(err))
                continue
            expected = rows.num_rows if column == "*" else KERNELS[function](_leaf(rows, column)).as_py()
            assert got == expected, (aggregate.name, options)
            answered += 1
    return answered, reasons


@pytest.mark.parametrize("name", HUDI_WRITTEN)
def test_hudi_written_tables_answer_exactly(fixture_table, name):
    table = HudiTable.open(fixture_table(name))
    answered, reasons = _check_all(table)
    assert answered > 20
    assert all("floating point" in r or "binary" in r for r in reasons), reasons
    first = table.timeline.commits[0].requested_time
    assert _check_all(table, as_of=first)[0] > 20  # time travel: the files of that instant


def test_generated_table_answers_types_and_nested_leaves(generated_table):
    table = HudiTable.open(generated_table(GeneratorSpec(rows=3000, partitions=3, commits=2, workers=1)))
    answered, reasons = _check_all(table)
    assert answered >= 3 * 12  # ints, strings, decimal, timestamp, location.zone ...
    got = table.scan().aggregates([Aggregate("min", "location.zone"), Aggregate("count", "*")])
    assert got.schema.names == ["min(location.zone)", "count(*)"]


def test_filters_are_answered_only_where_the_statistics_decide(generated_table):
    table = HudiTable.open(generated_table(GeneratorSpec(rows=3000, partitions=3, commits=2, workers=1)))
    region = table.read(columns=["region"]).column("region")[0].as_py()
    decided = table.scan(filters=[("region", "=", region)]).aggregates([Aggregate("max", "ts")])
    assert decided.column(0)[0].as_py() == pc.max(table.read(filters=[("region", "=", region)])["ts"]).as_py()
    with pytest.raises(UnansweredError, match="do not prove"):
        table.scan(filters=[("ts", "!=", 1700000000001)]).aggregates([Aggregate("count", "*")])
    with pytest.raises(UnansweredError, match="decide a filter on 'fare'"):
        table.scan(filters=[("fare", ">", 1.0)]).aggregates([Aggregate("count", "*")])


def test_merges_increments_schema_evolution_and_floats_are_refused(generated_table):
    mor = HudiTable.open(generated_table(GeneratorSpec(rows=600, partitions=2, commits=3, table_type=MERGE_ON_READ,
                                                       workers=1)))
    with pytest.raises(UnansweredError, match="log files"):
        mor.scan().aggregates([Aggregate("count", "*")])
    assert mor.scan(query_type="read_optimized").aggregates([Aggregate("count", "*")]).num_rows == 1
    # a few updates: some base files keep the schema of an older commit (a column renamed since)
    evolved = HudiTable.open(generated_table(GeneratorSpec(
        rows=600, partitions=2, files_per_partition=3, update_fraction=0.01, commits=4, evolve_schema=True,
        table_type=COPY_ON_WRITE, workers=1)))
    answered, reasons = _check_all(evolved)  # what is answered is right
    assert sum("changed when read" in r for r in reasons) > 10
    with pytest.raises(UnansweredError, match="floating point"):
        mor.scan(query_type="read_optimized").aggregates([Aggregate("min", "fare")])
    with pytest.raises(UnansweredError, match="leaf columns"):
        mor.scan(query_type="read_optimized").aggregates([Aggregate("count", "location")])
    with pytest.raises(ColumnNotFoundError, match="'nope'"):
        mor.scan(query_type="read_optimized").aggregates([Aggregate("max", "nope")])


@pytest.mark.parametrize("raw, message", [
    (["sum", "x"], "unknown aggregate function"), (["min", "*"], "count only"), (["count"], "function, column"),
    ("count(*)", "function, column"), (["count", ""], "needs a column"),
])
def test_bad_aggregates_are_invalid(raw, message):
    with pytest.raises(InvalidQueryError, match=message):
        Aggregate.parse(raw)


@pytest.mark.parametrize("options, message", [
    (ReadOptions(limit=1), "limit"), (ReadOptions(columns=["a"]), "columns"),
    (ReadOptions(query_type="incremental"), "incremental"), (ReadOptions(query_type="cdc"), "cdc"),
])
def test_options_aggregates_do_not_take(options, message):
    with pytest.raises(InvalidQueryError, match=message):
        check_aggregates([Aggregate("count", "*")], options)
