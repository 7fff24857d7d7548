"""Consecutive interpreter runs that read tables, counted by exit status (issue 15's exit abort).

Each run is a fresh ``python`` process that reads every given table snapshot and storage-listed,
from local disk and from an in-process ``memory://`` copy (the fsspec path every remote protocol
takes), then exits. Before the fix a few percent of such processes aborted at exit ("terminate
called without an active exception", status -6): an Arrow thread took the GIL, or dropped the last
reference to a Python object, while the interpreter finalized.

Command line (from the repository root, ``PYTHONPATH=.``)::

    python -m tests.support.exit_runs --runs 200 [--workers 2] [TABLE_PATH ...]

Without table paths it extracts four fixture tables (COW and MOR, versions 6 and 9, with and
without a metadata table) into a temporary folder. Prints one JSON line with the exit counts and
exits 1 if any run did not exit 0.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: fixture tables read by every run: COW and MOR, versions 6 and 9, with and without a metadata table
TABLES = (
    "sample_table/cow/v9_txns_simple_nometa",
    "sample_table/cow/v6_complexkeygen_hivestyle",
    "sample_table/mor/avro/v9_txns_simple_meta",
    "sample_table/mor/parquet/v6_complexkeygen_hivestyle",
)

#: the child: read each table from disk and from a memory:// copy, both planning ways and filtered
CHILD = """\
import os, sys, uuid
import fsspec
from catalog import HudiTable

mem = fsspec.filesystem("memory")
for path in sys.argv[1:]:
    root = f"/exit-{uuid.uuid4().hex}"
    for dirpath, _, files in os.walk(path):
        for name in files:
            src = os.path.join(dirpath, name)
            with open(src, "rb") as fh:
                mem.pipe_file(root + "/" + os.path.relpath(src, path), fh.read())
    for uri in (path, f"memory://{root}"):
        assert HudiTable.open(uri).read().num_rows > 0
        HudiTable.open(uri, use_metadata_table=False).read(columns=[])
        HudiTable.open(uri).read(filters=[("_hoodie_commit_time", ">", "0")])  # row-group pruning
"""


def run_once(paths: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, *paths], cwd=str(ROOT), capture_output=True, text=True,
                          timeout=timeout)


def run_many(paths: list[str], runs: int, workers: int = 2) -> list[subprocess.CompletedProcess]:
    """``runs`` interpreter runs, ``workers`` at a time."""
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda _: run_once(paths), range(runs)))


def summary(procs: list[subprocess.CompletedProcess]) -> dict:
    codes = collections.Counter(p.returncode for p in procs)
    bad = [p for p in procs if p.returncode != 0]
    return {"runs": len(procs), "exit_0": codes.get(0, 0), "exit_codes": {str(k): v for k, v in sorted(codes.items())},
            "first_failure_stderr": bad[0].stderr[-2000:] if bad else ""}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("tables", nargs="*", help="table base paths (default: four extracted fixture tables)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="exit-runs-") as tmp:
        paths = args.tables
        if not paths:
            from tests.support.fixtures import extract_table

            paths = [str(extract_table(name, Path(tmp))) for name in TABLES]
        result = summary(run_many(paths, args.runs, args.workers))
    print(json.dumps(result))
    return 0 if result["exit_0"] == result["runs"] else 1


if __name__ == "__main__":
    sys.exit(main())
