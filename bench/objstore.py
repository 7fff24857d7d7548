"""Object storage with a round trip: moto S3 behind a latency-injecting proxy, hudi-flight side by
side with the ``hudi`` package (hudi-rs) and ``pyarrow.dataset`` on the same files, one run.

Two tables are generated locally once per size (cached) and uploaded into a moto S3 server on
127.0.0.1 at the start of each run: ``bench.cow`` (copy-on-write) and ``bench.mor``
(merge-on-read), each with a metadata table and a record index, three commits of which the last
two update 5% of the rows each (MOR: in Avro log blocks, about 10% of the rows). Every reader
reaches moto through :class:`bench.latency_proxy.LatencyProxy`, which holds each HTTP request
``DELAYS_MS`` (0, then 25 ms) and counts requests and response bytes: the storage requests and
bytes below are the proxy's counts, not the project's own counters. The upload goes through it
too, so at the end its count of the whole run is set against moto's own request log (two rows).

For each delay, fresh ``hudi-flight serve`` processes are started over the bucket (the warehouse
``s3://BUCKET/objstore``, the server's credentials for it in its config), one per setting:

* ``hudi-flight (no disk cache)``: the defaults but the disk cache of remote bytes
  (``disk_cache_bytes`` 0; on by default), so every scan round fetches its bytes from the store
  as ``pyarrow.dataset`` and hudi-rs do;
* ``hudi-flight (disk cache, max_staleness_ms)``: ``CACHED`` settings (a local disk cache of
  remote bytes, and a table state reused without a timeline listing for ``max_staleness_ms``);
* with ``--peer COMMIT``: the same two for a checkout of another commit (:func:`serve_trees`).

Measured, one competitor at a time (so the proxy's counts are that competitor's):

* ``cold planning``: a server's first full-scan ``get_flight_info`` of a table (its first call
  after start-up), and hudi-rs' table build + ``get_file_slices()``;
* ``full scan`` and ``2-column projection`` (``uuid``, ``fare``): the JSON command's endpoints
  read by 4 threads, hudi-rs' ``read()`` and, for COW, ``pyarrow.dataset`` over the latest base
  files; ``Size.repeats`` interleaved rounds, the median; the projection's bytes next to the bytes of
  its column chunks and the footers of those files (MOR: plus the log files);
* ``warm point query``: a record-key lookup (JSON command: ``get_flight_info`` + ``do_get``;
  Flight SQL: ``SELECT * ... WHERE uuid = ?`` bound through ADBC), after a warm-up that touched
  every row group and record-index block (:func:`bench.point_query.steady_warmup_keys`); then
  ``Size.queries`` keys never asked before: p50 latency, storage requests and bytes per query;
* ``warm filter query (partition + column)``: ``region = <partition> AND fare BETWEEN f AND
  f + 5`` by the JSON command, one client, after every partition once: p50, storage requests;
* ``8 clients``: ``Size.clients`` threads with a connection each asking ``Size.per_client`` keys at
  once: throughput and storage requests per query;
* ``storage floor``: beside each warm point query of the default servers, right after it, the one
  request such a query makes (the listing of the table's active timeline folder that checks
  whether the table moved), ``Size.queries`` times by this process through the server's own code
  and client (:meth:`catalog.storage.Storage.ls_names`, s3fs) and the same proxy: its p50, and
  the point query's p50 minus it (what the server adds to the store's round trip).

Beside the proxy's counts, each server's own storage-request counter (its ``/metrics``) per call.

The server's CPU (user + system of its process tree, ``/proc``) per query or scan is reported
beside the wall times. At 25 ms the issue's targets are checked and printed (holds / misses); the
rows of those measurements carry ``target`` and ``holds`` in their ``params``.

Run alone: ``python -m bench.objstore [quick|full] [--peer COMMIT] [--points-only]`` (``--points-only``:
the warm point queries and their floor alone, without the cold planning and scan rows).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pyarrow.flight as flight

from bench.common import base_file_paths, generated_once, percentile, row, table_dir
from bench.latency_proxy import LatencyProxy, Traffic
from bench.planning import REGION, MotoServer, hudi_options, storage_options
from bench.point_query import REPO, peer_tree, serve_trees, steady_warmup_keys
from bench.process_cpu import tree_cpu_seconds
from tests.support.servers import free_port

BUCKET = "objstore-bench"
PREFIX = "objstore"
NAMESPACE = "bench"
TABLES = {"cow": "COPY_ON_WRITE", "mor": "MERGE_ON_READ"}
DELAYS_MS = (0, 25)
PROJECTION = ["uuid", "fare"]
SCAN_THREADS = 4
CACHED = {"disk_cache_bytes": 512 << 20, "max_staleness_ms": 30_000}
UNCACHED = {"disk_cache_bytes": 0}
DEFAULT_NAME, CACHED_NAME = "hudi-flight (no disk cache)", "hudi-flight (disk cache, max_staleness_ms)"
FLOOR_NAME = "storage floor (the timeline listing alone)"


@dataclass(frozen=True)
class Size:
    rows: int
    partitions: int
    repeats: int  # scan rounds
    queries: int  # measured point queries per path
    clients: int
    per_client: int


SIZES = {"quick": Size(60_000, 10, 2, 30, 8, 6), "full": Size(200_000, 20, 3, 100, 8, 25)}


def _spec(kind: str, size: Size) -> Any:
    from hudi_generator.generator import GeneratorSpec

    return GeneratorSpec(rows=size.rows, partitions=size.partitions, commits=3, update_fraction=0.05,
                         delete_fraction=0.0, table_type=TABLES[kind], record_index=True, table_name=kind,
                         workers=2)


def local_tables(size: Size, data_dir: Path) -> dict[str, Path]:
    """The generated tables of ``size`` under ``data_dir`` (made once, reused)."""
    out = {}
    for kind in TABLES:
        path = data_dir / f"{kind}-{size.rows}-{size.partitions}" / kind
        generated_once(path, _spec(kind, size), path.parent / "done")
        out[kind] = path
    return out


def _upload(endpoint: str, tables: dict[str, Path]) -> str:
    """The local tables copied into a new bucket through ``endpoint``; the warehouse URI."""
    import boto3

    s3 = boto3.client("s3", endpoint_url=endpoint, region_name=REGION, aws_access_key_id="testing",
                      aws_secret_access_key="testing")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    for kind, path in tables.items():
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            s3.upload_file(str(file), BUCKET, f"{PREFIX}/{NAMESPACE}/{kind}/{file.relative_to(path)}")
    return f"s3://{BUCKET}/{PREFIX}"


# -- what is measured -----------------------------------------------------------------------------
@dataclass
class Cost:
    """Per call: wall seconds (each), storage requests and bytes at the proxy, server CPU seconds."""

    walls: list[float]
    requests: float
    bytes: float
    cpu: float | None
    kinds: dict[str, float]
    #: (requests, bytes) per call by the server's own counters (its Prometheus metrics), if it has them
    own: tuple[float, float] | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.walls)


class Meter:
    """Counts one competitor's calls at the proxy (and its server's CPU, when it has a server)."""

    def __init__(self, proxy: LatencyProxy):
        self.proxy = proxy
        self.metrics: dict[int, str] = {}  # server pid -> its /metrics URL

    def own_counters(self, pid: int | None) -> tuple[float, float] | None:
        """(storage requests, bytes read) so far by the server's own counters (None: unknown)."""
        import urllib.request

        url = self.metrics.get(pid or 0)
        if url is None:
            return None
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                text = answer.read().decode()
        except OSError:
            return None
        requests = read = 0.0
        for line in text.splitlines():
            if line.startswith("hudi_flight_storage_requests_total{"):
                requests += float(line.rsplit(" ", 1)[1])
            elif line.startswith("hudi_flight_storage_read_bytes_total"):
                read += float(line.rsplit(" ", 1)[1])
        return requests, read

    def run(self, calls: list[Callable[[], Any]], pid: int | None = None,
            check: Callable[[Any], bool] | None = None) -> Cost:
        """Make ``calls`` one after the other, each timed; their cost per call."""
        own0 = self.own_counters(pid)
        before, cpu0 = self.proxy.traffic(), tree_cpu_seconds(pid) if pid else 0.0
        walls: list[float] = []

        def one(call: Callable[[], Any]) -> None:
            t0 = time.perf_counter()
            got = call()
            walls.append(time.perf_counter() - t0)
            if check is not None and not check(got):
                raise AssertionError(f"unexpected answer {got!r}")

        for call in calls:
            one(call)
        spent: Traffic = self.proxy.traffic() - before
        n = len(calls)
        cpu = (tree_cpu_seconds(pid) - cpu0) / n if pid else None
        own1 = self.own_counters(pid)
        own = None if own0 is None or own1 is None else ((own1[0] - own0[0]) / n, (own1[1] - own0[1]) / n)
        return Cost(walls, spent.total_requests / n, spent.total_bytes / n, cpu,
                    {k: v / n for k, v in spent.requests.items() if v}, own)


