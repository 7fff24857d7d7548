"""The local disk cache of remote file bytes through a real server (``countfs://`` stands for a
remote store: it records every request). Faults: the cache folder deleted while serving, and a
full disk; either way reads fall back to storage and answer the same rows."""

from __future__ import annotations

import errno
import os
import shutil

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from catalog.hudi_table import HudiTable
from flight_server.server.cache import disk_cache as disk_cache_module
from flight_server.server.cache.disk_cache import is_immutable
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from hudi_generator.generator import MERGE_ON_READ, GeneratorSpec
from tests.support.compare import assert_same_rows
from tests.support.counting_fs import CountingFileSystem, register
from tests.support.servers import running_server

SPEC = GeneratorSpec(rows=400, partitions=2, commits=2, table_type=MERGE_ON_READ)


@pytest.fixture(scope="module")
def table(generated_table):
    return generated_table(SPEC)


@pytest.fixture
def serve(table, tmp_path):
    register()
    registry = Registry(f"sqlite:///{tmp_path / 'catalog.db'}")
    registry.register_table("t.trips", f"countfs://{table}")
    registry.register_table("t.local", table)

    def _serve(**settings):
        config = ServerConfig(port=0, state_dir=str(tmp_path / "state"), refresh_interval_seconds=0, **settings)
        return running_server(config, registry=registry)

    return _serve


def _query(server, name: str = "trips") -> pa.Table:
    client = flight.connect(f"grpc://127.0.0.1:{server.port}")
    try:
        info = client.get_flight_info(flight.FlightDescriptor.for_path("t", name))
        return pa.concat_tables([client.do_get(ep.ticket).read_all() for ep in info.endpoints])
    finally:
        client.close()


def _data_reads(calls) -> list[str]:
    return [p for kind, p in calls if kind in ("read", "open") and is_immutable(p)]


def test_remote_file_bytes_come_from_disk_the_second_time(serve, table, tmp_path):
    with serve(disk_cache_bytes=64 << 20) as server:
        expected = HudiTable.open(table).read()
        assert_same_rows(_query(server), expected, exact_types=True)
        CountingFileSystem.reset()
        assert_same_rows(_query(server), expected, exact_types=True)
        assert _data_reads(CountingFileSystem.reset()) == []
        stats = server.app.tables.disk_cache.stats()
        assert stats.hits > 0 and 0 < stats.bytes <= 64 << 20
        _query(server, "local")  # local tables are read directly, never copied
        entry = server.app.registry.load_table("t.local")
        assert type(server.app.tables.get(entry).storage.fs).__name__ == "LocalFileSystem"


def test_a_deleted_cache_folder_falls_back_to_storage(serve, table):
    with serve(disk_cache_bytes=64 << 20) as server:
        expected = HudiTable.open(table).read()
        _query(server)
        shutil.rmtree(server.app.tables.disk_cache.root.parent)
        CountingFileSystem.reset()
        assert_same_rows(_query(server), expected, exact_types=True)
        assert _data_reads(CountingFileSystem.reset())  # storage answered
        assert server.app.tables.disk_cache.fallbacks > 0
        assert_same_rows(_query(server), expected, exact_types=True)  # and the cache refills
        assert any(server.app.tables.disk_cache.root.iterdir())


def test_a_full_disk_falls_back_to_storage(serve, table, monkeypatch):
    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(disk_cache_module, "open", no_space, raising=False)
    with serve(disk_cache_bytes=64 << 20) as server:
        expected = HudiTable.open(table).read()
        assert_same_rows(_query(server), expected, exact_types=True)
        assert_same_rows(_query(server), expected, exact_types=True)
        cache = server.app.tables.disk_cache
        assert cache.fallbacks > 0 and cache.stats().entries == 0 and not any(cache.root.iterdir())


