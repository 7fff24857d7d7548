"""Point-query latency on a warm Flight server, p50/p99 with 1 and 16 concurrent clients.

Two queries against a generated copy-on-write table (metadata table with ``files`` and
``record_index``):

* ``key =``: record-key equality, ``uuid = 'trip-…'`` (a random live key per request);
* ``partition + column``: ``region = <one partition> AND fare > 500``.

Each request is what a client does end to end: ``get_flight_info`` (plan) then ``do_get`` of every
endpoint. The server runs in-process (``flight_server.service.HudiFlightServer``) on loopback;
clients are threads, each with its own ``FlightClient``.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.flight as flight

from bench.common import percentile, row, table_dir
from tests.support.servers import free_port

# rows, partitions, files per partition, requests per (query, concurrency), spread over the clients
SIZES = {"quick": (200_000, 20, 2, 32), "full": (2_000_000, 200, 4, 320)}
CONCURRENCY = (1, 16)
NAMESPACE, TABLE = "bench", "trips"


def _table(size: str) -> tuple[Path, "GeneratorSpec"]:  # noqa: F821 - imported lazily
    from hudi_generator.generator import GeneratorSpec, generate

    rows, partitions, files, _ = SIZES[size]
    spec = GeneratorSpec(rows=rows, partitions=partitions, files_per_partition=files, commits=1, table_name=TABLE,
                         record_index=True)
    warehouse = table_dir("latency", size) / "wh"
    path = warehouse / NAMESPACE / TABLE
    marker = warehouse / f"{TABLE}-{rows}-{partitions}-{files}-rli.done"
    if not marker.exists():
        shutil.rmtree(path, ignore_errors=True)
        generate(str(path), spec)
        marker.touch()
    return warehouse, spec


def _query(client: flight.FlightClient, filters: list) -> int:
    command = json.dumps({"table": f"{NAMESPACE}.{TABLE}", "filters": filters}).encode()
    info = client.get_flight_info(flight.FlightDescriptor.for_command(command))
    return sum(client.do_get(ep.ticket).read_all().num_rows for ep in info.endpoints)


def _latencies(uri: str, make_filters, clients: int, per_client: int) -> list[float]:
    """Run ``clients`` threads, each issuing ``per_client`` requests; per-request seconds."""
    samples: list[float] = []
    lock = threading.Lock()

    def worker(seed: int) -> None:
        rnd = random.Random(seed)
        client = flight.connect(uri)
        try:
            _query(client, make_filters(rnd))  # warm the connection
            mine = []
            for _ in range(per_client):
                filters = make_filters(rnd)
                t0 = time.perf_counter()
                _query(client, filters)
                mine.append(time.perf_counter() - t0)
        finally:
            client.close()
        with lock:
            samples.extend(mine)

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(worker, range(clients)))
    return samples


def run(size: str) -> list[dict]:
    from flight_server.server.config import ServerConfig
    from flight_server.server.service import HudiFlightServer

    warehouse, spec = _table(size)
    requests = SIZES[size][3]
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="hudi-flight-latency-") as state:
        config = ServerConfig(host="127.0.0.1", port=port, warehouses=[str(warehouse)], state_dir=state,
                              refresh_interval_seconds=0)
        server = HudiFlightServer(config)
        thread = threading.Thread(target=server.serve, daemon=True)
        thread.start()
        uri = f"grpc://127.0.0.1:{port}"
        try:
            from hudi_generator.generator import expected_table

            # sanity: the key query finds exactly one row, the partition query the expected rows
            probe = flight.connect(uri)
            key_rows = _query(probe, [["uuid", "=", "trip-0000000007"]])
            part = spec.partition_path(3).split("=", 1)[-1]
            part_rows = _query(probe, [["region", "=", part], ["fare", ">", 500]])
            probe.close()
            exp = expected_table(spec)
            exp_part = exp.filter(pc.and_(pc.equal(exp["region"], part), pc.greater(exp["fare"], 500))).num_rows
            if key_rows != 1 or part_rows != exp_part:
                raise AssertionError(f"wrong answers: key query {key_rows} rows, partition query {part_rows} (expected {exp_part})")

            queries = {
                "key =": lambda rnd: [["uuid", "=", f"trip-{rnd.randrange(spec.rows):010d}"]],
                "partition + column": lambda rnd: [["region", "=", spec.partition_path(rnd.randrange(spec.partitions)).split("=", 1)[-1]],
                                                   ["fare", ">", 500]],
            }
            out = []
            for qname, make in queries.items():
                for clients in CONCURRENCY:
                    t0 = time.perf_counter()
                    samples = _latencies(uri, make, clients, max(2, requests // clients))
                    wall = time.perf_counter() - t0
                    name = f"latency/{qname} ({spec.rows:,} rows, {clients} client{'s' if clients > 1 else ''})"
                    params = {"rows": spec.rows, "partitions": spec.partitions, "clients": clients}
                    for p in (50, 99):
                        out.append(row(name, "hudi-flight", f"p{p} latency", 1000 * percentile(samples, p), "ms",
                                       repeats=len(samples), params=params))
                    out.append(row(name, "hudi-flight", "throughput", len(samples) / wall, "queries/s", params=params))
            return out
        finally:
            server.shutdown()
            thread.join(10)


if __name__ == "__main__":
    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r['name']:60} {r['metric']:14} {r['value']:10.2f} {r['unit']}")
