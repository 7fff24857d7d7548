"""Anonymous callers of a loopback server without users may add names to the catalog, never
re-point or remove one (docs/flight.md, "Safe defaults")."""

from __future__ import annotations

import json

import pyarrow.flight as flight
import pytest

from flight_server.server.config import ServerConfig
from tests.support.servers import running_server

SIMPLE = "sample_table/cow/v6_nonpartitioned"
OTHER = "sample_table/cow/v9_txns_complex_meta"


def _action(client: flight.FlightClient, name: str, body: dict) -> dict:
    return json.loads(next(iter(client.do_action(flight.Action(name, json.dumps(body).encode())))).body.to_pybytes())


@pytest.fixture(scope="module")
def anonymous(tmp_path_factory):
    config = ServerConfig(port=0, state_dir=str(tmp_path_factory.mktemp("state-local") / "state"))
    with running_server(config) as srv, flight.connect(f"grpc://127.0.0.1:{srv.port}") as client:
        yield client


def test_anonymous_register_adds_a_name(anonymous, fixture_table):
    reg = _action(anonymous, "register-table", {"table": "local.added", "uri": fixture_table(SIMPLE)})
    assert reg["uri"] == fixture_table(SIMPLE)


def test_anonymous_register_cannot_replace_or_remove(anonymous, fixture_table):
    _action(anonymous, "register-table", {"table": "local.kept", "uri": fixture_table(SIMPLE)})
    with pytest.raises(flight.FlightUnauthorizedError, match="anonymous has no admin right on local.kept"):
        _action(anonymous, "register-table", {"table": "local.kept", "uri": fixture_table(OTHER), "replace": True})
    with pytest.raises(flight.FlightUnauthorizedError, match="no admin right"):
        _action(anonymous, "unregister-table", {"table": "local.kept"})
    kept = next(t for t in _action(anonymous, "list-tables", {}) if t["table"] == "local.kept")
    assert kept["uri"] == fixture_table(SIMPLE)
