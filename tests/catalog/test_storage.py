"""All table IO goes through fsspec: a table in ``memory://`` (or any registered protocol) reads
exactly like the same table on local disk."""

from __future__ import annotations

import os
import uuid

import fsspec
import pyarrow as pa
import pytest

from catalog import HudiTable
from catalog.storage import Storage
from tests.support.compare import assert_same_rows


@pytest.mark.parametrize("name", ["sample_table/cow/v6_complexkeygen_hivestyle", "sample_table/cow/v9_txns_simple_nometa"])
def test_memory_filesystem(fixture_table, name):
    local = fixture_table(name)
    mem = fsspec.filesystem("memory")
    root = f"/h1-{uuid.uuid4().hex}"
    for dirpath, _, files in os.walk(local):
        for f in files:
            src = os.path.join(dirpath, f)
            mem.pipe_file(root + "/" + os.path.relpath(src, local), open(src, "rb").read())
    try:
        table = HudiTable.open(f"memory://{root}")
        result = table.read(filters=[("_hoodie_commit_time", "is not null", None)])
        assert_same_rows(result, HudiTable.open(local).read(), name)
        stats = table.storage.stats.snapshot()
        assert stats["list"] > 0 and stats["read"] >= 1  # base files: ranged reads, no open
        assert len(table.timeline) == len(HudiTable.open(local).timeline)
    finally:
        mem.rm(root, recursive=True)


# Regression: "terminate called without an active exception" at interpreter exit. pyarrow's
# Parquet scan runs on Arrow's own IO/CPU thread pools (whatever use_threads says); handed a
# Python-backed filesystem (PyFileSystem over fsspec), those threads take the GIL to read and
# later to drop their last references to Python objects. One that does so while the interpreter
# finalizes is killed by CPython and the process aborts. The exit race itself hits a few percent
# of processes, so the decisive check is its precondition: no fsspec call on an Arrow thread,
# for local tables (Arrow's native filesystem) and for memory:// (the path of every remote
# protocol: fsspec file objects read on Python threads).


def _copy_into_memory(local: str) -> str:
    mem = fsspec.filesystem("memory")
    root = f"/exit-{uuid.uuid4().hex}"
    for dirpath, _, files in os.walk(local):
        for f in files:
            src = os.path.join(dirpath, f)
            with open(src, "rb") as fh:
                mem.pipe_file(root + "/" + os.path.relpath(src, local), fh.read())
    return f"memory://{root}"


def _spy(monkeypatch, cls, names, seen, foreign) -> None:
    import threading

    for name in (n for n in names if hasattr(cls, n)):
        original = getattr(cls, name)

        def spy(self, *args, __original=original, **kwargs):
            thread = threading.current_thread()
            seen.append(thread.name)
            if isinstance(thread, threading._DummyThread):  # a thread Python did not start: Arrow's
                foreign.append(f"{cls.__name__}.{__original.__name__}")
            return __original(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, spy)


@pytest.mark.parametrize("where", ["local", "memory"])
def test_reads_make_no_python_calls_on_arrow_threads(fixture_table, monkeypatch, where):
    from fsspec.implementations.local import LocalFileOpener, LocalFileSystem
    from fsspec.implementations.memory import MemoryFile, MemoryFileSystem

    from tests.support.exit_runs import TABLES

    foreign: list[str] = []
    seen: list[str] = []
    _spy(monkeypatch, LocalFileOpener, ("read", "readinto", "seek"), seen, foreign)
    _spy(monkeypatch, LocalFileSystem, ("_open", "info", "cat_file"), seen, foreign)
    _spy(monkeypatch, MemoryFile, ("read", "readinto", "seek", "close"), seen, foreign)
    _spy(monkeypatch, MemoryFileSystem, ("_open", "info", "cat_file", "ls"), seen, foreign)
    for name in TABLES:
        uri = fixture_table(name) if where == "local" else _copy_into_memory(fixture_table(name))
        for mdt in (True, False):
            assert HudiTable.open(uri, use_metadata_table=mdt).read().num_rows > 0
    assert seen, "the spy saw no reads at all"
    assert not foreign, f"Arrow threads called back into fsspec: {sorted(set(foreign))}"


