"""Complex and custom key generators' record keys from filters pinning every key field: the record
index locates their file groups, and the rows are those of a read without the index."""

from __future__ import annotations

from dataclasses import replace

import pytest

from catalog import HudiTable
from catalog.plan.composite_keys import MAX_KEYS, composite_keys
from catalog.plan.filters import bind_filters
from catalog.plan.options import ReadOptions
from catalog.plan.planner import plan
from hudi_generator.generator import MERGE_ON_READ, GeneratorSpec
from tests.support.compare import assert_same_rows

#: two partition levels: the generator's table names the complex key generator (record key ``uuid``)
COMPLEX_MOR = GeneratorSpec(rows=2000, partitions=4, partition_levels=2, files_per_partition=2, commits=3,
                            table_type=MERGE_ON_READ, record_index=True)


def test_a_table_of_the_complex_key_generator_is_one(generated_table):
    config = HudiTable.open(generated_table(COMPLEX_MOR)).config
    assert "COMPLEX" in config.key_generator.upper() and config.record_key_fields == ["uuid"]


def test_keys_are_spelled_as_the_writer_spells_them(generated_table):
    table = HudiTable.open(generated_table(COMPLEX_MOR))
    config, schema = table.config, table.schema
    one = bind_filters([("uuid", "=", "trip-1")], schema)
    assert composite_keys(config, one) == {"trip-1", "uuid:trip-1"}  # either encoding of one field
    two = replace(config, record_key_fields=["uuid", "rider"])
    pinned = bind_filters([("uuid", "in", ["a", "b"]), ("rider", "=", ""), ("fare", ">", 1.0)], schema)
    assert composite_keys(two, pinned) == {"uuid:a,rider:__empty__", "uuid:b,rider:__empty__"}
    numbered = replace(config, record_key_fields=["rider", "ts"])
    assert composite_keys(numbered, bind_filters([("rider", "=", "r"), ("ts", "=", 7)], schema)) == {"rider:r,ts:7"}
    # a key field not pinned, pinned by a range, by a type Java spells otherwise, or too many keys
    assert composite_keys(two, bind_filters([("uuid", "=", "a")], schema)) is None
    assert composite_keys(two, bind_filters([("uuid", "=", "a"), ("rider", ">", "r")], schema)) is None
    floats = replace(config, record_key_fields=["uuid", "fare"])
    assert composite_keys(floats, bind_filters([("uuid", "=", "a"), ("fare", "=", 1.0)], schema)) is None
    many = [f"k{i}" for i in range(MAX_KEYS)]
    assert composite_keys(two, bind_filters([("uuid", "in", many), ("rider", "in", ["x", "y"])], schema)) is None
    simple = replace(config, key_generator="SIMPLE")
    assert composite_keys(simple, one) is None


@pytest.mark.parametrize("kind", ["updated", "untouched", "missing"])
def test_the_record_index_locates_a_composite_key_and_the_rows_are_those_of_a_full_read(generated_table, kind):
    path = generated_table(COMPLEX_MOR)
    indexed = HudiTable.open(path)
    unindexed = HudiTable.open(path, use_record_index=False)
    snapshot = {r["uuid"]: r for r in indexed.read(columns=["uuid", "fare"]).to_pylist()}
    base = {r["uuid"]: r for r in indexed.read(columns=["uuid", "fare"], query_type="read_optimized").to_pylist()}
    keys = {"updated": sorted(k for k in snapshot if k in base and snapshot[k] != base[k]),
            "untouched": sorted(k for k in snapshot if k in base and snapshot[k] == base[k]),
            "missing": ["trip-missing"]}[kind]
    for filters in ([("uuid", "=", keys[0])], [("uuid", "in", keys[:3])], [("uuid", "=", keys[0]), ("fare", ">", 0.0)]):
        located = list(plan(indexed.state, ReadOptions(filters=filters)).splits)
        everywhere = list(plan(unindexed.state, ReadOptions(filters=filters)).splits)
        assert len(located) <= len(set(keys[:3])) < len(everywhere)
        assert_same_rows(indexed.read(filters=filters), unindexed.read(filters=filters), str(filters),
                         exact_types=True)
    if kind != "missing":
        assert indexed.read(filters=[("uuid", "=", keys[0])]).num_rows == 1
