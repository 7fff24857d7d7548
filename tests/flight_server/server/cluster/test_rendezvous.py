"""Rendezvous placement and heartbeat membership, without processes."""

from __future__ import annotations

import json
import os
import time

import pyarrow.flight as flight
import pytest

from catalog.errors import InvalidQueryError, InvalidTicketError
from flight_server.server.cluster.membership import HEARTBEAT_PURPOSE, Membership, heartbeat_token, rendezvous
from flight_server.server.cluster.worker import Registration
from flight_server.server.config import ServerConfig
from flight_server.server.security.auth import TokenIssuer
from flight_server.server.security.tickets import TicketSigner, configured_signer
from flight_server.server.security.users import CLUSTER_MEMBER
from tests.support.auth import add_admin
from tests.support.servers import running_server

KEYS = [f"ns.t/part={i % 7}/file-{i:05d}" for i in range(4000)]
WORKERS = [f"grpc+tcp://worker-{i}:8815" for i in range(4)]


def test_placement_is_stable_and_spread():
    first = {k: rendezvous(k, WORKERS) for k in KEYS}
    assert first == {k: rendezvous(k, list(reversed(WORKERS))) for k in KEYS}  # order of members is irrelevant
    assert all(len(v) == 2 and v[0] != v[1] for v in first.values())
    counts = {w: sum(v[0] == w for v in first.values()) for w in WORKERS}
    assert all(abs(c - len(KEYS) / 4) < 0.1 * len(KEYS) for c in counts.values()), counts


def test_a_joining_worker_moves_about_one_nth_of_the_file_groups_and_only_to_itself():
    before = {k: rendezvous(k, WORKERS, 1)[0] for k in KEYS}
    joined = [*WORKERS, "grpc+tcp://worker-new:8815"]
    after = {k: rendezvous(k, joined, 1)[0] for k in KEYS}
    moved = [k for k in KEYS if before[k] != after[k]]
    assert all(after[k] == "grpc+tcp://worker-new:8815" for k in moved)
    assert abs(len(moved) / len(KEYS) - 1 / 5) < 0.04
    # and a leaving worker moves only its own file groups
    left = [w for w in WORKERS if w != WORKERS[0]]
    gone = {k: rendezvous(k, left, 1)[0] for k in KEYS}
    assert all(gone[k] == before[k] for k in KEYS if before[k] != WORKERS[0])


@pytest.mark.parametrize("shared", [False, True])
def test_membership_accepts_signed_heartbeats_and_forgets_silent_workers(tmp_path, shared):
    signer = TicketSigner(os.urandom(32)).derived(HEARTBEAT_PURPOSE)
    members = Membership(signer, timeout=0.5, directory=tmp_path / "workers" if shared else None)
    assert members.locations("k") == []  # no worker: this server
    members.accept(heartbeat_token(signer, WORKERS[0], 5))
    members.accept(heartbeat_token(signer, WORKERS[1], 5))
    assert members.live() == WORKERS[:2]
    if shared:  # a second process of the same coordinator sees the same heartbeats
        assert Membership(signer, 0.5, tmp_path / "workers").live() == WORKERS[:2]
    members.accept(heartbeat_token(signer, WORKERS[1], 5, leave=True))
    assert members.live() == WORKERS[:1]
    deadline = time.monotonic() + 5
    while members.live() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert members.live() == []


def test_membership_refuses_foreign_expired_and_malformed_heartbeats():
    signer = TicketSigner(os.urandom(32)).derived(HEARTBEAT_PURPOSE)
    members = Membership(signer, timeout=5)
    with pytest.raises(InvalidTicketError):
        members.accept(heartbeat_token(TicketSigner(os.urandom(32)).derived(HEARTBEAT_PURPOSE), WORKERS[0], 5))
    with pytest.raises(InvalidTicketError):
        members.accept(heartbeat_token(signer, WORKERS[0], -1))  # expired
    with pytest.raises(InvalidTicketError):
        members.accept(signer.sign({"t": "ns.t"}, time.time() + 5).decode())  # signed, but no heartbeat
    with pytest.raises(InvalidQueryError):
        members.accept(heartbeat_token(signer, "file:///etc/passwd", 5))
    assert members.live() == []


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"role": "boss"}, "role must be one of"),
        ({"role": "worker"}, "needs --coordinator"),
        ({"role": "worker", "coordinator": "file:///x"}, "coordinator must be a grpc"),
        ({"coordinator": "grpc://c:1"}, "only for --role worker"),
        ({"advertise": "grpc://no-port"}, "host:port"),
        ({"processes": 0}, "at least 1"),
        ({"processes": 2, "process_ports": [9001]}, "1 ports for 2 processes"),
        ({"heartbeat_interval_seconds": 5, "heartbeat_timeout_seconds": 5}, "must exceed"),
    ],
)
def test_inconsistent_topologies_are_refused_at_start(settings, message):
    from flight_server.server.config import ServerConfig
    from flight_server.server.runtime.serve import check_topology

    with pytest.raises(ValueError, match=message):
        check_topology(ServerConfig().updated(settings))


def test_worker_heartbeats_pass_a_coordinator_that_has_users(tmp_path):
    """A coordinator with users refuses anonymous calls; a worker's heartbeat authenticates with a
    token of the shared secret (the cluster member, which holds no right on any table)."""
    config = ServerConfig(port=0, role="coordinator", state_dir=str(tmp_path / "coord"), secret="ab" * 32)
    with running_server(config) as coordinator:
        add_admin(coordinator)
        anonymous = flight.connect(f"grpc://127.0.0.1:{coordinator.port}")
        with pytest.raises(flight.FlightUnauthenticatedError):
            list(anonymous.do_action(flight.Action("list-namespaces", b"{}")))
        worker_config = ServerConfig(coordinator=f"grpc://127.0.0.1:{coordinator.port}", secret="ab" * 32)
        registration = Registration(worker_config, "grpc+tcp://worker-a:8815", configured_signer("ab" * 32, "", 60))
        assert registration.beat()
        assert coordinator.app.cluster is not None and coordinator.app.cluster.live() == ["grpc+tcp://worker-a:8815"]
        member = TokenIssuer(coordinator.app.signer, 60).issue(CLUSTER_MEMBER)
        as_member = flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {member}".encode())])
        assert json.loads(next(iter(anonymous.do_action(flight.Action("list-namespaces", b"{}"), as_member))).body.to_pybytes()) == []
        anonymous.close()
