"""Storage requests that fail transiently are retried (reads are idempotent); one that keeps
failing raises StorageUnavailableError naming the file; missing files are never retried."""

from __future__ import annotations

import pytest

from catalog import storage as storage_module
from catalog.errors import StorageUnavailableError
from catalog.hudi_table import HudiTable
from catalog.storage import Storage
from tests.support.counting_fs import FlakyFileSystem, register


@pytest.fixture
def flaky(tmp_path, monkeypatch):
    register()
    monkeypatch.setattr(storage_module, "RETRY_BACKOFF", (0.0, 0.0))
    (tmp_path / "f.bin").write_bytes(b"0123456789")
    FlakyFileSystem.reset()
    yield Storage(f"flakyfs://{tmp_path}")
    FlakyFileSystem.failures = 0


def test_transient_failures_are_retried(flaky):
    FlakyFileSystem.failures = 2
    assert flaky.read_bytes("f.bin") == b"0123456789"
    assert [k for k, _ in FlakyFileSystem.reset()] == ["read"] * 3
    FlakyFileSystem.failures = 1
    assert [e["name"] for e in flaky.ls("")] == ["f.bin"]
    assert flaky.stats.counts["list"] == 2  # both attempts count as requests


def test_a_request_that_keeps_failing_names_the_file(flaky):
    FlakyFileSystem.failures = -1
    with pytest.raises(StorageUnavailableError, match=r"after 3 attempts: read f\.bin: ConnectionResetError"):
        flaky.read_range("f.bin", 0, 4)
    assert len(FlakyFileSystem.reset()) == 3


def test_missing_files_are_answers_not_retried(flaky):
    with pytest.raises(FileNotFoundError):
        flaky.read_bytes("nope.bin")
    assert len(FlakyFileSystem.reset()) == 1


def test_a_table_reads_through_transient_failures(generated_table, monkeypatch):
    from hudi_generator.generator import GeneratorSpec

    register()
    monkeypatch.setattr(storage_module, "RETRY_BACKOFF", (0.0, 0.0))
    path = generated_table(GeneratorSpec(rows=100, partitions=2))
    expected = HudiTable.open(path).read()
    FlakyFileSystem.failures = 1  # the first request of the open fails once
    try:
        assert HudiTable.open(f"flakyfs://{path}").read().num_rows == expected.num_rows
    finally:
        FlakyFileSystem.failures = 0