def _flight_scan(client: flight.FlightClient, table: str, columns: list[str] | None) -> int:
    command: dict[str, Any] = {"table": f"{NAMESPACE}.{table}"}
    if columns:
        command["columns"] = columns
    info = client.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(command).encode()))
    with ThreadPoolExecutor(SCAN_THREADS) as pool:
        return sum(pool.map(lambda ep: client.do_get(ep.ticket).read_all().num_rows, info.endpoints))


class _JsonPoint:
    """Record-key lookups by the JSON command (``get_flight_info`` + ``do_get`` of each endpoint)."""

    def __init__(self, uri: str, table: str):
        self.client = flight.connect(uri)
        self.table = f"{NAMESPACE}.{table}"

    def __call__(self, key: str) -> int:
        command = json.dumps({"table": self.table, "filters": [["uuid", "=", key]]}).encode()
        info = self.client.get_flight_info(flight.FlightDescriptor.for_command(command))
        return sum(self.client.do_get(ep.ticket).read_all().num_rows for ep in info.endpoints)

    def close(self) -> None:
        self.client.close()


class _SqlPoint:
    """Record-key lookups by Flight SQL: one prepared statement, the key bound (ADBC)."""

    def __init__(self, uri: str, table: str):
        import adbc_driver_flightsql.dbapi as adbc

        self.conn = adbc.connect(uri, autocommit=True)
        self.cursor = self.conn.cursor()
        self.sql = f"SELECT * FROM {NAMESPACE}.{table} WHERE uuid = ?"

    def __call__(self, key: str) -> int:
        self.cursor.execute(self.sql, parameters=(key,))
        return int(self.cursor.fetch_arrow_table().num_rows)

    def close(self) -> None:
        self.cursor.close()
        self.conn.close()


