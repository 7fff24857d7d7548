"""Queries run on the connections of pooled databases: a database is reused only after a query
that ended well and was not interrupted, and nothing of one query (its views) is seen by the next."""

from __future__ import annotations

import pyarrow as pa
import pytest

from flight_server.server.engine.duckdb_engine import Engine
from flight_server.server.engine.failures import EngineFailure
from flight_server.server.engine.settings import EngineSettings


@pytest.fixture
def engine():
    engine = Engine(EngineSettings(memory_limit="256MB", memory_budget="512MB", threads=1))
    yield engine
    engine.stop_all()


def _run(engine: Engine, sql: str, views: dict) -> pa.Table:
    schema, batches = engine.run(sql, views)
    return pa.Table.from_batches(list(batches), schema)


def _idle(engine: Engine) -> list:
    return engine.databases.idle()


def test_a_database_is_reused_after_a_query_that_ended_well(engine):
    assert _run(engine, "SELECT sum(x) AS s FROM v", {"v": pa.table({"x": [1, 2]})}).column("s").to_pylist() == [3]
    idle = _idle(engine)
    assert len(idle) == 1
    assert engine.result_schema("SELECT x FROM w", {"w": pa.schema([("x", pa.int64())])}).names == ["x"]
    assert _idle(engine) == idle  # the same database served the next query
    with pytest.raises(EngineFailure, match="v"):  # the first query's view went with its connection
        _run(engine, "SELECT * FROM v", {})


def test_a_database_a_query_failed_on_is_closed(engine):
    _run(engine, "SELECT 1 AS one", {})
    (first,) = _idle(engine)
    with pytest.raises(EngineFailure):
        _run(engine, "SELECT * FROM missing", {})
    assert first not in _idle(engine)


def test_an_abandoned_stream_does_not_give_its_database_back(engine):
    schema, batches = engine.run("SELECT * FROM range(200000) t(x)", {})
    next(iter(batches))
    batches.close()
    assert _idle(engine) == []


def test_no_database_is_kept_after_shutdown(engine):
    _run(engine, "SELECT 1 AS one", {})
    (database,) = _idle(engine)
    engine.stop_all()
    assert _idle(engine) == []
    with pytest.raises(Exception, match="closed"):
        database.connection.execute("SELECT 1")


def test_a_database_whose_query_was_interrupted_as_it_ended_is_closed(engine, monkeypatch):
    release = engine.watchdog.release

    def interrupted_first(watch):  # the deadline passes between the last batch and the release
        watch.stop("deadline")
        release(watch)

    monkeypatch.setattr(engine.watchdog, "release", interrupted_first)
    assert _run(engine, "SELECT 1 AS one", {}).num_rows == 1
    assert _idle(engine) == []  # its connection may still hold the interrupt: never lent again


def test_a_database_is_closed_when_its_query_cannot_be_watched(engine, monkeypatch):
    taken = []
    take = engine.databases.take
    monkeypatch.setattr(engine.databases, "take", lambda spec: taken.append(take(spec)) or taken[-1])

    def cannot_watch(*args):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(engine.watchdog, "watch", cannot_watch)
    with pytest.raises(RuntimeError):
        engine.run("SELECT 1 AS one", {})
    assert _idle(engine) == [] and len(taken) == 1
    with pytest.raises(Exception, match="closed"):
        taken[0].connection.execute("SELECT 1")
    monkeypatch.undo()
    assert _run(engine, "SELECT 1 AS one", {}).num_rows == 1  # a new database serves the next query
