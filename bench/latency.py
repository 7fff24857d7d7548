"""Point-query latency and throughput on a warm server: 1 process against ``--processes 2``.

Two queries against a generated copy-on-write table (metadata table with ``files`` and
``record_index``):

* ``key =``: record-key equality, ``uuid = 'trip-…'`` (a random live key per request);
* ``partition + column``: ``region = <one partition> AND fare > 500``.

Each request is what a client does end to end: ``get_flight_info`` (plan) then ``do_get`` of every
endpoint. The server is ``hudi-flight serve`` in its own process tree on loopback, once with one
serving process and once with ``--processes 2`` (one port), side by side in one run. Clients are
separate processes (1, 4 and 16 of them, each with its own connection), so what is measured is
the server, not one client process's GIL. Every client warms up, then all start together; each
reports its request latencies and its measured span; throughput is requests over the span of all.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.flight as flight

from bench.common import generated_once, percentile, row, table_dir

# rows, partitions, files per partition, requests per client count (spread over the clients)
SIZES = {"quick": (200_000, 20, 2, 64), "full": (2_000_000, 200, 4, 640)}
CLIENTS = (1, 4, 16)
PROCESSES = (1, 2)
MIN_PER_CLIENT = 4
NAMESPACE, TABLE = "bench", "trips"


def _table(size: str) -> tuple[Path, "GeneratorSpec"]:  # noqa: F821 - imported lazily
    from hudi_generator.generator import GeneratorSpec

    rows, partitions, files, _ = SIZES[size]
    spec = GeneratorSpec(rows=rows, partitions=partitions, files_per_partition=files, commits=1, table_name=TABLE,
                         record_index=True)
    warehouse = table_dir("latency", size) / "wh"
    generated_once(warehouse / NAMESPACE / TABLE, spec, warehouse / f"{TABLE}-{rows}-{partitions}-{files}-rli.done")
    return warehouse, spec


def _query(client: flight.FlightClient, filters: list) -> int:
    command = json.dumps({"table": f"{NAMESPACE}.{TABLE}", "filters": filters}).encode()
    info = client.get_flight_info(flight.FlightDescriptor.for_command(command))
    return sum(client.do_get(ep.ticket).read_all().num_rows for ep in info.endpoints)


def _filters(kind: str, rnd: random.Random, rows: int, partitions: list[str]) -> list:
    if kind == "key =":
        return [["uuid", "=", f"trip-{rnd.randrange(rows):010d}"]]
    return [["region", "=", rnd.choice(partitions)], ["fare", ">", 500]]


def _client(uri: str, kind: str, seed: int, requests: int, rows: int, partitions: list[str],
            start, results) -> None:
    """One client process: warm up, wait for the others, run ``requests`` queries, report."""
    rnd = random.Random(seed)
    client = flight.connect(uri)
    try:
        for _ in range(2):
            _query(client, _filters(kind, rnd, rows, partitions))
        start.wait()
        samples = []
        t0 = time.perf_counter()
        for _ in range(requests):
            filters = _filters(kind, rnd, rows, partitions)
            t = time.perf_counter()
            _query(client, filters)
            samples.append(time.perf_counter() - t)
        results.put((samples, time.perf_counter() - t0))
    except Exception as err:  # reported to the parent, which fails the run
        results.put(err)
    finally:
        client.close()


def _run_clients(uri: str, kind: str, clients: int, per_client: int, rows: int,
                 partitions: list[str]) -> tuple[list[float], float]:
    """``clients`` client processes; all latencies and the wall time of the measured phase."""
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(clients), ctx.Queue()
    procs = [ctx.Process(target=_client, args=(uri, kind, i, per_client, rows, partitions, start, results))
             for i in range(clients)]
    for p in procs:
        p.start()
    samples: list[float] = []
    spans = []
    try:
        for _ in procs:
            got = results.get(timeout=600)
            if isinstance(got, Exception):
                raise got
            samples.extend(got[0])
            spans.append(got[1])
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    return samples, max(spans)


def _check_answers(uri: str, spec) -> None:
    """The key query finds exactly one row, the partition query the expected rows."""
    from hudi_generator.generator import expected_table

    probe = flight.connect(uri)
    try:
        key_rows = _query(probe, [["uuid", "=", "trip-0000000007"]])
        part = spec.partition_path(3).split("=", 1)[-1]
        part_rows = _query(probe, [["region", "=", part], ["fare", ">", 500]])
    finally:
        probe.close()
    exp = expected_table(spec)
    exp_part = exp.filter(pc.and_(pc.equal(exp["region"], part), pc.greater(exp["fare"], 500))).num_rows
    if key_rows != 1 or part_rows != exp_part:
        raise AssertionError(f"wrong answers: key query {key_rows} rows, partition query {part_rows} (expected {exp_part})")


def run(size: str) -> list[dict]:
    from tests.support.processes import ServeProcess

    warehouse, spec = _table(size)
    requests = SIZES[size][3]
    partitions = [spec.partition_path(i).split("=", 1)[-1] for i in range(spec.partitions)]
    out = []
    with tempfile.TemporaryDirectory(prefix="hudi-flight-latency-") as tmp:
        config = Path(tmp) / "bench.json"
        config.write_text(json.dumps({"refresh_interval_seconds": 0}))
        servers = {}
        try:
            for p in PROCESSES:
                servers[p] = ServeProcess("--port", "0", "--warehouse", str(warehouse), "--state-dir",
                                          f"{tmp}/state{p}", "--processes", str(p), "--config", str(config),
                                          log=Path(tmp) / f"serve{p}.log")
                _check_answers(servers[p].uri, spec)
            for kind in ("key =", "partition + column"):
                for clients in CLIENTS:
                    name = f"latency/{kind} ({spec.rows:,} rows, {clients} client process{'es' if clients > 1 else ''})"
                    params = {"rows": spec.rows, "partitions": spec.partitions, "clients": clients,
                              "cpus": os.cpu_count(), "load_average": round(os.getloadavg()[0], 2)}
                    per_client = max(MIN_PER_CLIENT, requests // clients)
                    for p, server in servers.items():  # side by side, same table, same clients
                        competitor = "hudi-flight" if p == 1 else f"hudi-flight --processes {p}"
                        samples, wall = _run_clients(server.uri, kind, clients, per_client, spec.rows, partitions)
                        for q in (50, 99):
                            out.append(row(name, competitor, f"p{q} latency", 1000 * percentile(samples, q), "ms",
                                           repeats=len(samples), params=params))
                        out.append(row(name, competitor, "throughput", len(samples) / wall, "queries/s",
                                       params=params))
        finally:
            for server in servers.values():
                server.stop()
    return out


if __name__ == "__main__":
    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r['name']:66} {r['competitor']:26} {r['metric']:12} {r['value']:10.2f} {r['unit']}")
