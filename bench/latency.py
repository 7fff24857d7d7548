"""Point-query latency and throughput on a warm server: 1 process against ``--processes 2``.

Two queries against a generated copy-on-write table (metadata table with ``files`` and
``record_index``):

* ``key =``: record-key equality, ``uuid = 'trip-…'`` (a random live key per request);
* ``partition + column``: ``region = <one partition> AND fare > 500``.

Each request is what a client does end to end: ``get_flight_info`` (plan) then ``do_get`` of every
endpoint, from the location the endpoint names when it names one (else from the server planned
with). The server is ``hudi-flight serve`` in its own process tree on loopback, side by side in one
run: one serving process, ``--processes 2`` (every byte through the supervisor's relay) and
``--processes 2 --process-endpoints`` (endpoints name the serving processes' own ports).

Warm means warm caches, not only open connections: before anything is measured every serving
process answers the queries of a warm-up set over connections of its own (the relay balances per
connection, so the warm-up opens connections until the ``health`` action has named every serving
process). The warm-up touches every file group (the point-read cache decodes a row group on first
touch) and every partition with keys and values the measured phase does not reuse.

Clients are separate processes (1, 4 and 16 of them, a pool started once and reused, each with
connections of its own per run), so what is measured is the server, not one client process's GIL.
Every client warms its connection up, then all run queries for the same fixed span; the
competitors take turns in a few interleaved rounds (the machine is shared: a change of load falls
on all of them alike), the rounds of one competitor pooled into its row. Besides the
latency percentiles and the throughput (queries over the span), each row carries the CPU time
(user + system, from ``/proc``) spent per query by the server's process tree, by the supervisor
alone (its relay: ``--processes 2`` only) and by the client processes: the machine has a few cores
shared by server and clients, so these are what the wall-clock numbers must be read against.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Callable, cast

import pyarrow.compute as pc
import pyarrow.flight as flight

from bench.common import generated_once, percentile, row, table_dir
from bench.process_cpu import tree_cpu_seconds

if TYPE_CHECKING:
    from hudi_generator.generator import GeneratorSpec

# rows, partitions, files per partition, seconds of queries per competitor and client count
SIZES = {"quick": (200_000, 20, 2, 2.4), "full": (2_000_000, 200, 4, 9.0)}
ROUNDS = 3  # the seconds are split over this many interleaved rounds
CLIENTS = (1, 4, 16)
KINDS = ("key =", "partition + column")
CLIENT_WARMUP = 5  # queries per client connection before the measured span
SERVERS = {  # competitor -> serve arguments
    "hudi-flight": ("--processes", "1"),
    "hudi-flight --processes 2": ("--processes", "2"),
    "hudi-flight --processes 2 --process-endpoints": ("--processes", "2", "--process-endpoints"),
}
NAMESPACE, TABLE = "bench", "trips"


def _table(size: str) -> tuple[Path, GeneratorSpec]:
    from hudi_generator.generator import GeneratorSpec

    rows, partitions, files, _ = SIZES[size]
    spec = GeneratorSpec(rows=rows, partitions=partitions, files_per_partition=files, commits=1, table_name=TABLE,
                         record_index=True)
    warehouse = table_dir("latency", size) / "wh"
    generated_once(warehouse / NAMESPACE / TABLE, spec, warehouse / f"{TABLE}-{rows}-{partitions}-{files}-rli.done")
    return warehouse, spec


class _Connection:
    """One client's connection to the server, and to each location endpoints name (opened on
    first use, as a Flight client follows an endpoint's locations)."""

    def __init__(self, uri: str):
        self.client = flight.connect(uri)
        self._located: dict[str, flight.FlightClient] = {}

    def _for(self, endpoint: flight.FlightEndpoint) -> flight.FlightClient:
        if not endpoint.locations:
            return self.client
        uri = endpoint.locations[0].uri.decode()
        if uri not in self._located:
            self._located[uri] = flight.connect(uri)
        return self._located[uri]

    def query(self, filters: list) -> int:
        command = json.dumps({"table": f"{NAMESPACE}.{TABLE}", "filters": filters}).encode()
        info = self.client.get_flight_info(flight.FlightDescriptor.for_command(command))
        return sum(self._for(ep).do_get(ep.ticket).read_all().num_rows for ep in info.endpoints)

    def serving_pid(self) -> int:
        (result,) = self.client.do_action(flight.Action("health", b""))
        return int(json.loads(result.body.to_pybytes())["pid"])

    def close(self) -> None:
        for client in (self.client, *self._located.values()):
            client.close()


@dataclass(frozen=True)
class _Keys:
    """The query parameters: warm-up and measured requests draw from disjoint sets, so no cache
    keyed by a request's values (a plan cache, say) is warmed for the measured phase."""

    rows: int
    groups: int  # file groups: keys 0 .. groups - 1 are their first rows, one each
    partitions: tuple[str, ...]

    def warmup(self, kind: str) -> list[list]:
        """One query per file group (the key of its first row) or per partition."""
        if kind == "key =":
            return [[["uuid", "=", f"trip-{g:010d}"]] for g in range(self.groups)]
        return [[["region", "=", p], ["fare", ">", 499]] for p in self.partitions]

    def measured(self, kind: str, rnd: random.Random) -> list:
        if kind == "key =":
            return [["uuid", "=", f"trip-{rnd.randrange(self.groups, self.rows):010d}"]]
        return [["region", "=", rnd.choice(self.partitions)], ["fare", ">", 500]]


