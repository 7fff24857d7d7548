"""Fair shares under load: budgets per user, per connection and per process; refusals carry a
retry hint our clients honour (issue 20: 16 local clients shared one budget of 16 streams and
the refusal, INVALID_ARGUMENT, was never retried)."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.client.session import ServerBusyError, connect
from flight_server.protocol.retry import REASON, RetryHint, decode, encode
from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from flight_server.server.security.budgets import Budget, CallKeys, MemoryBudget
from flight_server.server.security.budgets import ServerBusyError as Refusal
from tests.support.servers import running_server

SIMPLE = "sample_table/cow/v6_nonpartitioned"


def test_retry_hint_round_trips_and_ignores_foreign_details():
    data = encode(RetryHint("max_streams_per_user", 0.25), "busy")
    assert decode(data) == RetryHint("max_streams_per_user", 0.25)
    assert b"type.googleapis.com/google.rpc.RetryInfo" in data and REASON.encode() in data
    for foreign in (b"", b"retry-after-ms=200", b"\x0a\xff\xff", b"\x08\x0e\x12\x04busy"):
        assert decode(foreign) is None


def test_budget_bounds_each_connection_each_user_and_the_total():
    budget = Budget("streams", per_user=3, per_connection=2, total=5)
    a1, a2 = CallKeys(None, "ipv4:127.0.0.1:1001"), CallKeys(None, "ipv4:127.0.0.1:1002")
    for _ in range(2):
        budget.acquire(a1)
    with pytest.raises(Refusal, match="max_streams_per_connection"):
        budget.acquire(a1)
    budget.acquire(a2)  # same host, another connection: its own share
    alice = [CallKeys("alice", f"ipv4:10.0.0.1:{p}") for p in range(4)]
    budget.acquire(alice[0])
    budget.acquire(alice[1])
    with pytest.raises(Refusal, match="max_streams_total"):
        budget.acquire(alice[2])
    budget.release(a1)
    budget.acquire(alice[2])
    budget.release(a2)
    with pytest.raises(Refusal, match="max_streams_per_user") as refused:
        budget.acquire(alice[3])
    assert decode(refused.value.extra_info) == RetryHint("max_streams_per_user", budget.retry_after)
    assert budget.in_use() == 4


def test_guarded_stream_gives_its_unit_back_once():
    budget = Budget("streams", per_user=0, per_connection=1, total=0)
    keys = CallKeys(None, "c")
    budget.acquire(keys)
    assert list(budget.guarded(keys, iter([1, 2]))) == [1, 2]
    budget.acquire(keys)
    dropped = budget.guarded(keys, iter([1]))
    del dropped
    assert budget.in_use() == 0


def test_memory_budget_admits_while_batches_in_flight_fit():
    memory = MemoryBudget(100)
    stream = memory.charged(iter([60, 70, 10]), lambda n: n)
    assert next(stream) == 60 and memory.used == 60
    memory.admit()
    assert next(stream) == 70 and memory.used == 70
    memory.limit = 70
    with pytest.raises(Refusal, match="stream_memory_bytes"):
        memory.admit()
    stream.close()
    assert memory.used == 0
    memory.admit()


@pytest.fixture()
def served(tmp_path, fixture_table):
    registry = Registry("sqlite://")
    registry.register_table("a.b", fixture_table(SIMPLE))
    config = ServerConfig(port=0, state_dir=str(tmp_path / "s"), max_streams_per_connection=1, max_streams_total=8)
    with running_server(config, registry=registry) as srv:
        yield srv


def test_local_clients_do_not_share_one_budget(served):
    """Other connections of the same host holding their whole share do not lock this one out."""
    others = [CallKeys(None, f"ipv4:127.0.0.1:{port}") for port in range(2000, 2007)]
    for keys in others:
        served.app.streams.acquire(keys)
    try:
        with flight.connect(f"grpc://127.0.0.1:{served.port}") as c:
            info = c.get_flight_info(flight.FlightDescriptor.for_path("a", "b"))
            assert c.do_get(info.endpoints[0].ticket).read_all().num_rows > 0
    finally:
        for keys in others:
            served.app.streams.release(keys)


def test_refusal_for_load_is_unavailable_with_a_hint_and_our_client_retries(served):
    others = [CallKeys(None, f"ipv4:127.0.0.1:{port}") for port in range(3000, 3008)]
    for keys in others:  # the process-wide bound is full
        served.app.streams.acquire(keys)
    try:
        with flight.connect(f"grpc://127.0.0.1:{served.port}") as c:
            info = c.get_flight_info(flight.FlightDescriptor.for_path("a", "b"))
            with pytest.raises(flight.FlightUnavailableError, match="max_streams_total") as refused:
                c.do_get(info.endpoints[0].ticket).read_all()
            assert "Traceback" not in str(refused.value)
            assert decode(refused.value.extra_info).limit == "max_streams_total"
        client = connect(f"grpc://127.0.0.1:{served.port}")
        client.busy_retry_seconds = 0.3
        with pytest.raises(ServerBusyError, match="busy") as busy:
            client.read("a.b")
        assert busy.value.limit == "max_streams_total" and busy.value.retry_after > 0
        client.busy_retry_seconds = 20.0
        threading.Timer(0.5, lambda: [served.app.streams.release(k) for k in others]).start()
        assert client.read("a.b").num_rows > 0  # retried with backoff until the budget frees up
        client.close()
        others = []
    finally:
        for keys in others:
            served.app.streams.release(keys)


def test_planning_is_bounded_per_connection(served):
    served.app.plans = Budget("plans", per_user=0, per_connection=0, total=1)
    served.app.plans.acquire(CallKeys(None, "ipv4:127.0.0.1:4000"))
    with flight.connect(f"grpc://127.0.0.1:{served.port}") as c:
        with pytest.raises(flight.FlightUnavailableError, match="max_plans_total"):
            c.get_flight_info(flight.FlightDescriptor.for_path("a", "b"))


def test_planning_is_tried_once_more_when_its_connection_broke(served):
    """A relay may close an idle connection (or displace it under a flood): planning reconnects."""
    client = connect(f"grpc://127.0.0.1:{served.port}")
    broken = [flight.FlightUnavailableError("Stream removed (Socket closed)")]

    class Flaky:
        def __init__(self, real):
            self.real = real

        def get_flight_info(self, *args):
            if broken:
                raise broken.pop()
            return self.real.get_flight_info(*args)

    real = client.flight
    client.flight = Flaky(real)
    assert client.plan("a.b").endpoints and not broken
    broken.extend([flight.FlightUnavailableError("Socket closed")] * 2)
    with pytest.raises(ConnectionError, match="unreachable"):  # once, not forever
        client.plan("a.b")
    client.flight = real
    client.close()


def test_a_stream_past_its_own_bound_queues_for_a_slot_then_is_refused():
    budget = Budget("streams", per_user=0, per_connection=1, total=10, queue_seconds=5.0, queue_factor=1)
    conn = CallKeys(None, "ipv4:127.0.0.1:1001")
    budget.acquire(conn)
    got = threading.Event()

    def second() -> None:
        budget.acquire(conn)  # waits for the first unit, not refused
        got.set()

    waiter = threading.Thread(target=second)
    waiter.start()
    assert not got.wait(0.3)
    with pytest.raises(Refusal, match="max_streams_per_connection"):  # the queue (1 per key) is full
        budget.acquire(conn)
    budget.release(conn)
    waiter.join(5)
    assert got.is_set() and budget.in_use() == 1
    # waiting threads are bounded in all: at most ``total`` calls queue, whatever their keys
    crowded = Budget("streams", per_user=1, per_connection=0, total=3, queue_seconds=5.0)
    alice = [CallKeys("alice", f"ipv4:127.0.0.1:{2000 + i}") for i in range(5)]
    crowded.acquire(alice[0])
    parked = [threading.Thread(target=crowded.acquire, args=(k,), daemon=True) for k in alice[1:4]]
    for thread in parked:
        thread.start()
    deadline = time.monotonic() + 5
    while crowded._queued < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    with pytest.raises(Refusal, match="max_streams_per_user"):  # the fourth waiter finds the queue full
        crowded.acquire(alice[4])
    assert time.monotonic() - started < 2.5  # refused at once, not after the 5 s wait
    for _ in parked:
        crowded.release(alice[0])
        time.sleep(0.05)
    for thread in parked:
        thread.join(5)
    assert not any(thread.is_alive() for thread in parked)
    short = Budget("streams", per_user=0, per_connection=1, total=10, queue_seconds=0.2)
    short.acquire(conn)
    with pytest.raises(Refusal, match="max_streams_per_connection"):  # waited its time, then refused
        short.acquire(conn)


def test_adbc_reads_a_result_with_more_endpoints_than_the_connection_bound(generated_table, tmp_path):
    """The ADBC driver opens every endpoint of a result at once and does not retry."""
    adbc = pytest.importorskip("adbc_driver_flightsql.dbapi")
    from hudi_generator.generator import GeneratorSpec

    path = generated_table(GeneratorSpec(rows=2_000, partitions=12, files_per_partition=1, commits=1))
    registry = Registry("sqlite://")
    registry.register_table("ns.t", path)
    config = ServerConfig(port=0, state_dir=str(tmp_path / "s"), max_streams_per_connection=4,
                          allowed_roots=[str(tmp_path.parent.parent), path])
    with running_server(config, registry=registry) as server:
        with adbc.connect(f"grpc://127.0.0.1:{server.port}", autocommit=True) as conn, conn.cursor() as cur:
            partitions, _ = cur.adbc_execute_partitions("SELECT * FROM ns.t")
            cur.execute("SELECT * FROM ns.t")
            assert cur.fetch_arrow_table().num_rows == 2_000
    assert len(partitions) > 4


def test_a_streamed_batch_is_charged_at_least_what_it_holds():
    """A one-row slice of a row group keeps the row group's buffers alive: it is charged them (read
    off the buffers, not by walking the columns); a slice of a batch larger than a message is
    charged its own share, so a scan's slices are not each charged the whole batch."""
    from flight_server.server.service import MAX_MESSAGE_BYTES, _batch_bytes, _message_sized

    group = pa.record_batch([pa.array([f"key-{i:06d}" for i in range(5000)]), pa.array(range(5000))], names=["k", "n"])
    row = group.slice(2500, 1)
    assert _batch_bytes(row) == group.get_total_buffer_size() >= row.nbytes
    assert _batch_bytes(group) >= group.nbytes

    large = pa.record_batch([pa.array(["x" * 1000] * 30_000)], names=["s"])  # ~30 MB
    parts = list(_message_sized(iter([large])))
    assert all(row.nbytes <= _batch_bytes(p) == p.nbytes <= MAX_MESSAGE_BYTES + 1024 for p in parts)
    assert sum(_batch_bytes(p) for p in parts) < 2 * large.nbytes
