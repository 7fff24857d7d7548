"""The coordinator and worker commands of docs/flight.md work as written (issue 20: a worker
started as the docs showed refused every ticket). They run here on loopback: the placeholders
and host names are replaced, nothing else."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

from catalog import HudiTable
from flight_server.client.session import connect
from tests.support.certs import make_pki
from tests.support.compare import assert_same_rows
from tests.support.processes import ServeProcess, poll
from tests.support.servers import free_port

DOCS = Path(__file__).resolve().parents[4] / "docs" / "flight.md"
TABLE = "sample_table/mor/avro/v9_txns_simple_meta"


def _documented_commands() -> list[list[str]]:
    text = DOCS.read_text()
    section = text[text.index("### Every machine"):]
    block = section[section.index("```\n") + 4:]
    block = block[:block.index("```")]
    commands = [shlex.split(c) for c in block.replace("\\\n", " ").splitlines() if c.strip()]
    assert [c[:4] for c in commands] == [["hudi-flight", "serve", "--role", "coordinator"],
                                         ["hudi-flight", "serve", "--role", "worker"]]
    return commands


def test_documented_worker_serves_the_coordinators_tickets(tmp_path, fixture_table):
    pki = make_pki(tmp_path / "pki")
    warehouse = tmp_path / "warehouse"
    shutil.copytree(fixture_table(TABLE), warehouse / "ns" / "trips")
    coord, worker = free_port(), free_port()
    values = {"WAREHOUSE": str(warehouse), "URL": f"sqlite:///{tmp_path / 'catalog.db'}",
              "F": str(tmp_path / "secret"), "CERT": str(pki.server_cert), "KEY": str(pki.server_key),
              "CA": str(pki.ca_cert), "0.0.0.0": "127.0.0.1"}
    started = []
    try:
        for command, port in zip(_documented_commands(), (coord, worker)):
            args = [values.get(a, a) for a in command[2:]]
            args = [re.sub(r"//coord:8815", f"//127.0.0.1:{coord}", a) for a in args]
            args = [re.sub(r"//w1:8815", f"//127.0.0.1:{worker}", a) for a in args]
            args = [str(port) if a == "8815" else a for a in args]
            started.append(ServeProcess(*args, log=tmp_path / f"{args[1]}.log", defaults=False))
        with connect(f"grpc+tls://127.0.0.1:{coord}", tls_root_certs=pki.ca_cert) as client:
            worker_uri = f"grpc+tls://127.0.0.1:{worker}"
            plan = poll(lambda: (p := client.plan("ns.trips")).endpoints[0].locations and p, 30, "the worker")
            assert plan.endpoints[0].locations[0] == worker_uri
            with connect(worker_uri, tls_root_certs=pki.ca_cert) as direct:  # the worker itself serves it
                rows = [b for ep in plan.endpoints for b in direct.fetch(ep)]
            assert sum(b.num_rows for b in rows) == HudiTable.open(str(warehouse / "ns" / "trips")).read().num_rows
            assert_same_rows(client.read("ns.trips"), HudiTable.open(str(warehouse / "ns" / "trips")).read())
    finally:
        for process in started:
            process.stop()
