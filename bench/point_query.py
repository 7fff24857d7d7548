"""Server CPU per warm point query by record key: this tree against a peer commit, side by side.

The peer is the server as it was before the one-query-path change (commit ``PEER_COMMIT``),
checked out into a ``git worktree`` under the ignored ``.cache/`` folder and served from there.
Both are ``hudi-flight serve`` (one process) on loopback over the same generated table (metadata
table with ``files`` and ``record_index``), warmed up, then asked the same random live keys one
after the other by one client. Two tables: copy-on-write (one commit), and merge-on-read with a
second commit that updated a tenth and deleted a fiftieth of the rows into log files (every file
group has a log file; a MOR query merges its key's slice):

* ``JSON command``: ``get_flight_info`` of ``{"table", "filters": [["uuid", "=", key]]}`` and
  ``do_get`` of every endpoint (pyarrow.flight);
* ``Flight SQL``: ``SELECT * FROM bench.trips WHERE uuid = ?`` with the key bound as a parameter,
  through the ADBC Flight SQL driver (prepare, bind, execute, fetch).

The metric is the CPU time (user + system) the server's process tree spent per query, read from
``/proc`` before and after the measured queries: what the server costs, not the client's wall
time. Wall-clock p50 latency is reported alongside. This tree is served twice: as configured by
default and with the point-read cache off (``point_read_cache_bytes=0``: every lookup decodes its
row group), so the cache's share of the difference to the peer shows.

Each path is measured twice on every server, with the same measured keys:

* ``server CPU per query`` (and ``p50 latency``): after a short warm-up of ``WARMUP`` keys, so
  many measured keys are the first of their row group (decoded on that query) or of their
  record-index block: a freshly started server, a cold-ish cache;
* ``server CPU per query, steady state``: then, after a warm-up that touched every row group and
  every record-index block (the first record key of every row group, and one key in every stretch
  of ``STEADY_STEP`` consecutive keys), as many other random keys, none asked before: no measured
  query decodes anything first, as on a server that has been answering for a while. Beside it,
  ``storage reads per query, steady state``: the storage requests (``open``, ``read``, ``info``;
  the timeline listing every query makes is not counted) the server's metrics counted meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

import pyarrow.flight as flight

from bench.common import filtered_rows, generated_once, median, row, table_dir
from bench.latency import NAMESPACE, SIZES, TABLE, _table
from bench.process_cpu import tree_cpu_seconds

if TYPE_CHECKING:
    from hudi_generator.generator import GeneratorSpec
    from tests.support.processes import ServeProcess

PEER_COMMIT = "4019a99"
REPO = Path(__file__).resolve().parents[1]
QUERIES = {"quick": 200, "full": 1000}
WARMUP = 20
#: the steady-state warm-up asks one key in every stretch of this many consecutive keys, so every
#: record-index block (about 640 keys each in this table) is read before the measured queries
STEADY_STEP = 500
#: the storage requests a warm point query should not make (the timeline listing aside)
READ_KINDS = ("open", "read", "info")


def peer_tree(commit: str = PEER_COMMIT) -> Path:
    """A checkout of ``commit`` in a git worktree under ``.cache/`` (made once, reused)."""
    path = REPO / ".cache" / f"peer-{commit}"
    if not (path / "flight_server").is_dir():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--force", str(path), commit],
                       check=True, capture_output=True)
    return path


def serve_trees(warehouse: Path | str, trees: dict[str, tuple[Path, dict]], tmp: str) -> dict[str, ServeProcess]:
    """One ``hudi-flight serve`` per competitor: ``name -> (checkout served, settings beyond the
    defaults)``, each on ``warehouse`` with its own state under ``tmp`` and no background re-scan.
    They start side by side (each then waited for). A competitor that fails to start stops the
    others."""
    from tests.support.processes import ServeProcess

    servers: dict[str, ServeProcess] = {}
    try:
        for i, (name, (tree, settings)) in enumerate(trees.items()):
            config = Path(tmp) / f"bench{i}.json"
            config.write_text(json.dumps({"refresh_interval_seconds": 0, **settings}))
            servers[name] = ServeProcess("--port", "0", "--warehouse", str(warehouse), "--state-dir",
                                         f"{tmp}/state{i}", "--config", str(config),
                                         log=Path(tmp) / f"serve{i}.log", repo=tree, wait=False)
        for server in servers.values():
            server.ready()
    except BaseException:
        for server in servers.values():
            server.stop()
        raise
    return servers


def _mor_table(size: str) -> tuple[Path, GeneratorSpec]:
    """The merge-on-read twin of the latency table: a second commit's updates and deletes in log files."""
    from hudi_generator.generator import MERGE_ON_READ, GeneratorSpec

    rows, partitions, files, _ = SIZES[size]
    spec = GeneratorSpec(rows=rows, partitions=partitions, files_per_partition=files, commits=2, table_name=TABLE,
                         record_index=True, table_type=MERGE_ON_READ)
    warehouse = table_dir("point_query", size) / "mor"
    generated_once(warehouse / NAMESPACE / TABLE, spec, warehouse / f"{TABLE}-{rows}-{partitions}-{files}-mor.done")
    return warehouse, spec