POINT_PATHS: dict[str, Callable[[str, str], _JsonPoint | _SqlPoint]] = {"JSON command": _JsonPoint,
                                                                      "Flight SQL": _SqlPoint}


def _hudi_rs(uri: str, endpoint: str) -> Any:
    from hudi import HudiTableBuilder

    return HudiTableBuilder.from_base_uri(uri).with_storage_options(hudi_options(endpoint)).build()


def _hudi_rs_read(uri: str, endpoint: str, columns: list[str] | None) -> Callable[[], int]:
    from hudi import HudiReadOptions

    table = _hudi_rs(uri, endpoint)
    options = HudiReadOptions().with_projection(columns) if columns else None

    def read() -> int:
        return sum(b.num_rows for b in table.read(options))

    return read


def _pyarrow_read(files: list[str], endpoint: str, columns: list[str] | None) -> Callable[[], int]:
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    fs = pafs.S3FileSystem(access_key="testing", secret_key="testing", region=REGION, endpoint_override=endpoint)

    def read() -> int:
        return ds.dataset(files, format="parquet", filesystem=fs).to_table(columns=columns).num_rows

    return read


def chunk_and_footer_bytes(table: Path, columns: list[str]) -> int:
    """Bytes of the ``columns``' chunks and of the footers of the latest base files of the local
    table (a merge-on-read table's log files added whole): what a projection has to fetch."""
    import pyarrow.parquet as pq

    from catalog import HudiTable, ReadOptions
    from catalog.plan.planner import file_slices

    total = 0
    for path in base_file_paths(table):
        meta = pq.ParquetFile(path).metadata
        total += meta.serialized_size + 8
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for c in range(group.num_columns):
                chunk = group.column(c)
                if chunk.path_in_schema.split(".")[0] in columns:
                    total += chunk.total_compressed_size
    for fs in file_slices(HudiTable.open(str(table)).state, ReadOptions()):
        total += sum((table / rel).stat().st_size for rel in fs.log_file_paths)
    return total


