"""The fair queue of SQL work (``engine/admission.py``): work past a user's or a connection's
limit waits instead of being refused, a freed slot goes round-robin between users, a full queue
is refused with a retry hint, and one user's work (the schema step included) never stops another
user's first statement."""

from __future__ import annotations

import itertools
import json
import threading
import time
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.protocol import pack, sql
from flight_server.protocol.retry import decode
from flight_server.server.engine.admission import Admission
from flight_server.server.engine.sandbox import SandboxedEngine, Views
from flight_server.server.engine.settings import EngineSettings
from flight_server.server.security.budgets import CallKeys, ServerBusyError
from tests.support.credentials import prepare_state
from tests.support.processes import ServeProcess, poll

ENDLESS = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) SELECT count(*) FROM r"
#: a constant the engine folds while it finds the schema (the schema step): over a minute of CPU
#: in a few hundred MB, so only the deadline (or the end of the test) ends it
HELD_SCHEMA = "SELECT list_sum(list_transform(range(10000000), lambda x: list_sum(range(x % 1000)))) AS n"
#: the same over Flight SQL (its lambda syntax), more than a minute of CPU; a column alias follows
HELD_OVER_FLIGHT = "SELECT list_sum(list_transform(range(30000000), x -> length(repeat('ab', 500))))"
ALICE_TOKEN, BOB_TOKEN = "alice-token-" + "a" * 16, "bob-token-" + "b" * 16


def _keys(user: str | None, connection: int) -> CallKeys:
    return CallKeys(user, f"ipv4:127.0.0.1:{connection}")


def _queue(slots: int = 1, **settings: Any) -> tuple[Admission, list[tuple[str, str, float]]]:
    """A queue of ``slots`` (each 64 MB of the budget), and the events it tells its listener."""
    events: list[tuple[str, str, float]] = []
    engine = EngineSettings(memory_limit="64MB", memory_budget=f"{64 * slots}MB", **settings)
    return Admission(engine, lambda *event: events.append(event)), events


class _Worker(threading.Thread):
    """Takes a slot for ``keys`` (waiting as long as it must), notes its name in ``order`` once
    admitted, and gives the slot back when ``done`` is set (at once when ``done`` is None)."""

    def __init__(self, queue: Admission, name: str, keys: CallKeys, order: list[str], done: threading.Event | None):
        super().__init__(daemon=True)
        self.queue, self.label, self.keys, self.order, self.done = queue, name, keys, order, done
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            with self.queue.admitted(self.keys):
                self.order.append(self.label)
                if self.done is not None:
                    self.done.wait(10)
        except Exception as err:
            self.error = err


def _queued(queue: Admission, events: list[tuple[str, str, float]], worker: _Worker) -> None:
    """Start ``worker`` and wait until it waits in the queue."""
    before = sum(amount for _u, event, amount in events if event == "queued")
    worker.start()
    poll(lambda: sum(amount for _u, event, amount in events if event == "queued") > before, 5, f"{worker.label} queued")


def test_a_freed_slot_goes_round_robin_between_users_first_come_within_one():
    queue, events = _queue(slots=1, queue_per_user=8)
    order: list[str] = []
    hold = threading.Event()
    first = _Worker(queue, "a1", _keys("alice", 1), order, hold)
    first.start()
    poll(lambda: order == ["a1"], 5, "alice's first to run")
    waiting = [
        _Worker(queue, "a2", _keys("alice", 2), order, None), _Worker(queue, "a3", _keys("alice", 3), order, None),
        _Worker(queue, "b1", _keys("bob", 4), order, None), _Worker(queue, "b2", _keys("bob", 5), order, None),
        _Worker(queue, "c1", _keys("carol", 6), order, None),
    ]
    for worker in waiting:
        _queued(queue, events, worker)
    hold.set()
    for worker in [first, *waiting]:
        worker.join(10)
    # served least recently first: bob and carol (never) in arrival order, then alice, bob, alice
    assert order == ["a1", "b1", "c1", "a2", "b2", "a3"]
    assert all(worker.error is None for worker in waiting)
    waits = [amount for _u, event, amount in events if event == "wait"]
    assert len(waits) == 6 and waits[0] == 0.0 and all(w > 0 for w in waits[1:])


