"""Server CPU per warm filter query that is no plain record-key lookup, local disk, side by side.

Three tables, generated once per size: the copy-on-write and merge-on-read tables of
:mod:`bench.point_query` (MOR: a second commit's updates and deletes in Avro log blocks, every
file group with a log file), and a merge-on-read table of the complex key generator (two
partition levels, ``region`` and ``day``, so the table names ``COMPLEX``; record key ``uuid``;
a record index; Avro log blocks). Query shapes, a random value each query:

* ``composite key``: ``uuid = <live key>`` on the complex-key table (a key the record index
  locates only when the key is spelled as the complex key generator spells it);
* ``partition + column``: ``region = <partition> AND fare BETWEEN f AND f + 5``;
* ``data column``: ``rider = <value>`` over the whole table (about 200 rows of 200,000);
* ``record key (reference)``: ``uuid = <key>`` on the copy-on-write table, the record-key point
  read of :mod:`bench.point_query`, whose figures on a quiet machine are known (``HISTORY.md``):
  it tells how much a loaded machine inflates the CPU times of the same run.

Each through both paths of :mod:`bench.point_query`: the JSON command (``get_flight_info`` and
``do_get`` of every endpoint, pyarrow.flight) and Flight SQL through ADBC with the values bound
as parameters. Competitors, one ``hudi-flight serve`` process each: the defaults, and the same
with the caches of decoded columns and log blocks off (``point_read_cache_bytes`` and
``log_block_cache_bytes`` 0: every filter query decodes what it reads, as before filter queries
went through those caches).

Before the measured queries every path asks ``WARMUP`` queries of the shape, and the queries
that touch every file of the table once (the partition shape: every partition; the composite
key: the first key of every row group and one in every stretch of record-index keys,
:func:`bench.point_query.steady_warmup_keys`), as a server answering for a while has; then
``QUERIES`` others: the server's CPU per query (user +
system of its process tree, ``/proc``), the p50 wall time, and the storage requests per query
(``open``, ``read``, ``info`` of its ``/metrics``; the timeline listing every plan makes is not
counted). The targets of issue 41 are checked on the defaults' rows: <= 2 ms (JSON) and <= 3 ms
(Flight SQL) of server CPU per query, <= 0.1 storage requests per query.

Run alone: ``python -m bench.warm_filter [quick|full]``.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

import pyarrow.flight as flight

from bench.common import filtered_rows, generated_once, median, row, table_dir
from bench.latency import NAMESPACE, SIZES, TABLE, _table
from bench.point_query import _live, _mor_table, _storage_reads, serve_trees, steady_warmup_keys, tree_cpu_seconds

if TYPE_CHECKING:
    from hudi_generator.generator import GeneratorSpec

REPO = Path(__file__).resolve().parents[1]
QUERIES = {"quick": 100, "full": 1000}
WARMUP = 30
#: issue 41's targets: server CPU ms per query by path, storage requests per query
CPU_TARGETS = {"JSON command": 2.0, "Flight SQL (ADBC, bound values)": 3.0}
READS_TARGET = 0.1
CACHES_OFF = {"point_read_cache_bytes": 0, "log_block_cache_bytes": 0}
#: a query: (JSON command filters, SQL condition with ? parameters, the parameters)
Query = tuple[list, str, tuple]


def _complex_table(size: str) -> tuple[Path, GeneratorSpec]:
    """A merge-on-read table of the complex key generator: two partition levels, a record index."""
    from hudi_generator.generator import MERGE_ON_READ, GeneratorSpec

    rows, partitions, files, _ = SIZES[size]
    spec = GeneratorSpec(rows=rows, partitions=partitions, partition_levels=2, files_per_partition=files, commits=2,
                         table_name=TABLE, record_index=True, table_type=MERGE_ON_READ)
    warehouse = table_dir("warm_filter", size) / "complex"
    generated_once(warehouse / NAMESPACE / TABLE, spec,
                   warehouse / f"{TABLE}-{rows}-{partitions}-{files}-complex-mor.done")
    return warehouse, spec


def _key_query(key: str) -> Query:
    return [["uuid", "=", key]], "uuid = ?", (key,)


def _partition_query(region: str, fare: float) -> Query:
    filters = [["region", "=", region], ["fare", ">=", fare], ["fare", "<=", fare + 5]]
    return filters, "region = ? AND fare BETWEEN ? AND ?", (region, fare, fare + 5)


def _rider_query(rider: str) -> Query:
    return [["rider", "=", rider]], "rider = ?", (rider,)


def _shapes(size: str) -> list[tuple[str, Path, GeneratorSpec, Callable[[random.Random, set[str]], Query], bool]]:
    """(shape, warehouse, spec, a random query of it, whether the warm-up asks every partition
    (else: every row group's first key, for the key shape))."""
    complex_wh, complex_spec = _complex_table(size)
    cow_wh, cow_spec = _table(size)
    mor_wh, mor_spec = _mor_table(size)

    def key(rnd: random.Random, live: set[str]) -> Query:
        while True:
            candidate = f"trip-{rnd.randrange(complex_spec.rows):010d}"
            if candidate in live:
                return _key_query(candidate)

    def plain_key(rnd: random.Random, _: set[str]) -> Query:
        return _key_query(f"trip-{rnd.randrange(cow_spec.rows):010d}")

    def partition(spec: GeneratorSpec) -> Callable[[random.Random, set[str]], Query]:
        return lambda rnd, _: _partition_query(f"region-{rnd.randrange(spec.partitions):05d}",
                                               round(rnd.uniform(0, 990), 2))

    def rider(rnd: random.Random, _: set[str]) -> Query:
        return _rider_query(f"rider-{rnd.randrange(1000)}-v1")

    return [
        ("composite key, merge-on-read (complex key generator)", complex_wh, complex_spec, key, False),
        ("partition + column, copy-on-write", cow_wh, cow_spec, partition(cow_spec), True),
        ("partition + column, merge-on-read", mor_wh, mor_spec, partition(mor_spec), True),
        ("data column, copy-on-write", cow_wh, cow_spec, rider, False),
        ("data column, merge-on-read", mor_wh, mor_spec, rider, False),
        ("record key (reference), copy-on-write", cow_wh, cow_spec, plain_key, False),
    ]


@contextlib.contextmanager
def _json_query(uri: str) -> Iterator[Callable[[Query], int]]:
    client = flight.connect(uri)

    def query(q: Query) -> int:
        return filtered_rows(client, f"{NAMESPACE}.{TABLE}", q[0])

    try:
        yield query
    finally:
        client.close()


@contextlib.contextmanager
def _sql_query(uri: str) -> Iterator[Callable[[Query], int]]:
    import adbc_driver_flightsql.dbapi as adbc

    with adbc.connect(uri, autocommit=True) as conn, conn.cursor() as cursor:

        def query(q: Query) -> int:
            cursor.execute(f"SELECT * FROM {NAMESPACE}.{TABLE} WHERE {q[1]}", parameters=q[2])
            return cursor.fetch_arrow_table().num_rows

        yield query


PATHS = {"JSON command": _json_query, "Flight SQL (ADBC, bound values)": _sql_query}


def _measure(pid: int, query: Callable[[Query], int], queries: list[Query], metrics: str) -> tuple[float, float, float]:
    """(server CPU ms per query, p50 wall ms, storage requests per query) over ``queries``."""
    reads = _storage_reads(metrics)
    before = tree_cpu_seconds(pid)
    walls = []
    for q in queries:
        t = time.perf_counter()
        query(q)
        walls.append(time.perf_counter() - t)
    cpu = tree_cpu_seconds(pid) - before
    return 1000 * cpu / len(queries), 1000 * median(walls), (_storage_reads(metrics) - reads) / len(queries)


def run(size: str, only: str = "") -> list[dict]:
    """Every shape (``only``: those whose name holds it)."""
    from tests.support.servers import free_port

    out = []
    for shape, warehouse, spec, make, every_partition in _shapes(size):
        if only not in shape:
            continue
        live = _live(warehouse) if "key" in shape else set()
        rnd = random.Random(41)
        warmup = [make(rnd, live) for _ in range(WARMUP)]
        if every_partition:
            warmup += [_partition_query(f"region-{p:05d}", 500.0) for p in range(spec.partitions)]
        elif live:
            table = warehouse / NAMESPACE / TABLE
            warmup += [_key_query(k) for k in steady_warmup_keys(table, spec.rows) if k in live]
        measured = [make(rnd, live) for _ in range(QUERIES[size])]
        trees = {"hudi-flight": (REPO, {}), "hudi-flight, caches off": (REPO, dict(CACHES_OFF))}
        ports = {name: free_port() for name in trees}
        trees = {name: (tree, {**settings, "metrics_port": ports[name]}) for name, (tree, settings) in trees.items()}
        params = {"rows": spec.rows, "partitions": spec.partitions, "queries": len(measured), "warmup": len(warmup),
                  "cpus": os.cpu_count(), "load_average": round(os.getloadavg()[0], 2)}
        with tempfile.TemporaryDirectory(prefix="hudi-flight-warm-") as tmp:
            servers = serve_trees(warehouse, trees, tmp)
            try:
                for path, client in PATHS.items():
                    title = f"warm filter/{path}/{shape} ({spec.rows:,} rows)"
                    for name, server in servers.items():  # side by side: same table, same queries
                        with client(server.uri) as query:
                            returned = sum(query(q) for q in warmup)
                            cpu_ms, p50_ms, reads = _measure(server.pid, query, measured,
                                                             f"http://127.0.0.1:{ports[name]}/metrics")
                        checked = name == "hudi-flight"
                        cpu_params = {**params, "warmup_rows": returned}
                        if checked:
                            cpu_params |= {"target": CPU_TARGETS[path], "holds": cpu_ms <= CPU_TARGETS[path]}
                        out.append(row(title, name, "server CPU per query", cpu_ms, "ms", repeats=len(measured),
                                       params=cpu_params))
                        out.append(row(title, name, "p50 latency", p50_ms, "ms", repeats=len(measured), params=params))
                        read_params = {**params, "target": READS_TARGET, "holds": reads <= READS_TARGET} \
                            if checked else params
                        out.append(row(title, name, "storage requests per query", reads, "requests",
                                       repeats=len(measured), params=read_params))
                        print(f"{title} {name}: {cpu_ms:.2f} ms CPU, p50 {p50_ms:.2f} ms, {reads:.2f} requests",
                              file=sys.stderr, flush=True)
            finally:
                for server in servers.values():
                    server.stop()
    return out


if __name__ == "__main__":
    # python -m bench.warm_filter [quick|full] [part of a shape's name]
    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick", *sys.argv[2:3]):
        holds = r["params"].get("holds")
        verdict = "" if holds is None else ("  holds" if holds else "  MISSES")
        print(f"{r['name']:96} {r['competitor']:24} {r['metric']:27} {r['value']:8.2f} {r['unit']}{verdict}")
