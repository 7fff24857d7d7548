"""Hand-built table version 6 tables for cases no fixture covers (format doc section 10 notes):
URL-encoded partition values, dropped partition columns and schema evolution between files."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from catalog import HudiTable, UnsupportedTableError
from tests.support.planning import planned_partitions

META = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
        "_hoodie_file_name"]


def _avro(fields: list[tuple[str, str]]) -> str:
    return json.dumps({"type": "record", "name": "r", "fields": [{"name": n, "type": ["null", t]} for n, t in fields]})


def _write(root: Path, props: dict[str, str], commits: list[tuple[str, str, dict[str, pa.Table]]]) -> str:
    """``commits``: (instant, avro schema, {relative file path: data without meta columns})."""
    hoodie = root / ".hoodie"
    hoodie.mkdir(parents=True)
    base = {"hoodie.table.type": "COPY_ON_WRITE", "hoodie.table.version": "6", "hoodie.table.name": "t",
            "hoodie.table.recordkey.fields": "id"}
    (hoodie / "hoodie.properties").write_text("".join(f"{k}={v}\n" for k, v in {**base, **props}.items()))
    for instant, schema, files in commits:
        stats: dict[str, list] = {}
        for rel, data in files.items():
            partition, _, name = rel.rpartition("/")
            (root / partition).mkdir(parents=True, exist_ok=True)
            (root / partition / ".hoodie_partition_metadata").write_text(f"commitTime={instant}\npartitionDepth=1\n")
            rows = data.num_rows
            meta = {
                "_hoodie_commit_time": [instant] * rows,
                "_hoodie_commit_seqno": [f"{instant}_0_{i}" for i in range(rows)],
                "_hoodie_record_key": [str(k) for k in data.column("id").to_pylist()],
                "_hoodie_partition_path": [partition] * rows,
                "_hoodie_file_name": [name] * rows,
            }
            full = pa.table({**{k: pa.array(v, pa.string()) for k, v in meta.items()},
                             **{c: data.column(c) for c in data.column_names}})
            pq.write_table(full, root / rel)
            stats.setdefault(partition, []).append({"fileId": name.split("_")[0], "path": rel})
        extra = {"schema": schema} if schema else {}
        (hoodie / f"{instant}.commit").write_text(json.dumps(
            {"partitionToWriteStats": stats, "extraMetadata": extra, "operationType": "UPSERT"}))
    return str(root)


FG1, FG2 = "11111111-1111-1111-1111-111111111111-0", "22222222-2222-2222-2222-222222222222-0"


def test_url_encoded_values_and_dropped_partition_columns(tmp_path):
    schema = _avro([("id", "int"), ("region", "string")])
    path = _write(
        tmp_path,
        {"hoodie.table.partition.fields": "region", "hoodie.datasource.write.hive_style_partitioning": "true",
         "hoodie.datasource.write.partitionpath.urlencode": "true",
         "hoodie.datasource.write.drop.partition.columns": "true"},
        [("20240101000000000", schema, {
            f"region=a%2Fb/{FG1}_0-1-1_20240101000000000.parquet": pa.table({"id": pa.array([1, 2], pa.int32())}),
            f"region=c%3Dd/{FG2}_0-1-1_20240101000000000.parquet": pa.table({"id": pa.array([3], pa.int32())}),
        })],
    )
    table = HudiTable.open(path)
    result = table.read(columns=["id", "region"]).sort_by("id")
    assert result.to_pylist() == [{"id": 1, "region": "a/b"}, {"id": 2, "region": "a/b"}, {"id": 3, "region": "c=d"}]
    assert planned_partitions(table, columns=["id"], filters=[("region", "=", "c=d")]) == ["region=c%3Dd"]
    assert table.read(columns=["id"], filters=[("region", "=", "c=d")]).column("id").to_pylist() == [3]


def _dropped_int_partition(tmp_path: Path, folder: str) -> str:
    """A table partitioned by the int ``grp``, which its data files leave out, whose commit schema
    keeps the column (with its type), with one file in partition ``folder``."""
    return _write(
        tmp_path,
        {"hoodie.table.partition.fields": "grp", "hoodie.datasource.write.hive_style_partitioning": "true",
         "hoodie.datasource.write.drop.partition.columns": "true"},
        [("20240101000000000", _avro([("id", "int"), ("grp", "int")]), {
            f"{folder}/{FG1}_0-1-1_20240101000000000.parquet": pa.table({"id": pa.array([1, 2], pa.int32())}),
        })],
    )


def test_a_dropped_partition_column_keeps_the_schemas_type(tmp_path):
    table = HudiTable.open(_dropped_int_partition(tmp_path, "grp=7"))
    assert table.schema.field("grp").type == pa.int32()
    assert table.read(columns=["id", "grp"], filters=[("grp", ">", 5)]).to_pylist() == [
        {"id": 1, "grp": 7}, {"id": 2, "grp": 7}]


def test_a_dropped_partition_column_the_path_gives_no_value_for_is_refused(tmp_path):
    """Never a column of nulls: a path segment that is not a value of the column's type is refused."""
    table = HudiTable.open(_dropped_int_partition(tmp_path, "grp=seven"))
    with pytest.raises(UnsupportedTableError, match="partition column.s. grp are left out of the data files"):
        table.read(columns=["id", "grp"])
    assert table.read(columns=["id"]).num_rows == 2  # the column not asked for


