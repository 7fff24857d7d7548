"""SQL under hostile load: every query has a deadline and stops when its client leaves or the
server stops; memory is bounded per query and for all queries together; SQL text is bounded
before the engine sees it. Each probe here once ran for minutes or took gigabytes."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pyarrow as pa
import pyarrow.flight as flight
import pytest
import sqlglot

from catalog.errors import InvalidQueryError
from flight_server.protocol import pack, sql
from flight_server.server.config import ServerConfig
from flight_server.server.engine.duckdb_engine import Engine
from flight_server.server.engine.failures import EngineFailure
from flight_server.server.engine.sandbox import SandboxedEngine, Views
from flight_server.server.engine.settings import EngineSettings
from flight_server.server.engine.watchdog import MEMORY, Watchdog, rss_bytes
from flight_server.server.security.budgets import ServerBusyError
from flight_server.server.security.limits import Limits
from flight_server.server.sql import bounds
from tests.support.processes import ServeProcess, poll
from tests.support.servers import running_server

ENDLESS = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) SELECT count(*) FROM r"
TABLE = "sample_table_cow.v9_txns_simple_meta"


def _command(query: str) -> flight.FlightDescriptor:
    return flight.FlightDescriptor.for_command(pack(sql.CommandStatementQuery(query=query)))


@pytest.fixture(scope="module")
def deadline_server(sql_tables, tmp_path_factory):
    registry, _ = sql_tables
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("bounds")), secret="ab" * 32,
                          sql_memory_limit="64MB", sql_threads=1, sql_timeout_seconds=2.0)
    with running_server(config, registry=registry) as srv:
        yield srv


@pytest.fixture
def client(deadline_server):
    c = flight.connect(f"grpc://127.0.0.1:{deadline_server.port}")
    yield c
    c.close()


def _running(server) -> int:
    return server.app.flight_sql.statements.engine.watchdog.running()


def test_an_endless_query_stops_at_its_deadline(client, deadline_server):
    info = client.get_flight_info(_command(ENDLESS))  # the schema is found without running it
    started = time.monotonic()
    with pytest.raises(flight.FlightTimedOutError, match="sql_timeout_seconds"):
        client.do_get(info.endpoints[0].ticket).read_all()
    assert time.monotonic() - started < 15
    poll(lambda: _running(deadline_server) == 0, 5, "the query to be released")


def test_a_query_stops_when_its_client_goes_away(sql_tables, tmp_path):
    registry, _ = sql_tables
    config = ServerConfig(port=0, state_dir=str(tmp_path), secret="ab" * 32, sql_memory_limit="64MB",
                          sql_threads=1, sql_timeout_seconds=600.0)
    with running_server(config, registry=registry) as server:
        c = flight.connect(f"grpc://127.0.0.1:{server.port}")
        info = c.get_flight_info(_command(ENDLESS))
        options = flight.FlightCallOptions(timeout=1.0)  # the client gives up after a second
        with pytest.raises(flight.FlightTimedOutError):
            c.do_get(info.endpoints[0].ticket, options).read_all()
        poll(lambda: _running(server) == 0, 10, "the engine to stop the abandoned query")
        c.close()


def test_shutdown_interrupts_running_queries(sql_tables, tmp_path):
    registry, _ = sql_tables
    config = ServerConfig(port=0, state_dir=str(tmp_path), secret="ab" * 32, sql_memory_limit="64MB",
                          sql_threads=1, sql_timeout_seconds=600.0)
    errors: list[Exception] = []
    with running_server(config, registry=registry) as server:
        c = flight.connect(f"grpc://127.0.0.1:{server.port}")
        info = c.get_flight_info(_command(ENDLESS))

        def read() -> None:
            try:
                c.do_get(info.endpoints[0].ticket).read_all()
            except Exception as err:
                errors.append(err)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        poll(lambda: _running(server) == 1, 10, "the query to run")
        started = time.monotonic()
    assert time.monotonic() - started < 10  # running_server's exit is the shutdown
    reader.join(10)
    assert errors  # the client is told (the query's error, or the closed connection)


@pytest.mark.parametrize("query, bound", [
    ("SELECT len(range(300000000))", "max_sql_generated_values"),
    ("SELECT unnest(generate_series(1, n)) FROM (SELECT 10 AS n)", "max_sql_generated_values"),
    ("SELECT repeat('x', 500000000)", "max_sql_generated_values"),
    ("SELECT lpad('x', 2000000000, 'y')", "max_sql_generated_values"),
    ("SELECT printf('%1000000000d', 1)", "max_sql_generated_values"),
    ("SELECT list_resize([1], 100000000)", "max_sql_generated_values"),
    ("SELECT length(printf('%*d', 1000000000, 1))", "printf takes a width or precision from an argument"),
    ("SELECT printf('%.*f', 1000000000, 1.5)", "printf takes a width or precision from an argument"),
    ("SELECT format('{:>{}}', 1, 1000000000)", "format takes a width or precision from an argument"),
    ("SELECT len(flatten(list_transform(range(999999), x -> range(999999))))",
     "list_transform builds 1000000 values for each of 1000000 elements"),
    ("SELECT list_transform(range(1000), x -> list_transform(range(1000), y -> repeat('ab', 10)))",
     "list_transform builds .* values for each of 1001 elements"),
    ("SELECT [range(1000) for x in range(10000)]", "a list comprehension builds"),
    ("SELECT list_filter(range(2000), x -> len(range(1000)) > x)", "list_filter builds"),
    ("SELECT list_transform(l, x -> range(3)) FROM (SELECT [1, 2] AS l)", "list of unknown size"),
    ("SELECT length(repeat(repeat('x', 1000000), 1000000))", "repeat builds a value longer"),
    ("SELECT length(replace(repeat('x', 100000), 'x', repeat('y', 100000)))", "replace builds a value longer"),
    (f"SELECT * FROM {TABLE} WHERE txn_id IN ({','.join(map(str, range(10001)))})", "max_in_values"),
    ("SELECT " + " + ".join(["1"] * 400), "max_sql_depth"),
    ("SELECT " + ", ".join(["1"] * 30000), "max_sql_tokens"),
])
def test_sql_past_a_bound_is_refused_by_name(client, query, bound):
    started = time.process_time()
    with pytest.raises(pa.ArrowInvalid, match=bound):
        client.get_flight_info(_command(query))
    assert time.process_time() - started < 5


def test_nested_generators_are_sized_once_each(monkeypatch):
    """Each node of a statement is sized once: 18 nested repeats (a repeat sized its argument
    again, and that one its own, ...) would be 2^18 walks."""
    nested = "SELECT " + "repeat(" * 18 + "'x'" + ", 1)" * 18
    query = sqlglot.parse_one(nested, read="duckdb")
    calls = []
    original = bounds._Generated._size_of

    def counting(self, node):
        calls.append(node)
        return original(self, node)

    monkeypatch.setattr(bounds._Generated, "_size_of", counting)
    bounds.check_query(query, Limits())
    assert len(calls) == len(list(query.bfs()))


def test_small_generated_values_still_work(client):
    info = client.get_flight_info(_command(
        "SELECT len(range(1000)) AS n, repeat('ab', 3) AS s, printf('%3d|%-2s|%.1f', 7, 'a', 1.25) AS p, "
        "format('{{}}{:>3}', 1) AS f, len(flatten(list_transform(range(10), x -> range(5)))) AS m, "
        "list_transform(l, x -> x + 1) AS l FROM (SELECT [1, 2] AS l)"
    ))
    assert client.do_get(info.endpoints[0].ticket).read_all().to_pylist() == [
        {"n": 1000, "s": "ababab", "p": "  7|a |1.2", "f": "{}  1", "m": 50, "l": [2, 3]}
    ]


def test_the_budget_admits_as_many_queries_as_it_holds_and_one_more_waits_its_turn():
    settings = EngineSettings(memory_limit="64MB", memory_budget="64MB", threads=1,
                              timeout_seconds=3.0, admission_wait_seconds=0.2)
    sql_engine = SandboxedEngine(settings)
    errors: list[Exception] = []

    def run() -> None:
        try:
            list(sql_engine.run(ENDLESS, Views())[1])
        except Exception as err:
            errors.append(err)

    first = threading.Thread(target=run, daemon=True)
    first.start()
    poll(lambda: sql_engine.watchdog.running() == 1, 10, "the first query to run")
    with pytest.raises(ServerBusyError, match="sql_admission_wait_seconds"):  # it waited, then was refused
        sql_engine.run("SELECT 1", Views())
    first.join(15)  # its deadline ends it
    assert not first.is_alive() and isinstance(errors[0], flight.FlightTimedOutError)
    assert list(sql_engine.run("SELECT 1 AS one", Views())[1])[0].to_pylist() == [{"one": 1}]  # given back
    _, never_read = sql_engine.run("SELECT 1", Views())  # e.g. a stream refused before its first batch
    del never_read
    assert sql_engine.watchdog.running() == 0
    assert list(sql_engine.run("SELECT 2 AS two", Views())[1])[0].to_pylist() == [{"two": 2}]
    sql_engine.stop_all()  # shutting down: no query starts any more
    with pytest.raises(flight.FlightUnavailableError, match="shutting down"):
        sql_engine.run("SELECT 3", Views())


def test_the_result_is_bounded_while_it_streams():
    sql_engine = SandboxedEngine(EngineSettings(memory_limit="64MB", threads=1, max_result_bytes=100_000))
    try:  # the engine process stops there, or the serving process does
        with pytest.raises(InvalidQueryError, match="sql_max_result_bytes"):
            list(sql_engine.run("SELECT unnest(range(1000000)) AS i", Views())[1])
        assert sql_engine.watchdog.running() == 0
    finally:
        sql_engine.stop_all()


def test_an_engine_bounds_its_result_too():
    """The engine process stops producing past the bound (the serving process refuses it first)."""
    in_process = Engine(EngineSettings(memory_limit="64MB", threads=1, max_result_bytes=100_000))
    with pytest.raises(EngineFailure, match="sql_max_result_bytes"):
        list(in_process.run("SELECT unnest(range(1000000)) AS i", {})[1])
    assert in_process.watchdog.running() == 0


class _Connection:
    def __init__(self) -> None:
        self.interrupted = threading.Event()

    def interrupt(self) -> None:
        self.interrupted.set()


def test_the_watchdog_stops_queries_when_the_process_grows_past_the_budget():
    rss = [100 << 20]
    watchdog = Watchdog(memory_bytes=50 << 20, rss=lambda: rss[0])
    connection = _Connection()
    watch = watchdog.watch(connection, 600.0, None)
    time.sleep(0.3)
    assert not connection.interrupted.is_set()
    rss[0] += 60 << 20  # list and string values DuckDB's memory_limit does not count
    assert connection.interrupted.wait(5) and watch.reason == MEMORY
    watchdog.release(watch)


def test_the_resident_size_follows_what_the_process_holds_and_a_forked_child_reads_its_own():
    before = rss_bytes()
    held = bytearray(64 << 20)  # zeroed pages: resident once written
    held[:: 4096] = b"x" * len(held[:: 4096])
    assert rss_bytes() - before >= 60 << 20
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # the child reads its own statm (the descriptor kept open names the parent's)
        rss_bytes()
        opened = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
                  if os.path.exists(f"/proc/self/fd/{fd}")]
        os.write(writing, b"own" if f"/proc/{os.getpid()}/statm" in opened else b"parent's")
        os._exit(0)
    os.close(writing)
    try:
        assert os.read(reading, 64) == b"own"
    finally:
        os.waitpid(child, 0)
        os.close(reading)
    assert rss_bytes() - before >= 60 << 20


def test_sigterm_stops_a_real_server_running_an_endless_query(tmp_path):
    config = tmp_path / "serve.json"
    config.write_text(json.dumps({"server": {"sql_timeout_seconds": 600, "sql_memory_limit": "64MB", "sql_threads": 1}}))
    server = ServeProcess("--port", "0", "--state-dir", str(tmp_path / "state"), "--config", str(config),
                          log=tmp_path / "serve.log")
    try:
        c = flight.connect(server.uri)
        info = c.get_flight_info(_command(ENDLESS))
        reader = threading.Thread(target=_drain, args=(c, info), daemon=True)
        reader.start()
        time.sleep(1.0)  # the query is running in the engine (nothing else could end it for 10 minutes)
        assert server.proc.poll() is None
        started = time.monotonic()
        server.signal(signal.SIGTERM)
        server.proc.wait(15)
        assert time.monotonic() - started < 10
    finally:
        server.stop()


def _drain(c: flight.FlightClient, info: flight.FlightInfo) -> None:
    try:
        c.do_get(info.endpoints[0].ticket).read_all()
    except Exception:  # the server went away: what the test wants
        pass