# -- the run ---------------------------------------------------------------------------------------
def benchmark(size: Size, log: Callable[[str], None], delays: tuple[float, ...] = DELAYS_MS,
              peer: str | None = None, data_dir: Path | None = None, cached: bool = True,
              points_only: bool = False) -> list[dict]:
    """Every measurement at each of ``delays`` (``cached=False``: without the cached-settings servers;
    ``points_only``: the warm point queries and their storage floor alone)."""
    tables = local_tables(size, data_dir or table_dir("objstore", "full" if size.rows > 100_000 else "quick"))
    rows = size.rows
    rnd = random.Random(28)
    warm = {kind: steady_warmup_keys(path, rows) for kind, path in tables.items()}
    measured, concurrent = {}, {}
    for kind in tables:  # distinct keys, none of the warm-up's
        asked = set(warm[kind])
        fresh = [key for key in (f"trip-{i:010d}" for i in range(rows)) if key not in asked]
        picked = rnd.sample(fresh, size.queries + size.clients * size.per_client)
        measured[kind], concurrent[kind] = picked[:size.queries], picked[size.queries:]
    settings: dict[str, tuple[Path, dict]] = {DEFAULT_NAME: (REPO, UNCACHED)}
    if peer:
        settings[f"hudi-flight @ {peer} (no disk cache)"] = (peer_tree(peer), UNCACHED)
    if cached:
        settings[CACHED_NAME] = (REPO, CACHED)
        if peer:
            settings[f"hudi-flight @ {peer} (disk cache, max_staleness_ms)"] = (peer_tree(peer), CACHED)
    base_files = {kind: [f"{BUCKET}/{PREFIX}/{NAMESPACE}/{kind}/{Path(p).relative_to(path)}"
                         for p in base_file_paths(path)] for kind, path in tables.items()}
    reference = {kind: chunk_and_footer_bytes(path, PROJECTION) for kind, path in tables.items()}
    out: list[dict] = []
    moto = MotoServer()
    try:
        with LatencyProxy(moto.endpoint) as proxy:
            warehouse = _upload(proxy.endpoint, tables)
            for delay in delays:
                proxy.delay_ms = delay
                out += _one_delay(proxy, warehouse, settings, size, delay, warm, measured, concurrent, base_files,
                                  reference, log, points_only)
            out += _cross_check(proxy, moto, size, log)
    finally:
        moto.stop()
    return out


def _cross_check(proxy: LatencyProxy, moto: MotoServer, size: Size, log: Callable[[str], None]) -> list[dict]:
    """Every request of the run went through the proxy (the upload too): its count against the
    requests moto's own log shows (logged just after each answer: waited for, briefly)."""
    counted = proxy.traffic().total_requests
    deadline = time.monotonic() + 10
    served = moto.request_count()
    while served < counted and time.monotonic() < deadline:
        time.sleep(0.2)
        served = moto.request_count()
    log(f"requests of the whole run: {counted:,} counted by the proxy, {served:,} in moto's request log")
    name = f"objstore/{size.rows:,} rows: requests of the whole run"
    return [row(name, "latency proxy (its count)", "storage requests", counted, "requests"),
            row(name, "moto S3 (its request log)", "storage requests", served, "requests")]


