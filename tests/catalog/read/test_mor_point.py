"""The Python merge of a point read's few rows equals the vectorised merge, row for row, on
randomized small inputs (ties, nulls, deletes of every kind, both merge modes); what it does not
carry, partial updates among it, is left to the vectorised merge."""

from __future__ import annotations

import datetime as dt
import random

import pyarrow as pa
import pytest

from catalog.format.log_block import DeleteRecords
from catalog.read.mor import (
    COMMIT_TIME,
    EVENT_TIME,
    IS_DELETED,
    LogPart,
    MergeSpec,
    fill_constants,
    fold_winners,
    merge_batches,
)
from catalog.read.mor_point import PointWinners

KEY = "_hoodie_record_key"
KEYS = ["k1", "k2", "k3", "k4", "k5"]
#: a table's delete marker (column, value): log records whose column reads so are deletes
MARKER = ("op_flag", "DEL")
#: ordering field types and how to draw a value (few distinct values: ties are common)
ORDERING = {
    "int": (pa.int64(), lambda r: r.choice([None, 1, 2, 3])),
    "string": (pa.string(), lambda r: r.choice([None, "a", "b", "\u00e9"])),
    "timestamp": (pa.timestamp("us", "UTC"), lambda r: r.choice([None, *(dt.datetime(2024, 1, d, tzinfo=dt.timezone.utc)
                                                                         for d in (1, 2, 3))])),
    "double": (pa.float64(), lambda r: r.choice([None, -1.5, 0.0, 2.5])),
}


def _schema(kind: str, two_fields: bool) -> pa.Schema:
    fields = [(KEY, pa.string()), ("ts", ORDERING[kind][0]), ("v", pa.string()), ("p", pa.string())]
    if two_fields:
        fields.append(("ts2", pa.int32()))
    return pa.schema(fields)


def _draw(rnd: random.Random, kind: str, schema: pa.Schema) -> tuple[pa.Table, list[LogPart]]:
    """A base table and log parts (oldest first) over a few keys."""
    draw = ORDERING[kind][1]

    def row(key: str) -> dict:
        out = {KEY: key, "ts": draw(rnd), "v": f"v{rnd.randrange(1000)}", "p": "x"}
        if "ts2" in schema.names:
            out["ts2"] = rnd.choice([None, 1, 2])
        return out

    base = pa.Table.from_pylist([row(k) for k in rnd.sample(KEYS, rnd.randrange(len(KEYS) + 1))], schema=schema)
    parts: list[LogPart] = []
    for _ in range(rnd.randrange(1, 5)):
        keys = [rnd.choice(KEYS) for _ in range(rnd.randrange(1, 4))]
        if rnd.random() < 0.3:
            ordering = [rnd.choice([0, 0, None, 2, 5]) if kind == "int" else 0 for _ in keys]
            parts.append(DeleteRecords(pa.array(keys, pa.string()), pa.array([""] * len(keys)), ordering))
            continue
        rows = [row(k) for k in keys]
        table = pa.Table.from_pylist(rows, schema=schema)
        if rnd.random() < 0.4:
            table = table.append_column(IS_DELETED, pa.array([rnd.choice([None, False, True]) for _ in keys]))
        if rnd.random() < 0.3:
            table = table.append_column(MARKER[0], pa.array([rnd.choice([None, "keep", MARKER[1]]) for _ in keys]))
        if rnd.random() < 0.2:
            table = table.append_column("_hoodie_operation", pa.array([rnd.choice(["I", "U", "D"]) for _ in keys]))
        if rnd.random() < 0.3:
            table = table.drop_columns(["ts"])  # an older schema: the ordering value is null
        parts.append(table)
    return base, parts


def _general(spec: MergeSpec, base: pa.Table, parts: list[LogPart], **kw) -> list[dict]:
    winners = fold_winners(spec, parts)
    assert winners is not None
    constants = kw.pop("constants", None)
    if constants:
        winners = fill_constants(winners, constants)
    return pa.Table.from_batches(list(merge_batches(spec, base.to_batches(max_chunksize=2), winners, **kw)),
                                 schema=spec.schema).to_pylist()


def _point(spec: MergeSpec, base: pa.Table, parts: list[LogPart], **kw) -> list[dict]:
    point = PointWinners.of(spec, parts)
    assert point is not None
    batches = list(point.merge(base.to_batches(max_chunksize=2), **kw))
    return pa.Table.from_batches(batches, schema=spec.schema).to_pylist()