@dataclass(frozen=True)
class _Run:
    """What one client process is asked to do: warm its connection up, then run queries until
    the parent's ``end`` (``time.monotonic()``, the same clock in every process)."""

    uri: str
    kind: str
    seed: int


def _client_process(conn: Connection, keys: _Keys) -> None:
    """Body of a pooled client process: one :class:`_Run` after the other until ``None``."""
    while (run := conn.recv()) is not None:
        try:
            _client_run(conn, run, keys)
        except Exception as err:  # reported to the parent (flight errors do not always pickle)
            conn.send(("error", f"{type(err).__name__}: {err}"))


def _client_run(conn: Connection, run: _Run, keys: _Keys) -> None:
    rnd = random.Random(run.seed)
    connection = _Connection(run.uri)
    try:
        for _ in range(CLIENT_WARMUP):
            connection.query(keys.measured(run.kind, rnd))
        conn.send(("ready", None))
        end = conn.recv()
        samples = []
        cpu, t0 = time.process_time(), time.monotonic()
        while time.monotonic() < end:
            filters = keys.measured(run.kind, rnd)
            t = time.perf_counter()
            found = connection.query(filters)
            samples.append(time.perf_counter() - t)
            if run.kind == "key =" and found != 1:
                raise AssertionError(f"{filters} found {found} rows, not one")
        conn.send(("done", (samples, time.monotonic() - t0, time.process_time() - cpu)))
    finally:
        connection.close()


class _ClientPool:
    """``size`` client processes, started once (starting 16 Python processes costs seconds of
    CPU: not something to pay per measured run)."""

    def __init__(self, size: int, keys: _Keys):
        ctx = multiprocessing.get_context("spawn")
        self._conns: list[Connection] = []
        self._procs = []
        for _ in range(size):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_client_process, args=(child, keys), daemon=True)
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)

    @staticmethod
    def _answer(conn: Connection, expected: str) -> object:
        if not conn.poll(600):
            raise TimeoutError("a client process did not answer within 600 s")
        what, value = conn.recv()
        if what == "error":
            raise RuntimeError(f"a client failed: {value}")
        assert what == expected, (what, expected)
        return value

    def run(self, runs: list[_Run], seconds: float, on_start: Callable[[], None],
            on_end: Callable[[], None]) -> tuple[list[float], float, float]:
        """Run ``runs`` (one per client process) for ``seconds`` together; all latencies, the span
        and the client processes' CPU seconds. ``on_start``/``on_end`` bracket the measured span."""
        conns = self._conns[:len(runs)]
        for conn, one in zip(conns, runs):
            conn.send(one)
        for conn in conns:
            self._answer(conn, "ready")
        on_start()
        end = time.monotonic() + seconds
        for conn in conns:
            conn.send(end)
        samples: list[float] = []
        span = cpu = 0.0
        for conn in conns:
            report = cast("tuple[list[float], float, float]", self._answer(conn, "done"))
            got_samples, got_span, got_cpu = report
            samples.extend(got_samples)
            span, cpu = max(span, got_span), cpu + got_cpu
        on_end()
        return samples, span, cpu

    def close(self) -> None:
        for conn in self._conns:
            try:
                conn.send(None)
            except OSError:
                pass
        for proc in self._procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()


def _warm(uri: str, processes: int, keys: _Keys) -> list[int]:
    """Warm every serving process's caches with the warm-up queries; their pids.

    Connections are held open together until ``health`` named ``processes`` distinct pids (the
    relay gives a new connection to the process with the fewest open ones), then each of those
    processes answers the whole warm-up set over one of them.
    """
    by_pid: dict[int, _Connection] = {}
    opened: list[_Connection] = []
    try:
        while len(by_pid) < processes:
            if len(opened) == 4 * processes:
                raise RuntimeError(f"the warm-up reached {len(by_pid)} of {processes} serving processes")
            opened.append(_Connection(uri))
            by_pid.setdefault(opened[-1].serving_pid(), opened[-1])
        for connection in by_pid.values():
            for kind in KINDS:
                for filters in keys.warmup(kind):
                    connection.query(filters)
        return sorted(by_pid)
    finally:
        for connection in opened:
            connection.close()


def _check_answers(uri: str, spec: GeneratorSpec) -> None:
    """The key query finds exactly one row, the partition query the expected rows."""
    from hudi_generator.generator import expected_table

    probe = _Connection(uri)
    try:
        key_rows = probe.query([["uuid", "=", "trip-0000000007"]])
        part = spec.partition_path(3).split("=", 1)[-1]
        part_rows = probe.query([["region", "=", part], ["fare", ">", 500]])
    finally:
        probe.close()
    exp = expected_table(spec)
    exp_part = exp.filter(pc.and_(pc.equal(exp["region"], part), pc.greater(exp["fare"], 500))).num_rows
    if key_rows != 1 or part_rows != exp_part:
        raise AssertionError(f"wrong answers: key query {key_rows} rows, partition query {part_rows} (expected {exp_part})")