_EXIT_RUNS = 24


def test_interpreter_exits_cleanly_after_reads(fixture_table):
    """End to end: processes that read tables from disk and from memory:// then exit must all
    exit 0 (24 runs, 2 at a time). With the bug back a process aborts only a few percent of the
    time, so this is a smoke test; the decisive guard is the test above. The 200-run check is
    ``python -m tests.support.exit_runs --runs 200``."""
    from tests.support.exit_runs import TABLES, run_many, summary

    result = summary(run_many([fixture_table(n) for n in TABLES], _EXIT_RUNS))
    assert result["exit_0"] == _EXIT_RUNS, result


def test_remote_reads_skip_row_groups_by_statistics(monkeypatch):
    """Remote protocols read Parquet on the calling thread, yet still skip row groups whose
    statistics rule a filter out (Arrow prunes a metadata-only copy of the footer)."""
    import pyarrow.parquet as pq

    from hudi_generator.generator import GeneratorSpec, expected_table, generate

    spec = GeneratorSpec(rows=1000, partitions=0, commits=1, metadata_table=False, row_group_size=100)
    uri = f"memory://prune-{uuid.uuid4().hex}/t"
    generate(uri, spec)
    read: list = []
    iter_batches = pq.ParquetFile.iter_batches

    def spy(self, *args, row_groups=None, **kwargs):
        read.append(row_groups)
        return iter_batches(self, *args, row_groups=row_groups, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    try:
        expected = expected_table(spec)
        cut = expected["ts"][949].as_py()
        got = HudiTable.open(uri).read(columns=expected.column_names, filters=[("ts", ">", cut)])
        assert_same_rows(got, expected.filter(pa.compute.greater(expected["ts"], cut)), "pruned")
        assert read == [[9]]  # of the file's 10 row groups, only the last can hold ts > cut
        read.clear()
        assert HudiTable.open(uri).read(filters=[("ts", "<", 0)]).num_rows == 0
        assert read == []  # every row group ruled out: nothing decoded
    finally:
        fsspec.filesystem("memory").rm(uri.removeprefix("memory://").split("/")[0], recursive=True)


def test_ls_names_is_one_counted_listing_of_files_and_folders(tmp_path):
    (tmp_path / "a.commit").write_text("{}")
    (tmp_path / "archived").mkdir()
    storage = Storage(str(tmp_path))
    assert sorted(storage.ls_names()) == ["a.commit", "archived"]
    assert storage.stats.snapshot().get("list") == 1
    assert sorted(storage.ls_names()) == sorted(e["name"] for e in storage.ls())
    with pytest.raises(FileNotFoundError):
        storage.ls_names("missing")


def test_local_tables_share_one_arrow_filesystem(tmp_path):
    first, second = Storage(str(tmp_path)), Storage(str(tmp_path / "other"))
    assert first.arrow_filesystem() is not None
    assert first.arrow_filesystem() is second.arrow_filesystem()
    assert Storage("memory://x").arrow_filesystem() is None


def test_file_uri_is_one_key_for_every_alias_kept_and_bounded(tmp_path, monkeypatch):
    import catalog.storage as storage_module

    storage = Storage(str(tmp_path))
    first = storage.file_uri("p/f.parquet")
    assert first == storage.file_uri("p//f.parquet") == storage.file_uri("p/x/../f.parquet")
    assert first.startswith("file://") and first.endswith("/p/f.parquet")
    asked: list[str] = []
    unstrip = storage.fs.unstrip_protocol
    monkeypatch.setattr(storage.fs, "unstrip_protocol", lambda name: asked.append(name) or unstrip(name))
    assert storage.file_uri("p/f.parquet") == first and asked == []  # kept
    monkeypatch.setattr(storage_module, "FILE_URIS_KEPT", 3)
    for i in range(5):
        storage.file_uri(f"p/{i}.parquet")
    assert len(storage._file_uris) <= 3
    assert storage.child("p").file_uri("f.parquet") == first  # a child keys files the same way