TABLES = {"copy-on-write": _table, "merge-on-read": _mor_table}


def _live(warehouse: Path) -> set[str]:
    """The record keys the table holds now (the merge-on-read table deleted some)."""
    from catalog import HudiTable

    return set(HudiTable.open(str(warehouse / NAMESPACE / TABLE)).read(columns=["uuid"])["uuid"].to_pylist())


def _storage_reads(metrics_uri: str) -> float:
    """The server's storage requests of ``READ_KINDS`` so far (its Prometheus text)."""
    from urllib.request import urlopen

    with urlopen(metrics_uri, timeout=10) as response:  # noqa: S310 - a loopback URL of our own
        text = response.read().decode()
    kinds = {f'hudi_flight_storage_requests_total{{kind="{kind}"}}' for kind in READ_KINDS}
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.rsplit(" ", 1)[0] in kinds)


@contextlib.contextmanager
def _json_query(uri: str) -> Iterator[Callable[[str], int]]:
    client = flight.connect(uri)

    def query(key: str) -> int:
        return filtered_rows(client, f"{NAMESPACE}.{TABLE}", [["uuid", "=", key]])

    try:
        yield query
    finally:
        client.close()


@contextlib.contextmanager
def _sql_query(uri: str) -> Iterator[Callable[[str], int]]:
    """The ADBC connection and cursor are closed while the server still runs (closing them after
    it stopped prints the driver's failure to close the prepared statement)."""
    import adbc_driver_flightsql.dbapi as adbc

    with adbc.connect(uri, autocommit=True) as conn, conn.cursor() as cursor:

        def query(key: str) -> int:
            cursor.execute(f"SELECT * FROM {NAMESPACE}.{TABLE} WHERE uuid = ?", parameters=(key,))
            return cursor.fetch_arrow_table().num_rows

        yield query


PATHS = {"JSON command": _json_query, "Flight SQL (ADBC, bound key)": _sql_query}


def _steady_warmup(warehouse: Path, rows: int) -> list[str]:
    """Keys that touch every row group (the first record key of each) and every record-index
    block (one key in every ``STEADY_STEP`` consecutive ones) of the generated table."""
    return steady_warmup_keys(warehouse / NAMESPACE / TABLE, rows)


def steady_warmup_keys(table: Path, rows: int) -> list[str]:
    """:func:`_steady_warmup` of the generated table in the local folder ``table``."""
    import pyarrow.parquet as pq

    firsts = []
    for path in sorted(p for p in table.rglob("*.parquet") if ".hoodie" not in p.parts):
        parquet = pq.ParquetFile(path)
        for index in range(parquet.num_row_groups):
            firsts.append(parquet.read_row_group(index, columns=["_hoodie_record_key"]).column(0)[0].as_py())
    return firsts + [f"trip-{i:010d}" for i in range(0, rows, STEADY_STEP)]


