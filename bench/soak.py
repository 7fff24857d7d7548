"""Soak under hostile load: legitimate clients keep working while one hostile client at a time
attacks the server (issue 20).

``hudi-flight serve --processes 2`` (one port, the relay in front) serves a generated table on
loopback. Legitimate clients (32 for ``full``, 8 for ``quick``; threads in a few processes, each
with its own connection and the project's client, which retries refusals for load) loop for the
phase's duration over a mix of point queries (record key), scans (one partition) and Flight SQL
(an aggregate). Phases, one after the other: no hostile client (the baseline), then each of

* ``idle sockets``: 300 TCP connections that never speak (held for the phase);
* ``200 MB bodies``: a client sending 200 MB commands, one after the other;
* ``recursive CTE``: an unbounded ``WITH RECURSIVE`` over Flight SQL;
* ``regex``: a pathological regular expression over Flight SQL;
* ``lambda string``, ``lambda lists``, ``printf width``: SQL that builds gigabytes in one
  expression (a 1 GB string from a lambda, a trillion list elements, a 1 GB ``printf`` width).

The server's static SQL bounds would refuse the last three before the engine sees them; the soak
relaxes ``max_sql_generated_values`` so that they run, in the server's engine processes, bounded
only by the operating system (``sql_process_memory``, the deadline ``sql_timeout_seconds`` = 10).

Reported per phase: failed legitimate requests (target 0), legitimate p99 latency and its ratio
to the baseline's (target within 2x), the p99 of each kind of request (the SQL aggregates share
the engine processes' cores with a hostile statement; point queries and scans run in the serving
processes, which the engine processes yield to), the server's peak RSS (all its processes), and for the
hostile requests the median time until the server refused (or answered) them. Not part of the
test suite; ``python -m bench --only soak --size quick`` for a short run.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import socket
import statistics
import threading
import time
from pathlib import Path
from typing import Any, Callable

from bench.common import ServedWarehouse, generated_once, percentile, row, table_dir, tree_rss

# rows, partitions, legitimate clients, seconds per phase
SIZES = {"quick": (50_000, 8, 16, 8.0), "full": (500_000, 32, 32, 60.0)}
CLIENT_PROCESSES = 4
IDLE_SOCKETS = 300
BODY_BYTES = 200 << 20
NAMESPACE, TABLE = "soak", "trips"
#: the legitimate request kinds, and the mix the clients loop over (half of them point queries)
KINDS = ("point", "scan", "sql")
MIX = ("point", "point", "scan", "sql")
KIND_NAMES = {"point": "point queries", "scan": "partition scans", "sql": "SQL aggregates"}
HOSTILE_SQL = {
    "recursive CTE": "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
    "regex": f"SELECT count(*) FROM {NAMESPACE}.{TABLE} WHERE regexp_matches(repeat(uuid, 2000), '(a|aa)*(b|bb)*c$')",
    "lambda string": "SELECT length(list_reduce(list_transform(range(1000), x -> repeat('z', 999999)), (a, b) -> a || b))",
    "lambda lists": "SELECT len(flatten(list_transform(range(999999), x -> range(999999))))",
    "printf width": "SELECT length(printf('%1000000000d', 1))",
}
PHASES = ("none", "idle sockets", "200 MB bodies", *HOSTILE_SQL)
#: the server's settings: hostile SQL reaches the engine (see the module docstring)
SERVER_SETTINGS = {"max_sql_generated_values": 10**15, "sql_timeout_seconds": 10}


def _warehouse(size: str) -> tuple[Path, list[str]]:
    """The generated table's warehouse and its region (partition) values."""
    from hudi_generator.generator import GeneratorSpec

    rows, partitions, _, _ = SIZES[size]
    spec = GeneratorSpec(rows=rows, partitions=partitions, files_per_partition=1, commits=1, table_name=TABLE,
                         record_index=True)
    warehouse = table_dir("soak", size) / "wh"
    generated_once(warehouse / NAMESPACE / TABLE, spec, warehouse / f"{TABLE}-{rows}-{partitions}.done")
    return warehouse, [spec.partition_path(i).split("=", 1)[-1] for i in range(partitions)]


