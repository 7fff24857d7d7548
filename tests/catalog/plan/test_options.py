"""ReadOptions: the one definition of the query options, its JSON form, and instant resolution."""

from __future__ import annotations

import dataclasses

import pytest

import schemas
from catalog import HudiTable, InvalidInstantError, InvalidQueryError, ReadOptions
from catalog.plan.options import QUERY_TYPES, resolve
from tests.support.compare import assert_same_rows

V9 = "sample_table/cow/v9_txns_simple_meta"
V6 = "sample_table/cow/v6_simplekeygen_nonhivestyle"


def test_command_schema_mirrors_read_options():
    command = schemas.load("command.schema.json")
    assert set(command["properties"]) - {"table", "aggregates"} == set(ReadOptions.field_names())
    assert command["properties"]["query_type"]["enum"] == list(QUERY_TYPES)


@pytest.mark.parametrize(
    "options",
    [
        ReadOptions(),
        ReadOptions(columns=["a", "b"], filters=[("a", "in", [1, 2]), ("b", "is null"), ("c", "==", "x")], limit=5),
        ReadOptions(query_type="incremental", start="20240101000000000", end="20240102000000000"),
        ReadOptions(query_type="read_optimized", as_of="20240101000000000"),
        ReadOptions(query_type="cdc", start="20240101000000000", columns=["op", "after"], filters=[("op", "=", "d")]),
    ],
)
def test_json_round_trip(options):
    doc = options.to_json()
    assert ReadOptions.from_json(doc) == options
    assert "table" not in doc and all(value is not None for value in doc.values())


def test_filters_are_normalised():
    options = ReadOptions(filters=[["a", "==", 1], ["b", "<>", 2], ["c", "NOT  IN", [1]], ("d", "is_null")])
    assert options.filters == (("a", "=", 1), ("b", "!=", 2), ("c", "not in", (1,)), ("d", "is null", None))
    assert ReadOptions(filters=("a", "=", 1)).filters == (("a", "=", 1),)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"query_type": "streaming"}, "unknown query_type"),
        ({"limit": -1}, "limit"),
        ({"limit": True}, "limit"),
        ({"columns": "a"}, "columns"),
        ({"as_of": "yesterday"}, "malformed as_of"),
        ({"start": "20240101000000000"}, "only to query_type='incremental'"),
        ({"query_type": "incremental", "as_of": "20240101000000000"}, "as_of does not apply"),
        ({"filters": [("a", "in", 1)]}, "needs a list value"),
        ({"filters": [("a", "=", [1])]}, "single value"),
        ({"filters": [("a", "=")]}, "needs a value"),
        ({"filters": [("a", "~", 1)]}, "unsupported filter operator"),
        ({"filters": 5}, "filters must be"),
        ({"filters": "a = = 1"}, "unexpected"),
    ],
)
def test_bad_options_say_what_is_wrong(kwargs, message):
    with pytest.raises(InvalidQueryError, match=message):
        ReadOptions(**kwargs)


def test_resolve_pins_snapshot_and_incremental_instants(fixture_table):
    table = HudiTable.open(fixture_table(V9))
    commits = table.timeline.commits
    latest = commits[-1].requested_time
    snapshot = resolve(ReadOptions(), table.timeline)
    assert snapshot.instant == latest and snapshot.options.as_of == latest
    # version 8+: incremental ranges compare completion times; the pinned end is the last one
    inc = resolve(ReadOptions(query_type="incremental", start=commits[0].completion_time), table.timeline)
    assert inc.incremental_instants == tuple(c.requested_time for c in commits[1:])
    assert inc.options.end == commits[-1].completion_time and inc.instant == latest
    # a pinned read gives the same rows, whatever is committed later
    assert_same_rows(table.read(snapshot.options), table.read(), exact_types=True)
    with pytest.raises(InvalidInstantError, match="before the table's first commit"):
        resolve(ReadOptions(as_of="19700101000000000"), table.timeline)


def test_resolve_version_6_compares_requested_times(fixture_table):
    table = HudiTable.open(fixture_table(V6))
    commits = table.timeline.commits
    inc = resolve(ReadOptions(query_type="incremental", start=commits[0].requested_time), table.timeline)
    assert inc.options.end == commits[-1].requested_time
    assert inc.incremental_instants == tuple(c.requested_time for c in commits[1:])


def test_cdc_takes_a_range_not_an_instant():
    with pytest.raises(InvalidQueryError, match="as_of does not apply to cdc"):
        ReadOptions(query_type="cdc", as_of="20240101000000000")
    with pytest.raises(InvalidQueryError, match="after its end"):
        ReadOptions(query_type="cdc", start="20240102000000000", end="20240101000000000")
    assert ReadOptions(query_type="CDC").cdc and not ReadOptions(query_type="incremental").cdc


@pytest.mark.parametrize("options, changes", [
    (ReadOptions(filters=[("a", "==", 1)], columns=["a"]), {"as_of": "2024-01-02"}),
    (ReadOptions(query_type="incremental", start="20240101000000000"), {"end": "20240102000000000"}),
    (ReadOptions(query_type="cdc"), {"start": "20240101000000", "end": "20240102000000000"}),
    (ReadOptions(as_of="20240101000000000"), {"as_of": None}),
])
def test_pinning_an_instant_equals_a_full_replace(options, changes):
    """``replace`` of instants only checks the instants; the answer is the one a full rebuild gives."""
    assert options.replace(**changes) == dataclasses.replace(options, **changes)


@pytest.mark.parametrize("options, changes, message", [
    (ReadOptions(), {"start": "20240101000000000"}, "start/end apply only"),
    (ReadOptions(query_type="incremental"), {"as_of": "20240101000000000"}, "as_of does not apply"),
    (ReadOptions(), {"as_of": "yesterday"}, "as_of"),
    (ReadOptions(query_type="cdc", end="20240101000000000"), {"start": "20240102000000000"}, "after its end"),
])
def test_pinning_a_bad_instant_is_still_refused(options, changes, message):
    with pytest.raises(InvalidQueryError, match=message):
        options.replace(**changes)
