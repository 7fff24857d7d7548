"""A coordinator and workers in real processes on loopback (docs/flight.md, "Scaling out"): placement by
rendezvous hashing, registration by signed heartbeats, a worker killed mid-stream, a coordinator
restart, a worker that stops heartbeating. Every wait polls with a deadline."""

from __future__ import annotations

import json
import signal
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from catalog import HudiTable
from flight_server.client.session import HudiFlightClient
from flight_server.server.registry import Registry
from flight_server.server.security.tickets import TicketSigner
from hudi_generator.generator import GeneratorSpec
from tests.support.compare import assert_same_rows
from tests.support.processes import ServeProcess, poll

BIG = GeneratorSpec(rows=200_000, partitions=0, files_per_partition=1, row_group_size=4096, commits=1)
SMALL = GeneratorSpec(rows=4_000, partitions=4, files_per_partition=2, commits=2)


class Cluster:
    """A shared catalog and secret, a coordinator and workers (each its own process)."""

    def __init__(self, root: Path, tables: dict[str, str]):
        self.root = root
        self.catalog = f"sqlite:///{root / 'catalog.db'}"
        self.secret = root / "secret.hex"
        self.secret.write_text("ab" * 32 + "\n")
        self.secret.chmod(0o600)
        self.config = root / "cluster.json"
        self.config.write_text(json.dumps({"heartbeat_interval_seconds": 0.3, "heartbeat_timeout_seconds": 5.0,
                                           "refresh_interval_seconds": 0}))
        registry = Registry(self.catalog)
        for name, path in tables.items():
            registry.register_table(name, path)
        registry.close()
        self.coordinator: ServeProcess | None = None
        self.workers: list[ServeProcess] = []
        self.coordinator_port = 0

    def _common(self, name: str) -> list[str]:
        state = self.root / name
        return ["--catalog-url", self.catalog, "--secret-file", str(self.secret), "--state-dir", str(state),
                "--config", str(self.config)]

    def start_coordinator(self) -> ServeProcess:
        self.coordinator = ServeProcess("--port", str(self.coordinator_port), "--role", "coordinator",
                                        *self._common("coordinator"), log=self.root / "coordinator.log")
        self.coordinator_port = self.coordinator.port
        return self.coordinator

    def start_workers(self, count: int) -> None:
        """Start ``count`` workers side by side; returns once all listen."""
        assert self.coordinator is not None
        started = []
        for _ in range(count):
            n = len(self.workers) + len(started)
            started.append(ServeProcess("--port", "0", "--role", "worker", "--coordinator", self.coordinator.uri,
                                        *self._common(f"worker{n}"), log=self.root / f"worker{n}.log", wait=False))
        self.workers.extend(p.ready() for p in started)

    def client(self) -> HudiFlightClient:
        assert self.coordinator is not None
        return HudiFlightClient(self.coordinator.uri, timeout=60)

    def live_workers(self) -> list[str]:
        with self.client() as c:
            return c.health()["workers"]

    def await_workers(self, expected: set[str]) -> None:
        poll(lambda: set(self.live_workers()) == expected, 15, f"workers {sorted(expected)}")

    def stop(self) -> None:
        for p in [*self.workers, self.coordinator]:
            if p is not None:
                p.stop()


def _uri(p: ServeProcess) -> str:
    return f"grpc+tcp://127.0.0.1:{p.port}"


@pytest.fixture(scope="module")
def paths(generated_table, fixture_table) -> dict[str, str]:
    return {"t.big": generated_table(BIG), "t.small": generated_table(SMALL),
            "t.mor": fixture_table("sample_table/mor/avro/v9_txns_simple_meta")}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, paths):
    c = Cluster(tmp_path_factory.mktemp("cluster"), paths)
    try:
        c.start_coordinator()
        c.start_workers(2)
        c.await_workers({_uri(w) for w in c.workers})
        yield c
    finally:
        c.stop()


