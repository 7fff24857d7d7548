"""Versioned caches on the S3 endpoint (moto on 127.0.0.1): warm plans, the delta after a commit,
hit ratios under a skewed workload, and every cache within its bound.

A merge-on-read table with a metadata table (``files`` and ``record_index``), 20 rows per
partition, is generated into moto with one commit (served); the same spec with two commits is
generated locally, and the second commit's files are uploaded into the served table later (data
and MDT first, the completed instant last, as Hudi writes them). An in-process server plans it through ``get_flight_info``
(the real planning path, over loopback gRPC). Storage requests are counted server-side (moto's
request log), so they include everything the server asked S3.

Competitors, in one run:

* ``versioned cache``: a warm plan of the unchanged table (state cached, one timeline check);
* ``TTL expired (cold state)``: today's behaviour once the 10 s table TTL has expired: the state
  is loaded from scratch (``tables.drop()`` before each plan; the footer cache stays warm, as it
  did before);
* ``after a commit``: the first plan after the commit (versioned cache: only the delta);
* a Zipf (s = 1.2) workload of record-key point queries (plan + ``do_get``), with every cache on
  and small bounds: hit ratio and bytes against the bound of each cache.

Sizes: ``quick`` 200 partitions; ``full`` 10,000 partitions (generation on moto takes minutes).
Run standalone: ``python -m bench.caches [quick|full|PARTITIONS]``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow.flight as flight

from bench.common import median, row
from bench.planning import BUCKET, MotoServer, create_bucket, storage_options
from catalog.storage import add_request_listener, remove_request_listener
from tests.support.servers import free_port

SIZES = {"quick": (200, 20, 40), "full": (10_000, 3, 30)}  # partitions, plan repeats, point queries
ROWS_PER_PARTITION = 20
BOUNDS = {"table_cache_bytes": 256 << 20, "footer_cache_bytes": 8 << 20, "split_cache_bytes": 2 << 20,
          "disk_cache_bytes": 16 << 20}
NAMESPACE, TABLE = "bench", "trips"


def _spec(partitions: int, commits: int):
    from hudi_generator.generator import MERGE_ON_READ, GeneratorSpec

    return GeneratorSpec(rows=partitions * ROWS_PER_PARTITION, partitions=partitions, commits=commits,
                         update_fraction=0.05, delete_fraction=0.0, table_type=MERGE_ON_READ,
                         record_index=True, workers=8)


def _land_commit(fs: Any, served: str, older: Path, newer: Path) -> int:
    """Upload the files of the local table ``newer`` that ``older`` lacks into the served table;
    completed data-timeline instant files last, as a writer completes a commit."""
    def files(root: Path) -> set[str]:
        return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}

    added = sorted(files(newer) - files(older))
    last = [p for p in added if p.startswith(".hoodie/timeline/") and "_" in p.rsplit("/", 1)[-1]]
    for rel in [p for p in added if p not in last] + last:
        fs.put_file(str(newer / rel), f"{served}/{rel}")
    return len(added)


class _Harness:
    def __init__(self, moto: MotoServer, uri: str, options: dict[str, Any], state: str, **settings: Any):
        from flight_server.server.config import ServerConfig
        from flight_server.server.registry import Registry
        from flight_server.server.service import HudiFlightServer

        registry = Registry(f"sqlite:///{state}/catalog.db")
        registry.register_table(f"{NAMESPACE}.{TABLE}", uri, {})
        self.port = free_port()
        # a cold full-scan plan of 10,000 partitions reads 10,000 footers from moto: past the default bound
        # as deployed: the table's bucket is a root of the server, with the server's credentials for it
        root = uri.rsplit("/caches/", 1)[0]
        config = ServerConfig(port=self.port, state_dir=state, refresh_interval_seconds=0, planning_seconds=900,
                              allowed_roots=[root], root_storage_options={root: options}, **settings)
        self.server = HudiFlightServer(config, registry=registry)
        self.thread = threading.Thread(target=self.server.serve, daemon=True)
        self.thread.start()
        self.client = flight.connect(f"grpc://127.0.0.1:{self.port}")
        self.moto = moto
        self.bytes_read = 0
        add_request_listener(self._count)

    def _count(self, kind: str, nbytes: int) -> None:
        self.bytes_read += nbytes

    def plan(self, filters: list | None = None) -> flight.FlightInfo:
        command = {"table": f"{NAMESPACE}.{TABLE}", "filters": filters or []}
        return self.client.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(command).encode()))

    def timed(self, fn: Callable[[], Any], repeat: int) -> tuple[float, float, float]:
        """(median seconds, storage requests per call, bytes read per call) over ``repeat`` calls."""
        times = []
        before, bytes_before = self.moto.request_count(), self.bytes_read
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return median(times), (self.moto.request_count() - before) / repeat, (self.bytes_read - bytes_before) / repeat

    def close(self) -> None:
        remove_request_listener(self._count)
        self.client.close()
        self.server.shutdown()
        self.thread.join(10)


def benchmark(partitions: int, repeat: int, queries: int, log: Callable[[str], None]) -> list[dict]:
    import s3fs

    from hudi_generator.generator import generate

    local = Path(tempfile.mkdtemp(prefix="hudi-flight-caches-tables-"))
    moto = MotoServer()
    rows: list[dict] = []
    try:
        create_bucket(moto.endpoint)
        options = storage_options(moto.endpoint)
        gen_options = {k: v for k, v in options.items() if k not in ("skip_instance_cache", "use_listings_cache")}
        served = f"{BUCKET}/caches/served/{TABLE}"
        t0 = time.perf_counter()
        generate(f"s3://{served}", _spec(partitions, 1), gen_options)
        log(f"generated {partitions} partitions on moto in {time.perf_counter() - t0:.1f}s")
        generate(str(local / "older"), _spec(partitions, 1))  # the same table, locally: the delta's base
        generate(str(local / "newer"), _spec(partitions, 2))
        fs = s3fs.S3FileSystem(**options)
        name = f"caches/{partitions:,} partitions (S3/moto)"
        params = {"partitions": partitions, "rows": partitions * ROWS_PER_PARTITION}
        with tempfile.TemporaryDirectory(prefix="hudi-flight-caches-") as state:
            h = _Harness(moto, f"s3://{served}", options, state)
            try:
                h.plan()  # first plan: cold state, footers read
                warm = h.timed(h.plan, repeat)
                point = [["uuid", "=", "trip-0000000007"]]
                h.plan(point)
                point_plan = h.timed(lambda: h.plan(point), repeat)

                def cold() -> None:
                    h.server.app.tables.drop()
                    h.plan()

                cold_runs = max(2, repeat // 4)
                cold_load = h.timed(cold, cold_runs)
                h.plan()
                copied = _land_commit(fs, served, local / "older", local / "newer")
                delta = h.timed(h.plan, 1)
                mdt = h.server.app.tables.get(h.server.app.registry.load_table(f"{NAMESPACE}.{TABLE}")).metadata_table
                updates = dict(mdt.update_counts) if mdt is not None else {"incremental": 0, "full": 0}
                after = h.timed(h.plan, repeat)
                cold_after = h.timed(cold, cold_runs)
            finally:
                h.close()
        for who, (s, req, nbytes), note in (
            ("versioned cache (warm, unchanged)", warm, repeat),
            ("versioned cache (warm, unchanged): record-key plan", point_plan, repeat),
            ("TTL expired (cold state load)", cold_load, cold_runs),
            ("versioned cache (first plan after a commit)", delta, 1),
            ("versioned cache (warm, after the commit)", after, repeat),
            ("TTL expired after the commit (cold state load)", cold_after, cold_runs),
        ):
            log(f"{who}: {s * 1000:.1f} ms, {req:.1f} requests, {nbytes:,.0f} bytes read")
            rows.append(row(f"{name}: plan", who, "median plan latency", 1000 * s, "ms", params=params, repeats=note))
            rows.append(row(f"{name}: plan", who, "storage requests per plan", req, "requests", params=params,
                            repeats=note))
            rows.append(row(f"{name}: plan", who, "bytes read per plan", nbytes, "bytes", params=params,
                            repeats=note))
        log(f"{copied} files landed by the commit")
        rows.append(row(f"{name}: plan", "versioned cache (first plan after a commit)",
                        "MDT files partition slices updated incrementally", updates["incremental"],
                        "slices", params={**params, "full_reloads": updates["full"]}))
        rows += _zipf(moto, served, options, partitions, queries, name, params, log)
    finally:
        moto.stop()
        shutil.rmtree(local, ignore_errors=True)
    return rows


def _zipf(moto, served, options, partitions, queries, name, params, log) -> list[dict]:
    """Record-key point queries with Zipf-distributed keys, every cache on with small bounds."""
    rng = np.random.default_rng(7)
    n_rows = partitions * ROWS_PER_PARTITION
    ranks = np.minimum(rng.zipf(1.2, queries), n_rows) - 1
    keys = [f"trip-{int(k):010d}" for k in rng.permutation(n_rows)[ranks]]
    out = []
    with tempfile.TemporaryDirectory(prefix="hudi-flight-caches-") as state:
        h = _Harness(moto, f"s3://{served}", options, state, **BOUNDS)
        try:
            found = 0
            t0 = time.perf_counter()
            for key in keys:
                info = h.plan([["uuid", "=", key]])
                found += sum(h.client.do_get(ep.ticket).read_all().num_rows for ep in info.endpoints)
            wall = time.perf_counter() - t0
            if found != len(keys):
                raise AssertionError(f"point queries found {found} rows for {len(keys)} keys")
            server = h.server
            caches = {
                "table_states": (server.app.tables.stats(), BOUNDS["table_cache_bytes"]),
                "footers": (server.app.queries.footers.stats(), BOUNDS["footer_cache_bytes"]),
                "split_results": (server.app.split_results.stats(), BOUNDS["split_cache_bytes"]),
                "disk": (server.app.tables.disk_cache.stats(), BOUNDS["disk_cache_bytes"]),
            }
        finally:
            h.close()
    zparams = {**params, "queries": queries, "distinct_keys": len(set(keys)), "zipf_s": 1.2}
    log(f"zipf: {queries} queries in {wall:.1f}s, {len(set(keys))} distinct keys")
    for cache, (stats, bound) in caches.items():
        if stats.bytes > bound:
            raise AssertionError(f"cache {cache} holds {stats.bytes} bytes over its bound {bound}")
        log(f"  {cache}: hit ratio {stats.hit_ratio:.2f} ({stats.hits}/{stats.hits + stats.misses}), "
            f"{stats.bytes:,} of {bound:,} bytes, {stats.evictions} evictions")
        p = {**zparams, "hits": stats.hits, "misses": stats.misses, "evictions": stats.evictions}
        out.append(row(f"{name}: Zipf point queries", cache, "hit ratio", stats.hit_ratio, "ratio", params=p))
        out.append(row(f"{name}: Zipf point queries", cache, "bytes held / bound", stats.bytes / bound, "ratio",
                       params={**p, "bytes": stats.bytes, "bound": bound}))
    out.append(row(f"{name}: Zipf point queries", "all caches on", "throughput", queries / wall, "queries/s",
                   params=zparams))
    return out


def run(size: str) -> list[dict]:
    """Harness entry (``python -m bench``)."""
    partitions, repeat, queries = SIZES[size]
    return benchmark(partitions, repeat, queries, log=lambda m: print(f"[caches] {m}", file=sys.stderr, flush=True))


if __name__ == "__main__":  # python -m bench.caches [quick|full|PARTITIONS]
    arg = sys.argv[1] if len(sys.argv) > 1 else "quick"
    rows = run(arg) if arg in SIZES else benchmark(int(arg), 5, 30, lambda m: print(f"[caches] {m}", file=sys.stderr))
    for r in rows:
        print(f"{r['name']:48} {r['competitor']:48} {r['metric']:34} {r['value']:10.3f} {r['unit']}")
