"""``python -m bench --merge``: earlier runs combine into one report, later runs winning."""

from __future__ import annotations

import json

from bench.__main__ import merge_runs
from bench.common import row, validate_rows, write_results


def _run(folder, benchmark, value, size="quick"):
    rows = validate_rows([row(f"{benchmark}/x", "hudi-flight", "median wall time", value, "s")], benchmark)
    write_results(rows, size, folder)


def test_later_runs_replace_the_same_benchmark_and_keep_the_others(tmp_path):
    _run(tmp_path / "a", "scan", 1.0)
    _run(tmp_path / "b", "scan", 2.0)
    _run(tmp_path / "c", "planning", 3.0)
    rows = merge_runs([tmp_path / "a", tmp_path / "b", tmp_path / "c"], tmp_path / "out")
    assert {(r["benchmark"], r["value"]) for r in rows} == {("scan", 2.0), ("planning", 3.0)}
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert len(saved["rows"]) == 2 and "merged" in saved["meta"]["size"]
    assert "| planning |" in (tmp_path / "out" / "results.md").read_text()


def test_a_quick_and_a_full_run_of_one_benchmark_both_stay_and_merge_again(tmp_path):
    _run(tmp_path / "a", "latency", 1.0, "quick")
    _run(tmp_path / "b", "latency", 2.0, "full")
    merge_runs([tmp_path / "a", tmp_path / "b"], tmp_path / "ab")
    _run(tmp_path / "c", "latency", 3.0, "quick")
    rows = merge_runs([tmp_path / "ab", tmp_path / "c"], tmp_path / "out")
    assert sorted((r["size"], r["value"]) for r in rows) == [("full", 2.0), ("quick", 3.0)]
