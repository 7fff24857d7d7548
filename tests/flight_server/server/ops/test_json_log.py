"""``serve --log-format json`` writes nothing but JSON lines on stderr through a mix of requests:
good and failing SQL, a metadata table, a table whose metadata table is broken (the reader falls
back to listing storage, with a MetadataTableFallbackWarning), reads closed early, forged tickets,
unknown actions, a TLS client at a plain port and ADBC's CloseSession on close. No line carries a
traceback or a path of the server's."""

from __future__ import annotations

import json
import shutil

import adbc_driver_flightsql.dbapi as adbc
import pyarrow.flight as flight
import pytest

from flight_server.client.session import HudiFlightClient
from tests.support.fixtures import extract_table
from tests.support.processes import ServeProcess

GOOD = "sample_table/cow/v6_nonpartitioned"
BROKEN = "sample_table/cow/v9_txns_simple_meta"  # its metadata table's files are overwritten below


@pytest.fixture
def served(tmp_path):
    warehouse = tmp_path / "warehouse"
    for name in (GOOD, BROKEN):
        shutil.copytree(extract_table(name, tmp_path / "fixtures"), warehouse / "ns" / name.rsplit("/", 1)[1])
    for file in (warehouse / "ns" / "v9_txns_simple_meta" / ".hoodie" / "metadata" / "files").iterdir():
        if file.is_file():
            file.write_bytes(b"not an hfile")
    log = tmp_path / "serve.log"
    server = ServeProcess("--port", "0", "--warehouse", str(warehouse), "--state-dir", str(tmp_path / "state"),
                          "--log-format", "json", log=log)
    try:
        yield server, log
    finally:
        server.stop()


def _mistake(cur, query: str) -> None:
    with pytest.raises(adbc.Error):
        cur.execute(query)
        cur.fetch_arrow_table()


def test_every_line_is_json_without_tracebacks_or_paths(served, tmp_path):
    server, log = served
    with adbc.connect(server.uri, autocommit=True) as conn:  # closing sends CloseSession
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) AS n FROM ns.v6_nonpartitioned")
            assert cur.fetch_arrow_table().column("n").to_pylist()
            cur.execute("SELECT * FROM ns.v9_txns_simple_meta")  # planned by listing storage: a warning
            assert cur.fetch_arrow_table().num_rows > 0
            cur.execute('SELECT * FROM ns."v6_nonpartitioned$timeline"')
            cur.fetch_arrow_table()
            _mistake(cur, "SELECT ridr FROM ns.v6_nonpartitioned")
            _mistake(cur, "SELECT * FROM ns.nope")
            _mistake(cur, "SELECT * FROM ns.v6_nonpartitioned WHERE id = 'abc'")
    client = flight.connect(server.uri)
    try:
        list(client.list_flights())
        with pytest.raises(flight.FlightError):
            client.do_get(flight.Ticket(b"forged")).read_all()
        with pytest.raises(NotImplementedError):
            list(client.do_action(flight.Action("no-such-action", b"")))
        with HudiFlightClient(server.uri) as hudi:
            batches = hudi.read_batches("ns.v9_txns_simple_meta")
            next(iter(batches))  # a read left after its first batch
            del batches
            assert hudi.read("ns.v6_nonpartitioned", limit=1).num_rows == 1
    finally:
        client.close()
    with pytest.raises(ConnectionError):
        HudiFlightClient(f"grpc+tls://127.0.0.1:{server.port}", timeout=10).tables()
    server.stop()

    lines = [line for line in log.read_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # each line parses on its own
    assert all(isinstance(r, dict) and {"time", "level", "logger", "message"} <= r.keys() for r in records)
    text = "\n".join(lines)
    assert "Traceback" not in text and str(tmp_path) not in text, text[-3000:]
    warned = [r for r in records if r["logger"] == "py.warnings"]
    assert any(r["message"].startswith("MetadataTableFallbackWarning: ") for r in warned), warned
    calls = [r for r in records if r["logger"] == "flight_server.calls" and r.get("method") == "do_action"]
    assert not any(r["status"] == "UNIMPLEMENTED" and "CloseSession" in r.get("reason", "") for r in calls)