def _one_delay(proxy: LatencyProxy, warehouse: str, settings: dict[str, tuple[Path, dict]], size: Size,
               delay: float, warm: dict[str, list[str]], measured: dict[str, list[str]],
               concurrent: dict[str, list[str]], base_files: dict[str, list[str]], reference: dict[str, int],
               log: Callable[[str], None], points_only: bool = False) -> list[dict]:
    meter = Meter(proxy)
    out: list[dict] = []
    config = {"storage_options": storage_options(proxy.endpoint)}
    ports = {name: free_port() for name in settings}
    trees = {name: (tree, {**config, "metrics_port": ports[name], **extra}) for name, (tree, extra) in settings.items()}
    params = {"rows": size.rows, "partitions": size.partitions, "delay_ms": delay, "commits": 3,
              "cpus": os.cpu_count(), "load_average": round(os.getloadavg()[0], 2)}

    def title(kind: str, what: str) -> str:
        return f"objstore/{kind.upper()} {size.rows:,} rows, {delay:g} ms/request: {what}"

    def emit(kind: str, what: str, who: str, cost: Cost, unit_of: str, floor: Cost | None = None,
             **extra: Any) -> None:
        name = title(kind, what)
        p = {**params, "calls": len(cost.walls), "requests_by_kind": cost.kinds, **extra}
        out.append(row(name, who, f"storage requests per {unit_of}", cost.requests, "requests", params=p))
        out.append(row(name, who, f"bytes fetched per {unit_of}", cost.bytes, "bytes", params=p))
        if unit_of == "query":
            out.append(row(name, who, "p50 latency", 1000 * percentile(cost.walls, 50), "ms", params=p))
        else:
            out.append(row(name, who, "median wall time", cost.median, "s", params=p))
        if cost.cpu is not None:
            out.append(row(name, who, f"server CPU per {unit_of}", 1000 * cost.cpu, "ms", params=p))
        if floor is not None:
            out.append(row(name, who, "p50 latency minus the storage floor's",
                           1000 * (percentile(cost.walls, 50) - percentile(floor.walls, 50)), "ms", params=p))
        if cost.own is not None:
            out.append(row(name, who, f"storage requests per {unit_of}, the server's own counter", cost.own[0],
                           "requests", params=p))
        log(f"{delay:g} ms {kind} {what}: {who}: {1000 * cost.median:.1f} ms median, {cost.requests:.2f} requests, "
            f"{cost.bytes:,.0f} bytes" + (f", server CPU {1000 * cost.cpu:.2f} ms" if cost.cpu is not None else ""))

    with tempfile.TemporaryDirectory(prefix="hudi-flight-objstore-") as tmp:
        t0 = time.perf_counter()
        servers = serve_trees(warehouse, trees, tmp)
        log(f"{delay:g} ms: {len(servers)} servers started in {time.perf_counter() - t0:.1f}s")
        meter.metrics = {server.pid: f"http://127.0.0.1:{ports[name]}/metrics" for name, server in servers.items()}
        try:
            # cold planning: each server's first plan of each table, then hudi-rs'
            for kind in () if points_only else TABLES:
                for name, server in servers.items():
                    emit(kind, "cold planning", name, _cold_plan(meter, server, kind), "plan")
                uri = f"{warehouse}/{NAMESPACE}/{kind}"
                emit(kind, "cold planning", "hudi-rs",
                     meter.run([lambda u=uri: len(_hudi_rs(u, proxy.endpoint).get_file_slices())]), "plan")
            # full scan and projection, interleaved rounds
            scanners = {name: s for name, s in servers.items() if "max_staleness_ms" not in name}
            scans = (("full scan", None), (f"{len(PROJECTION)}-column projection", PROJECTION))
            for what, columns in () if points_only else scans:
                for kind in TABLES:
                    uri = f"{warehouse}/{NAMESPACE}/{kind}"
                    clients = {name: flight.connect(server.uri) for name, server in scanners.items()}
                    readers: dict[str, tuple[Callable[[], int], int | None]] = {
                        name: (lambda c=clients[name], k=kind, cs=columns: _flight_scan(c, k, cs), server.pid)
                        for name, server in scanners.items()}
                    readers["hudi-rs"] = (_hudi_rs_read(uri, proxy.endpoint, columns), None)
                    if kind == "cow":
                        readers["pyarrow.dataset"] = (_pyarrow_read(base_files[kind], proxy.endpoint, columns), None)
                    costs: dict[str, list[Cost]] = {name: [] for name in readers}
                    try:
                        for _ in range(size.repeats):
                            for name, (read, pid) in readers.items():
                                costs[name].append(meter.run([read], pid, check=lambda n: n == size.rows))
                    finally:
                        for client in clients.values():
                            client.close()
                    for name, runs in costs.items():
                        cost = _merged(runs)
                        extra = {}
                        if columns:
                            extra = {"column_chunk_and_footer_bytes": reference[kind],
                                     "fetched_over_chunks": round(cost.bytes / reference[kind], 2)}
                        emit(kind, what, name, cost, "scan", **extra)
            # warm point queries, one client, then several clients at once
            for name, server in servers.items():
                for kind in TABLES:
                    floor = _timeline_listing(warehouse, kind, config) if "no disk cache" in name else None
                    _point_queries(meter, server, name, kind, size, warm[kind], measured[kind], concurrent[kind],
                                   emit, title, params, out, log, floor,
                                   FLOOR_NAME if name == DEFAULT_NAME else f"{FLOOR_NAME}, beside {name}")
            # warm filter queries (partition + column), one client
            for name, server in servers.items():
                for kind in TABLES:
                    emit(kind, "warm filter query (partition + column), JSON command", name,
                         _filter_queries(meter, server, kind, size), "query", warmup_queries=size.partitions)
        finally:
            for server in servers.values():
                server.stop()
    return out


