"""The pure-Python XXH64 equals the compiled ``xxhash`` package (used when installed)."""

from __future__ import annotations

import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.listing.xxh64 import xxh64


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(min_value=0, max_value=2**64 - 1))
def test_matches_xxhash(data, seed):
    assert xxh64(data, seed) == xxhash.xxh64(data, seed=seed).intdigest()


def test_known_value():
    # the empty input with seed 0 (the xxHash specification's test vector)
    assert xxh64(b"") == 0xEF46DB3751D8E999
