"""What authentication costs a read: planning latency and scan throughput, anonymous against a
bearer token from the basic-auth handshake, side by side in one run (target: within 10%).

Two in-process servers on loopback serve the same generated copy-on-write table: one without
users (anonymous callers read), one with a user holding ``read`` on the namespace (every call
carries the bearer token; tickets name the user and ``do_get`` re-checks the grant). The
requests alternate between the two so that both see the same machine load.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import threading
import time
from typing import Callable

import pyarrow.flight as flight

from bench.common import percentile, row, table_dir
from tests.support.servers import free_port

# rows, partitions, planning requests, full scans
SIZES = {"quick": (200_000, 8, 60, 6), "full": (2_000_000, 32, 300, 20)}
NAMESPACE, TABLE = "bench", "trips"
USER, PASSWORD = "bench-reader", "bench-reader-password"


def _warehouse(size: str):
    from hudi_generator.generator import GeneratorSpec, generate

    rows, partitions, _, _ = SIZES[size]
    warehouse = table_dir("auth_overhead", size) / "wh"
    path = warehouse / NAMESPACE / TABLE
    marker = warehouse / f"{TABLE}-{rows}-{partitions}.done"
    if not marker.exists():
        shutil.rmtree(path, ignore_errors=True)
        generate(str(path), GeneratorSpec(rows=rows, partitions=partitions, commits=1, table_name=TABLE))
        marker.touch()
    return warehouse, rows


def _serve(warehouse, state: str, with_user: bool):
    from flight_server.server.config import ServerConfig
    from flight_server.server.service import HudiFlightServer
    from flight_server.server.users import Grant

    config = ServerConfig(port=free_port(), warehouses=[str(warehouse)], state_dir=state,
                          refresh_interval_seconds=0, table_cache_seconds=3600)
    server = HudiFlightServer(config)
    if with_user:
        server.users.add_user(USER, PASSWORD)
        server.users.grant(USER, Grant.parse("read", NAMESPACE))
    threading.Thread(target=server.serve, daemon=True).start()
    return server


def _caller(server, with_user: bool) -> tuple[flight.FlightClient, flight.FlightCallOptions]:
    client = flight.connect(f"grpc://127.0.0.1:{server.port}")
    if not with_user:
        return client, flight.FlightCallOptions()
    return client, flight.FlightCallOptions(headers=[client.authenticate_basic_token(USER, PASSWORD)])


def _plan(client, options) -> flight.FlightInfo:
    command = json.dumps({"table": f"{NAMESPACE}.{TABLE}"}).encode()
    return client.get_flight_info(flight.FlightDescriptor.for_command(command), options)


def _scan(client, options) -> int:
    info = _plan(client, options)
    return sum(client.do_get(ep.ticket, options).read_all().num_rows for ep in info.endpoints)


def _timed(fn: Callable[..., object], *args: object) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def run(size: str) -> list[dict]:
    warehouse, rows = _warehouse(size)
    _, _, plans, scans = SIZES[size]
    with tempfile.TemporaryDirectory(prefix="hudi-flight-auth-bench-") as tmp:
        servers = {"anonymous": _serve(warehouse, f"{tmp}/a", False), "bearer token": _serve(warehouse, f"{tmp}/b", True)}
        try:
            callers = {k: _caller(s, k != "anonymous") for k, s in servers.items()}
            for client, options in callers.values():
                if _scan(client, options) != rows:
                    raise AssertionError("a scan returned the wrong number of rows")
            plan_s: dict[str, list[float]] = {k: [] for k in callers}
            scan_s: dict[str, list[float]] = {k: [] for k in callers}
            for _ in range(plans):
                for k, (client, options) in callers.items():
                    plan_s[k].append(_timed(_plan, client, options))
            for _ in range(scans):
                for k, (client, options) in callers.items():
                    scan_s[k].append(_timed(_scan, client, options))
            for client, _ in callers.values():
                client.close()
        finally:
            for s in servers.values():
                s.shutdown()
    params = {"rows": rows, "size": size}
    out = []
    for k in callers:
        competitor = f"hudi-flight ({k})"
        out.append(row("auth_overhead/planning", competitor, "p50 latency", statistics.median(plan_s[k]) * 1e3, "ms",
                       params=params, repeats=plans))
        out.append(row("auth_overhead/planning", competitor, "p99 latency", percentile(plan_s[k], 99) * 1e3, "ms",
                       params=params, repeats=plans))
        out.append(row("auth_overhead/scan", competitor, "throughput", rows / statistics.median(scan_s[k]), "rows/s",
                       params=params, repeats=scans))
    return out
