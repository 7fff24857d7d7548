"""A metadata count is computed once per table state and pinned scan: the next state (a new
commit seen by the table cache) counts again, and so does another scan of the same state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from catalog.plan.options import ReadOptions
from flight_server.server.flightsql.counts import MetadataCounts
from flight_server.server.query.tickets import PinnedScan


class _State:
    """Stands for a table state: only its identity matters."""


@dataclass
class _Table:
    state: _State


@dataclass
class _Planned:
    table: _Table
    pinned: PinnedScan


def _planned(state: _State, instant: str = "001", **options: Any) -> Any:
    return _Planned(_Table(state), PinnedScan("ns.t", "file:///t", instant, ReadOptions(**options)))


class _Counter:
    def __init__(self, answer: int | None) -> None:
        self.answer, self.calls = answer, 0

    def __call__(self) -> int | None:
        self.calls += 1
        return self.answer


def test_a_count_is_computed_once_per_state_and_scan():
    counts, state, compute = MetadataCounts(), _State(), _Counter(42)
    assert [counts.count(_planned(state), compute) for _ in range(3)] == [42, 42, 42]
    assert compute.calls == 1
    assert counts.count(_planned(state, filters=[("id", ">", 3)]), compute) == 42
    assert compute.calls == 2  # another scan: its own count


def test_the_next_table_state_counts_again_even_at_the_same_instant():
    counts, compute = MetadataCounts(), _Counter(7)
    counts.count(_planned(_State()), compute)
    compute.answer = 8
    assert counts.count(_planned(_State()), compute) == 8
    assert compute.calls == 2


def test_a_scan_counted_by_reading_is_not_listed_again():
    counts, state, compute = MetadataCounts(), _State(), _Counter(None)
    assert counts.count(_planned(state), compute) is None
    assert counts.count(_planned(state), compute) is None
    assert compute.calls == 1


def test_the_counts_are_bounded():
    counts, state, compute = MetadataCounts(entries=2), _State(), _Counter(1)
    for instant in ("001", "002", "003", "001"):
        counts.count(_planned(state, instant), compute)
    assert compute.calls == 4  # "001" was evicted
