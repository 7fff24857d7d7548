"""The vectorised MOR merge (format doc 7.1-7.3): merge modes, deletes, schema evolution, and
end-to-end reads of synthetic and corrupted tables."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pyarrow as pa
import pytest

from catalog import HudiTable
from catalog.errors import CorruptBlockWarning
from catalog.format.log_block import DeleteRecords
from catalog.plan.options import ReadOptions
from catalog.plan.planner import file_slices, plan
from catalog.read.mor import COMMIT_TIME, EVENT_TIME, MergeSpec, data_rows, delete_rows, merge_batches, reduce_winners
from catalog.read.split_reader import read_split
from catalog.table.files import Split
from hudi_generator import log_writer
from hudi_generator.generator import MERGE_ON_READ, GeneratorSpec, expected_table
from tests.support.compare import assert_same_rows, hudi_read

SCHEMA = pa.schema([("_hoodie_record_key", pa.string()), ("ts", pa.int64()), ("v", pa.string())])


def _spec(mode: str) -> MergeSpec:
    return MergeSpec(["_hoodie_record_key"], ["ts"], mode, SCHEMA)


def _records(*rows: tuple) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r)) for r in rows], schema=SCHEMA)


def _deletes(*keys: str, ordering=0) -> DeleteRecords:
    return DeleteRecords(pa.array(keys, pa.string()), pa.array([""] * len(keys), pa.string()), [ordering] * len(keys))


def _merge(spec: MergeSpec, base: pa.Table, *log_parts) -> dict:
    """Apply log parts (record tables or DeleteRecords) in order over ``base``; key -> (ts, v)."""
    seq, rows = 0, []
    for part in log_parts:
        r = delete_rows(spec, part, seq) if isinstance(part, DeleteRecords) else data_rows(spec, part, seq)
        seq += r.num_rows
        rows.append(r)
    winners = reduce_winners(spec, pa.concat_tables(rows))
    out = pa.Table.from_batches(list(merge_batches(spec, base.to_batches(), winners)))
    return {r["_hoodie_record_key"]: (r["ts"], r["v"]) for r in out.select(SCHEMA.names).to_pylist()}


BASE = _records(("a", 10, "a0"), ("b", 10, "b0"), ("c", 10, "c0"))


def test_commit_time_ordering_last_write_wins():
    got = _merge(_spec(COMMIT_TIME), BASE, _records(("a", 5, "a1"), ("d", 1, "d1")), _records(("a", 1, "a2")))
    assert got == {"a": (1, "a2"), "b": (10, "b0"), "c": (10, "c0"), "d": (1, "d1")}


def test_event_time_ordering_highest_ordering_wins_ties_to_later():
    spec = _spec(EVENT_TIME)
    got = _merge(
        spec,
        BASE,
        _records(("a", 20, "a1"), ("b", 5, "b1"), ("c", 10, "c1"), ("d", 3, "d1")),
        _records(("a", 15, "a2"), ("d", 3, "d2")),
    )
    # a: 20 beats the later 15; b: base 10 > log 5 keeps the base row; c: tie goes to the log;
    # d: tie inside the logs goes to the later write.
    assert got == {"a": (20, "a1"), "b": (10, "b0"), "c": (10, "c1"), "d": (3, "d2")}


def test_commit_time_delete_beats_older_versions_regardless_of_ordering():
    spec = _spec(EVENT_TIME)
    got = _merge(spec, BASE, _records(("a", 99, "a1")), _deletes("a", "b", "zz"))
    assert got == {"c": (10, "c0")}


def test_write_after_commit_time_delete_wins_even_with_lower_ordering():
    spec = _spec(EVENT_TIME)
    got = _merge(spec, BASE, _records(("a", 99, "a1")), _deletes("a"), _records(("a", 1, "a3")))
    # The later write beats the delete within the logs; then base (10) vs log (1): base is older
    # on the ordering field and the delete is gone, so Hudi's event-time rule keeps the base row.
    assert got["a"] == (10, "a0")
    got = _merge(_spec(COMMIT_TIME), BASE, _records(("a", 99, "a1")), _deletes("a"), _records(("a", 1, "a3")))
    assert got["a"] == (1, "a3")


def test_delete_with_real_ordering_value_only_wins_if_not_older():
    spec = _spec(EVENT_TIME)
    got = _merge(spec, BASE, _deletes("a", ordering=5), _deletes("b", ordering=50))
    assert got == {"a": (10, "a0"), "c": (10, "c0")}  # a: base ts 10 > delete 5 survives


def test_is_deleted_flag_removes_keys():
    # The marker column need not be part of the table schema: it is read from the log records.
    spec = _spec(COMMIT_TIME)
    log = pa.Table.from_pylist(
        [{"_hoodie_record_key": "a", "ts": 2, "v": None, "_hoodie_is_deleted": True},
         {"_hoodie_record_key": "n", "ts": 2, "v": "n", "_hoodie_is_deleted": None},
         {"_hoodie_record_key": "x", "ts": 2, "v": "x", "_hoodie_is_deleted": True}],
    )
    assert _merge(spec, BASE, log) == {"b": (10, "b0"), "c": (10, "c0"), "n": (2, "n")}


def test_table_delete_marker_removes_keys():
    """A record whose delete column holds the table's marker (``AWSDmsAvroPayload``'s ``Op`` =
    ``D``) is a delete; other values and nulls are not."""
    spec = MergeSpec(["_hoodie_record_key"], ["ts"], COMMIT_TIME, SCHEMA, delete_marker=("Op", "D"))
    log = pa.Table.from_pylist(
        [{"_hoodie_record_key": "a", "ts": 2, "v": "a1", "Op": "D"},
         {"_hoodie_record_key": "b", "ts": 2, "v": "b1", "Op": "U"},
         {"_hoodie_record_key": "c", "ts": 2, "v": "c1", "Op": None}],
    )
    assert _merge(spec, BASE, log) == {"b": (2, "b1"), "c": (2, "c1")}
    assert _merge(_spec(COMMIT_TIME), BASE, log) == {"a": (2, "a1"), "b": (2, "b1"), "c": (2, "c1")}


def test_log_schema_evolution_is_resolved_by_name():
    spec = _spec(COMMIT_TIME)
    # An older writer: no "v" column, ts as int32, columns in another order, an extra column.
    old = pa.table({"extra": [1], "ts": pa.array([7], pa.int32()), "_hoodie_record_key": ["b"]})
    got = _merge(spec, BASE, old)
    assert got["b"] == (7, None)


def test_keys_rebuilt_from_fields_without_meta_columns():
    schema = pa.schema([("id", pa.int32()), ("name", pa.string()), ("ts", pa.int64())])
    single = MergeSpec(["id"], ["ts"], COMMIT_TIME, schema)
    complex_ = MergeSpec(["id", "name"], ["ts"], COMMIT_TIME, schema)
    t = pa.table({"id": pa.array([1, None], pa.int32()), "name": ["x", ""], "ts": [1, 2]})
    assert single.keys(t).to_pylist() == ["1", "__null__"]
    assert complex_.keys(t).to_pylist() == ["id:1,name:x", "id:__null__,name:__empty__"]


def test_reduction_is_associative():
    """fold_winners folds pending rows into the winners in steps (bounded memory); that is
    only correct because reducing in steps equals reducing all rows at once."""
    spec = _spec(EVENT_TIME)
    parts = [_records(*[(f"k{i % 7}", (i * 37) % 11, f"v{i}") for i in range(j, j + 9)]) for j in range(0, 90, 9)]
    rows, seq = [], 0
    for k, p in enumerate(parts):
        rows.append(data_rows(spec, p, seq) if k % 3 else delete_rows(spec, _deletes("k1", "k4"), seq))
        seq += p.num_rows
    expected = reduce_winners(spec, pa.concat_tables(rows)).sort_by("__hf_key")
    folded = None
    for r in rows:
        folded = reduce_winners(spec, r if folded is None else pa.concat_tables([folded, r]))
    assert folded.sort_by("__hf_key").to_pylist() == expected.to_pylist()


# -- end to end ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def generated(generated_table) -> tuple[str, GeneratorSpec]:
    spec = GeneratorSpec(rows=3000, partitions=2, files_per_partition=2, commits=4, table_type=MERGE_ON_READ,
                         metadata_table=False, update_fraction=0.2, delete_fraction=0.05, workers=1)
    return generated_table(spec), spec


def test_generated_table_matches_generator_and_hudi(generated):
    path, spec = generated
    table = HudiTable.open(path)
    ours = table.read()
    expected = expected_table(spec, with_meta=True)
    assert_same_rows(ours.select(expected.column_names), expected, "generator expectation")
    assert_same_rows(ours, hudi_read(path), "hudi package")
    for inst in table.timeline.commits:
        assert_same_rows(table.read(as_of=inst.requested_time), hudi_read(path, as_of=inst.requested_time), inst)


def test_projection_without_key_columns_still_merges(generated):
    path, spec = generated
    ours = HudiTable.open(path).read(columns=["fare"])
    assert ours.column_names == ["fare"]
    assert sorted(ours.column("fare").to_pylist()) == sorted(expected_table(spec).column("fare").to_pylist())


def test_merge_spec_is_kept_per_table_and_columns(generated):
    """Every query plans a new read context; the merge spec of the same table state and columns
    is the one made before, another column list gets its own."""
    state = HudiTable.open(generated[0]).state
    first, again = (plan(state, ReadOptions(filters=[("fare", ">", f)])).context for f in (1.0, 2.0))
    assert first is not again
    assert MergeSpec.for_context(first) is MergeSpec.for_context(again)
    fares = MergeSpec.for_context(plan(state, ReadOptions(columns=["fare"])).context)
    assert fares is not MergeSpec.for_context(first)
    assert fares.schema.names[0] == "fare" and "_hoodie_record_key" in fares.schema.names


def _copy(fixture_table, name: str, tmp_path: Path) -> Path:
    dest = tmp_path / "t"
    shutil.copytree(fixture_table(name), dest)
    return dest


def test_corrupt_log_block_is_skipped_like_hudi(fixture_table, tmp_path):
    path = _copy(fixture_table, "sample_table/mor/parquet/v6_nonpartitioned", tmp_path)
    (log,) = [p for p in path.iterdir() if ".log." in p.name]
    log.write_bytes(log.read_bytes()[:-100])  # crash mid-block
    table = HudiTable.open(str(path))
    with pytest.warns(CorruptBlockWarning, match=log.name):
        snap = table.read()
    assert_same_rows(snap, table.read(query_type="read_optimized"), "corrupt block ignored")


def test_blocks_of_an_uncommitted_instant_are_ignored(fixture_table, tmp_path):
    # v6: a failed writer appended a block (instant not on the timeline) to the slice's log.
    path = _copy(fixture_table, "sample_table/mor/parquet/v6_nonpartitioned", tmp_path)
    table = HudiTable.open(str(path))
    before = table.read()
    (log,) = [p for p in path.iterdir() if ".log." in p.name]
    schema = {"type": "record", "name": "r", "fields": [{"name": "_hoodie_record_key", "type": "string"},
                                                        {"name": "name", "type": "string"}]}
    extra = log_writer.avro_data_block("20250117083140000", schema, [{"_hoodie_record_key": "1", "name": "ghost"}])
    with log.open("ab") as fh:
        fh.write(extra + log_writer.delete_block("20250117083140000", [("2", "")]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorruptBlockWarning)
        assert_same_rows(HudiTable.open(str(path)).read(), before, "uncommitted blocks ignored")


def test_log_file_of_rolled_back_instant_is_ignored_v9(fixture_table, tmp_path):
    # v9: a log file named by an instant that is not (or no longer) on the timeline.
    path = _copy(fixture_table, "sample_table/mor/avro/v9_txns_nonpart_nometa", tmp_path)
    table = HudiTable.open(str(path))
    before = table.read()
    logs = sorted(p for p in path.iterdir() if ".log." in p.name)
    ghost = path / logs[-1].name.replace("20260307135933863", "20260307135999999")
    ghost.write_bytes(logs[-1].read_bytes())
    assert_same_rows(HudiTable.open(str(path)).read(), before, "rolled-back log file ignored")


def _append_block(log: Path, instant: str, fields: dict[str, str], records: list[dict]) -> None:
    """Append an Avro data block (field name -> Avro type) to a copied fixture's log file."""
    schema = {"type": "record", "name": "r", "fields": [{"name": k, "type": t} for k, t in fields.items()]}
    with log.open("ab") as fh:
        fh.write(log_writer.avro_data_block(instant, schema, records))