def _filter_queries(meter: Meter, server: Any, kind: str, size: Size) -> Cost:
    """``region = <partition> AND fare BETWEEN f AND f + 5`` by the JSON command (the shape of
    :mod:`bench.warm_filter`), one client: every partition once, then ``size.queries`` random ones."""
    from bench.warm_filter import _partition_query

    client = flight.connect(server.uri)
    rnd = random.Random(41)

    def query(filters: list) -> int:
        command = json.dumps({"table": f"{NAMESPACE}.{kind}", "filters": filters}).encode()
        info = client.get_flight_info(flight.FlightDescriptor.for_command(command))
        return sum(client.do_get(ep.ticket).read_all().num_rows for ep in info.endpoints)

    try:
        for p in range(size.partitions):
            query(_partition_query(f"region-{p:05d}", 500.0)[0])
        measured = [_partition_query(f"region-{rnd.randrange(size.partitions):05d}", round(rnd.uniform(0, 990), 2))[0]
                    for _ in range(size.queries)]
        return meter.run([lambda f=f: query(f) for f in measured], server.pid)
    finally:
        client.close()


def _cold_plan(meter: Meter, server: Any, kind: str) -> Cost:
    """A server's first plan of a full scan of ``kind``."""
    client = flight.connect(server.uri)
    command = json.dumps({"table": f"{NAMESPACE}.{kind}"}).encode()
    try:
        return meter.run([lambda: client.get_flight_info(flight.FlightDescriptor.for_command(command))], server.pid)
    finally:
        client.close()


def _timeline_listing(warehouse: str, kind: str, config: dict) -> Callable[[], int]:
    """The request a warm default server makes per query, made by this process: one listing of
    ``kind``'s active timeline folder, through the catalog's own storage code and fsspec client
    (with the server's storage options), on one client kept warm as the server keeps its own."""
    from catalog.storage import open_table_storage
    from catalog.timeline.active import DEFAULT_TIMELINE_FOLDER

    storage = open_table_storage(f"{warehouse}/{NAMESPACE}/{kind}", config["storage_options"])
    storage.ls_names(DEFAULT_TIMELINE_FOLDER)  # the client's connection and credentials, as a warm server has

    return lambda: len(storage.ls_names(DEFAULT_TIMELINE_FOLDER))


