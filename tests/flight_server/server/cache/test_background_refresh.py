"""BackgroundRefresh on its own: which tables a round checks, bounds, failures."""

from __future__ import annotations

from flight_server.server.cache.refresh import RECENT_SECONDS, BackgroundRefresh


def _round(interval: float = 100.0, max_tables: int = 64, fail: frozenset[str] = frozenset()):
    now = [0.0]
    checked: dict[str, float] = {}
    listed: list[str] = []

    def refresh(key: str, at: float) -> None:
        listed.append(key)
        if key in fail:
            raise ConnectionError("store down")
        checked[key] = at

    rounds = BackgroundRefresh(interval, refresh, lambda k: checked.get(k, float("-inf")), lambda: now[0], max_tables)
    return rounds, now, checked, listed


def test_a_round_checks_only_tables_whose_check_is_due():
    rounds, now, checked, listed = _round()
    try:
        rounds.queried("a")
        rounds.queried("b")
        checked.update(a=0.0, b=50.0)
        now[0] = 80.0  # a: 80 s old (due at 75), b: 30 s
        assert rounds.run_once() == 1 and listed == ["a"]
        now[0] = 130.0
        assert rounds.run_once() == 1 and listed == ["a", "b"]  # one listing per table per interval
    finally:
        rounds.close()


def test_the_round_is_bounded_to_the_most_recently_queried_tables():
    rounds, now, _, listed = _round(max_tables=2)
    try:
        for key in ("a", "b", "c", "b"):
            rounds.queried(key)
        assert rounds.tables() == ["c", "b"]
        now[0] = RECENT_SECONDS * 100  # not queried for long: nobody is refreshed
        assert rounds.run_once() == 0 and rounds.tables() == [] and listed == []
    finally:
        rounds.close()


def test_a_failing_refresh_is_counted_and_the_others_still_run():
    rounds, _, checked, listed = _round(fail=frozenset({"a"}))
    try:
        rounds.queried("a")
        rounds.queried("b")
        assert rounds.run_once() == 1 and listed == ["a", "b"] and rounds.failures == 1
        assert "b" in checked and rounds.tables() == ["a", "b"]  # a stays: the next round retries
    finally:
        rounds.close()
    assert not rounds.running