def test_the_disk_cache_stays_within_its_bound(serve, table):
    bound = 20_000
    with serve(disk_cache_bytes=bound) as server:
        for _ in range(2):
            _query(server)
        cache = server.app.tables.disk_cache
        on_disk = sum(os.path.getsize(p) for p in cache.root.iterdir())
        stats = cache.stats()
        assert stats.bytes <= bound and on_disk <= bound and stats.evictions > 0


def test_ranges_come_from_blocks_fetched_in_runs_then_from_disk(tmp_path):
    """``cat_ranges`` of an immutable file: each run of missing blocks is one request; the same
    ranges again make none; the bytes are the file's."""
    from flight_server.server.cache.disk_cache import BLOCK_BYTES, DiskCache

    register()
    name = "fg1-0_0-1-0_20250101000000000.parquet"
    data = os.urandom(4 * BLOCK_BYTES + 100)
    (tmp_path / name).write_bytes(data)
    fs = DiskCache(tmp_path / "cache", 64 * BLOCK_BYTES).wrap(CountingFileSystem())
    path = str(tmp_path / name)
    ranges = [(10, 20), (BLOCK_BYTES - 5, BLOCK_BYTES + 5), (3 * BLOCK_BYTES + 1, len(data)), (7, 7)]
    CountingFileSystem.reset()
    for _ in range(2):
        got = fs.cat_ranges([path] * len(ranges), [s for s, _ in ranges], [e for _, e in ranges])
        assert got == [data[s:e] for s, e in ranges]
    # blocks 0-1 (one run) and 3-4 (another), each fetched once; the second pass reads disk only
    assert [kind for kind, _ in CountingFileSystem.reset()] == ["read", "read"]
    assert fs.cat_file(path, start=BLOCK_BYTES + 1, end=BLOCK_BYTES + 9) == data[BLOCK_BYTES + 1 : BLOCK_BYTES + 9]
    assert CountingFileSystem.reset() == []


def _cached_file(tmp_path, size: int):
    tmp_path.mkdir(parents=True, exist_ok=True)
    from flight_server.server.cache.disk_cache import BLOCK_BYTES, DiskCache

    register()
    name = "fg2-0_0-1-0_20250101000000000.parquet"
    data = os.urandom(size)
    (tmp_path / name).write_bytes(data)
    cache = DiskCache(tmp_path / "cache", 64 * BLOCK_BYTES)
    return cache, cache.wrap(CountingFileSystem()), str(tmp_path / name), data


def test_a_block_file_of_another_length_is_not_served(tmp_path):
    """A block file cut short (or grown) on disk is read from storage again, never served short."""
    from flight_server.server.cache.disk_cache import BLOCK_BYTES

    cache, fs, path, data = _cached_file(tmp_path, 2 * BLOCK_BYTES + 10)
    assert fs.cat_file(path, start=4, end=len(data)) == data[4:]
    for block in cache.root.iterdir():
        block.write_bytes(block.read_bytes()[:5])
    CountingFileSystem.reset()
    assert fs.cat_file(path, start=4, end=len(data)) == data[4:]
    assert [kind for kind, _ in CountingFileSystem.reset()] == ["read"]
    assert cache.fallbacks == 3


def test_threads_fetching_the_same_blocks_at_once_keep_whole_blocks(tmp_path):
    """Many requests missing the same blocks at once each keep them through a temp file of their
    own: every answer, and every block left on disk, holds the file's bytes."""
    from concurrent.futures import ThreadPoolExecutor

    from flight_server.server.cache.disk_cache import BLOCK_BYTES

    for round_ in range(5):
        cache, fs, path, data = _cached_file(tmp_path / str(round_), 3 * BLOCK_BYTES + 7)
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(fs.cat_file, [path] * 16, [4] * 16, [len(data)] * 16))
        assert answers == [data[4:]] * 16
        assert fs.cat_file(path, start=0, end=len(data)) == data
        assert sorted(os.path.getsize(p) for p in cache.root.iterdir()) == [7, BLOCK_BYTES, BLOCK_BYTES, BLOCK_BYTES]
