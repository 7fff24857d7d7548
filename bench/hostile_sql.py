"""Hostile SQL against ``hudi-flight serve``: what each probe costs the server now that SQL is
bounded (deadline, cancellation, memory, text bounds, linear LIKE matching).

For each probe, sent by an anonymous Flight SQL client to a server in a subprocess with
``sql_timeout_seconds`` = 5: the wall time until the client has its answer (an error naming the
bound), the server's CPU seconds and its resident-memory growth (the new peak ``VmHWM``, else the
RSS after, minus the RSS before the probe, from ``/proc``). Before these bounds (the peer, commit 4019a99, not re-run here:
it needs tens of GiB), the recursive CTE ran for 14 minutes after the client left, ``len(range(...))``
took the server from 178 MiB to 14.8 GiB, a 31-byte LIKE pattern took 71 s of CPU.

Run alone with ``python -m bench.hostile_sql [quick|full]`` (both sizes run the same probes).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow.flight as flight

from bench.common import row

PROBES: dict[str, Any] = {
    "recursive CTE without end": "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) SELECT count(*) FROM r",
    "len(range(300000000))": "SELECT len(range(300000000))",
    "repeat('x', 10^10)": "SELECT repeat('x', 10000000000)",
    "string_agg of a recursive CTE": (
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r WHERE n < 30000000) "
        "SELECT length(string_agg(repeat('x', 1000), '')) FROM r"
    ),
    "IN list of 10001 values": "SELECT 1 IN (" + ",".join(["1"] * 10001) + ")",
}
LIKE_PATTERN = "%_" * 150 + "!"  # 301 bytes
TIMEOUT_SECONDS = 5


def _proc(pid: int) -> tuple[int, int, float]:
    """RSS and peak RSS in bytes, CPU seconds of process ``pid``."""
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    kib = {key: int(fields[key].split()[0]) << 10 for key in ("VmRSS", "VmHWM")}
    return kib["VmRSS"], kib["VmHWM"], (int(stat[11]) + int(stat[12])) / ticks


def _statement(client: flight.FlightClient, sql_text: str) -> str:
    from flight_server.protocol import pack, sql

    try:
        info = client.get_flight_info(flight.FlightDescriptor.for_command(pack(sql.CommandStatementQuery(query=sql_text))))
        client.do_get(info.endpoints[0].ticket).read_all()
        return "answered"
    except Exception as err:  # the answer we measure is the refusal
        return str(err).split(". Detail")[0][:120]


def _like(client: flight.FlightClient) -> str:
    from flight_server.protocol import pack, sql

    command = sql.CommandGetTables(table_name_filter_pattern=LIKE_PATTERN)
    info = client.get_flight_info(flight.FlightDescriptor.for_command(pack(command)))
    return f"{client.do_get(info.endpoints[0].ticket).read_all().num_rows} rows"


def run(size: str) -> list[dict]:
    from tests.support.processes import ServeProcess

    state = Path(tempfile.mkdtemp(prefix="hudi-flight-bench-"))
    config = state / "serve.json"
    config.write_text(json.dumps({"server": {"sql_timeout_seconds": TIMEOUT_SECONDS}}))
    server = ServeProcess("--port", "0", "--state-dir", str(state / "state"), "--config", str(config),
                          log=state / "serve.log")
    rows = []
    try:
        client = flight.connect(server.uri)
        probes = [(name, lambda q=q: _statement(client, q)) for name, q in PROBES.items()]
        probes.append((f"LIKE pattern of {len(LIKE_PATTERN)} bytes (GetTables)", lambda: _like(client)))
        for name, probe in probes:
            rss, peak_before, cpu = _proc(server.pid)
            started = time.perf_counter()
            answer = probe()
            wall = time.perf_counter() - started
            rss_after, peak, cpu_after = _proc(server.pid)
            top = peak if peak > peak_before else rss_after  # VmHWM is the process's peak so far
            extra = {"answer": answer}
            rows.append(row(name, "hudi-flight", "wall time to the answer", wall, "s", **extra))
            rows.append(row(name, "hudi-flight", "server CPU", cpu_after - cpu, "s", **extra))
            rows.append(row(name, "hudi-flight", "server peak RSS growth", max(0, top - rss) / 2**20, "MiB", **extra))
        endless = threading.Thread(target=_statement, args=(client, PROBES["recursive CTE without end"]), daemon=True)
        endless.start()
        time.sleep(1.0)  # the query runs in the engine
        started = time.perf_counter()
        server.stop()
        rows.append(row("SIGTERM while an endless query runs", "hudi-flight", "seconds to exit",
                        time.perf_counter() - started, "s"))
        endless.join(10)
        client.close()
    finally:
        server.stop()
    return rows


if __name__ == "__main__":
    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r['name']:45s} {r['metric']:28s} {r['value']:10.3f} {r['unit']:4s} {r.get('answer', '')}")
