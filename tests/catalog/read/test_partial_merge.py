"""Partial updates in the MOR merge (``hoodie.table.partial.update.mode=IGNORE_DEFAULTS``): the
winning version's nulls take the losing version's values, folded over a key's versions in write
order; deletes end the chain. Hand-built merges, then Hudi-written tables through the point read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from catalog import HudiTable, UnsupportedTableError
from catalog.format.caches import ReadCaches
from catalog.format.log_block import DeleteRecords
from catalog.format.log_cache import DecodedLogBlocks
from catalog.format.log_file import BlockType, LogBlock
from catalog.format.row_groups import DecodedRowGroups
from catalog.plan.options import ReadOptions
from catalog.plan.planner import plan
from catalog.read.mor import (
    COMMIT_TIME,
    EVENT_TIME,
    MergeSpec,
    data_rows,
    delete_rows,
    fold_winners,
    log_parts,
    merge_batches,
    reduce_winners,
)
from catalog.read.split_reader import read_splits
from tests.support.compare import assert_same_rows
from tests.support.written import WrittenTable

SCHEMA = pa.schema([("_hoodie_record_key", pa.string()), ("ts", pa.int64()), ("v", pa.string()), ("n", pa.int64())])


def _spec(mode: str, partial: bool = True) -> MergeSpec:
    return MergeSpec(["_hoodie_record_key"], ["ts"], mode, SCHEMA, partial=partial)


def _records(*rows: tuple) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r)) for r in rows], schema=SCHEMA)


def _deletes(*keys: str, ordering=0) -> DeleteRecords:
    return DeleteRecords(pa.array(keys, pa.string()), pa.array([""] * len(keys), pa.string()), [ordering] * len(keys))


def _rows(spec: MergeSpec, *log_parts) -> list[pa.Table]:
    seq, rows = 0, []
    for part in log_parts:
        r = delete_rows(spec, part, seq) if isinstance(part, DeleteRecords) else data_rows(spec, part, seq)
        seq += r.num_rows
        rows.append(r)
    return rows


def _merge(spec: MergeSpec, base: pa.Table, *log_parts) -> dict:
    """Apply log parts (record tables or DeleteRecords) in order over ``base``; key -> (ts, v, n)."""
    winners = reduce_winners(spec, pa.concat_tables(_rows(spec, *log_parts)))
    out = pa.Table.from_batches(list(merge_batches(spec, base.to_batches(), winners)), schema=SCHEMA)
    return {r["_hoodie_record_key"]: (r["ts"], r["v"], r["n"]) for r in out.select(SCHEMA.names).to_pylist()}


BASE = _records(("a", 10, "a0", 1), ("b", 10, "b0", 1), ("c", 10, "c0", 1))


@pytest.mark.parametrize("mode", [COMMIT_TIME, EVENT_TIME])
def test_three_versions_fill_each_others_nulls(mode):
    got = _merge(_spec(mode), BASE, _records(("a", 11, None, 2), ("d", 1, "d1", None)), _records(("a", 12, "a2", None)))
    # a: v from the latest write, n from the one before it, ts from the winner; d: an insert keeps its nulls
    assert got == {"a": (12, "a2", 2), "b": (10, "b0", 1), "c": (10, "c0", 1), "d": (1, "d1", None)}


def test_without_partial_update_nulls_replace_values():
    got = _merge(_spec(COMMIT_TIME, partial=False), BASE, _records(("a", 11, None, 2)), _records(("a", 12, "a2", None)))
    assert got["a"] == (12, "a2", None)


def test_null_is_the_default_zero_and_empty_are_values():
    got = _merge(_spec(COMMIT_TIME), BASE, _records(("a", 11, "", 0), ("b", 11, None, 0)))
    assert got["a"] == (11, "", 0) and got["b"] == (11, "b0", 0)


def test_commit_time_later_write_wins_whatever_its_ordering_value():
    got = _merge(_spec(COMMIT_TIME), BASE, _records(("a", 50, "a1", None)), _records(("a", 5, None, 7)))
    assert got["a"] == (5, "a1", 7)


def test_event_time_out_of_order_versions_fold_in_write_order():
    """The highest ordering value wins; its nulls take what the fold holds when it wins: a value
    filled from a lower-ordered version stays when a middle-ordered version arrives later (the
    fold is not a sort by ordering value)."""
    got = _merge(
        _spec(EVENT_TIME), BASE,
        _records(("a", 30, None, None)), _records(("a", 20, "a2", None)), _records(("a", 25, "a3", 3)),
    )
    assert got["a"] == (30, "a2", 3)


def test_event_time_base_with_greater_ordering_takes_the_log_winner_values():
    base = _records(("a", 50, None, 1), ("b", 50, "b0", None))
    got = _merge(_spec(EVENT_TIME), base, _records(("a", 20, "a1", 2), ("b", 60, None, 6)))
    assert got == {"a": (50, "a1", 1), "b": (60, "b0", 6)}


def test_commit_time_delete_between_versions_ends_the_log_chain_not_the_base():
    """A write after a log delete merges with nothing from the log before it; Hudi's file group
    reader keeps only the merged log version of a key, so the base row still fills its nulls."""
    got = _merge(
        _spec(COMMIT_TIME), BASE,
        _records(("a", 11, "a1", 2), ("d", 1, "d1", 1)),
        _deletes("a", "b", "d"),
        _records(("a", 12, None, None), ("d", 2, None, 2)),
    )
    assert got == {"a": (12, "a0", 1), "c": (10, "c0", 1), "d": (2, None, 2)}


def test_event_time_delete_between_versions():
    spec = _spec(EVENT_TIME)
    flagged = pa.Table.from_pylist([{"_hoodie_record_key": "b", "ts": 40, "_hoodie_is_deleted": True}])
    got = _merge(
        spec, BASE,
        _records(("a", 20, None, 2), ("b", 20, None, 2)),
        _deletes("a"),  # commit-time delete: beats every older version
        flagged,  # a delete with an ordering value above b's versions
        _records(("a", 15, None, 3), ("b", 30, "b3", None)),
    )
    # a: written after the delete, it merges with the base only; b: the delete (40) outranks the later 30
    assert got == {"a": (15, "a0", 3), "c": (10, "c0", 1)}


def test_event_time_delete_with_lower_ordering_leaves_the_base_whole():
    got = _merge(_spec(EVENT_TIME), BASE, _deletes("a", ordering=5), _records(("b", 5, "b1", None)))
    assert got == {"a": (10, "a0", 1), "b": (10, "b0", 1), "c": (10, "c0", 1)}


@pytest.mark.parametrize("mode", [COMMIT_TIME, EVENT_TIME])
def test_partial_reduction_in_steps_equals_at_once(mode):
    """fold_winners folds pending rows into the winners in steps; the partial fold in write
    order must give the same winners as one fold of all rows."""
    spec = _spec(mode)
    parts = [
        _records(*[(f"k{i % 5}", (i * 37) % 11, None if i % 3 else f"v{i}", None if i % 4 else i) for i in range(j, j + 7)])
        for j in range(0, 70, 7)
    ]
    rows = _rows(spec, *[p if k % 4 != 2 else _deletes("k1", "k3") for k, p in enumerate(parts)])
    expected = reduce_winners(spec, pa.concat_tables(rows)).sort_by("__hf_key")
    folded = None
    for r in rows:
        folded = reduce_winners(spec, r if folded is None else pa.concat_tables([folded, r]))
    assert folded.sort_by("__hf_key").to_pylist() == expected.to_pylist()


def _block(default_n) -> LogBlock:
    fields = [{"name": "_hoodie_record_key", "type": ["null", "string"], "default": None},
              {"name": "ts", "type": ["null", "long"], "default": None},
              {"name": "v", "type": ["null", "string"], "default": None},
              {"name": "n", "type": ["long", "null"], "default": default_n}]
    schema = {"type": "record", "name": "r", "fields": fields}
    return LogBlock("x.log", 0, 1, BlockType.AVRO_DATA, header={"SCHEMA": json.dumps(schema)})


def test_non_null_column_defaults_are_refused_by_name():
    """Hudi compares values with a non-null default by object identity: not restated, refused."""
    records = _records(("a", 11, None, 0))
    spec = _spec(COMMIT_TIME)
    assert fold_winners(spec, log_parts(spec, None, [_block(None)], decode=lambda b: records)).num_rows == 1
    with pytest.raises(UnsupportedTableError, match="non-null column defaults \\(n\\)"):
        fold_winners(spec, log_parts(spec, None, [_block(0)], decode=lambda b: records))
    # without partial updates the defaults play no part
    plain = _spec(COMMIT_TIME, partial=False)
    assert fold_winners(plain, log_parts(plain, None, [_block(0)], decode=lambda b: records)).num_rows == 1


# -- Hudi-written tables ------------------------------------------------------------------

PARTIAL = WrittenTable("1.2.0", "mor_payload_partial_update")


def test_point_reads_merge_like_the_snapshot(written_table):
    """A point read (filters pinning record keys, through the decoded block caches) merges
    through the same partial fold, cold and warm."""
    table = HudiTable.open(written_table(PARTIAL))
    snapshot = table.read()
    filled = [r["id"] for r in snapshot.to_pylist() if r["memo"] and r["memo"].endswith("_v0") and r["ts"] > 2000]
    assert filled, "the table has rows whose memo comes from an older version"
    caches = ReadCaches(row_groups=DecodedRowGroups(16 << 20), log_blocks=DecodedLogBlocks(16 << 20))
    for keys in [[k] for k in filled] + [filled + ["id000"]] * 2:
        scan = plan(table.state, ReadOptions(filters=[("id", "in", keys)]))
        assert scan.context.point is not None
        ours = pa.Table.from_batches(list(read_splits(scan.context, list(scan.splits), caches=caches)),
                                     schema=scan.schema)
        assert_same_rows(ours, snapshot.filter(pc.is_in(snapshot.column("id"), pa.array(keys))), str(keys))


def test_unsupported_partial_update_mode_is_refused_by_name(written_table, tmp_path: Path):
    path = tmp_path / "t"
    shutil.copytree(written_table(PARTIAL), path)
    props = path / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text().replace("partial.update.mode=IGNORE_DEFAULTS", "partial.update.mode=FILL_UNAVAILABLE"))
    with pytest.raises(UnsupportedTableError, match="partial update mode FILL_UNAVAILABLE"):
        HudiTable.open(str(path)).read()