def test_endpoints_name_both_workers_by_file_group_and_rows_equal_the_library(cluster, paths):
    workers = {_uri(w) for w in cluster.workers}
    cluster.await_workers(workers)
    with cluster.client() as client:
        for name in ("t.small", "t.mor"):
            plan = client.plan(name)
            assert plan.endpoints
            for ep in plan.endpoints:
                assert len(ep.locations) == 2 and set(ep.locations) == workers
            firsts = {ep.locations[0] for ep in plan.endpoints}
            if name == "t.small":  # 8 file groups over 2 workers: both are someone's first choice
                assert firsts == workers
            # the same file group always lands on the same worker while membership is unchanged
            again = {tuple(ep.metadata["file_ids"]): ep.locations for ep in client.plan(name).endpoints}
            assert again == {tuple(ep.metadata["file_ids"]): ep.locations for ep in plan.endpoints}
            assert_same_rows(client.read(name), HudiTable.open(paths[name]).read())


def test_heartbeats_must_be_signed_with_the_cluster_secret(cluster):
    from flight_server.server.cluster.membership import HEARTBEAT_PURPOSE, heartbeat_token

    client = flight.connect(cluster.coordinator.uri)
    try:
        forged = heartbeat_token(TicketSigner(b"x" * 32).derived(HEARTBEAT_PURPOSE), "grpc://evil:1", 5)
        with pytest.raises(flight.FlightUnauthenticatedError):
            list(client.do_action(flight.Action("cluster-heartbeat", json.dumps({"token": forged}).encode())))
        # a data ticket is no heartbeat, even though the same secret signed it
        ticket = cluster.client().plan("t.small").endpoints[0].ticket.decode()
        with pytest.raises(flight.FlightUnauthenticatedError):
            list(client.do_action(flight.Action("cluster-heartbeat", json.dumps({"token": ticket}).encode())))
    finally:
        client.close()
    assert "grpc://evil:1" not in cluster.live_workers()


def test_worker_that_stops_heartbeating_leaves_new_plans(cluster, paths):
    silent, alive = cluster.workers
    silent.signal(signal.SIGSTOP)  # alive but silent: no heartbeat, no goodbye
    try:
        cluster.await_workers({_uri(alive)})  # within the 5 s timeout (+ polling)
        with cluster.client() as client:
            plan = client.plan("t.small")
            assert all(ep.locations == (_uri(alive),) for ep in plan.endpoints)
            assert_same_rows(client.read("t.small"), HudiTable.open(paths["t.small"]).read())
    finally:
        silent.signal(signal.SIGCONT)
    cluster.await_workers({_uri(w) for w in cluster.workers})  # heartbeats again: back in the plans


def test_coordinator_restart_keeps_tickets_valid_and_workers_rejoin(cluster, paths):
    workers = {_uri(w) for w in cluster.workers}
    with cluster.client() as client:
        plan = client.plan("t.small")
    assert cluster.coordinator is not None
    cluster.coordinator.stop()
    cluster.start_coordinator()  # same port, same secret and catalog, no memory of the workers
    expected = HudiTable.open(paths["t.small"]).read()
    for target in [*(w.uri for w in cluster.workers), cluster.coordinator.uri]:
        with HudiFlightClient(target, timeout=60) as direct:  # each endpoint read from `target` only
            rows = [b for ep in plan.endpoints for b in direct.fetch(replace(ep, locations=()))]
        assert_same_rows(pa.Table.from_batches(rows, schema=plan.schema), expected)
    cluster.await_workers(workers)  # the next heartbeats register them again


def test_worker_killed_mid_stream_client_finishes_from_the_other_location(cluster, paths):
    """Last in this module: it leaves the cluster one worker short."""
    with cluster.client() as client:
        plan = client.plan("t.big")
        assert len(plan.endpoints) == 1  # one large split
        endpoint = plan.endpoints[0]
        victim = next(w for w in cluster.workers if _uri(w) == endpoint.locations[0])
        dialled: list[str] = []
        connect = client._client
        client._client = lambda uri, lane=0: (dialled.append(uri), connect(uri, lane))[1]  # type: ignore[method-assign]
        stream = client.fetch(endpoint)
        batches = [next(stream)]
        victim.signal(signal.SIGKILL)
        victim.proc.wait(10)
        batches.extend(stream)
        got = pa.Table.from_batches(batches)
    # the stream really broke: the rest came from the second location
    assert dialled == list(endpoint.locations)
    expected = HudiTable.open(paths["t.big"]).read()
    assert got.num_rows == expected.num_rows
    assert_same_rows(got, expected)