def test_schema_evolution_across_files(tmp_path):
    old = _avro([("id", "int"), ("n", "int")])
    new = json.dumps({"type": "record", "name": "r", "fields": [
        {"name": "id", "type": ["null", "int"]}, {"name": "n", "type": ["null", "long"]},
        {"name": "extra", "type": ["null", "string"]},
        {"name": "st", "type": ["null", {"type": "record", "name": "st", "fields": [
            {"name": "a", "type": ["null", "int"]}, {"name": "b", "type": ["null", "string"]}]}]}]})
    path = _write(
        tmp_path, {},
        [
            ("20240101000000000", old, {f"{FG1}_0-1-1_20240101000000000.parquet": pa.table(
                {"id": pa.array([1], pa.int32()), "n": pa.array([7], pa.int32()),
                 "st": pa.array([{"a": 1}], pa.struct([("a", pa.int32())]))})}),
            ("20240102000000000", new, {f"{FG2}_0-1-1_20240102000000000.parquet": pa.table(
                {"id": pa.array([2], pa.int32()), "n": pa.array([2**40], pa.int64()), "extra": ["x"],
                 "st": pa.array([{"a": 2, "b": "y"}], pa.struct([("a", pa.int32()), ("b", pa.string())]))})}),
        ],
    )
    table = HudiTable.open(path)
    assert table.schema.names == META + ["id", "n", "extra", "st"]
    assert table.schema.field("n").type == pa.int64()
    rows = table.read(columns=["id", "n", "extra", "st"]).sort_by("id").to_pylist()
    assert rows == [
        {"id": 1, "n": 7, "extra": None, "st": {"a": 1, "b": None}},
        {"id": 2, "n": 2**40, "extra": "x", "st": {"a": 2, "b": "y"}},
    ]
    # A filter on a column the older file lacks is applied after the cast: exact, never an error.
    assert table.read(columns=["id"], filters=[("extra", "is null", None)]).column("id").to_pylist() == [1]
    assert table.read(columns=["id"], filters=[("n", ">", 10)]).column("id").to_pylist() == [2]


@pytest.mark.parametrize("limit", [0, 1, 2, 5])
def test_limit_and_batches(tmp_path, limit):
    schema = _avro([("id", "int")])
    path = _write(tmp_path, {}, [("20240101000000000", schema, {
        f"{FG1}_0-1-1_20240101000000000.parquet": pa.table({"id": pa.array([1, 2, 3], pa.int32())}),
        f"{FG2}_0-1-1_20240101000000000.parquet": pa.table({"id": pa.array([4], pa.int32())}),
    })])
    table = HudiTable.open(path)
    reader = table.read_batches(columns=["id"], limit=limit)
    assert isinstance(reader, pa.RecordBatchReader)
    assert reader.read_all().num_rows == min(limit, 4)


def test_schema_falls_back_to_create_schema_then_base_file(tmp_path):
    data = {f"{FG1}_0-1-1_20240101000000000.parquet": pa.table({"id": pa.array([1], pa.int32()), "v": [1.5]})}
    # No schema in the commit: hoodie.table.create.schema is next.
    created = _write(tmp_path / "a", {"hoodie.table.create.schema": _avro([("id", "int"), ("v", "double")])},
                     [("20240101000000000", "", data)])
    assert HudiTable.open(created).schema.names == META + ["id", "v"]
    # Neither: the schema of a committed base file (its Parquet schema when no Avro schema is stored).
    bare = _write(tmp_path / "b", {}, [("20240101000000000", "", data)])
    table = HudiTable.open(bare)
    assert table.schema.names == META + ["id", "v"] and table.schema.field("v").type == pa.float64()
    assert table.read(columns=["id", "v"]).to_pylist() == [{"id": 1, "v": 1.5}]