def test_v6_overwrite_latest_payload_is_commit_time_ordering(fixture_table, tmp_path):
    """v6 + OverwriteWithLatestAvroPayload => COMMIT_TIME (format doc 7.1): a later log write wins
    even with a lower ordering value (longField); the hudi package agrees."""
    path = _copy(fixture_table, "sample_table/mor/parquet/v6_nonpartitioned", tmp_path)
    (log,) = [p for p in path.iterdir() if ".log." in p.name]
    committed = "20250117083136333"  # the instant of the existing log block
    _append_block(log, committed, {"_hoodie_commit_time": "string", "_hoodie_record_key": "string", "id": "int",
                                   "name": "string", "longField": "long"},
                  [{"_hoodie_commit_time": committed, "_hoodie_record_key": "3", "id": 3, "name": "Carol-low", "longField": 1}])
    table = HudiTable.open(str(path))
    assert table.config.merge_mode == COMMIT_TIME
    rows = {r["id"]: (r["name"], r["longField"]) for r in table.read(columns=["id", "name", "longField"]).to_pylist()}
    assert rows[3] == ("Carol-low", 1)
    written = ["_hoodie_commit_time", "_hoodie_record_key", "id", "name", "longField"]
    assert_same_rows(table.read(columns=written), hudi_read(str(path), columns=written), "commit-time ordering")
    # Departure pinned (format doc 9.3 vs hudi-rs): the block's schema lacks most columns and has
    # no IS_PARTIAL header, so Hudi resolves them to null; hudi-rs treats the record as a partial
    # update and fills them from the base row (e.g. isActive=True). We follow Hudi.
    ours = table.read(filters=[("id", "=", 3)]).to_pylist()[0]
    theirs = [r for r in hudi_read(str(path)).to_pylist() if r["id"] == 3][0]
    assert ours["isActive"] is None and ours["_hoodie_commit_seqno"] is None
    assert theirs["isActive"] is True


