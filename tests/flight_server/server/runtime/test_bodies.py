"""Request bodies bounded before they are held, in the server ``hudi-flight serve`` starts by
default (one process), in cleartext or with TLS: concurrent large bodies, with credentials or without, are refused at
their first bytes while a legitimate client keeps being answered, and the server's memory stays
where it was (issue 39: 16 x 200 MB bodies took it from 238 MiB to 6.3 GiB)."""

from __future__ import annotations

import json
import os
import struct
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.flight as flight
import pytest

from flight_server.server.registry import Registry
from flight_server.server.runtime.h2_guard import BodyBudget, H2Guard, MessageTooLarge
from tests.support.processes import ServeProcess

SIMPLE = "sample_table/cow/v6_nonpartitioned"
BODY_BYTES = 64 << 20
BODIES = 4
#: what the server may grow by while refusing them (a body held whole would be 64 MiB)
GROWTH_BOUND = 48 << 20


def _rss(pid: int) -> int:
    pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


class _Bearer(flight.ClientMiddlewareFactory):
    """Sends a (wrong) bearer token: a body with credentials is bounded like one without."""

    def start_call(self, info: flight.CallInfo) -> flight.ClientMiddleware:
        return _Header()


class _Header(flight.ClientMiddleware):
    def sending_headers(self) -> dict[str, str]:
        return {"authorization": "Bearer not-a-token"}


@dataclass(frozen=True)
class Served:
    """A ``hudi-flight serve`` process and how a client connects to it."""

    process: ServeProcess
    uri: str
    connect: dict[str, Any]

    @property
    def pid(self) -> int:
        return self.process.pid


@pytest.fixture(scope="module", params=["cleartext", "tls", "mutual tls"])
def served(request, tmp_path_factory, fixture_table, pki):
    """The default single-process server, in cleartext, with TLS and with mutual TLS (the relay
    in front ends TLS, so the bound holds for TLS clients too)."""
    root = tmp_path_factory.mktemp("bodies")
    catalog = f"sqlite:///{root / 'catalog.db'}"
    registry = Registry(catalog)
    registry.register_table("b.t", fixture_table(SIMPLE))
    registry.close()
    ca, _ = pki
    tls: list[str] = []
    connect: dict[str, Any] = {}
    if request.param != "cleartext":
        tls = ["--tls-cert", str(ca.server_cert), "--tls-key", str(ca.server_key)]
        connect = {"tls_root_certs": ca.ca_cert.read_bytes()}
    if request.param == "mutual tls":
        tls += ["--tls-client-ca", str(ca.ca_cert)]
        connect.update(cert_chain=ca.client_cert.read_bytes(), private_key=ca.client_key.read_bytes())
    server = ServeProcess("--port", "0", "--catalog-url", catalog, "--state-dir", str(root / "state"), *tls,
                          log=root / "serve.log")
    scheme = "grpc+tls" if tls else "grpc"
    try:
        yield Served(server, f"{scheme}://127.0.0.1:{server.port}", connect)
    finally:
        server.stop()


def _legitimate(served: Served) -> int:
    with flight.connect(served.uri, **served.connect) as client:
        info = client.get_flight_info(flight.FlightDescriptor.for_path("b", "t"))
        return sum(client.do_get(e.ticket).read_all().num_rows for e in info.endpoints)


def _send(served: Served, body: bytes, credentials: bool) -> str:
    middleware = [_Bearer()] if credentials else []
    with flight.connect(served.uri, middleware=middleware, **served.connect) as client:
        try:
            client.get_flight_info(flight.FlightDescriptor.for_command(body), flight.FlightCallOptions(timeout=60))
        except flight.FlightError as err:
            return type(err).__name__
    return "answered"


