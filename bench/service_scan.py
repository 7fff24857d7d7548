"""Scans through the service beyond the copy-on-write full scan of :mod:`bench.flight_scan`.

Side by side, in one run, round-robin:

* merge-on-read full scan (the :mod:`bench.mor_read` table: 10% of keys updated and 1% deleted
  through Avro log blocks) through the service vs the ``hudi`` package vs the library;
* two-column projections of the same merge-on-read table and of the :mod:`bench.flight_scan`
  copy-on-write table, through the service vs ``pyarrow.dataset`` on the base files (COW only:
  for MOR the base files alone are not the answer) vs the ``hudi`` package.

Every competitor's row count is checked against the library's before timing.
``python -m bench.service_scan [quick|full]``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import pyarrow.dataset as ds

from bench.common import ServedWarehouse, base_file_paths, check_size, percentile, round_robin, row
from bench.flight_scan import WORKERS, _service_read
from bench.flight_scan import _table as cow_table
from bench.mor_read import ensure_table as mor_table
from catalog import HudiTable

PROJECTION = ["uuid", "fare"]


def _hudi_rows(path: Path, columns: list[str] | None) -> int:
    from hudi import HudiReadOptions, HudiTableBuilder

    table = HudiTableBuilder.from_base_uri(str(path)).build()
    options = HudiReadOptions(projection=columns) if columns else None
    return sum(b.num_rows for b in table.read(options))


def _scenario(name: str, path: Path, ident: str, columns: list[str] | None, cow: bool, server: ServedWarehouse,
              repeat: int) -> list[dict]:
    table = HudiTable.open(str(path))
    rows = table.read(columns=["_hoodie_record_key"]).num_rows
    competitors: dict[str, Callable[[], int]] = {
        "hudi-flight": lambda: _service_read(server.uri, ident, WORKERS, columns),
        "hudi-flight library": lambda: table.read(columns=columns).num_rows,
        "hudi-rs (hudi package)": lambda: _hudi_rows(path, columns),
    }
    if cow:
        files = base_file_paths(path)
        competitors["pyarrow.dataset (1 process)"] = lambda: ds.dataset(files, format="parquet").to_table(
            columns=columns
        ).num_rows
    params = {"rows": rows, "columns": columns or "all", "client_workers": WORKERS}
    out = []
    for competitor, times in round_robin(competitors, rows, repeat).items():
        median = percentile(times, 50)
        out.append(row(name, competitor, "median wall time", median, "s", repeats=len(times), params=params))
        out.append(row(name, competitor, "throughput", rows / median, "rows/s", repeats=len(times), params=params))
    return out


def run(size: str) -> list[dict]:
    size = check_size(size)
    repeat = 3
    mor = mor_table(size)
    cow = cow_table(size)
    out: list[dict] = []
    mor_server = ServedWarehouse(mor.parent, 1)
    try:
        ident = f"{mor.parent.name}.{mor.name}"
        out += _scenario("service_scan/MOR full scan", mor, ident, None, False, mor_server, repeat)
        out += _scenario("service_scan/MOR projection uuid,fare", mor, ident, PROJECTION, False, mor_server, repeat)
    finally:
        mor_server.close()
    cow_server = ServedWarehouse(cow.parent.parent, 1)
    try:
        out += _scenario("service_scan/COW projection uuid,fare", cow, "bench.trips", PROJECTION, True, cow_server,
                         repeat)
    finally:
        cow_server.close()
    return out


if __name__ == "__main__":
    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r['name']:40} {r['competitor']:28} {r['metric']:17} {r['value']:>14,.3f} {r['unit']}")