def test_one_users_backlog_does_not_delay_another_users_first_statement():
    queue, events = _queue(slots=2)  # a user's share: one of the two slots
    order: list[str] = []
    hold = threading.Event()
    alice = [_Worker(queue, f"a{i}", _keys("alice", i), order, hold) for i in range(6)]
    alice[0].start()
    poll(lambda: order == ["a0"], 5, "alice's first to run")
    for worker in alice[1:]:
        _queued(queue, events, worker)
    started = time.monotonic()
    with queue.admitted(_keys("bob", 9)):  # the free slot: alice's backlog waits for her own
        assert time.monotonic() - started < 1.0
        assert order == ["a0"]
    hold.set()
    for worker in alice:
        worker.join(10)
    assert sorted(order) == [f"a{i}" for i in range(6)] and not [w for w in alice if w.error]
    refused = [event for event in events if event[1] == "refused"]
    assert refused == []


@pytest.mark.parametrize("who, limit", [
    ({"queue_per_user": 2}, "sql_queue_per_user"),
    ({"queue_per_connection": 2}, "sql_queue_per_connection"),
    ({"queue_total": 2}, "sql_queue_total"),
])
def test_a_full_queue_is_refused_at_once_with_a_retry_hint(who, limit):
    queue, events = _queue(slots=1, **who)
    order: list[str] = []
    hold = threading.Event()
    keys = _keys("alice", 1) if limit == "sql_queue_per_connection" else None
    workers = [_Worker(queue, str(i), keys or _keys("alice", i), order, hold) for i in range(3)]
    workers[0].start()
    poll(lambda: order == ["0"], 5, "the first to run")
    for worker in workers[1:]:
        _queued(queue, events, worker)
    started = time.monotonic()
    with pytest.raises(ServerBusyError) as refused:
        queue.acquire(keys or _keys("alice", 7))
    assert time.monotonic() - started < 1.0
    assert refused.value.limit == limit and refused.value.retry_after > 0
    hint = decode(refused.value.extra_info)
    assert hint is not None and hint.limit == limit
    message = str(refused.value)
    assert message.startswith(f"server busy: limit {limit} (2) reached") and "Error" not in message
    assert ("alice", "refused", 1) in events
    hold.set()
    for worker in workers:
        worker.join(10)
    assert order == ["0", "1", "2"]


def test_a_waiter_leaves_at_its_wait_bound_or_when_its_client_leaves():
    queue, events = _queue(slots=1, admission_wait_seconds=0.3)
    with queue.admitted(_keys("alice", 1)):
        with pytest.raises(ServerBusyError, match="sql_admission_wait_seconds") as refused:
            queue.acquire(_keys("bob", 2))
        assert refused.value.retry_after > 0
        gone = threading.Event()
        threading.Timer(0.1, gone.set).start()
        with pytest.raises(flight.FlightCancelledError, match="client went away"):
            queue.acquire(_keys("carol", 3), gone.is_set)
    # neither waiter stayed in the queue: the next comes in at once
    with queue.admitted(_keys("bob", 2)):
        pass
    queued = {}
    for user, event, amount in events:
        if event in ("queued", "running"):
            queued[(user, event)] = queued.get((user, event), 0) + amount
    assert set(queued.values()) == {0}
    assert [(user, event) for user, event, _ in events if event == "refused"] == [("bob", "refused")]


def test_shutting_down_refuses_the_waiters_at_once():
    queue, events = _queue(slots=1)
    order: list[str] = []
    waiter = _Worker(queue, "bob", _keys("bob", 2), order, None)
    with queue.admitted(_keys("alice", 1)):
        _queued(queue, events, waiter)
        queue.close()
        waiter.join(2)
        assert not waiter.is_alive() and isinstance(waiter.error, flight.FlightUnavailableError)
        assert "shutting down" in str(waiter.error) and order == []
    with pytest.raises(flight.FlightUnavailableError, match="shutting down"):
        queue.acquire(_keys("carol", 3))


