"""bench.objstore on tiny tables (moto behind the latency proxy, one served tree, one delay): every
competitor answers, the proxy counts each one's requests and bytes, and the targets are evaluated."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_objstore_bench_runs_on_tiny_tables(tmp_path: Path) -> None:
    pytest.importorskip("moto")
    pytest.importorskip("hudi")
    pytest.importorskip("adbc_driver_flightsql")
    from bench import objstore

    size = objstore.Size(rows=1200, partitions=2, repeats=1, queries=2, clients=2, per_client=2)
    rows = objstore.benchmark(size, log=lambda _m: None, delays=(1,), data_dir=tmp_path)
    by = {(r["name"].split(": ", 1)[1], r["name"].split()[0], r["competitor"], r["metric"]): r["value"]
          for r in rows}
    flight, cached = objstore.DEFAULT_NAME, objstore.CACHED_NAME
    for kind in ("objstore/COW", "objstore/MOR"):
        for who in (flight, cached, "hudi-rs"):
            assert by[("cold planning", kind, who, "storage requests per plan")] > 0
        for who in (flight, "hudi-rs"):
            assert by[("full scan", kind, who, "bytes fetched per scan")] > 0
        for path in ("JSON command", "Flight SQL"):
            what = f"warm point query, {path}"
            assert by[(what, kind, cached, "storage requests per query")] <= by[(what, kind, flight,
                                                                                   "storage requests per query")]
            assert by[(what, kind, flight, "server CPU per query")] >= 0
            # the floor: the warm query's one request (the timeline listing) alone, beside it
            floor = objstore.FLOOR_NAME
            assert by[(what, kind, floor, "storage requests per query")] == 1
            assert by[(what, kind, flight, "p50 latency minus the storage floor's")] == pytest.approx(
                by[(what, kind, flight, "p50 latency")] - by[(what, kind, floor, "p50 latency")])
        assert by[("2 clients, warm point queries, JSON command", kind, flight, "throughput")] > 0
        assert by[("full scan", kind, flight, "storage requests per scan, the server's own counter")] > 0
    assert by[("full scan", "objstore/COW", "pyarrow.dataset", "bytes fetched per scan")] > 0
    whole = {r["competitor"]: r["value"] for r in rows if r["name"].endswith("requests of the whole run")}
    assert whole["latency proxy (its count)"] == whole["moto S3 (its request log)"] > 0
    found = objstore.targets(rows, delay=1)
    assert len(found) == 2 * 2 * 4 + 2 + 2 + 1 + 2  # point queries, cold plans, clients, projection, scans
    assert all("holds" in r["params"] for r in rows if "target" in r.get("params", {}))
