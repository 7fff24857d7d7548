"""``serve --processes 2 --console-port P``: the first process serves the console, and its live
queries are every process's (each publishes its calls in flight once a second), in real
processes on loopback."""

from __future__ import annotations

import re
import urllib.error
import urllib.request

import pyarrow.flight as flight

from flight_server.server.registry import Registry
from tests.flight_server.server.console.conftest import BIG
from tests.support.processes import ServeProcess, poll
from tests.support.servers import free_port


def _scans(url: str) -> list[str] | None:
    """The processes of the scans the live queries page lists (``None``: no page yet)."""
    try:
        with urllib.request.urlopen(url + "queries", timeout=10) as response:
            body = response.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return None
    rows = re.findall(r'<tr class="call" data-kind="scan">(.*?)</tr>', body, re.S)
    return [re.findall(r'<td class="num process">(\d+)</td>', row)[0] for row in rows]


def test_live_queries_of_every_process(generated_table, tmp_path):
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    registry = Registry(catalog)
    registry.register_table("big.trips", generated_table(BIG))
    registry.close()
    port = free_port()
    server = ServeProcess("--port", "0", "--processes", "2", "--console-port", str(port), "--catalog-url", catalog,
                          "--state-dir", str(tmp_path / "state"), log=tmp_path / "serve.log")
    url = f"http://127.0.0.1:{port}/"
    clients, readers = [], []
    try:
        poll(lambda: _scans(url) is not None, 60, "the console of the first process")
        for _ in range(2):  # two connections at once: the relay gives them to different processes
            client = flight.connect(server.uri)
            clients.append(client)
        for client in clients:
            info = client.get_flight_info(flight.FlightDescriptor.for_path("big", "trips"))
            reader = client.do_get(info.endpoints[0].ticket)
            reader.read_chunk()  # then the stream waits on its client: the call stays in flight
            readers.append(reader)
        processes = poll(lambda: (found := _scans(url)) and len(found) == 2 and found, 30, "both scans listed")
        assert len(set(processes)) == 2  # one per serving process
        for reader in readers:
            reader.cancel()
        poll(lambda: _scans(url) == [], 30, "the scans to leave the page")
    finally:
        for client in clients:
            client.close()
        server.stop()