# -- legitimate clients ------------------------------------------------------------------------
def _request(client: Any, kind: str, rnd: random.Random, rows: int, regions: list[str]) -> int:
    from flight_server.client.sql.flightsql import statement_plan

    table = f"{NAMESPACE}.{TABLE}"
    if kind == "point":
        return client.read(table, filters=[("uuid", "=", f"trip-{rnd.randrange(rows):010d}")]).num_rows
    if kind == "scan":
        return client.read(table, columns=["uuid", "fare"], filters=[("region", "=", rnd.choice(regions))]).num_rows
    plan = statement_plan(client, f"SELECT region, count(*), avg(fare) FROM {table} GROUP BY region")
    return sum(b.num_rows for b in client.fetch_all(plan.endpoints))


def _client_process(uri: str, threads: int, seconds: float, rows: int, regions: list[str], seed: int,
                    start: Any, results: Any) -> None:
    from flight_server.client.session import connect

    samples: list[tuple[str, float, str]] = []  # kind, seconds, error ("" when it worked)
    lock = threading.Lock()

    def loop(i: int) -> None:
        rnd = random.Random(seed * 1000 + i)
        client = connect(uri, timeout=60)
        try:
            try:
                for kind in KINDS:  # warm: the baseline phase measures a warm server, as the others do
                    _request(client, kind, rnd, rows, regions)
            finally:
                start.wait()  # every client thread and the conductor start together
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                kind = rnd.choice(MIX)
                t0 = time.perf_counter()
                try:
                    _request(client, kind, rnd, rows, regions)
                    error = ""
                except Exception as err:  # a failed legitimate request is what this measures
                    error = f"{type(err).__name__}: {str(err)[:160]}"
                with lock:
                    samples.append((kind, time.perf_counter() - t0, error))
        finally:
            client.close()

    workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    results.put(samples)


# -- hostile clients -------------------------------------------------------------------------
def _idle_sockets(port: int, stop: threading.Event, refusals: list[float]) -> None:
    held = []
    for _ in range(IDLE_SOCKETS):
        try:
            held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        except OSError:
            refusals.append(0.0)
    stop.wait()
    closed = 0
    for s in held:
        s.setblocking(False)
        try:
            closed += s.recv(1) == b""
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
        s.close()
    refusals.extend([0.0] * closed)  # connections the server closed meanwhile


def _bodies(port: int, stop: threading.Event, refusals: list[float]) -> None:
    import pyarrow.flight as flight

    body = b'{"table":"' + b"x" * BODY_BYTES + b'"}'
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            with flight.connect(f"grpc://127.0.0.1:{port}") as client:
                client.get_flight_info(flight.FlightDescriptor.for_command(body), flight.FlightCallOptions(timeout=60))
        except Exception:  # the refusal is the expected answer
            pass
        refusals.append(time.perf_counter() - t0)
        stop.wait(0.2)


def _sql(uri: str, query: str) -> Callable[[int, threading.Event, list[float]], None]:
    def attack(port: int, stop: threading.Event, refusals: list[float]) -> None:
        from flight_server.client.session import connect
        from flight_server.client.sql.flightsql import statement_plan

        client = connect(uri, timeout=30)  # a hostile request still running then counts as refused at 30 s
        client.busy_retry_seconds = 0.0
        try:
            while not stop.is_set():
                t0 = time.perf_counter()
                try:
                    plan = statement_plan(client, query)
                    for _ in client.fetch_all(plan.endpoints):
                        pass
                except Exception:  # refused or cancelled: what is measured is how soon
                    pass
                refusals.append(time.perf_counter() - t0)
                stop.wait(0.2)
        finally:
            client.close()

    return attack


