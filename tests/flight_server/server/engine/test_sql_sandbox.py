"""SQL runs in engine processes the operating system bounds, never in the serving process.

Each probe below once ignored the deadline, the client's departure and SIGTERM, or grew the
server by gigabytes, because the engine folded it as a constant while planning. The static SQL
bounds are relaxed here (``max_sql_generated_values``), so the sandbox alone must hold."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from catalog.errors import InvalidQueryError
from flight_server.protocol import pack, sql
from flight_server.server.engine.sandbox import SandboxedEngine, Views
from flight_server.server.engine.settings import EngineSettings
from flight_server.server.security.budgets import CallKeys
from tests.support.processes import ServeProcess, poll

#: a constant (which engines may fold while planning): ~1 GB of string built in a lambda
FOLDED = "SELECT length(list_reduce(list_transform(range(1000), x -> repeat('z', 999999)), (a, b) -> a || b)) AS n"
#: a lambda whose values multiply: a trillion list elements
MULTIPLIED = "SELECT len(flatten(list_transform(range(999999), x -> range(999999)))) AS n"
#: a query that never ends by itself
ENDLESS = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) SELECT count(*) FROM r"
#: a 1 GB string from a printf width (a width from an argument is refused before the engine)
WIDE = "SELECT length(printf('%1000000000d', 1)) AS n"
#: what the refusal of each names
BOUNDS = "sql_timeout_seconds|sql_memory_limit|sql_process_memory"


def _command(query: str) -> flight.FlightDescriptor:
    return flight.FlightDescriptor.for_command(pack(sql.CommandStatementQuery(query=query)))


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _rss_bytes(pid: int) -> int:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _serve(tmp_path: Path, **settings: object) -> ServeProcess:
    config = tmp_path / "serve.json"
    server = {"sql_memory_limit": "64MB", "sql_threads": 1, "max_sql_generated_values": 10**15, **settings}
    config.write_text(json.dumps({"server": server}))
    return ServeProcess("--port", "0", "--state-dir", str(tmp_path / "state"), "--config", str(config),
                        log=tmp_path / "serve.log")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    served = _serve(tmp_path_factory.mktemp("sandbox"), sql_timeout_seconds=4, sql_process_memory="768MB")
    yield served
    served.stop()


@pytest.fixture
def client(server):
    c = flight.connect(server.uri)
    yield c
    c.close()


@pytest.mark.parametrize("query", [FOLDED, MULTIPLIED, WIDE])
def test_values_that_multiply_are_bounded_by_the_engine_process(server, client, query):
    rss_before = _rss_bytes(server.pid)
    started = time.monotonic()
    with pytest.raises((flight.FlightTimedOutError, pa.ArrowInvalid), match=BOUNDS):
        info = client.get_flight_info(_command(query))  # its schema: planned in an engine process
        client.do_get(info.endpoints[0].ticket).read_all()
    assert time.monotonic() - started < 30
    assert _rss_bytes(server.pid) - rss_before < 256 << 20  # the serving process did not hold the string
    for child in _children(server.pid):  # what is left: idle engine processes, each within its bound
        try:
            assert _rss_bytes(child) < (768 << 20) + (1 << 30)
        except FileNotFoundError:  # a retired engine process ended after it was listed
            continue
    info = client.get_flight_info(_command("SELECT 41 + 1 AS answer"))  # an engine process answers again
    assert client.do_get(info.endpoints[0].ticket).read_all().to_pylist() == [{"answer": 42}]


def test_an_endless_query_stops_at_its_deadline(server, client):
    info = client.get_flight_info(_command(ENDLESS))
    started = time.monotonic()
    with pytest.raises(flight.FlightTimedOutError, match="sql_timeout_seconds"):
        client.do_get(info.endpoints[0].ticket).read_all()
    assert time.monotonic() - started < 30


def test_the_sql_client_tells_a_statement_stopped_at_its_deadline_and_does_not_run_it_again(server):
    """The deadline is the server's answer, not a lost connection: the client's DB-API raises an
    OperationalError naming the limit (not "unreachable"), and its endpoint is not fetched again."""
    from flight_server.client.sql import dbapi

    with dbapi.connect(server.uri) as conn:
        cursor = conn.cursor()
        with pytest.raises(dbapi.OperationalError, match="sql_timeout_seconds") as raised:
            cursor.execute(ENDLESS)
            cursor.fetchall()
    assert "unreachable" not in str(raised.value)


def test_sigterm_returns_within_five_seconds_whatever_the_engine_does(tmp_path):
    server = _serve(tmp_path, sql_timeout_seconds=600)
    try:
        c = flight.connect(server.uri)
        errors: list[Exception] = []

        def read() -> None:
            try:
                c.do_get(c.get_flight_info(_command(ENDLESS)).endpoints[0].ticket).read_all()
            except Exception as err:  # the server went away: what the test wants
                errors.append(err)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        engines = poll(lambda: _children(server.pid), 60, "the engine process to start")
        time.sleep(2.0)  # the engine runs the query (nothing else ends it for 10 minutes)
        started = time.monotonic()
        server.signal(signal.SIGTERM)
        server.proc.wait(15)
        assert time.monotonic() - started < 5
        poll(lambda: not any(_alive(pid) for pid in engines), 5, "the engine processes to end with the server")
        reader.join(10)
        assert errors
    finally:
        server.stop()


def test_the_client_leaving_kills_its_statement():
    engine = SandboxedEngine(EngineSettings(memory_limit="64MB", threads=1, timeout_seconds=600))
    gone = threading.Event()
    try:
        errors: list[Exception] = []

        def plan() -> None:
            try:
                list(engine.run(ENDLESS, Views(), gone.is_set)[1])
            except Exception as err:
                errors.append(err)

        planner = threading.Thread(target=plan, daemon=True)
        planner.start()
        poll(lambda: engine.watchdog.running() == 1, 60, "the statement to run")
        gone.set()
        planner.join(15)
        assert not planner.is_alive()
        assert isinstance(errors[0], flight.FlightCancelledError)
        schema = engine.result_schema("SELECT 1 AS one", {})
        assert schema.names == ["one"]
    finally:
        engine.stop_all()


def test_views_and_results_stream_through_the_engine_process():
    engine = SandboxedEngine(EngineSettings(memory_limit="64MB", threads=1))
    try:
        table = pa.table({"k": [i % 7 for i in range(100_000)], "v": list(range(100_000))})
        reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=4096))
        schema, batches = engine.run("SELECT k, sum(v) AS total FROM t GROUP BY k ORDER BY k", Views.of({"t": reader}))
        got = pa.Table.from_batches(list(batches), schema)
        expected = {k: sum(v for v in range(100_000) if v % 7 == k) for k in range(7)}
        assert {row["k"]: row["total"] for row in got.to_pylist()} == expected
        (process,) = engine.processes.idle()  # given back for the next statement
        # this machine lets a process have a network namespace of its own: the engine has no network
        assert process.network_isolated
    finally:
        engine.stop_all()


def test_a_view_whose_source_fails_fails_the_statement():
    engine = SandboxedEngine(EngineSettings(memory_limit="64MB", threads=1))
    schema = pa.schema([("v", pa.int64())])

    def failing():
        yield pa.record_batch([pa.array([1, 2, 3])], schema=schema)
        raise OSError("the table's storage went away")

    try:
        with pytest.raises(OSError, match="storage went away"):  # the source's own error, as every read tells it
            failing_view = Views.of({"t": pa.RecordBatchReader.from_batches(schema, failing())})
            list(engine.run("SELECT count(*) AS n FROM t", failing_view)[1])
        schema_, batches = engine.run("SELECT 2 AS two", Views())
        assert pa.Table.from_batches(list(batches), schema_).to_pylist() == [{"two": 2}]
    finally:
        engine.stop_all()


#: a sort that needs more memory than 64 MB and may not spill: DuckDB runs out of memory
OUT_OF_MEMORY = "SELECT i, md5(i::VARCHAR) AS m FROM range(3000000) t(i) ORDER BY m"


def test_an_engine_process_that_ran_out_of_memory_is_retired():
    """The retirement rule: an engine process whose statement met a memory failure (an allocation
    failure, any unexpected engine error) never runs another statement; one whose statement was
    merely wrong does."""
    engine = SandboxedEngine(EngineSettings(memory_limit="64MB", memory_budget="64MB", threads=1))
    try:
        schema, batches = _run(engine, "SELECT 1 AS one")
        assert pa.Table.from_batches(batches, schema).num_rows == 1
        (first,) = engine.processes.idle()
        with pytest.raises(InvalidQueryError, match="SQL engine"):  # the statement's own fault: kept
            _run(engine, "SELECT no_such_column FROM (SELECT 1 AS one)")
        assert [p.pid for p in engine.processes.idle()] == [first.pid]
        with pytest.raises(InvalidQueryError, match="sql_memory_limit"):
            _run(engine, OUT_OF_MEMORY)
        assert first.pid not in [p.pid for p in engine.processes.idle()]
        poll(lambda: not _alive(first.pid), 10, "the retired engine process to end")
        schema, batches = _run(engine, "SELECT 2 AS two")  # another process answers
        assert pa.Table.from_batches(batches, schema).to_pylist() == [{"two": 2}]
    finally:
        engine.stop_all()


def _run(engine: SandboxedEngine, sql: str) -> tuple[pa.Schema, list[pa.RecordBatch]]:
    schema, batches = engine.run(sql, Views())
    return schema, list(batches)


def test_after_memory_failures_the_next_statements_of_other_users_all_answer_on_warm_processes():
    """A run of statements that end in memory failures (each retires its engine process) leaves
    no broken process behind: the next 40 statements of two other users over a 12-row table
    all answer, on replacements started in the background before they were needed."""
    engine = SandboxedEngine(EngineSettings(memory_limit="64MB", memory_budget="128MB", threads=1))
    hostile = [CallKeys(user, f"ipv4:127.0.0.1:{i}") for i, user in enumerate(("mallory", "mallet"))]
    users = [CallKeys(user, f"ipv4:127.0.0.1:{i}") for i, user in enumerate(("bob", "carol"), 2)]
    table = pa.table({"k": list(range(12)), "v": [f"row-{i}" for i in range(12)]})
    try:
        # both slots' processes meet a memory failure side by side, then one more while the
        # other process is idle (its replacement too is started before it is needed)
        for round_ in (hostile, hostile[:1]):
            threads = [threading.Thread(target=_fails_for_memory, args=(engine, keys), daemon=True) for keys in round_]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
        poll(lambda: len(engine.processes.idle()) == 2, 30, "the replacements to be warm")
        started = engine.processes.started
        failures: list[Exception] = []

        def statements(keys: CallKeys) -> None:
            for i in range(20):
                try:
                    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches())
                    schema, batches = engine.run(f"SELECT count(*) AS n, max(k) + {i} AS m FROM t",
                                                 Views.of({"t": reader}), keys=keys)
                    assert pa.Table.from_batches(list(batches), schema).to_pylist() == [{"n": 12, "m": 11 + i}]
                except Exception as err:
                    failures.append(err)

        others = [threading.Thread(target=statements, args=(keys,), daemon=True) for keys in users]
        for thread in others:
            thread.start()
        for thread in others:
            thread.join(120)
        assert failures == []
        assert engine.processes.started == started  # none of them waited for a process to start
        assert engine.processes.replaced >= 3
    finally:
        engine.stop_all()


def _fails_for_memory(engine: SandboxedEngine, keys: CallKeys) -> None:
    with pytest.raises(InvalidQueryError, match="sql_memory_limit"):
        list(engine.run(OUT_OF_MEMORY, Views(), keys=keys)[1])