def _point_queries(meter: Meter, server: Any, name: str, kind: str, size: Size, warm: list[str],
                   measured: list[str], concurrent: list[str], emit: Callable[..., None],
                   title: Callable[[str, str], str], params: dict, out: list[dict],
                   log: Callable[[str], None], floor: Callable[[], int] | None = None,
                   floor_name: str = FLOOR_NAME) -> None:
    """Warm ``server`` up on ``kind`` (4 clients), then its point queries by each path, one client,
    and by ``size.clients`` clients at once (each its own connection). With ``floor`` (the one
    request a warm query makes), that request alone ``len(measured)`` times right after each
    path's queries, as its own row, and the path's p50 minus the floor's."""
    warmers = [_JsonPoint(server.uri, kind) for _ in range(4)]
    clients = [_JsonPoint(server.uri, kind) for _ in range(size.clients)]
    try:
        _spread(meter, warmers, warm, None)
        for path, make in POINT_PATHS.items():
            query = make(server.uri, kind)
            try:
                query(warm[0])  # the path's own first call (prepared statement, connection)
                cost = meter.run([lambda k=k, q=query: q(k) for k in measured], server.pid, check=lambda n: n == 1)
            finally:
                query.close()
            bare = None if floor is None else meter.run([floor for _ in measured], check=lambda n: n > 0)
            emit(kind, f"warm point query, {path}", name, cost, "query", bare, warmup_queries=len(warm))
            if bare is not None:
                emit(kind, f"warm point query, {path}", floor_name, bare, "query")
        t0 = time.perf_counter()
        cost = _spread(meter, clients, concurrent, server.pid)
        wall = time.perf_counter() - t0
    finally:
        for client in warmers + clients:
            client.close()
    what = title(kind, f"{size.clients} clients, warm point queries, JSON command")
    p = {**params, "clients": size.clients, "queries": len(concurrent), "requests_by_kind": cost.kinds}
    out.append(row(what, name, "throughput", len(concurrent) / wall, "queries/s", params=p))
    out.append(row(what, name, "storage requests per query", cost.requests, "requests", params=p))
    out.append(row(what, name, "p50 latency", 1000 * percentile(cost.walls, 50), "ms", params=p))
    if cost.cpu is not None:
        out.append(row(what, name, "server CPU per query", 1000 * cost.cpu, "ms", params=p))
    if cost.own is not None:
        out.append(row(what, name, "storage requests per query, the server's own counter", cost.own[0], "requests",
                       params=p))
    log(f"{params['delay_ms']:g} ms {kind} {size.clients} clients: {name}: {len(concurrent) / wall:.1f} queries/s, "
        f"{cost.requests:.2f} requests per query")


def _spread(meter: Meter, clients: list[_JsonPoint], keys: list[str], pid: int | None) -> Cost:
    """``keys`` asked by ``clients`` at once, each client (a thread) its own share of the keys."""
    shares = [keys[i::len(clients)] for i in range(len(clients))]
    walls: list[float] = []

    def ask(client: _JsonPoint, share: list[str]) -> list[float]:
        times = []
        for key in share:
            t0 = time.perf_counter()
            if client(key) != 1:
                raise AssertionError(f"key {key} did not find exactly one row")
            times.append(time.perf_counter() - t0)
        return times

    def all_of_them() -> None:
        with ThreadPoolExecutor(len(clients)) as pool:
            for times in pool.map(ask, clients, shares):
                walls.extend(times)

    cost = meter.run([all_of_them], pid)
    n = len(keys)
    return Cost(walls, cost.requests / n, cost.bytes / n, None if cost.cpu is None else cost.cpu / n,
                {k: v / n for k, v in cost.kinds.items()}, None if cost.own is None else (cost.own[0] / n,
                                                                                          cost.own[1] / n))


def _merged(runs: list[Cost]) -> Cost:
    n = len(runs)
    kinds: dict[str, float] = {}
    for r in runs:
        for k, v in r.kinds.items():
            kinds[k] = kinds.get(k, 0) + v / n
    cpu = None if runs[0].cpu is None else statistics.median(r.cpu or 0.0 for r in runs)
    owns = [r.own for r in runs if r.own is not None]
    own = (statistics.median(o[0] for o in owns), statistics.median(o[1] for o in owns)) if owns else None
    return Cost([w for r in runs for w in r.walls], statistics.median(r.requests for r in runs),
                statistics.median(r.bytes for r in runs), cpu, kinds, own)


# -- the targets ---------------------------------------------------------------------------
def _find(rows: list[dict], kind: str, what: str, who: str, metric: str, delay: float) -> dict | None:
    name = f"objstore/{kind.upper()} "
    tail = f" {delay:g} ms/request: {what}"
    return next((r for r in rows if r["name"].startswith(name) and r["name"].endswith(tail)
                 and r["competitor"] == who and r["metric"] == metric), None)


