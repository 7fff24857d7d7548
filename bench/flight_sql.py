"""Flight SQL through the ADBC driver, side by side with the JSON-command path and local engines.

On the generated COW table of :mod:`bench.flight_scan` (>= 1 GiB of Parquet for ``full``), served
by ``hudi-flight serve`` in a subprocess:

* ``SELECT *``: ADBC ``adbc_execute_partitions`` with the partitions streamed in parallel, ADBC
  ``execute`` + ``fetch_arrow_table``, the JSON-command path (Python client, endpoints in parallel),
  ``pyarrow.dataset`` over the same base files in this process (the ceiling);
* ``SELECT count(*)`` and a filtered aggregate: Flight SQL (ADBC) vs DuckDB over the same Parquet
  files in this process, vs a second server whose engine gets every table fed through Python
  (``sql_native_scan = false``) and a third whose engine scans the base files through Arrow
  rather than its own Parquet reader (``sql_native_reader = false``); wall time and CPU time per query (server + client), each also as
  a ratio to DuckDB's, and the server's and the ADBC client's CPU per query apart;
* point lookup latency (one record key): ADBC vs the JSON-command path.

Run alone with ``python -m bench.flight_sql [quick|full]`` or through ``python -m bench``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import duckdb
import pyarrow.dataset as ds

from bench.common import ServedWarehouse, base_file_paths, percentile, round_robin, row
from bench.flight_scan import WORKERS, CpuMeter, _service_read, _table
from bench.process_cpu import tree_cpu_seconds

TABLE = "bench.trips"
AGGREGATE = ("SELECT count(*) AS n, sum(trip_count) AS trips FROM {} "
             "WHERE region = 'region-00001' AND fare > 100")
LOOKUPS = 30
PEER = "DuckDB over the Parquet files"
CPU_CALLS = 20  # queries per CPU-time measurement
#: rounds of the aggregates side by side (milliseconds each: enough for a steady median on a busy machine)
AGGREGATE_ROUNDS = {"quick": 21, "full": 11}


def _adbc_partitions(conns: list[Any], sql: str) -> int:
    """Plan with ``adbc_execute_partitions``; read the partitions on ``WORKERS`` threads, one ADBC
    connection each (reads of one connection's partitions do not run concurrently). As the JSON
    path's client does, each thread takes the next partition when it is free and streams its
    batches (``fetch_record_batch``) rather than gathering them into a table."""
    cursor = conns[0].cursor()
    try:
        partitions, _ = cursor.adbc_execute_partitions(sql)
    finally:
        cursor.close()
    todo = iter(partitions)
    lock = threading.Lock()

    def read(worker: int) -> int:
        cursor = conns[worker].cursor()
        try:
            total = 0
            while True:
                with lock:
                    partition = next(todo, None)
                if partition is None:
                    return total
                cursor.adbc_read_partition(partition)
                total += sum(batch.num_rows for batch in cursor.fetch_record_batch())
        finally:
            cursor.close()

    with ThreadPoolExecutor(len(conns)) as pool:
        return sum(pool.map(read, range(len(conns))))


def _adbc_query(conn: Any, sql: str, parameters: Any = None) -> Any:
    cursor = conn.cursor()
    try:
        cursor.execute(sql, parameters)
        return cursor.fetch_arrow_table()
    finally:
        cursor.close()


def _configured_server(warehouse: Path, settings: str) -> ServedWarehouse:
    """Another server over the warehouse with these configuration ``settings`` (TOML lines)."""
    config = Path(tempfile.mkdtemp(prefix="hudi-flight-bench-")) / "server.toml"
    config.write_text(settings)
    return ServedWarehouse(warehouse, 1, ["--config", str(config)])


def _cpu_per_call(fn: Any, server_pid: int | None, calls: int) -> tuple[float, float]:
    """CPU seconds per call of ``fn``: the server's process tree (0 without one) and this process
    (the client, or the in-process engine). Steadier than wall time on a loaded machine."""
    fn()  # warm
    server_before = tree_cpu_seconds(server_pid) if server_pid is not None else 0.0
    client_before = time.process_time()
    for _ in range(calls):
        fn()
    client = time.process_time() - client_before
    server = tree_cpu_seconds(server_pid) - server_before if server_pid is not None else 0.0
    return server / calls, client / calls


def _latency(fn: Any, repeat: int) -> list[float]:
    fn()  # warm
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return samples


def run(size: str) -> list[dict]:
    import adbc_driver_flightsql.dbapi as adbc

    from catalog import HudiTable
    from flight_server.client.session import connect

    path = _table(size)
    files = base_file_paths(path)
    nbytes = sum(os.path.getsize(f) for f in files)
    table = HudiTable.open(str(path))
    rows = table.read(columns=["_hoodie_record_key"]).num_rows
    key = table.read(columns=["_hoodie_record_key"], limit=1).column(0)[0].as_py()
    params = {"rows": rows, "parquet_bytes": nbytes, "files": len(files), "client_workers": WORKERS,
              "load_average": os.getloadavg()[0]}
    name = f"flight_sql/{nbytes / 2**30:.2f} GiB COW"
    repeat = 3 if size == "full" else 5
    parquet = "read_parquet([" + ", ".join(f"'{f}'" for f in files) + "])"
    local = duckdb.connect()

    def duckdb_scalar(sql: str) -> tuple:
        return tuple(local.execute(sql.format(parquet)).fetchall()[0])

    server = ServedWarehouse(path.parent.parent, 1)
    # the paths before: every table fed through Python; plain base files scanned through Arrow
    streamed = _configured_server(path.parent.parent, "sql_native_scan = false\n")
    arrow_scan = _configured_server(path.parent.parent, "sql_native_reader = false\n")
    conns = [adbc.connect(server.uri, autocommit=True) for _ in range(WORKERS)]
    conn = conns[0]
    streamed_conn = adbc.connect(streamed.uri, autocommit=True)
    arrow_conn = adbc.connect(arrow_scan.uri, autocommit=True)
    out: list[dict] = []
    try:
        cpu, pid = CpuMeter(), server.process.pid
        scans = {
            "ADBC partitions in parallel": cpu.metered(
                "ADBC partitions in parallel", pid, lambda: _adbc_partitions(conns, f"SELECT * FROM {TABLE}")),
            "ADBC execute + fetch_arrow_table": lambda: _adbc_query(conn, f"SELECT * FROM {TABLE}").num_rows,
            "JSON command (Python client)": cpu.metered(
                "JSON command (Python client)", pid, lambda: _service_read(server.uri, TABLE, WORKERS)),
            "pyarrow.dataset (1 process)": lambda: ds.dataset(files, format="parquet").to_table().num_rows,
        }
        for competitor, times in round_robin(scans, rows, repeat).items():
            median = percentile(times, 50)
            out.append(row(f"{name} SELECT *", competitor, "median wall time", median, "s",
                           repeats=len(times), params=params))
            out.append(row(f"{name} SELECT *", competitor, "throughput", nbytes / median / 2**20, "MiB/s",
                           params=params))
        for competitor, (server_cpu, client_cpu) in cpu.medians().items():
            out.append(row(f"{name} SELECT *", competitor, "server CPU per GiB", server_cpu / (nbytes / 2**30), "s",
                           params=params))
            out.append(row(f"{name} SELECT *", competitor, "client CPU per GiB", client_cpu / (nbytes / 2**30), "s",
                           params=params))

        def scalar_of(connection: Any) -> Callable[[str], tuple]:
            return lambda sql: tuple(_adbc_query(connection, sql.format(TABLE)).to_pylist()[0].values())

        sql_scalar, streamed_scalar, arrow_scalar = (scalar_of(c) for c in (conn, streamed_conn, arrow_conn))

        for label, sql in (("count(*)", "SELECT count(*) FROM {}"), ("filtered aggregate", AGGREGATE)):
            expected = duckdb_scalar(sql)
            competitors = {
                "hudi-flight SQL (ADBC)": lambda s=sql: sql_scalar(s),
                "hudi-flight SQL (ADBC, Python-fed views)": lambda s=sql: streamed_scalar(s),
                "hudi-flight SQL (ADBC, Arrow scan of base files)": lambda s=sql: arrow_scalar(s),
                PEER: lambda s=sql: duckdb_scalar(s),
            }
            rounds = AGGREGATE_ROUNDS[size]
            walls = {competitor: percentile(times, 50)
                     for competitor, times in round_robin(competitors, expected, rounds).items()}
            for competitor, median in walls.items():
                out.append(row(f"{name} {label}", competitor, "median wall time", median, "s",
                               repeats=rounds, params=params))
            pids = {"hudi-flight SQL (ADBC)": server.process.proc.pid,
                    "hudi-flight SQL (ADBC, Python-fed views)": streamed.process.proc.pid,
                    "hudi-flight SQL (ADBC, Arrow scan of base files)": arrow_scan.process.proc.pid}
            split = {competitor: _cpu_per_call(fn, pids.get(competitor), CPU_CALLS)
                     for competitor, fn in competitors.items()}
            cpus = {competitor: server_cpu + client_cpu for competitor, (server_cpu, client_cpu) in split.items()}
            for competitor, cpu in cpus.items():
                out.append(row(f"{name} {label}", competitor, "CPU time per query (server + client)", 1000 * cpu,
                               "ms", repeats=CPU_CALLS, params=params))
            for competitor in pids:  # the client's share (the ADBC driver and pyarrow) is not the server's
                server_cpu, client_cpu = split[competitor]
                out.append(row(f"{name} {label}", competitor, "server CPU per query", 1000 * server_cpu, "ms",
                               repeats=CPU_CALLS, params=params))
                out.append(row(f"{name} {label}", competitor, "client CPU per query", 1000 * client_cpu, "ms",
                               repeats=CPU_CALLS, params=params))
            for competitor in pids:  # issue 19's target: within 3x of DuckDB over the same files
                out.append(row(f"{name} {label}", competitor, "wall time / DuckDB's",
                               walls[competitor] / walls[PEER], "x", params=params))
                out.append(row(f"{name} {label}", competitor, "CPU time / DuckDB's",
                               cpus[competitor] / cpus[PEER], "x", params=params))

        lookup_sql = f"SELECT * FROM {TABLE} WHERE _hoodie_record_key = ?"
        with connect(server.uri) as client:
            lookups = {
                "hudi-flight SQL (ADBC, bound parameter)": lambda: _adbc_query(conn, lookup_sql, (key,)).num_rows,
                "JSON command (Python client)": lambda: client.read(
                    TABLE, filters=[("_hoodie_record_key", "=", key)]).num_rows,
            }
            for competitor, fn in lookups.items():
                samples = _latency(fn, LOOKUPS)
                for p in (50, 95):
                    out.append(row(f"{name} point lookup", competitor, f"p{p} latency", 1000 * percentile(samples, p),
                                   "ms", repeats=len(samples)))
    finally:
        for c in [*conns, streamed_conn, arrow_conn]:
            c.close()
        server.close()
        streamed.close()
        arrow_scan.close()
    return out


if __name__ == "__main__":
    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r['name']:48} {r['competitor']:40} {r['metric']:18} {r['value']:10.3f} {r['unit']}")
