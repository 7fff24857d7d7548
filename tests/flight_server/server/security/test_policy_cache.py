"""The storage policy keeps local path resolutions (not decisions): hit, forget, bound."""

from __future__ import annotations

import os

import pytest

from flight_server.server.cache.tables import TableCache
from flight_server.server.registry import TableEntry
from flight_server.server.security.policy import StoragePolicy, StoragePolicyError


@pytest.fixture
def resolved(monkeypatch) -> list[str]:
    """The paths ``os.path.realpath`` was asked to resolve."""
    asked: list[str] = []
    real = os.path.realpath

    def spy(path, *args, **kwargs):
        asked.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os.path, "realpath", spy)
    return asked


def test_a_path_is_resolved_once_and_checked_every_time(tmp_path, resolved):
    root, table = tmp_path / "root", tmp_path / "root" / "t"
    table.mkdir(parents=True)
    policy = StoragePolicy(roots=[str(root)])
    resolved.clear()
    for _ in range(3):
        policy.check_registered("ns.t", str(table), None)
    assert resolved.count(str(table)) == 1
    with pytest.raises(StoragePolicyError):  # the decision is still taken: another path is refused
        policy.check_registered("ns.u", str(tmp_path / "elsewhere"), None)


def test_forget_sees_a_moved_symbolic_link(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "real").mkdir(parents=True)
    outside.mkdir()
    link = root / "link"
    link.symlink_to(root / "real", target_is_directory=True)
    policy = StoragePolicy(roots=[str(root)])
    policy.check_registered("ns.t", str(link), None)
    link.unlink()
    link.symlink_to(outside, target_is_directory=True)
    policy.check_registered("ns.t", str(link), None)  # the kept resolution still answers
    policy.forget()
    with pytest.raises(StoragePolicyError, match="ns.t"):
        policy.check_registered("ns.t", str(link), None)


def test_a_catalog_change_forgets_the_resolutions(tmp_path):
    """``TableCache.drop`` (every catalog change and ``refresh-table``) empties the policy's cache."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    link = root / "t"
    link.symlink_to(outside, target_is_directory=True)
    policy = StoragePolicy(roots=[str(root)])
    entry = TableEntry("ns", "t", str(link))
    tables = TableCache(check=policy.check_registered, forget_checks=policy.forget)
    with pytest.raises(StoragePolicyError):
        tables.get(entry)
    assert len(policy._resolved) > 0
    tables.drop("ns.t")
    assert len(policy._resolved) == 0


def test_resolutions_are_bounded_in_bytes(tmp_path, resolved):
    paths = [tmp_path / f"table-{i:03d}" for i in range(50)]
    policy = StoragePolicy(roots=[str(tmp_path)], resolved_cache_bytes=2000)
    for path in paths:
        policy.check(str(path))
    assert 0 < policy._resolved.bytes <= 2000
    assert len(policy._resolved) < len(paths)
    resolved.clear()
    policy.check(str(paths[0]))  # evicted long ago: resolved again
    assert resolved == [str(paths[0])]


def test_no_cache_resolves_every_time(tmp_path, resolved):
    policy = StoragePolicy(roots=[str(tmp_path)], resolved_cache_bytes=0)
    resolved.clear()
    policy.check(str(tmp_path / "t"))
    policy.check(str(tmp_path / "t"))
    assert resolved.count(str(tmp_path / "t")) == 2


def test_the_bound_is_a_server_setting(tmp_path):
    from flight_server.server.config import ServerConfig

    config = ServerConfig(state_dir=str(tmp_path), warehouses=[str(tmp_path)], resolved_path_cache_bytes=4096)
    assert config.storage_policy()._resolved.max_bytes == 4096
