"""``hudi-flight serve --processes N``: N serving processes on one port, in real processes on
loopback. Both plan and stream; a process that dies is restarted; SIGTERM stops them all."""

from __future__ import annotations

import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor

import adbc_driver_flightsql.dbapi as adbc
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from catalog import HudiTable
from flight_server.client.session import HudiFlightClient
from flight_server.server.registry import Registry
from flight_server.server.security.users import Grant, UserStore
from hudi_generator.generator import GeneratorSpec
from tests.support.compare import assert_same_rows
from tests.support.processes import ServeProcess, poll
from tests.support.servers import free_port

SPEC = GeneratorSpec(rows=3_000, partitions=3, files_per_partition=2, commits=2)
CLIENTS = 12


class _Pid(flight.FlightServerBase):
    pass


def test_flight_servers_cannot_share_a_port_hence_the_relay():
    """Arrow Flight turns SO_REUSEPORT off: a second server on a bound port fails to start
    (flight_server/server/runtime/relay.py explains the way around it)."""
    port = free_port()
    first = _Pid(f"grpc+tcp://127.0.0.1:{port}")
    try:
        with pytest.raises(pa.ArrowException):
            _Pid(f"grpc+tcp://127.0.0.1:{port}")
    finally:
        first.shutdown()


@pytest.fixture(scope="module")
def table_paths(generated_table, fixture_table) -> dict[str, str]:
    return {"t.gen": generated_table(SPEC), "t.mor": fixture_table("sample_table/mor/avro/v9_txns_simple_meta")}


@pytest.fixture(scope="module")
def served(tmp_path_factory, table_paths):
    root = tmp_path_factory.mktemp("processes")
    catalog = f"sqlite:///{root / 'catalog.db'}"
    registry = Registry(catalog)
    for name, path in table_paths.items():
        registry.register_table(name, path)
    registry.close()
    server = ServeProcess("--port", "0", "--processes", "2", "--process-endpoints", "--catalog-url", catalog,
                          "--state-dir", str(root / "state"), log=root / "serve.log")
    try:
        yield server
    finally:
        server.stop()


def _pids(uri: str, connections: int) -> set[int]:
    """The serving processes that answer ``health`` over ``connections`` connections open at
    once (the relay gives each new connection to the process with the fewest open ones)."""
    clients = [HudiFlightClient(uri, timeout=30) for _ in range(connections)]
    pids = set()
    try:
        for client in clients:
            try:
                pids.add(client.health()["pid"])
            except ConnectionError:  # relayed to a process in the instant it died: ask again later
                pass
    finally:
        for client in clients:
            client.close()
    return pids


def _two(uri: str, without: int | None = None) -> set[int] | None:
    """The two serving processes' pids once both answer (and ``without`` is not among them)."""
    pids = _pids(uri, 6)
    return pids if len(pids) == 2 and without not in pids else None


def test_many_clients_are_planned_and_served_by_both_processes(served, table_paths):
    expected = {name: HudiTable.open(path).read() for name, path in table_paths.items()}
    pids: set[int] = set()
    lock = threading.Lock()

    def client_session(i: int) -> None:
        name = sorted(expected)[i % len(expected)]
        with HudiFlightClient(served.uri, timeout=60) as client:
            pid = client.health()["pid"]
            plan = client.plan(name)
            got = pa.Table.from_batches([b for ep in plan.endpoints for b in client.fetch(ep)], schema=plan.schema)
            assert_same_rows(got, expected[name])
        with lock:
            pids.add(pid)

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(client_session, range(CLIENTS)))
    assert len(pids) == 2 and served.pid not in pids


def _named(uri: str) -> dict[str, int]:
    """The locations a plan of ``t.gen`` names first, each with the pid that answers there."""
    with HudiFlightClient(uri, timeout=30) as client:
        named = {ep.locations[0] for ep in client.plan("t.gen").endpoints if ep.locations}
    pids = {}
    for location in named:
        try:
            with HudiFlightClient(location, timeout=30) as direct:
                pids[location] = direct.health()["pid"]
        except ConnectionError:  # a process that died, named until the supervisor says so
            pids[location] = 0
    return pids


def test_endpoints_name_the_process_that_streams_them(served, table_paths):
    """The bulk of a scan bypasses the relay: endpoints name the serving processes' own ports
    (each its own process, neither the public port), spread over both."""
    with HudiFlightClient(served.uri, timeout=60) as client:
        plan = client.plan("t.gen")
        assert len(plan.endpoints) == 6 and all(len(ep.locations) == 2 for ep in plan.endpoints)
        named = _named(served.uri)
        assert len(named) == 2 and len(set(named.values())) == 2 and served.pid not in named.values()
        assert all(f":{served.port}" not in location for location in named)
        got = pa.Table.from_batches([b for ep in plan.endpoints for b in client.fetch(ep)], schema=plan.schema)
    assert_same_rows(got, HudiTable.open(table_paths["t.gen"]).read())


