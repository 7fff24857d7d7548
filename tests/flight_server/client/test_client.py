"""The Python client (flight_server.client): reads equal HudiTable.read; parallel fetch, locations,
retry on another location without duplicating rows; catalog actions."""

from __future__ import annotations

import dataclasses
import shutil
import time

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from catalog.hudi_table import HudiTable
from flight_server.client.session import HudiFlightClient, PlannedEndpoint, QueryPlan, connect
from flight_server.server.config import ServerConfig
from tests.support.auth import ADMIN, ADMIN_PASSWORD, add_admin
from tests.support.compare import assert_same_rows
from tests.support.fixtures import all_table_names
from tests.support.servers import free_port, identifier, running_server

SECRET = "cd" * 32
V9 = "sample_table/cow/v9_txns_simple_meta"


@pytest.fixture(scope="module")
def server(tables, tmp_path_factory):
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("state")), secret=SECRET,
                          allowed_roots=[str(tmp_path_factory.getbasetemp())])
    with running_server(config, registry=tables[0]) as srv:
        yield srv


@pytest.fixture
def client(server):
    add_admin(server)
    with connect(f"127.0.0.1:{server.port}", max_workers=4, user=ADMIN, password=ADMIN_PASSWORD) as c:
        yield c


def _readable(name: str, path: str) -> bool:
    try:
        HudiTable.open(path).read()
        return True
    except (NotImplementedError, ValueError):
        return False


@pytest.mark.parametrize("name", all_table_names())
def test_read_equals_library(client, tables, name):
    path = tables[1][identifier(name)]
    if not _readable(name, path):
        with pytest.raises((NotImplementedError, ValueError)):
            client.read(identifier(name))
        return
    assert_same_rows(client.read(identifier(name)), HudiTable.open(path).read())


def test_read_with_options_and_batches(client, tables):
    path = tables[1][identifier(V9)]
    options = dict(columns=["txn_id", "region"], filters=[("region", "in", ["apac", "us"])])
    expected = HudiTable.open(path).read(**options)
    assert_same_rows(client.read(identifier(V9), **options), expected)
    batches = list(client.read_batches(identifier(V9), **options))
    assert sum(b.num_rows for b in batches) == expected.num_rows
    assert client.read(identifier(V9), limit=2).num_rows == 2
    assert client.schema(identifier(V9), columns=["amount"]).names == ["amount"]


def test_catalog_calls(client, tables, fixture_table):
    assert "sample_table_cow" in client.namespaces()
    assert identifier(V9) in {t["table"] for t in client.tables("sample_table_cow")}
    entry = client.register("mine.t", fixture_table(V9))
    assert entry["table_type"] == "COPY_ON_WRITE"
    assert client.table_info("mine.t")["partition_fields"] == ["region"]
    assert client.refresh("mine.t")["table"] == "mine.t"
    client.unregister("mine.t")
    with pytest.raises(LookupError, match="table mine.t not found"):
        client.read("mine.t")
    assert client.health()["status"] == "ok"


def test_errors_surface(client):
    with pytest.raises(ValueError, match="not in the table schema"):
        client.read(identifier(V9), columns=["nope"])
    with pytest.raises(LookupError, match="table no.such not found"):
        client.read("no.such")


def _dead_location() -> str:
    return f"grpc://127.0.0.1:{free_port()}"  # nothing listens there any more


def _relocated(plan: QueryPlan, locations: list[str]) -> list[PlannedEndpoint]:
    return [dataclasses.replace(ep, locations=tuple(locations)) for ep in plan.endpoints]


def test_follows_locations_and_retries_on_another(client, server, tables):
    info = client.plan(identifier(V9))
    expected = HudiTable.open(tables[1][identifier(V9)]).read()
    live = f"grpc://127.0.0.1:{server.port}"
    got = pa.Table.from_batches(list(client.fetch_all(_relocated(info, [_dead_location(), live]))), info.schema)
    assert_same_rows(got, expected, exact_types=True)
    # a single dead location: the retry goes to the planning server
    got = pa.Table.from_batches(list(client.fetch_all(_relocated(info, [_dead_location()]))), info.schema)
    assert_same_rows(got, expected, exact_types=True)


def test_resumes_at_each_next_location_then_gives_up(client, server, tables):
    info = client.plan(identifier(V9))
    expected = HudiTable.open(tables[1][identifier(V9)]).read()
    live = f"grpc://127.0.0.1:{server.port}"
    endpoints = _relocated(info, [_dead_location(), _dead_location(), live])
    assert_same_rows(pa.Table.from_batches(list(client.fetch_all(endpoints)), info.schema), expected)
    # every location and the planning server itself unreachable: a ConnectionError
    with HudiFlightClient(_dead_location()) as orphan:
        with pytest.raises(ConnectionError, match="unreachable"):
            list(orphan.fetch_all(_relocated(info, [_dead_location(), _dead_location()])))


def test_a_refused_ticket_is_not_retried_elsewhere(client, server, tables, tmp_path):
    """Only transport errors move to the next location: a server that refuses the ticket (here:
    another secret) ends the read, although the next location would have served it."""
    info = client.plan(identifier(V9))
    stranger_cfg = ServerConfig(port=0, state_dir=str(tmp_path / "x"), secret="ef" * 32)
    with running_server(stranger_cfg, registry=tables[0]) as stranger:
        endpoints = _relocated(info, [f"grpc://127.0.0.1:{stranger.port}", f"grpc://127.0.0.1:{server.port}"])
        with pytest.raises(PermissionError, match="signature"):
            list(client.fetch_all(endpoints))