def _measure(server_pid: int, query: Callable[[str], int], warmup: list[str], keys: list[str]) -> tuple[float, float]:
    """(server CPU ms per query, p50 wall ms) over ``keys`` after asking the ``warmup`` keys."""
    for key in warmup:
        if query(key) != 1:
            raise AssertionError(f"key {key} did not find exactly one row")
    before = tree_cpu_seconds(server_pid)
    walls = []
    for key in keys:
        t = time.perf_counter()
        if query(key) != 1:
            raise AssertionError(f"key {key} did not find exactly one row")
        walls.append(time.perf_counter() - t)
    cpu = tree_cpu_seconds(server_pid) - before
    return 1000 * cpu / len(walls), 1000 * median(walls)


def run(size: str, peer: str = PEER_COMMIT) -> list[dict]:
    """Every table of ``TABLES``, this tree (as configured by default and without the point-read
    cache) against the ``peer`` commit."""
    # name -> (checkout served, config beyond the defaults)
    trees = {
        "hudi-flight": (REPO, {}),
        "hudi-flight, point_read_cache_bytes=0": (REPO, {"point_read_cache_bytes": 0}),
        f"hudi-flight @ {peer}": (peer_tree(peer), {}),
    }
    return [r for kind in TABLES for r in run_table(size, kind, trees)]


def run_table(size: str, kind: str, trees: dict[str, tuple[Path, dict]]) -> list[dict]:
    """The rows of one table of ``TABLES`` served by each of ``trees`` (name -> checkout, settings)."""
    from tests.support.servers import free_port

    warehouse, spec = TABLES[kind](size)
    live = _live(warehouse) if kind != "copy-on-write" else None
    rnd = random.Random(7)

    def random_keys(n: int) -> list[str]:
        keys: list[str] = []
        while len(keys) < n:
            key = f"trip-{rnd.randrange(spec.rows):010d}"
            if live is None or key in live:
                keys.append(key)
        return keys

    keys = random_keys(WARMUP + QUERIES[size])
    steady_keys = random_keys(QUERIES[size])  # not asked before
    ports = {name: free_port() for name in trees}
    trees = {name: (tree, {**settings, "metrics_port": ports[name]}) for name, (tree, settings) in trees.items()}
    suffix = "" if kind == "copy-on-write" else f", {kind}"
    out = []
    with tempfile.TemporaryDirectory(prefix="hudi-flight-point-") as tmp:
        servers = serve_trees(warehouse, trees, tmp)
        try:
            params = {"rows": spec.rows, "partitions": spec.partitions, "queries": QUERIES[size],
                      "cpus": os.cpu_count(), "load_average": round(os.getloadavg()[0], 2)}
            steady = [k for k in _steady_warmup(warehouse, spec.rows) if live is None or k in live]
            for path, client in PATHS.items():
                for name, server in servers.items():  # side by side, same table, same keys
                    with client(server.uri) as query:
                        cpu_ms, p50_ms = _measure(server.pid, query, keys[:WARMUP], keys[WARMUP:])
                        title = f"point query/{path} ({spec.rows:,} rows{suffix})"
                        out.append(row(title, name, "server CPU per query", cpu_ms, "ms", repeats=QUERIES[size],
                                       params=params))
                        out.append(row(title, name, "p50 latency", p50_ms, "ms", repeats=QUERIES[size],
                                       params=params))
                        metrics = f"http://127.0.0.1:{ports[name]}/metrics"
                        for key in steady:
                            query(key)
                        before = _storage_reads(metrics)
                        steady_ms, _ = _measure(server.pid, query, [], steady_keys)
                        reads = (_storage_reads(metrics) - before) / len(steady_keys)
                    steady_params = {**params, "warmup_queries": len(steady)}
                    out.append(row(title, name, "server CPU per query, steady state", steady_ms, "ms",
                                   repeats=QUERIES[size], params=steady_params))
                    out.append(row(title, name, "storage reads per query, steady state", reads, "requests",
                                   repeats=QUERIES[size], params=steady_params))
        finally:
            for server in servers.values():
                server.stop()
    return out


if __name__ == "__main__":
    # python -m bench.point_query [quick|full] [peer commit]
    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick", *sys.argv[2:3]):
        print(f"{r['name']:56} {r['competitor']:26} {r['metric']:22} {r['value']:8.2f} {r['unit']}")