def test_anonymous_callers_share_by_connection():
    queue, _ = _queue(slots=4, admission_wait_seconds=0.2)  # a share of two
    one, other = _keys(None, 1), _keys(None, 2)
    with queue.admitted(one), queue.admitted(one):
        with pytest.raises(ServerBusyError, match="sql_admission_wait_seconds"):
            queue.acquire(one)
        with queue.admitted(other), queue.admitted(other):  # another connection: its own share
            pass


def test_a_schema_step_held_by_one_user_does_not_stop_another_users_first_statement():
    """Mallory's statements on two connections find their schemas by folding an expensive
    constant: the schema step is work of hers, so it holds her share (one slot) and her second
    waits behind it, while Bob's first statement and schema step run at once beside it."""
    settings = EngineSettings(memory_limit="256MB", memory_budget="512MB", threads=1, timeout_seconds=120.0)
    sql_engine = SandboxedEngine(settings)
    errors: list[Exception] = []

    def hold(connection: int) -> None:
        try:
            sql_engine.result_schema(HELD_SCHEMA, {}, keys=_keys("mallory", connection))
        except Exception as err:
            errors.append(err)

    held = [threading.Thread(target=hold, args=(i,), daemon=True) for i in (1, 2)]
    try:
        for thread in held:
            thread.start()
        poll(lambda: sql_engine.watchdog.running() == 1, 10, "mallory's schema step to run")
        bob = _keys("bob", 3)
        assert sql_engine.result_schema("SELECT 41 + 1 AS answer", {}, keys=bob).names == ["answer"]
        schema, batches = sql_engine.run("SELECT 42 AS answer", Views(), keys=bob)
        assert pa.Table.from_batches(list(batches), schema).to_pylist() == [{"answer": 42}]
        # answered beside mallory's first schema step, still running; her second still waits
        assert sql_engine.watchdog.running() == 1 and not errors
    finally:
        sql_engine.stop_all()
        for thread in held:
            thread.join(20)


def _command(query: str) -> flight.FlightDescriptor:
    return flight.FlightDescriptor.for_command(pack(sql.CommandStatementQuery(query=query)))


def _options(token: str) -> flight.FlightCallOptions:
    return flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {token}".encode())], timeout=30)


def _query(client: flight.FlightClient, token: str, query: str) -> list[dict]:
    options = _options(token)
    info = client.get_flight_info(_command(query), options)
    return client.do_get(info.endpoints[0].ticket, options).read_all().to_pylist()


def _serve(tmp_path, **settings: object) -> ServeProcess:
    """A real server with two users by static token and ``settings``."""
    state = tmp_path / "state"
    prepare_state(str(state), ("alice", "bob"))
    config = tmp_path / "serve.json"
    config.write_text(json.dumps({"server": {"tokens": {ALICE_TOKEN: "alice", BOB_TOKEN: "bob"}, **settings}}))
    return ServeProcess("--port", "0", "--state-dir", str(state), "--config", str(config), log=tmp_path / "serve.log")


def test_one_user_on_twelve_connections_looping_light_sql_is_never_refused(tmp_path):
    """A 12-panel dashboard of one user on the default settings (two slots, a share of one):
    its statements wait their turn, none is refused."""
    server = _serve(tmp_path)
    answered: list[int] = []
    failed: list[Exception] = []

    def panel(i: int) -> None:
        client = flight.connect(server.uri)
        try:
            for n in range(4):
                try:
                    rows = _query(client, ALICE_TOKEN, f"SELECT {i} * 1000 + {n % 5} AS v")
                    assert rows == [{"v": i * 1000 + n % 5}]
                    answered.append(i)
                except Exception as err:
                    failed.append(err)
        finally:
            client.close()

    panels = [threading.Thread(target=panel, args=(i,), daemon=True) for i in range(12)]
    try:
        for thread in panels:
            thread.start()
        for thread in panels:
            thread.join(120)
    finally:
        server.stop()
    assert not failed, failed[:3]
    assert sorted(answered) == sorted(list(range(12)) * 4)