def test_data_served_by_twin_processes_sharing_secret(tables, tmp_path):
    """Endpoints name two data servers; the client reads from both (as with serve --processes)."""
    registry, paths = tables
    twin_cfg = ServerConfig(port=0, state_dir=str(tmp_path / "b"), secret=SECRET)
    with running_server(twin_cfg, registry=registry) as twin:
        locations = [f"grpc+tcp://127.0.0.1:{twin.port}"]
        cfg = ServerConfig(port=0, state_dir=str(tmp_path / "a"), secret=SECRET, locations=locations)
        with running_server(cfg, registry=registry) as planner:
            add_admin(planner)  # the same catalog (and users) as the twin
            with HudiFlightClient(f"grpc://127.0.0.1:{planner.port}", user=ADMIN, password=ADMIN_PASSWORD) as c:
                info = c.plan(identifier(V9))
                assert all(ep.locations[0] == locations[0] for ep in info.endpoints)
                assert_same_rows(c.read(identifier(V9)), HudiTable.open(paths[identifier(V9)]).read())


def test_early_close_stops_fetching(client):
    it = client.read_batches(identifier(V9))
    first = next(it)
    assert first.num_rows > 0
    it.close()  # remaining endpoints are abandoned without hanging


def test_warehouse_rescan_on_action_and_timer(fixture_table, tmp_path):
    wh = tmp_path / "wh"
    shutil.copytree(fixture_table(V9), wh / "ns" / "first")
    cfg = ServerConfig(port=0, state_dir=str(tmp_path / "s"), warehouses=[str(wh)], refresh_interval_seconds=0.3)
    with running_server(cfg) as srv:
        add_admin(srv)
        with connect(f"127.0.0.1:{srv.port}", user=ADMIN, password=ADMIN_PASSWORD) as c:
            assert [t["table"] for t in c.tables()] == ["ns.first"]
            # tables appear and vanish atomically: the re-scan timer never sees half a table
            shutil.copytree(fixture_table(V9), tmp_path / "second")
            (tmp_path / "second").rename(wh / "ns" / "second")
            assert c.refresh()["tables"] == 2  # refresh-table without a table re-scans the warehouses
            assert [t["table"] for t in c.tables()] == ["ns.first", "ns.second"]
            (wh / "ns" / "first").rename(tmp_path / "first-gone")
            deadline = time.monotonic() + 10
            while len(c.tables()) != 1 and time.monotonic() < deadline:  # the timer notices alone
                time.sleep(0.1)
            assert [t["table"] for t in c.tables()] == ["ns.second"]
            assert c.read("ns.second").num_rows == HudiTable.open(str(wh / "ns" / "second")).read().num_rows


class _DroppingServer:
    """A Flight client stand-in whose every stream delivers one batch, then loses the connection."""

    def __init__(self):
        self.streams = 0

    def close(self):
        pass

    def do_get(self, ticket, options):
        self.streams += 1
        yield dataclasses.make_dataclass("Chunk", ["data", "app_metadata"])(pa.record_batch({"a": [1, 2]}), None)
        raise flight.FlightUnavailableError("connection reset")


@pytest.mark.parametrize("metadata, streams", [({"weight": 0.5}, 2), ({}, 1)])
def test_mid_stream_retry_only_for_splits(metadata, streams):
    """A split streams the same rows again, so it is retried past the rows delivered; any other
    endpoint (a Flight SQL statement result) may change order when run again, so it is not."""
    fake = _DroppingServer()
    with HudiFlightClient("grpc://127.0.0.1:1") as c:
        c._clients = {("grpc://127.0.0.1:1", 0): fake, ("grpc://127.0.0.1:2", 0): fake}
        endpoint = PlannedEndpoint(b"t", ("grpc://127.0.0.1:2",), 0.5, metadata)
        with pytest.raises(ConnectionError, match="unreachable"):
            list(c.fetch(endpoint))
    assert fake.streams == streams


class _TimingOutServer:
    """A Flight client stand-in whose every stream fails with TIMED_OUT and ``message``."""

    def __init__(self, message: str):
        self.message = message
        self.streams = 0

    def close(self):
        pass

    def do_get(self, ticket, options):
        self.streams += 1
        raise flight.FlightTimedOutError(self.message)


@pytest.mark.parametrize("message, error, streams", [
    # the server's own deadline: the statement would meet it again, so it is not run again
    ("limit sql_timeout_seconds (10) exceeded: the query was cancelled", TimeoutError, 1),
    # gRPC's deadline for the call (a hung server): the next location may answer
    ("Deadline Exceeded", ConnectionError, 2),
])
def test_a_server_deadline_is_not_retried_a_transport_deadline_is(message, error, streams):
    fake = _TimingOutServer(message)
    with HudiFlightClient("grpc://127.0.0.1:1") as c:
        c._clients = {("grpc://127.0.0.1:1", 0): fake, ("grpc://127.0.0.1:2", 0): fake}
        endpoint = PlannedEndpoint(b"t", ("grpc://127.0.0.1:2",), 1.0, {})
        with pytest.raises(error, match=message.split(" (")[0]) as raised:
            list(c.fetch(endpoint))
    assert fake.streams == streams
    assert error is ConnectionError or not isinstance(raised.value, ConnectionError)


def test_a_fetch_that_cannot_start_is_an_error_not_an_empty_result():
    """A worker thread whose stream fails before its first batch still reports to the consumer."""

    class Broken(HudiFlightClient):
        def fetch(self, endpoint, lane=0):
            raise ConnectionError("hudi-flight server is unreachable (test)")

    with Broken("grpc://127.0.0.1:1") as client:
        with pytest.raises(ConnectionError, match="unreachable"):
            list(client.fetch_all([PlannedEndpoint(b"t", (), 1.0, {})]))
