"""``python -m bench --merge``: earlier runs combine into one report, later runs winning."""

from __future__ import annotations

import json

from bench.__main__ import merge_runs
from bench.common import row, validate_rows, write_results


def _run(folder, benchmark, value):
    rows = validate_rows([row(f"{benchmark}/x", "hudi-flight", "median wall time", value, "s")], benchmark)
    write_results(rows, "quick", folder)


def test_later_runs_replace_the_same_benchmark_and_keep_the_others(tmp_path):
    _run(tmp_path / "a", "scan", 1.0)
    _run(tmp_path / "b", "scan", 2.0)
    _run(tmp_path / "c", "planning", 3.0)
    rows = merge_runs([tmp_path / "a", tmp_path / "b", tmp_path / "c"], tmp_path / "out")
    assert {(r["benchmark"], r["value"]) for r in rows} == {("scan", 2.0), ("planning", 3.0)}
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert len(saved["rows"]) == 2 and "merged" in saved["meta"]["size"]
    assert "| planning |" in (tmp_path / "out" / "results.md").read_text()