def test_one_users_heavy_sql_does_not_refuse_another_users_light_sql(tmp_path):
    """Alice loops endless SQL on two connections (each statement runs to its 2 s deadline):
    she holds her share, her other statement waits its turn (at most 1 s: then refused), and
    Bob's light statements run in the other slot at once: none waits its 1 s out."""
    server = _serve(tmp_path, sql_memory_limit="64MB", sql_memory_budget="128MB", sql_threads=1,
                    sql_timeout_seconds=2, sql_admission_wait_seconds=1)
    stop = threading.Event()
    alice_errors: list[Exception] = []

    def heavy() -> None:
        client = flight.connect(server.uri)
        try:
            while not stop.is_set():
                try:
                    _query(client, ALICE_TOKEN, ENDLESS)
                except flight.FlightError as err:
                    alice_errors.append(err)
        finally:
            client.close()

    loops = [threading.Thread(target=heavy, daemon=True) for _ in range(2)]
    bob = flight.connect(server.uri)
    try:
        for loop in loops:
            loop.start()
        poll(lambda: alice_errors, 30, "alice's first statement to reach its deadline")
        answers = [_query(bob, BOB_TOKEN, f"SELECT {i} AS i") for i in range(8)]
        assert answers == [[{"i": i}] for i in range(8)]
    finally:
        stop.set()
        for loop in loops:
            loop.join(30)
        bob.close()
        server.stop()
    assert any(isinstance(err, flight.FlightTimedOutError) for err in alice_errors)
    assert all(isinstance(err, flight.FlightTimedOutError) or "sql_admission_wait_seconds" in str(err)
               for err in alice_errors), alice_errors[:3]


def test_a_user_holding_schema_steps_does_not_stop_another_users_first_statement(tmp_path):
    """Over Flight SQL: Alice's GetFlightInfo calls on two connections fold an expensive constant
    in their schema step (a new column name each time: nothing remembered), which is work of
    hers: it holds her share and her second waits, while Bob's first statement, schema step and
    execution, finds the other slot (a 1 s admission wait would refuse him otherwise)."""
    server = _serve(tmp_path, max_sql_generated_values=10**15, sql_timeout_seconds=120,
                    sql_admission_wait_seconds=1)
    stop = threading.Event()
    alice_errors: list[Exception] = []

    def hold(connection: int) -> None:
        client = flight.connect(server.uri)
        try:
            for i in itertools.count():
                if stop.is_set():
                    break
                try:
                    query = f"{HELD_OVER_FLIGHT} AS n{connection}_{i}"
                    client.get_flight_info(_command(query), _options(ALICE_TOKEN))
                except flight.FlightError as err:
                    alice_errors.append(err)
        finally:
            client.close()

    holds = [threading.Thread(target=hold, args=(i,), daemon=True) for i in range(2)]
    bob = flight.connect(server.uri)
    try:
        for thread in holds:
            thread.start()
        poll(lambda: any("sql_admission_wait_seconds" in str(err) for err in alice_errors), 60,
             "alice's second schema step to wait behind her first")
        assert _query(bob, BOB_TOKEN, "SELECT 6 * 7 AS bobs_first") == [{"bobs_first": 42}]
    finally:
        stop.set()
        bob.close()
        server.stop()
        for thread in holds:
            thread.join(30)


def test_a_printf_width_from_an_argument_is_refused_by_a_real_server(tmp_path):
    server = _serve(tmp_path, sql_memory_limit="64MB", sql_threads=1)
    client = flight.connect(server.uri)
    try:
        with pytest.raises(pa.ArrowInvalid, match=r"max_sql_generated_values .*printf takes a width"):
            _query(client, BOB_TOKEN, "SELECT length(printf('%*d', 100000000, 1))")
        assert _query(client, BOB_TOKEN, "SELECT printf('%5d', 1) AS p") == [{"p": "    1"}]
    finally:
        client.close()
        server.stop()
