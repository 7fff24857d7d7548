"""The one bounded LRU: byte bound, recency, too-large entries, counters and the listener."""

from __future__ import annotations

import pytest

from catalog.lru import BoundedLRU


def test_least_recently_used_leave_first_and_bytes_stay_bounded():
    events = []
    cache: BoundedLRU[str, int] = BoundedLRU("t", 100, listener=lambda *e: events.append(e))
    for key in "abc":
        assert cache.put(key, 1, 40)
        assert cache.bytes <= 100
    assert cache.keys() == ["b", "c"]  # "a" was evicted by "c"
    assert cache.get("b") == 1 and cache.get("a") is None
    cache.put("d", 2, 40)  # "c" is now the least recently used
    assert cache.keys() == ["b", "d"]
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.evictions, stats.entries, stats.bytes) == (1, 1, 2, 2, 80)
    assert stats.hit_ratio == 0.5
    assert ("t", "eviction", 1) in events and ("t", "bytes", 80) == events[-1]


def test_too_large_entries_are_not_stored_and_growth_evicts_others():
    cache: BoundedLRU[str, str] = BoundedLRU("t", 100, max_entry_bytes=50)
    assert not cache.put("big", "x", 51) and len(cache) == 0
    cache.put("a", "x", 30)
    cache.put("b", "y", 30)
    cache.resize("b", 50)  # b grew: still fits with a
    assert cache.bytes == 80
    cache.put("c", "z", 30)
    assert cache.bytes <= 100 and "c" in cache
    cache.resize("c", 60)  # larger than an entry may be: dropped
    assert "c" not in cache and cache.bytes <= 100


def test_zero_bytes_disables_and_bad_bounds_refuse():
    cache: BoundedLRU[str, int] = BoundedLRU("off", 0)
    assert not cache.put("a", 1, 1) and cache.get("a") is None
    with pytest.raises(ValueError):
        BoundedLRU("bad", -1)
