"""TableState.refreshed on timeline layout 1 (``.hoodie/``): one listing when unchanged; a new
instant file makes a new state that keeps the decoded instant files and reads only
``hoodie.properties`` besides the listing."""

from __future__ import annotations

import shutil
from pathlib import Path

from catalog.state import TableState
from catalog.storage import Storage
from tests.support.counting_fs import CountingFileSystem, register

V6 = "sample_table/cow/v6_nonpartitioned"


def test_layout_1_refresh_costs_one_listing_and_reads_only_what_changed(fixture_table, tmp_path):
    register()
    path = tmp_path / "t"
    shutil.copytree(fixture_table(V6), path)
    state = TableState.load(Storage(f"countfs://{path}"))
    rows_before = len(list(state.fs_view.latest_file_slices(state.listing.list_partitions(), None)))
    assert state.timeline.latest_commit is not None and state.schema is not None
    CountingFileSystem.reset()
    assert state.refreshed() is state
    assert CountingFileSystem.reset() == [("list", f"{path}/.hoodie")]

    latest = state.timeline.latest_commit.requested_time
    pending = str(int(latest) + 1000).zfill(len(latest))
    (Path(path) / ".hoodie" / f"{pending}.commit.requested").write_bytes(b"")
    moved = state.refreshed()
    assert moved is not state and moved.timeline.is_pending(pending)
    assert moved.schema == state.schema  # decoded from the kept instant file: no read
    calls = CountingFileSystem.reset()
    assert calls == [("list", f"{path}/.hoodie"), ("read", f"{path}/.hoodie/hoodie.properties")]
    assert len(list(moved.fs_view.latest_file_slices(moved.listing.list_partitions(), None))) == rows_before


def test_an_unchanged_timeline_folder_is_not_parsed_again(fixture_table, tmp_path, monkeypatch):
    """Names listed as last time: no instant file name is parsed; a new non-instant entry parses
    once and keeps the timeline; a new instant file makes a new one."""
    import catalog.timeline.active as active

    path = tmp_path / "t"
    shutil.copytree(fixture_table(V6), path)
    state = TableState.load(Storage(str(path)))
    parsed: list[str] = []
    real = active.parse_instant_file_name
    monkeypatch.setattr(active, "parse_instant_file_name", lambda name, layout: parsed.append(name) or real(name, layout))
    timeline = state.timeline
    assert timeline.refreshed() is timeline and parsed == []

    (Path(path) / ".hoodie" / "scratch").mkdir()
    assert timeline.refreshed() is timeline and "scratch" in parsed
    parsed.clear()
    assert timeline.refreshed() is timeline and parsed == []

    latest = timeline.latest_commit.requested_time
    pending = str(int(latest) + 1000).zfill(len(latest))
    (Path(path) / ".hoodie" / f"{pending}.commit.requested").write_bytes(b"")
    moved = timeline.refreshed()
    assert moved is not timeline and moved.is_pending(pending)
    parsed.clear()
    assert moved.refreshed() is moved and parsed == []


def test_a_cold_plan_lists_the_timeline_while_it_reads_the_config(generated_table, tmp_path):
    """A cold plan of a table with a metadata table on a remote store: at most 12 requests, no
    HEAD before a read, and the timeline listings (the table's and its metadata table's) made
    on another thread while ``hoodie.properties`` is read."""
    import threading

    from catalog.plan.options import ReadOptions
    from catalog.plan.planner import plan
    from catalog.plan.splits import FooterCache
    from catalog.storage import add_request_listener, remove_request_listener
    from hudi_generator.generator import GeneratorSpec

    register()
    path = tmp_path / "t"
    shutil.copytree(generated_table(GeneratorSpec(rows=200, partitions=2, commits=2)), path)
    threads: list[tuple[str, str]] = []

    def who(kind: str, nbytes: int) -> None:
        threads.append((kind, threading.current_thread().name))

    CountingFileSystem.reset()
    add_request_listener(who)
    try:
        scan = plan(TableState.load(Storage(f"countfs://{path}")), ReadOptions(), footers=FooterCache())
        assert len(list(scan.splits)) == 2
    finally:
        remove_request_listener(who)
    calls = CountingFileSystem.reset()
    assert len(calls) <= 12 and {kind for kind, _ in calls} <= {"list", "read"}, calls
    listed_aside = [name for kind, name in threads if kind == "list" and name.startswith("hudi-timeline-listing")]
    assert len(listed_aside) == 2  # the table's timeline and the metadata table's
