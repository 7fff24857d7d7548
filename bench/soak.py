"""Soak under load: legitimate clients of several users keep working beside a hostile user
(issues 20 and 39).

Every client is the project's client on a connection of its own, authenticated by a static token
of its user, in threads of a few processes; refusals for load are not retried (a refusal is a
failed request: the fair queue of SQL work, ``engine/admission.py``, should leave none). Three
runs, each against ``hudi-flight serve`` on loopback over a generated table:

* ``dashboard``: the default single-process server and settings, 12 connections of one user
  looping the SQL aggregate, nobody hostile: refused statements (target 0) and the SQL p99.
* ``hostile``: ``serve --processes 2`` (one port, the relay in front); legitimate clients (32) of
  four users loop a mix of point queries (record key), scans (one partition) and Flight SQL (an
  aggregate) for each phase: no hostile client (the baseline), then each of

  * ``idle sockets``: 300 TCP connections that never speak (held for the phase);
  * ``200 MB bodies``: a client sending 200 MB commands, one after the other;
  * ``recursive CTE``: an unbounded ``WITH RECURSIVE`` over Flight SQL;
  * ``regex``: a pathological regular expression over Flight SQL;
  * ``lambda string``, ``lambda lists``, ``printf width``: SQL that builds gigabytes in one
    expression (a 1 GB string from a lambda, a trillion list elements, a 1 GB ``printf`` width);
  * ``schema-step hold``: GetFlightInfo of statements whose schema step folds an expensive
    constant (seconds of CPU in a few MB), a new one each time;

  each SQL family sent by one hostile user on two connections. The server's static SQL bounds
  would refuse the lambda and ``printf`` statements before the engine sees them; the soak relaxes
  ``max_sql_generated_values`` so that they run, in the server's engine processes, bounded only by
  the operating system (``sql_process_memory``, the deadline ``sql_timeout_seconds`` = 10).
* ``engine failures``: a single-process server whose engine processes have 128 MB each
  (``sql_memory_limit``; two slots); a hostile user's statements that end in memory failures
  (each retires its engine process), then the next 100 statements of two other users: their
  failures (target 0).

Reported for ``hostile``, per phase: failed legitimate requests (target 0), legitimate p99 latency
and its ratio to the baseline's (targets: SQL within 3x, point queries within 1.5x), the p99 of
each kind of request, the server's peak RSS (all its processes), and for the hostile requests the
median time until the server refused (or answered) them. Not part of the test suite;
``python -m bench --only soak --size quick`` for a short run.
"""

from __future__ import annotations

import itertools
import json
import math
import multiprocessing
import random
import secrets
import socket
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from bench.common import ServedWarehouse, generated_once, percentile, row, table_dir, tree_rss

# rows, partitions, legitimate clients, seconds per phase
SIZES = {"quick": (50_000, 8, 32, 8.0), "full": (500_000, 32, 32, 60.0)}
#: the legitimate users (clients take them in turn), the hostile one, and the dashboard's connections
USERS = ("alice", "bob", "carol", "dave")
HOSTILE_USER = "mallory"
DASHBOARD_CONNECTIONS = 12
#: statements that end in a memory failure (no spilling helps an aggregate's one string), and how
#: many of them, then how many statements of the other users follow
OUT_OF_MEMORY = "SELECT length(string_agg(md5(i::VARCHAR), ',')) AS n FROM range(10000000) t(i)"
MEMORY_FAILURES, AFTER_FAILURES = 8, 100
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
    # a new column name each time ({i}): the server remembers a schema by the statement's shape
    # (its literals are parameters), and a schema remembered costs no schema step
    "schema-step hold": "SELECT list_sum(list_transform(range(3000000), x -> length(repeat('ab', 500)))) AS n{i}",
}
#: the families whose statements are only planned (GetFlightInfo: the schema step), never read
PLANNED_ONLY = frozenset({"schema-step hold"})
PHASES = ("none", "idle sockets", "200 MB bodies", *HOSTILE_SQL)
#: the server's settings: hostile SQL reaches the engine (see the module docstring)
SERVER_SETTINGS = {"max_sql_generated_values": 10**15, "sql_timeout_seconds": 10}
#: the engine-failure run's: small engines, the same two slots as the defaults' 2GB / 1GB
FAILURE_SETTINGS = {"max_sql_generated_values": 10**15, "sql_memory_limit": "128MB", "sql_memory_budget": "256MB"}


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