# -- the run ---------------------------------------------------------------------------------
def _phase(served: ServedWarehouse, size: str, regions: list[str], hostile: str) -> dict[str, Any]:
    rows, _, clients, seconds = SIZES[size]
    ctx = multiprocessing.get_context("spawn")
    per = max(1, clients // CLIENT_PROCESSES)
    start = ctx.Barrier(CLIENT_PROCESSES * per + 1)
    results = ctx.Queue()
    procs = [ctx.Process(target=_client_process, args=(served.uri, per, seconds, rows, regions, i, start, results))
             for i in range(CLIENT_PROCESSES)]
    for p in procs:
        p.start()
    start.wait()
    stop = threading.Event()
    refusals: list[float] = []
    attacks = {"idle sockets": _idle_sockets, "200 MB bodies": _bodies}
    attacks.update({name: _sql(served.uri, query) for name, query in HOSTILE_SQL.items()})
    attacker = None
    if hostile != "none":
        attacker = threading.Thread(target=attacks[hostile], args=(served.process.port, stop, refusals))
        attacker.start()
    peak = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        peak = max(peak, tree_rss(served.process.pid))
        time.sleep(0.5)
    samples: list[tuple[str, float, str]] = []
    for _ in procs:
        samples.extend(results.get(timeout=seconds + 300))
    for p in procs:
        p.join()
    stop.set()
    if attacker is not None:
        attacker.join(180)
    failures = [s for s in samples if s[2]]
    return {"samples": samples, "failures": failures, "peak_rss": peak, "refusals": refusals}


def run(size: str) -> list[dict]:
    warehouse, regions = _warehouse(size)
    _, _, clients, seconds = SIZES[size]
    config = table_dir("soak", size) / "serve.json"
    config.write_text(json.dumps({"server": SERVER_SETTINGS}))
    served = ServedWarehouse(warehouse, processes=2, extra_args=("--config", str(config)))
    out: list[dict] = []
    try:
        phases = {hostile: _phase(served, size, regions, hostile) for hostile in PHASES}
    finally:
        served.close()
    base = phases["none"]
    base_p99 = percentile([s[1] for s in base["samples"] if not s[2]], 99)
    params = {"clients": clients, "seconds_per_phase": seconds, "processes": 2, **SERVER_SETTINGS}
    for hostile, got in phases.items():
        name = f"soak/hostile: {hostile}"
        ok = [s[1] for s in got["samples"] if not s[2]]
        p99 = percentile(ok, 99) if ok else float("nan")
        out += [
            row(name, "hudi-flight", "legitimate requests", len(got["samples"]), "requests", params=params),
            row(name, "hudi-flight", "failed legitimate requests", len(got["failures"]), "requests", params=params),
            row(name, "hudi-flight", "legitimate p99 latency", p99 * 1000, "ms", params=params),
            row(name, "hudi-flight", "p99 vs no hostile client", p99 / base_p99 if base_p99 else float("nan"), "x",
                params=params),
            row(name, "hudi-flight", "peak server RSS", got["peak_rss"] / (1 << 20), "MiB", params=params),
        ]
        for kind in KINDS:  # SQL shares the engine processes with a hostile statement; the others do not
            of_kind = [s[1] for s in got["samples"] if not s[2] and s[0] == kind]
            if of_kind:
                out.append(row(name, "hudi-flight", f"legitimate p99 latency, {KIND_NAMES[kind]}",
                               percentile(of_kind, 99) * 1000, "ms", params=params))
        if got["refusals"]:
            out.append(row(name, "hudi-flight", "median time to refuse a hostile request",
                           statistics.median(got["refusals"]) * 1000, "ms",
                           params={**params, "hostile requests": len(got["refusals"])}))
        if got["failures"]:
            kinds = sorted({f[2] for f in got["failures"]})[:3]
            print(f"[soak] {hostile}: {len(got['failures'])} failed legitimate requests, e.g. {kinds}")
    return out


if __name__ == "__main__":  # pragma: no cover - manual runs
    import sys

    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r['name']:<32} {r['metric']:<42} {r['value']:>10.2f} {r['unit']}")