@pytest.mark.parametrize("kind", sorted(ORDERING))
@pytest.mark.parametrize("mode", [EVENT_TIME, COMMIT_TIME])
def test_point_merge_equals_vectorised_merge(kind, mode):
    rnd = random.Random(f"{kind}-{mode}")
    for trial in range(150):
        two = kind == "int" and trial % 2 == 1
        schema = _schema(kind, two)
        marker = MARKER if trial % 3 == 0 else None
        spec = MergeSpec([KEY], ["ts", "ts2"] if two else ["ts"], mode, schema, delete_marker=marker)
        base, parts = _draw(rnd, kind, schema)
        kw: dict = {}
        if trial % 5 == 1:
            kw["emit_inserts"] = False
        if trial % 5 == 2:
            kw["other_base_keys"] = pa.array(rnd.sample(KEYS, 2), pa.string())
        if trial % 5 == 3:
            kw["constants"] = {"p": pa.scalar("const")}
        expected = _general(spec, base, parts, **dict(kw))
        assert _point(spec, base, parts, **kw) == expected, (trial, base.to_pylist(), parts)


def test_composite_keys_match_as_the_vectorised_merge_builds_them():
    schema = pa.schema([("a", pa.string()), ("b", pa.int32()), ("ts", pa.int64()), ("v", pa.string())])
    spec = MergeSpec(["a", "b"], ["ts"], EVENT_TIME, schema)
    base = pa.Table.from_pylist([{"a": "x", "b": 1, "ts": 5, "v": "base"}, {"a": "", "b": None, "ts": 1, "v": "b2"}],
                                schema=schema)
    log = pa.Table.from_pylist([{"a": "x", "b": 1, "ts": 5, "v": "tie"}, {"a": "", "b": None, "ts": 0, "v": "old"},
                                {"a": "y", "b": 2, "ts": 1, "v": "new"}], schema=schema)
    deletes = DeleteRecords(pa.array(["a:y,b:2"]), pa.array([""]), [0])
    for parts in ([log], [log, deletes]):
        got = _point(spec, base, parts)
        assert got == _general(spec, base, parts)
    assert [r["v"] for r in _point(spec, base, [log])] == ["b2", "tie", "new"]  # base kept, then replaced


def test_what_it_does_not_carry_is_left_to_the_vectorised_merge():
    schema = _schema("double", False)
    spec = MergeSpec([KEY], ["ts"], EVENT_TIME, schema)
    nan = pa.Table.from_pylist([{KEY: "k1", "ts": float("nan"), "v": "a", "p": "x"}], schema=schema)
    keyless = pa.table({"ts": pa.array([1.0]), "v": pa.array(["a"])})
    nested = MergeSpec([KEY], ["s"], EVENT_TIME, pa.schema([(KEY, pa.string()), ("s", pa.struct([("x", pa.int64())]))]))
    nested_rows = pa.table({KEY: ["k1"], "s": pa.array([{"x": 1}])})
    assert PointWinners.of(spec, [nan]) is None
    assert PointWinners.of(spec, [keyless]) is None
    assert PointWinners.of(nested, [nested_rows]) is None


@pytest.mark.parametrize("mode", [EVENT_TIME, COMMIT_TIME])
def test_a_large_base_batch_merges_as_the_vectorised_merge(mode):
    """A base batch of more than a few rows (a point read whose filter is more than its keys)."""
    rnd = random.Random(mode)
    schema = _schema("int", False)
    spec = MergeSpec([KEY], ["ts"], mode, schema)
    for _ in range(30):
        small, parts = _draw(rnd, "int", schema)
        filler = [{KEY: f"z{i:03d}", "ts": rnd.choice([None, 1, 2]), "v": "f", "p": "x"} for i in range(150)]
        base = pa.Table.from_pylist(filler[:70] + small.to_pylist() + filler[70:], schema=schema)
        got = PointWinners.of(spec, parts)
        assert got is not None
        merged = pa.Table.from_batches(list(got.merge(base.to_batches())), schema=schema).to_pylist()
        winners = fold_winners(spec, parts)
        assert winners is not None
        assert merged == pa.Table.from_batches(list(merge_batches(spec, base.to_batches(), winners)),
                                               schema=schema).to_pylist()
