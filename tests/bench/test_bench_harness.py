"""bench.common helpers and the ``python -m bench`` runner (discovery, failure isolation, reports)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from bench import __main__ as runner
from bench.common import markdown_table, measure, percentile, ratio, row, validate_rows, write_results


def test_percentile_and_measure() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([0.0, 10.0], 99) == pytest.approx(9.9)
    with pytest.raises(ValueError):
        percentile([], 50)
    calls = []
    t = measure(lambda: calls.append(1) or len(calls), repeat=3, warmup=2)
    assert t.repeats == 3 and len(calls) == 5 and t.result == 5
    assert t.best <= t.median
    assert ratio(2.0, 1.0) == 2.0


def test_rows_validated_and_reported(tmp_path: Path) -> None:
    rows = validate_rows([row("q", "hudi-flight", "median wall time", 1.0, "s"),
                          row("q", "hudi-rs", "median wall time", 3.0, "s")], "demo")
    with pytest.raises(ValueError, match="lacks"):
        validate_rows([{"name": "x"}], "demo")
    md = markdown_table(rows)
    assert "| demo | q | hudi-rs | median wall time | 3 | s | 3.00x |" in md
    written = write_results(rows, "quick", tmp_path, {"broken": "RuntimeError: boom"})
    data = json.loads(written["json"].read_text())
    assert [r["competitor"] for r in data["rows"]] == ["hudi-flight", "hudi-rs"]
    assert "broken" in written["markdown"].read_text()


def test_runner_discovers_and_isolates_failures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = types.ModuleType("bench.fake_good")
    good.run = lambda size: [row(f"g/{size}", "hudi-flight", "m", 1, "s")]
    bad = types.ModuleType("bench.fake_bad")
    bad.run = lambda size: (_ for _ in ()).throw(RuntimeError("boom"))
    monkeypatch.setitem(sys.modules, "bench.fake_good", good)
    monkeypatch.setitem(sys.modules, "bench.fake_bad", bad)
    monkeypatch.setattr(runner, "discover", lambda: ["fake_bad", "fake_good"])
    rows, errors = runner.run_all("quick", out_dir=tmp_path)
    assert [r["name"] for r in rows] == ["g/quick"]
    assert errors == {"fake_bad": "RuntimeError: boom"}
    assert (tmp_path / "results.md").exists()


def test_real_discovery_lists_benchmarks_only() -> None:
    names = runner.discover()
    assert "latency" in names and "caches" in names
    assert "common" not in names and "__main__" not in names


@pytest.mark.parametrize("table_version", [8, 6])
def test_planning_bench_on_tiny_local_tables(tmp_path: Path, table_version: int) -> None:
    from bench import planning

    only_ours = {"mdt": 1, "listing": 1}
    kw = dict(log=lambda _m: None, data_dir=tmp_path, rows_per_partition=4, table_version=table_version)
    small = planning.benchmark(5, "local", only_ours, **kw)
    large = planning.benchmark(20, "local", only_ours, **kw)
    assert small["table_version"] == table_version
    for res, parts in ((small, 5), (large, 20)):
        assert res["mdt"]["listing"] == "MetadataTableListing"
        assert res["mdt"]["slices"] == res["listing"]["slices"] == parts
    assert large["mdt"]["requests"] <= small["mdt"]["requests"] <= 30
    assert large["listing"]["requests"] > small["listing"]["requests"]
    rows = planning.rows_for(small)
    assert {r["competitor"] for r in rows} == {"hudi-flight", "hudi-flight (storage listing)"}


def test_every_benchmark_module_imports():
    """A benchmark that cannot even be imported (a helper moved away) fails here, not in make bench."""
    import importlib
    import pkgutil

    import bench

    names = [m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_")]
    assert "flight_sql" in names and "secure_scan" in names
    for name in names:
        importlib.import_module(f"bench.{name}")


def test_caches_bench_serves_a_tiny_table_on_moto_and_keeps_every_cache_in_bound() -> None:
    """The bench builds its server as deployed (the bucket a root, the server's credentials for
    it) and reads the server's caches where the server keeps them; it raises if a cache holds
    more than its bound or a point query misses its row."""
    from bench import caches

    rows = caches.benchmark(3, 1, 4, log=lambda _m: None)
    by = {(r["competitor"], r["metric"]): r["value"] for r in rows}
    assert by[("versioned cache (warm, unchanged)", "storage requests per plan")] == 1
    assert {"table_states", "footers", "split_results", "disk"} <= {c for c, _ in by}
