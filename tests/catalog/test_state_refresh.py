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
