"""Timeline layouts 1 and 2, instant parsing, commit metadata and the table schema (format doc 2)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hudi import HudiTableBuilder

from catalog import HudiTable, InvalidInstantError
from catalog.plan.options import parse_instant
from catalog.timeline.instants import COMPLETED, INFLIGHT, REQUESTED, parse_instant_file_name
from tests.support.fixtures import all_table_names

READABLE = all_table_names()


@pytest.mark.parametrize(
    "name, layout, expected",
    [
        ("20240101000000000.commit", 1, ("20240101000000000", "commit", COMPLETED, "20240101000000000")),
        ("20240101000000000.inflight", 1, ("20240101000000000", "commit", INFLIGHT, None)),
        ("20240101000000000.commit.requested", 1, ("20240101000000000", "commit", REQUESTED, None)),
        ("20240101000000000.deltacommit.inflight", 2, ("20240101000000000", "deltacommit", INFLIGHT, None)),
        ("20240101000000000.compaction.requested", 2, ("20240101000000000", "compaction", REQUESTED, None)),
        ("20240101000000000_20240101000000500.replacecommit", 2,
         ("20240101000000000", "replacecommit", COMPLETED, "20240101000000500")),
        ("20240101000000.clean", 1, ("20240101000000", "clean", COMPLETED, "20240101000000")),
    ],
)
def test_parse_instant_names(name, layout, expected):
    inst = parse_instant_file_name(name, layout)
    assert (inst.requested_time, inst.action, inst.state, inst.completion_time) == expected


@pytest.mark.parametrize(
    "name, layout",
    [
        ("hoodie.properties", 1),
        ("20240101000000000.commit.crc", 2),
        ("20240101000000000.commit", 2),  # completed without completion time in layout 2
        ("20240101000000000.frobnicate", 1),
        ("2024010100.commit", 1),
        ("20240101000000000_20240101000000500.commit.requested", 2),
    ],
)
def test_non_instant_names_are_skipped(name, layout):
    assert parse_instant_file_name(name, layout) is None


@pytest.mark.parametrize("name", READABLE)
def test_completed_write_instants_match_hudi(fixture_table, name):
    path = fixture_table(name)
    table = HudiTable.open(path)
    hudi_tl = HudiTableBuilder.from_base_uri(path).build().get_timeline()
    theirs = sorted(
        (i.timestamp, i.action)
        for getter in (hudi_tl.get_completed_commits, hudi_tl.get_completed_deltacommits,
                       hudi_tl.get_completed_replacecommits)
        for i in getter()
    )
    assert [(i.requested_time, i.action) for i in table.timeline.commits] == theirs
    # The public timeline: completed instants, oldest first, with completion times.
    times = [i.requested_time for i in table.timeline]
    assert times == sorted(times) and len(table.timeline) >= len(theirs)
    for inst in table.timeline:
        assert inst.completion_time is not None
        if table.table_version == 6:
            assert inst.completion_time == inst.requested_time
        else:
            assert inst.completion_time >= inst.requested_time


@pytest.mark.parametrize("name", READABLE)
def test_schema_matches_hudi(fixture_table, name):
    path = fixture_table(name)
    ours = HudiTable.open(path).schema
    theirs = HudiTableBuilder.from_base_uri(path).build().get_schema_with_meta_fields()
    if not HudiTable.open(path).config.populate_meta_fields:
        theirs = pa.schema([f for f in theirs if not f.name.startswith("_hoodie_")])
    assert ours.names == theirs.names
    for field in ours:
        # hudi-rs marks meta columns non-nullable; the types themselves must agree.
        assert field.type.equals(theirs.field(field.name).type), (field.name, field.type, theirs.field(field.name).type)


def test_v8_pending_and_completion_times(fixture_table):
    table = HudiTable.open(fixture_table("quickstart_trips_table/mor/avro/v8_trips_8i3u1d"))
    tl = table.timeline
    compaction = tl.get("20251220210129235")
    assert compaction.action == "commit" and compaction.completion_time > compaction.requested_time
    assert tl.is_committed("20251220210130911")
    assert not tl.is_committed("20991231000000000")
    # Incremental ranges in v8+ use completion times (format doc 7.5).
    last = tl.commits[-1]
    assert tl.instants_in_range(last.requested_time, last.completion_time) == [last]


def test_schema_from_create_schema_on_empty_table(fixture_table):
    table = HudiTable.open(fixture_table("sample_table/cow/v6_empty"))
    assert len(table.timeline.commits) == 0
    assert table.schema.names[:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                      "_hoodie_partition_path", "_hoodie_file_name"]
    result = table.read()
    assert result.num_rows == 0 and result.schema.equals(table.schema)


def test_replacecommit_metadata(fixture_table):
    table = HudiTable.open(fixture_table("sample_table/cow/v6_simplekeygen_nonhivestyle_overwritetable"))
    replaced = table.timeline.replaced_file_groups(None)
    assert sorted(replaced) == ["10", "20", "30"] and all(len(ids) == 1 for ids in replaced.values())
    first = table.timeline.commits[0].requested_time
    assert table.timeline.replaced_file_groups(first) == {}


def test_twenty_digit_mdt_instant_file_names_parse_but_user_instants_stay_strict():
    """0.14/0.15 metadata tables name compactions ``<instant>001.commit`` (20 digits); they sort
    between ``<instant>`` and the next millisecond. Users still give 14 or 17 digits."""
    inst = parse_instant_file_name("20250522045918378001.commit", 1)
    assert inst is not None and (inst.requested_time, inst.action, inst.state) == (
        "20250522045918378001", "commit", COMPLETED
    )
    req = parse_instant_file_name("20250522045918378001.compaction.requested", 1)
    assert req is not None and req.state == REQUESTED
    assert "20250522045918378" < inst.requested_time < "20250522045918379"
    assert parse_instant_file_name("2025052204591837800.commit", 1) is None  # 19 digits
    with pytest.raises(InvalidInstantError):
        parse_instant("20250522045918378001")
