"""A server's port answers only once its first warehouse scan is done: a client calling right
after start sees every table, never an empty catalog."""

from __future__ import annotations

import shutil
import socket
import threading
import time

import pyarrow.flight as flight

from flight_server.server.config import ServerConfig
from flight_server.server.registry import Registry
from flight_server.server.service import HudiFlightServer

SIMPLE = "sample_table/cow/v6_nonpartitioned"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_first_answer_comes_after_the_warehouse_scan(fixture_table, tmp_path, monkeypatch):
    warehouse = tmp_path / "wh"
    shutil.copytree(fixture_table(SIMPLE), warehouse / "ns" / "t")  # a warehouse of this one table
    discover = Registry.discover

    def slow_discover(self, *args, **kwargs):
        time.sleep(1.5)  # a slow object store: the scan outlasts the client's first attempts
        return discover(self, *args, **kwargs)

    monkeypatch.setattr(Registry, "discover", slow_discover)
    port = _free_port()
    config = ServerConfig(port=port, state_dir=str(tmp_path / "state"), warehouses=[str(warehouse)],
                          allowed_roots=[str(warehouse)], refresh_interval_seconds=0)
    started: list[HudiFlightServer] = []
    thread = threading.Thread(target=lambda: started.append(HudiFlightServer(config)), daemon=True)
    thread.start()
    try:
        answers: list[list[str]] = []
        deadline = time.monotonic() + 60
        while not answers and time.monotonic() < deadline:
            # a fresh client each time: a channel refused once waits out gRPC's reconnect backoff
            with flight.connect(f"grpc://127.0.0.1:{port}") as client:
                try:
                    infos = client.list_flights(options=flight.FlightCallOptions(timeout=0.5))
                    answers.append([".".join(p.decode() for p in i.descriptor.path) for i in infos])
                except flight.FlightError:  # not listening yet
                    time.sleep(0.05)
        assert answers == [["ns.t"]]
    finally:
        thread.join(60)
        for server in started:
            server.shutdown()