class _Tally:
    """What one competitor did over the rounds of one measurement: latencies, measured span and
    CPU seconds of the server's process tree, of its serving processes (the rest is the
    supervisor's: the relay) and of the client processes."""

    def __init__(self, server_pid: int, serving_pids: list[int]):
        self._tree = tree_cpu_seconds
        self._pids = server_pid, serving_pids
        self._before = (0.0, 0.0)
        self.samples: list[float] = []
        self.span = self.server = self.serving = self.clients = 0.0

    def _now(self) -> tuple[float, float]:
        server, serving = self._pids
        return self._tree(server), sum(self._tree(pid) for pid in serving)

    def start(self) -> None:
        self._before = self._now()

    def stop(self) -> None:
        after = self._now()
        self.server += after[0] - self._before[0]
        self.serving += after[1] - self._before[1]

    def add(self, samples: list[float], span: float, client_cpu: float) -> None:
        self.samples.extend(samples)
        self.span += span
        self.clients += client_cpu

    @property
    def relay(self) -> float:
        return self.server - self.serving


def run(size: str) -> list[dict]:
    from tests.support.processes import ServeProcess

    warehouse, spec = _table(size)
    seconds = SIZES[size][3]
    keys = _Keys(spec.rows, spec.n_groups,
                 tuple(spec.partition_path(i).split("=", 1)[-1] for i in range(spec.partitions)))
    out = []
    pool = _ClientPool(max(CLIENTS), keys)
    with tempfile.TemporaryDirectory(prefix="hudi-flight-latency-") as tmp:
        config = Path(tmp) / "bench.json"
        config.write_text(json.dumps({"refresh_interval_seconds": 0}))
        servers = {}
        try:
            for i, (competitor, args) in enumerate(SERVERS.items()):  # started side by side
                servers[competitor] = ServeProcess("--port", "0", "--warehouse", str(warehouse), "--state-dir",
                                                   f"{tmp}/state{i}", "--config", str(config), *args,
                                                   log=Path(tmp) / f"serve{i}.log", wait=False)
            serving = {}
            for competitor, server in servers.items():
                server.ready()
                _check_answers(server.uri, spec)
                serving[competitor] = _warm(server.uri, int(SERVERS[competitor][1]), keys)
            for kind in KINDS:
                single = 0.0  # throughput of one client against one process
                for clients in CLIENTS:
                    name = f"latency/{kind} ({spec.rows:,} rows, {clients} client process{'es' if clients > 1 else ''})"
                    params = {"rows": spec.rows, "partitions": spec.partitions, "clients": clients,
                              "seconds": seconds, "cpus": os.cpu_count(),
                              "load_average": round(os.getloadavg()[0], 2)}
                    tallies = {competitor: _Tally(server.pid, serving[competitor])
                               for competitor, server in servers.items()}
                    # side by side, same table, same clients, in interleaved rounds: a change of
                    # load on the shared machine falls on every competitor alike
                    for turn in range(ROUNDS):
                        for competitor, server in servers.items():
                            tally = tallies[competitor]
                            runs = [_Run(server.uri, kind, seed=10_000 * turn + 100 * clients + i)
                                    for i in range(clients)]
                            tally.add(*pool.run(runs, seconds / ROUNDS, tally.start, tally.stop))
                    for competitor, tally in tallies.items():
                        n = len(tally.samples)
                        throughput = n / tally.span
                        single = single or throughput
                        for q in (50, 99):
                            out.append(row(name, competitor, f"p{q} latency", 1000 * percentile(tally.samples, q),
                                           "ms", repeats=n, params=params))
                        out.append(row(name, competitor, "throughput", throughput, "queries/s", repeats=n,
                                       params=params))
                        out.append(row(name, competitor, "throughput / 1 client, 1 process", throughput / single,
                                       "x", repeats=n, params=params))
                        out.append(row(name, competitor, "server CPU per query", 1000 * tally.server / n, "ms",
                                       repeats=n, params=params))
                        if len(serving[competitor]) > 1:
                            out.append(row(name, competitor, "relay CPU per query", 1000 * tally.relay / n, "ms",
                                           repeats=n, params=params))
                        out.append(row(name, competitor, "client CPU per query", 1000 * tally.clients / n, "ms",
                                       repeats=n, params=params))
                        # every core busy with this server and these clients: the most it could do
                        ceiling = (os.cpu_count() or 1) / ((tally.server + tally.clients) / n)
                        out.append(row(name, competitor, "CPU-bound ceiling", ceiling, "queries/s", repeats=n,
                                       params=params))
        finally:
            pool.close()
            for server in servers.values():
                server.stop()
    return out


if __name__ == "__main__":
    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r['name']:66} {r['competitor']:46} {r['metric']:34} {r['value']:10.2f} {r['unit']}")
