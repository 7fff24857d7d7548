"""Where endpoints are read: configured data servers, else the serving processes of
``serve --processes N`` (least-loaded first), else this server; and which host names the
processes' own ports."""

from __future__ import annotations

import pytest

from flight_server.server.config import ServerConfig
from flight_server.server.query.placement import Placement
from flight_server.server.runtime.supervisor import process_host

A, B = "grpc+tcp://127.0.0.1:7001", "grpc+tcp://127.0.0.1:7002"


def test_processes_are_named_least_loaded_first_with_the_other_as_retry():
    placement = Placement([])
    assert placement.locations(1.0, "t/p/f") == []  # no process announced yet: this server
    placement.serve_from([A, B])
    firsts = [placement.locations(1.0, f"t/p/f{i}") for i in range(6)]
    assert [f[0] for f in firsts].count(A) == 3 and all(set(f) == {A, B} for f in firsts)
    assert placement.locations(4.0, "big") == [A, B] and placement.locations(1.0, "next")[0] == B


def test_a_process_that_left_is_no_longer_named_and_its_successor_starts_even():
    placement = Placement([])
    placement.serve_from([A, B])
    for i in range(4):
        placement.locations(1.0, str(i))
    placement.serve_from([A])
    assert placement.locations(1.0, "x") == [A]
    placement.serve_from([A, "grpc+tcp://127.0.0.1:7003"])
    assert placement.locations(1.0, "y") == ["grpc+tcp://127.0.0.1:7003", A]


def test_configured_locations_win_over_the_processes():
    placement = Placement(["grpc+tcp://data:1"])
    placement.serve_from([A, B])
    assert placement.locations(1.0, "k") == ["grpc+tcp://data:1"]


@pytest.mark.parametrize(
    ("settings", "host"),
    [
        ({}, "127.0.0.1"),
        ({"host": "::1"}, "[::1]"),
        ({"host": "db7.example"}, "db7.example"),
        ({"host": "0.0.0.0"}, None),  # every address and no name to give: through the relay
        ({"host": "0.0.0.0", "advertise": "grpc+tls://flight.example:443"}, "flight.example"),
        ({"host": "::", "advertise": "grpc://[fd00::5]:8815"}, "[fd00::5]"),
    ],
)
def test_the_processes_are_reached_at_the_advertised_or_listening_host(settings, host):
    assert process_host(ServerConfig().updated({"process_endpoints": True, **settings})) == host


def test_process_endpoints_are_opt_in():
    """By default every connection goes through the relay, whose bounds the processes' own ports
    lack (request sizes, connection counts, handshake and idle timeouts)."""
    assert process_host(ServerConfig()) is None
    assert process_host(ServerConfig().updated({"host": "db7.example"})) is None
