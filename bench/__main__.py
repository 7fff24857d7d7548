"""``python -m bench --size quick|full [--only NAME ...]``: run every benchmark module and report.

A benchmark module is any ``bench/*.py`` other than this runner and :mod:`bench.common` that
defines ``run(size) -> list[dict]``. A benchmark that raises is reported as failed; the others
still run. ``--merge DIR ...`` runs nothing: it combines the ``results.json`` of earlier runs
(a later folder's rows replace an earlier one's for the same benchmark at the same size, so a
quick and a full run of one benchmark both stay) into ``--out``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from bench.common import RESULTS_DIR, SIZES, validate_rows, write_results

_NOT_BENCHMARKS = {"common", "__main__", "latency_proxy", "process_cpu"}  # tools of benchmarks


def discover() -> list[str]:
    """Names of the benchmark modules in this package, sorted."""
    here = str(Path(__file__).resolve().parent)
    return sorted(m.name for m in pkgutil.iter_modules([here]) if m.name not in _NOT_BENCHMARKS)


def run_all(size: str, only: Sequence[str] | None = None, out_dir: Path = RESULTS_DIR) -> tuple[list[dict], dict[str, str]]:
    names = discover()
    if only:
        unknown = sorted(set(only) - set(names))
        if unknown:
            raise SystemExit(f"unknown benchmark(s) {unknown}; available: {names}")
        names = [n for n in names if n in only]
    rows: list[dict] = []
    errors: dict[str, str] = {}
    for name in names:
        start = time.perf_counter()
        print(f"[bench] {name} ({size}) ...", file=sys.stderr, flush=True)
        try:
            module = importlib.import_module(f"bench.{name}")
            if not callable(getattr(module, "run", None)):
                continue
            got = validate_rows(module.run(size), name)
        except Exception as exc:  # one broken benchmark must not hide the others' results
            traceback.print_exc()
            errors[name] = f"{type(exc).__name__}: {exc}"
            continue
        rows.extend(got)
        print(f"[bench] {name}: {len(got)} rows in {time.perf_counter() - start:.1f}s", file=sys.stderr)
    written = write_results(rows, size, out_dir, errors)
    for kind, path in written.items():
        print(f"[bench] wrote {kind}: {path}", file=sys.stderr)
    return rows, errors


def merge_runs(folders: Sequence[Path], out_dir: Path) -> list[dict]:
    """Combine earlier runs' ``results.json``, by benchmark and size (a merged report's rows keep
    the size they were measured at); the report's header lists each run's size and date."""
    by_benchmark: dict[tuple[str, str], list[dict]] = {}
    runs = []
    for folder in folders:
        data = json.loads((folder / "results.json").read_text())
        runs.append(f"{data['meta']['size']} {data['meta']['finished']}")
        found: dict[tuple[str, str], list[dict]] = {}
        for r in data["rows"]:
            found.setdefault((r["benchmark"], r.get("size", data["meta"]["size"])), []).append(r)
        by_benchmark.update(found)
    rows = [r for key in sorted(by_benchmark) for r in by_benchmark[key]]
    write_results(rows, "merged: " + "; ".join(runs), out_dir)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="quick")
    parser.add_argument("--only", nargs="+", metavar="NAME", help=f"benchmarks to run (default: all of {discover()})")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="results folder")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="DIR", help="combine earlier runs' results instead")
    args = parser.parse_args(argv)
    if args.merge:
        merge_runs(args.merge, args.out)
        print((args.out / "results.md").read_text())
        return 0
    rows, errors = run_all(args.size, args.only, args.out)
    print((args.out / "results.md").read_text())
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