def _connect(uri: str, token: str, timeout: float) -> Any:
    """The project's client as ``token``'s user, raising a refusal for load instead of retrying it."""
    from flight_server.client.session import connect

    client = connect(uri, token=token, timeout=timeout)
    client.busy_retry_seconds = 0.0
    return client


@dataclass(frozen=True)
class _Work:
    """What the clients of one client process do: each thread its token and its mix, looping for
    ``seconds`` (or ``count`` requests each, when given)."""

    uri: str
    clients: tuple[tuple[str, tuple[str, ...]], ...]
    seconds: float
    rows: int
    regions: tuple[str, ...]
    seed: int
    count: int = 0


def _client_process(work: _Work, start: Any, results: Any) -> None:
    samples: list[tuple[str, float, str]] = []  # kind, seconds, error ("" when it worked)
    lock = threading.Lock()
    regions = list(work.regions)

    def loop(i: int, token: str, mix: tuple[str, ...]) -> None:
        rnd = random.Random(work.seed * 1000 + i)
        client = _connect(work.uri, token, 60)
        try:
            try:
                for kind in sorted(set(mix)):  # warm: the baseline phase measures a warm server, as the others do
                    _request(client, kind, rnd, work.rows, regions)
            finally:
                start.wait()  # every client thread and the conductor start together
            end = time.monotonic() + work.seconds
            done = 0
            while (done < work.count) if work.count else (time.monotonic() < end):
                done += 1
                kind = rnd.choice(mix)
                t0 = time.perf_counter()
                try:
                    _request(client, kind, rnd, work.rows, regions)
                    error = ""
                except Exception as err:  # a failed legitimate request is what this measures
                    error = f"{type(err).__name__}: {str(err)[:160]}"
                with lock:
                    samples.append((kind, time.perf_counter() - t0, error))
        finally:
            client.close()

    workers = [threading.Thread(target=loop, args=(i, token, mix)) for i, (token, mix) in enumerate(work.clients)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    results.put(samples)


def _run_clients(works: list[_Work], during: Callable[[], Any] | None = None) -> tuple[list[tuple[str, float, str]], Any]:
    """Run each of ``works`` in a client process of its own, all starting together; ``during``
    runs in this process meanwhile (its answer is returned with the samples)."""
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(sum(len(w.clients) for w in works) + 1)
    results = ctx.Queue()
    procs = [ctx.Process(target=_client_process, args=(work, start, results)) for work in works]
    for p in procs:
        p.start()
    start.wait()
    answer = during() if during is not None else None
    samples: list[tuple[str, float, str]] = []
    for _ in procs:
        samples.extend(results.get(timeout=max(w.seconds for w in works) + 600))
    for p in procs:
        p.join()
    return samples, answer


def _works(uri: str, clients: list[tuple[str, tuple[str, ...]]], seconds: float, rows: int, regions: list[str],
           count: int = 0) -> list[_Work]:
    """``clients`` spread over :data:`CLIENT_PROCESSES` client processes."""
    return [_Work(uri, tuple(clients[i::CLIENT_PROCESSES]), seconds, rows, tuple(regions), i, count)
            for i in range(CLIENT_PROCESSES) if clients[i::CLIENT_PROCESSES]]


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


def _sql(uri: str, token: str, query: str, planned_only: bool) -> Callable[[int, threading.Event, list[float]], None]:
    """A hostile user's loop over ``query`` (only planned: GetFlightInfo, when ``planned_only``)."""
    def attack(port: int, stop: threading.Event, refusals: list[float]) -> None:
        from flight_server.client.sql.flightsql import statement_plan

        client = _connect(uri, token, 30)  # a hostile request still running then counts as refused at 30 s
        try:
            for i in itertools.count():
                if stop.is_set():
                    break
                t0 = time.perf_counter()
                try:
                    plan = statement_plan(client, query.replace("{i}", str(i)))
                    if not planned_only:
                        for _ in client.fetch_all(plan.endpoints):
                            pass
                except Exception:  # refused or cancelled: what is measured is how soon
                    pass
                refusals.append(time.perf_counter() - t0)
                stop.wait(0.2)
        finally:
            client.close()

    return attack


# -- the runs --------------------------------------------------------------------------------
class _Server:
    """A server of the generated warehouse whose users are :data:`USERS` and the hostile one,
    each with a static token (``settings``: more server settings)."""

    def __init__(self, warehouse: Path, processes: int, settings: dict[str, Any], name: str, size: str):
        self.tokens = {user: f"{user}-{secrets.token_hex(16)}" for user in (*USERS, HOSTILE_USER)}
        config = table_dir("soak", size) / f"serve-{name}.json"
        config.write_text(json.dumps({"server": {
            "tokens": {token: user for user, token in self.tokens.items()}, **settings,
        }}))
        self.served = ServedWarehouse(warehouse, processes=processes, extra_args=("--config", str(config)),
                                      users=(*USERS, HOSTILE_USER))

    def legitimate(self, clients: int, mix: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
        """``clients`` legitimate clients, the users taken in turn."""
        return [(self.tokens[USERS[i % len(USERS)]], mix) for i in range(clients)]


def _phase(server: _Server, size: str, regions: list[str], hostile: str) -> dict[str, Any]:
    rows, _, clients, seconds = SIZES[size]
    served = server.served
    stop = threading.Event()
    refusals: list[float] = []
    token = server.tokens[HOSTILE_USER]
    attackers: list[threading.Thread] = []
    if hostile in ("idle sockets", "200 MB bodies"):
        attack = _idle_sockets if hostile == "idle sockets" else _bodies
        attackers.append(threading.Thread(target=attack, args=(served.process.port, stop, refusals)))
    elif hostile != "none":  # one hostile user on two connections
        attack = _sql(served.uri, token, HOSTILE_SQL[hostile], hostile in PLANNED_ONLY)
        attackers += [threading.Thread(target=attack, args=(served.process.port, stop, refusals)) for _ in range(2)]

    def watch() -> int:
        for attacker in attackers:
            attacker.start()
        peak = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            peak = max(peak, tree_rss(served.process.pid))
            time.sleep(0.5)
        return peak

    samples, peak = _run_clients(_works(served.uri, server.legitimate(clients, MIX), seconds, rows, regions), watch)
    stop.set()
    for attacker in attackers:
        attacker.join(180)
    failures = [s for s in samples if s[2]]
    return {"samples": samples, "failures": failures, "peak_rss": peak, "refusals": refusals}


def _p99(samples: list[tuple[str, float, str]], kind: str | None = None) -> float:
    ok = [s[1] for s in samples if not s[2] and (kind is None or s[0] == kind)]
    return percentile(ok, 99) if ok else float("nan")


def _failed(name: str, failures: list[tuple[str, float, str]]) -> None:
    if failures:
        kinds = sorted({f[2] for f in failures})[:3]
        print(f"[soak] {name}: {len(failures)} failed legitimate requests, e.g. {kinds}")


def _dashboard(warehouse: Path, regions: list[str], size: str) -> list[dict]:
    """12 connections of one user looping SQL on the default server: none refused."""
    rows, _, _, seconds = SIZES[size]
    server = _Server(warehouse, 1, {}, "dashboard", size)
    try:
        clients = [(server.tokens[USERS[0]], ("sql",))] * DASHBOARD_CONNECTIONS
        samples, _ = _run_clients(_works(server.served.uri, clients, seconds, rows, regions))
    finally:
        server.served.close()
    failures = [s for s in samples if s[2]]
    _failed("dashboard", failures)
    params = {"connections": DASHBOARD_CONNECTIONS, "users": 1, "seconds": seconds, "processes": 1}
    name = "soak/dashboard: one user, 12 connections"
    return [
        row(name, "hudi-flight", "SQL statements", len(samples), "statements", params=params),
        row(name, "hudi-flight", "refused or failed statements", len(failures), "statements", params=params),
        row(name, "hudi-flight", "SQL p99 latency", _p99(samples) * 1000, "ms", params=params),
        row(name, "hudi-flight", "SQL p50 latency", percentile([s[1] for s in samples if not s[2]] or [math.nan], 50)
            * 1000, "ms", params=params),
    ]


def _engine_failures(warehouse: Path, regions: list[str], size: str) -> list[dict]:
    """A hostile user's statements that end in memory failures, then the next statements of two
    other users: none fails."""
    rows, _, _, _ = SIZES[size]
    server = _Server(warehouse, 1, FAILURE_SETTINGS, "engine-failures", size)
    try:
        attack = _sql(server.served.uri, server.tokens[HOSTILE_USER], OUT_OF_MEMORY, planned_only=False)
        stop = threading.Event()
        spent: list[float] = []
        attackers = [threading.Thread(target=attack, args=(server.served.process.port, stop, spent)) for _ in range(2)]
        for attacker in attackers:
            attacker.start()
        while len(spent) < MEMORY_FAILURES:
            time.sleep(0.1)
        stop.set()
        for attacker in attackers:
            attacker.join(120)
        per_client = AFTER_FAILURES // 2
        clients = [(server.tokens[user], ("sql",)) for user in USERS[1:3]]
        samples, _ = _run_clients(_works(server.served.uri, clients, 0.0, rows, regions, count=per_client))
    finally:
        server.served.close()
    failures = [s for s in samples if s[2]]
    _failed("engine failures", failures)
    params = {"memory failures": len(spent), **FAILURE_SETTINGS}
    name = "soak/engine failures"
    return [
        row(name, "hudi-flight", "statements of other users after the failures", len(samples), "statements",
            params=params),
        row(name, "hudi-flight", "failed statements of other users", len(failures), "statements", params=params),
        row(name, "hudi-flight", "SQL p99 latency", _p99(samples) * 1000, "ms", params=params),
    ]


def _hostile(warehouse: Path, regions: list[str], size: str) -> list[dict]:
    _, _, clients, seconds = SIZES[size]
    server = _Server(warehouse, 2, SERVER_SETTINGS, "hostile", size)
    out: list[dict] = []
    try:
        phases = {hostile: _phase(server, size, regions, hostile) for hostile in PHASES}
    finally:
        server.served.close()
    base = phases["none"]
    params = {"clients": clients, "users": len(USERS), "seconds_per_phase": seconds, "processes": 2,
              **SERVER_SETTINGS}
    for hostile, got in phases.items():
        name = f"soak/hostile: {hostile}"
        p99 = _p99(got["samples"])
        out += [
            row(name, "hudi-flight", "legitimate requests", len(got["samples"]), "requests", params=params),
            row(name, "hudi-flight", "failed legitimate requests", len(got["failures"]), "requests", params=params),
            row(name, "hudi-flight", "legitimate p99 latency", p99 * 1000, "ms", params=params),
            row(name, "hudi-flight", "p99 vs no hostile client", p99 / _p99(base["samples"]), "x", params=params),
            row(name, "hudi-flight", "peak server RSS", got["peak_rss"] / (1 << 20), "MiB", params=params),
        ]
        for kind in KINDS:  # SQL shares the engine processes with a hostile statement; the others do not
            of_kind = _p99(got["samples"], kind)
            if not math.isnan(of_kind):
                out += [
                    row(name, "hudi-flight", f"legitimate p99 latency, {KIND_NAMES[kind]}", of_kind * 1000, "ms",
                        params=params),
                    row(name, "hudi-flight", f"p99 vs no hostile client, {KIND_NAMES[kind]}",
                        of_kind / _p99(base["samples"], kind), "x", params=params),
                ]
        if got["refusals"]:
            out.append(row(name, "hudi-flight", "median time to refuse a hostile request",
                           statistics.median(got["refusals"]) * 1000, "ms",
                           params={**params, "hostile requests": len(got["refusals"])}))
        _failed(hostile, got["failures"])
    return out


def run(size: str) -> list[dict]:
    warehouse, regions = _warehouse(size)
    return [*_dashboard(warehouse, regions, size), *_engine_failures(warehouse, regions, size),
            *_hostile(warehouse, regions, size)]


if __name__ == "__main__":  # pragma: no cover - manual runs
    import sys

    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r['name']:<40} {r['metric']:<46} {r['value']:>10.2f} {r['unit']}")
