"""All table IO goes through fsspec: a table in ``memory://`` (or any registered protocol) reads
exactly like the same table on local disk."""

from __future__ import annotations

import os
import uuid

import fsspec
import pytest

from catalog import HudiTable
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
        assert stats["list"] > 0 and stats["open"] >= 1 and stats["read"] >= 1
        assert len(table.timeline) == len(HudiTable.open(local).timeline)
    finally:
        mem.rm(root, recursive=True)


# Regression: "terminate called without an active exception" at interpreter exit. pyarrow's
# Parquet scan runs on Arrow's own IO/CPU thread pools (whatever use_threads says); handed a
# Python-backed filesystem (PyFileSystem over fsspec), those threads take the GIL to read and
# later to drop their last references to Python objects. One that does so while the interpreter
# finalizes is killed by CPython and the process aborts. The exit race itself hits a few percent
# of processes, so the decisive check is its precondition: no Python IO callback on an Arrow thread.
_EXIT_TABLES = (
    "sample_table/cow/v9_txns_simple_nometa",
    "sample_table/cow/v6_complexkeygen_hivestyle",
    "sample_table/mor/avro/v9_txns_simple_meta",
    "sample_table/mor/parquet/v6_complexkeygen_hivestyle",
)


def test_local_reads_make_no_python_calls_on_arrow_threads(fixture_table, monkeypatch):
    import threading

    from fsspec.implementations.local import LocalFileOpener

    foreign: list[str] = []
    seen: list[str] = []
    read = LocalFileOpener.read

    def spy(self, *args, **kwargs):
        thread = threading.current_thread()
        seen.append(thread.name)
        if isinstance(thread, threading._DummyThread):  # a thread Python did not start: Arrow's
            foreign.append(self.path)
        return read(self, *args, **kwargs)

    monkeypatch.setattr(LocalFileOpener, "read", spy)
    for name in _EXIT_TABLES:
        for mdt in (True, False):
            assert HudiTable.open(fixture_table(name), use_metadata_table=mdt).read().num_rows > 0
    assert seen, "the spy saw no reads at all"
    assert not foreign, f"Arrow threads called back into fsspec for {sorted(set(foreign))[:3]}"


_EXIT_RUNS = 24


def test_interpreter_exits_cleanly_after_reads(fixture_table):
    """End to end: processes that read tables then exit must all exit 0 (24 runs, 2 at a time).
    With the bug back a process aborts only a few percent of the time, so this is a smoke test;
    the decisive guard is the test above."""
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    paths = [fixture_table(n) for n in _EXIT_TABLES]
    code = (
        "import sys\n"
        "from catalog import HudiTable\n"
        "for p in sys.argv[1:]:\n"
        "    HudiTable.open(p).read(); HudiTable.open(p, use_metadata_table=False).read(columns=[])\n"
    )
    root = str(Path(__file__).resolve().parents[2])

    def run(_):
        return subprocess.run([sys.executable, "-c", code, *paths], cwd=root, capture_output=True, text=True,
                              timeout=120)

    with ThreadPoolExecutor(2) as pool:
        procs = list(pool.map(run, range(_EXIT_RUNS)))
    bad = [p for p in procs if p.returncode != 0]
    assert not bad, f"{len(bad)}/{_EXIT_RUNS} runs exited {bad[0].returncode}: {bad[0].stderr[-2000:]}"