def test_v8_event_time_ordering_keeps_the_higher_ordering_value(fixture_table, tmp_path):
    """EVENT_TIME: a later log write with a lower ``ts`` loses to the version it would replace."""
    path = _copy(fixture_table, "quickstart_trips_table/mor/avro/v8_trips_8i3u1d", tmp_path)
    log = next((path / "city=sao_paulo").glob(".*_20251220210130911.log.*"))
    key = "7a84095f-737f-40bc-b62f-6b69664712d2"  # rider-G, updated to fare 0 by this instant
    _append_block(log, "20251220210130911",
                  {"_hoodie_commit_time": "string", "_hoodie_record_key": "string", "_hoodie_partition_path": "string",
                   "ts": "long", "uuid": "string", "rider": "string", "fare": "double", "city": "string"},
                  [{"_hoodie_commit_time": "20251220210130911", "_hoodie_record_key": key,
                    "_hoodie_partition_path": "city=sao_paulo", "ts": 5, "uuid": key, "rider": "rider-G-old",
                    "fare": 1.0, "city": "sao_paulo"}])
    table = HudiTable.open(str(path))
    got = {r["uuid"]: (r["rider"], r["fare"]) for r in table.read(columns=["uuid", "rider", "fare"]).to_pylist()}
    assert got[key] == ("rider-G", 0.0)
    assert_same_rows(table.read(), hudi_read(str(path)), "event-time ordering")


def test_row_group_splits_of_a_merged_slice_add_up(generated_table):
    """Reading a slice's base row groups separately gives the whole merged slice exactly once
    (log-only inserts come with row group 0; keys of other row groups are not re-inserted)."""
    spec = GeneratorSpec(rows=4000, partitions=1, commits=3, row_group_size=500, table_type=MERGE_ON_READ,
                         metadata_table=False, update_fraction=0.3, delete_fraction=0.05, workers=1)
    table = HudiTable.open(generated_table(spec))
    scan = table.scan()
    (fs,) = [s for s in file_slices(table.state, scan.options) if s.has_logs][:1]
    import pyarrow.parquet as pq

    with table.storage.open(fs.base_file_path) as fh:
        groups = pq.ParquetFile(fh).num_row_groups
    assert groups > 2
    whole = pa.Table.from_batches(list(read_split(scan.context, Split(fs, 0, 0, 1.0))))
    parts = [b for g in range(groups) for b in read_split(scan.context, Split(fs, 0, 0, 1.0, row_groups=(g,)))]
    assert_same_rows(pa.Table.from_batches(parts, schema=whole.schema), whole, "row-group splits")