def targets(rows: list[dict], delay: float = 25) -> list[tuple[str, str, bool]]:
    """(target, measured, holds) of the issue's targets, from the rows measured at ``delay``; the
    row of hudi-flight's value gets ``target`` and ``holds`` in its ``params``."""
    found: list[tuple[str, str, bool]] = []

    def check(target: str, ours: dict | None, measured: float | None, holds: Callable[[float], bool],
              shown: str) -> None:
        if ours is None or measured is None:
            return
        ok = holds(measured)
        found.append((target, shown.format(measured), ok))
        ours["params"] = {**ours.get("params", {}), "target": target, "holds": ok}

    def value(r: dict | None) -> float | None:
        return None if r is None else float(r["value"])

    for kind in TABLES:
        for path in POINT_PATHS:
            what = f"warm point query, {path}"
            for who, most, p50 in ((DEFAULT_NAME, 1.1, 40.0), (CACHED_NAME, 0.1, 10.0)):
                r = _find(rows, kind, what, who, "storage requests per query", delay)
                check(f"{kind.upper()} {what}, {who}: <= {most} requests per query", r, value(r),
                      lambda v, m=most: v <= m, "{:.2f}")
                r = _find(rows, kind, what, who, "p50 latency", delay)
                check(f"{kind.upper()} {what}, {who}: p50 <= {p50:g} ms", r, value(r), lambda v, m=p50: v <= m,
                      "{:.1f} ms")
        r = _find(rows, kind, "cold planning", DEFAULT_NAME, "storage requests per plan", delay)
        check(f"{kind.upper()} cold planning, {DEFAULT_NAME}: <= 12 requests", r, value(r), lambda v: v <= 12,
              "{:.0f}")
    for who in (DEFAULT_NAME, CACHED_NAME):
        what = next((r["name"].split(": ", 1)[1] for r in rows if "clients, warm point" in r["name"]), "")
        cow = _find(rows, "cow", what, who, "throughput", delay)
        mor = _find(rows, "mor", what, who, "throughput", delay)
        if cow and mor:
            check(f"{what}, {who}: MOR throughput >= 0.5x COW", mor, mor["value"] / cow["value"],
                  lambda v: v >= 0.5, "{:.2f}x")
    r = _find(rows, "cow", f"{len(PROJECTION)}-column projection", DEFAULT_NAME, "bytes fetched per scan", delay)
    if r is not None:
        check("COW 2-column projection: <= 2x the bytes of its column chunks and footers", r,
              r["value"] / r["params"]["column_chunk_and_footer_bytes"], lambda v: v <= 2, "{:.2f}x")
    for kind, peer, most in (("cow", "pyarrow.dataset", 1.0), ("mor", "hudi-rs", 1.5)):
        ours = _find(rows, kind, "full scan", DEFAULT_NAME, "median wall time", delay)
        theirs = _find(rows, kind, "full scan", peer, "median wall time", delay)
        if ours and theirs:
            check(f"{kind.upper()} full scan: >= {most:g}x as fast as {peer}", ours,
                  theirs["value"] / ours["value"], lambda v, m=most: v >= m, "{:.2f}x as fast")
    return found


def _with_targets(rows: list[dict], log: Callable[[str], None]) -> list[dict]:
    for target, measured, holds in targets(rows):
        log(f"target {'holds ' if holds else 'MISSES'}: {target}: {measured}")
    return rows


def run(size: str, peer: str | None = None, points_only: bool = False) -> list[dict]:
    """Harness entry (``python -m bench``)."""
    def log(message: str) -> None:
        print(f"[objstore] {message}", file=sys.stderr, flush=True)

    return _with_targets(benchmark(SIZES[size], log, peer=peer, points_only=points_only), log)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.objstore", description=__doc__.splitlines()[0])
    parser.add_argument("size", nargs="?", choices=list(SIZES), default="quick")
    parser.add_argument("--peer", help="also serve this commit (a git worktree under .cache/), side by side")
    parser.add_argument("--points-only", action="store_true",
                        help="only the warm point and filter queries and their storage floor (no cold planning, no scans)")
    args = parser.parse_args()
    for r in run(args.size, args.peer, args.points_only):
        print(f"{r['name']:78} {r['competitor']:44} {r['metric']:28} {r['value']:14.3f} {r['unit']}")