def test_a_process_that_dies_is_restarted(served, table_paths):
    before = poll(lambda: _two(served.uri), 30, "two serving processes")
    victim = min(before)
    os.kill(victim, signal.SIGKILL)
    after = poll(lambda: _two(served.uri, without=victim), 60, "a restarted serving process")
    assert len(after & before) == 1
    # endpoints name the restarted process at its new port, and the dead one no more
    def renamed() -> dict[str, int] | None:
        named = _named(served.uri)
        return named if set(named.values()) == after else None

    assert len(poll(renamed, 30, "the restarted process named in endpoints")) == 2
    with HudiFlightClient(served.uri, timeout=60) as client:
        assert_same_rows(client.read("t.gen"), HudiTable.open(table_paths["t.gen"]).read())


def test_a_login_on_the_public_port_reads_from_every_process(tmp_path, table_paths):
    """The handshake's bearer token (signed with the shared secret) and the tickets are valid on
    the process that streams an endpoint, whichever process answered the login; another user's
    token reads nothing there."""
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    registry = Registry(catalog)
    registry.register_table("t.gen", table_paths["t.gen"])
    users = UserStore(registry.engine)
    for name in ("reader", "stranger"):
        users.add_user(name, f"{name}-password-123")
    users.grant("reader", Grant.parse("read", "t.gen"))
    registry.close()
    server = ServeProcess("--port", "0", "--processes", "2", "--process-endpoints", "--catalog-url", catalog,
                          "--state-dir", str(tmp_path / "state"), log=tmp_path / "serve.log")
    try:
        with HudiFlightClient(server.uri, user="reader", password="reader-password-123", timeout=60) as client:
            plan = client.plan("t.gen")
            named = {ep.locations[0] for ep in plan.endpoints}
            assert len(named) == 2 and not any(f":{server.port}" in location for location in named)
            assert_same_rows(client.read("t.gen"), HudiTable.open(table_paths["t.gen"]).read())
        # a generic Flight SQL client follows the same locations with the same login
        with adbc.connect(server.uri, db_kwargs={"username": "reader", "password": "reader-password-123"}, autocommit=True) as conn:
            with conn.cursor() as cursor:
                partitions, _ = cursor.adbc_execute_partitions("SELECT * FROM t.gen")
                got = 0
                for partition in partitions:
                    cursor.adbc_read_partition(partition)
                    got += cursor.fetch_arrow_table().num_rows
        assert len(partitions) == len(plan.endpoints) and got == HudiTable.open(table_paths["t.gen"]).read().num_rows
        endpoint = plan.endpoints[0]
        with HudiFlightClient(endpoint.locations[0], user="stranger", password="stranger-password-123",
                              timeout=60) as stranger, pytest.raises(PermissionError):
            list(stranger.fetch(endpoint))
    finally:
        server.stop()


def test_without_process_endpoints_every_byte_goes_through_the_public_port(tmp_path, table_paths):
    """The default (``--process-endpoints`` not given): every connection stays behind the relay."""
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    registry = Registry(catalog)
    registry.register_table("t.gen", table_paths["t.gen"])
    registry.close()
    server = ServeProcess("--port", "0", "--processes", "2", "--catalog-url", catalog, "--state-dir",
                          str(tmp_path / "state"), log=tmp_path / "serve.log")
    try:
        with HudiFlightClient(server.uri, timeout=60) as client:
            plan = client.plan("t.gen")
            assert plan.endpoints and all(ep.locations == () for ep in plan.endpoints)  # this server
            assert_same_rows(client.read("t.gen"), HudiTable.open(table_paths["t.gen"]).read())
    finally:
        server.stop()


def test_sigterm_stops_every_process(served):
    """Last in this module: it stops the module's server."""
    children = poll(lambda: _two(served.uri), 30, "two serving processes")
    assert served.stop() == 0

    def gone(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            with open(f"/proc/{pid}/stat") as fh:  # a zombie waiting for init counts as gone
                return fh.read().split(") ", 1)[1].startswith("Z")
        except FileNotFoundError:  # reaped meanwhile
            return True

    poll(lambda: all(gone(p) for p in children), 20, "the serving processes to exit")
    with pytest.raises(ConnectionError):
        with HudiFlightClient(served.uri, timeout=5) as client:
            client.health()


def test_on_a_named_address_the_processes_listen_and_are_named_there(tmp_path, table_paths):
    """``--host`` a name (not the default ``127.0.0.1``): the relay reaches the processes at that
    name and endpoints name it (``localhost``: tests listen on 127.0.0.1 only)."""
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    registry = Registry(catalog)
    registry.register_table("t.gen", table_paths["t.gen"])
    registry.close()
    server = ServeProcess("--port", "0", "--processes", "2", "--process-endpoints", "--catalog-url", catalog,
                          "--state-dir", str(tmp_path / "state"), "--host", "localhost", log=tmp_path / "serve.log")
    try:
        with HudiFlightClient(f"grpc://localhost:{server.port}", timeout=60) as client:
            assert len(_pids(f"grpc://localhost:{server.port}", 6)) == 2  # the relay reaches both
            plan = client.plan("t.gen")
            assert {loc.rsplit(":", 1)[0] for ep in plan.endpoints for loc in ep.locations} == {"grpc+tcp://localhost"}
            assert_same_rows(client.read("t.gen"), HudiTable.open(table_paths["t.gen"]).read())
    finally:
        server.stop()