def test_concurrent_large_bodies_are_refused_without_memory_growth(served):
    rows = _legitimate(served)
    before = _rss(served.pid)
    body = json.dumps({"table": "b.t", "pad": "x" * BODY_BYTES}).encode()
    peak, done = before, threading.Event()
    answered: list[int] = []

    def watch() -> None:
        nonlocal peak
        while not done.wait(0.02):
            peak = max(peak, _rss(served.pid))
            answered.append(_legitimate(served))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with ThreadPoolExecutor(BODIES) as pool:
            outcomes = list(pool.map(lambda i: _send(served, body, credentials=i % 2 == 1), range(BODIES)))
    finally:
        done.set()
        watcher.join(60)
    assert outcomes == ["FlightUnavailableError"] * BODIES  # the connection cut at the message's prefix
    assert answered and set(answered) == {rows}  # the legitimate client was answered throughout
    assert peak - before < GROWTH_BOUND, f"grew {(peak - before) >> 20} MiB"
    assert _legitimate(served) == rows


@pytest.mark.parametrize("served", ["tls", "mutual tls"], indirect=True)
def test_the_relay_refuses_what_the_server_would(served, pki):
    """With TLS ended in the relay, a plaintext client is refused; with mutual TLS, a client
    without a certificate or with one of another CA too."""
    ca, other = pki
    refused = [{"uri": served.uri.replace("grpc+tls", "grpc")}]
    if "cert_chain" in served.connect:
        refused += [
            {"tls_root_certs": ca.ca_cert.read_bytes()},
            {"tls_root_certs": ca.ca_cert.read_bytes(), "cert_chain": other.client_cert.read_bytes(),
             "private_key": other.client_key.read_bytes()},
        ]
    for settings in refused:
        uri = settings.pop("uri", served.uri)
        with flight.connect(uri, **settings) as client, pytest.raises(flight.FlightUnavailableError):
            client.list_flights(options=flight.FlightCallOptions(timeout=10)).__next__()
    assert _legitimate(served) > 0


# -- the bounds on messages in progress, frame by frame ------------------------------------------
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def _data(stream: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([0, 0]) + struct.pack(">I", stream) + payload


def _prefix(declared: int) -> bytes:
    return b"\x00" + struct.pack(">I", declared)


def test_messages_in_progress_are_bounded_per_connection():
    guard = H2Guard(100, max_connection_bytes=150)
    guard.feed(PREFACE + _data(1, _prefix(100) + b"x" * 10) + _data(3, _prefix(60)))  # 150 in progress
    with pytest.raises(MessageTooLarge, match="connection body 150"):
        guard.feed(_data(5, _prefix(1)))


def test_messages_in_progress_are_bounded_on_all_connections_together():
    budget = BodyBudget(200)
    first, second, third = (H2Guard(100, budget=budget) for _ in range(3))
    first.feed(PREFACE + _data(1, _prefix(100)))
    second.feed(PREFACE + _data(1, _prefix(100) + b"x" * 40))  # 40 of it received: 160 in progress
    assert budget.used == 160
    third.feed(PREFACE)
    with pytest.raises(MessageTooLarge, match="body memory 200"):
        third.feed(_data(1, _prefix(41)))
    third.feed(_data(1, _prefix(40)))  # what is left fits
    first.feed(_data(1, b"x" * 100))  # a message received whole no longer counts
    second.release()  # nor the rest of one whose connection ended
    assert budget.used == 40 and first.in_progress == 0


def test_one_peer_holds_at_most_its_share_of_the_budget():
    """A host holding messages open on many connections cannot fill the budget for the others."""
    budget = BodyBudget(1000, max_peer_bytes=150)
    first, second = H2Guard(100, budget=budget, peer="10.0.0.1"), H2Guard(100, budget=budget, peer="10.0.0.1")
    other = H2Guard(100, budget=budget, peer="10.0.0.2")
    first.feed(PREFACE + _data(1, _prefix(100)))
    second.feed(PREFACE)
    with pytest.raises(MessageTooLarge, match="peer body 150"):
        second.feed(_data(1, _prefix(60)))
    other.feed(PREFACE + _data(1, _prefix(100)))  # another host is not held back
    first.release()
    second.feed(_data(3, _prefix(100)))  # the host's share is free again
    assert budget.used == 200

