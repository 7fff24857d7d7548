"""Flight scan throughput and planning latency.

* Throughput: a copy-on-write table (generated; >= 1 GB of Parquet for ``full``) read
  - through the service (``hudi-flight serve --processes N`` in a subprocess, the Python client
    fetching every endpoint in parallel over loopback),
  - by ``pyarrow.dataset`` over the same base files in this one process (the ceiling),
  - by the ``hudi`` package's ``read()`` (hudi-rs) and by ``HudiTable.read`` (in-process library).
* Planning latency: ``get_flight_info`` on a warm server, for a fixture table and the big table.

Run alone with ``python -m bench.flight_scan [quick|full]`` or through ``python -m bench``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

import pyarrow.dataset as ds
import pyarrow.flight as flight

from bench.common import base_file_paths, check_size, percentile, round_robin, row
from tests.support.servers import free_port

REPO = Path(__file__).resolve().parents[1]
# rows, partitions, parquet row-group rows; ~60 bytes of Parquet per generated row.
SIZES = {"quick": (600_000, 4, 65_536), "full": (20_500_000, 8, 262_144)}
PLAN_FIXTURE = "sample_table/cow/v9_txns_simple_meta"
WORKERS = 4  # parallel endpoint fetches of the client


def _data_dir(size: str) -> Path:
    """Where the generated table lives: outside the repository (it is ~1 GB for ``full``)."""
    root = Path(os.environ.get("HUDI_FLIGHT_BENCH_DATA", Path(tempfile.gettempdir()) / "hudi-flight-bench"))
    return root / check_size(size) / "flight_scan"


def _table(size: str) -> Path:
    """The generated table (reused between runs), under ``<data>/wh/bench/trips``."""
    from hudi_generator.generator import GeneratorSpec, generate

    rows, partitions, rg = SIZES[size]
    path = _data_dir(size) / "wh" / "bench" / "trips"
    marker = path.parent / f"trips-{rows}-{partitions}-{rg}.done"
    if not marker.exists():
        spec = GeneratorSpec(rows=rows, partitions=partitions, files_per_partition=1, row_group_size=rg,
                             commits=1, metadata_table=True, table_name="trips")
        generate(str(path), spec)
        marker.touch()
    return path


class _Server:
    """``hudi-flight serve`` in a subprocess (``extra_args``: more serve flags; ``scheme`` of its URI)."""

    def __init__(self, warehouse: Path, processes: int, extra_args: Sequence[str] = (), scheme: str = "grpc"):
        self.port = free_port()
        self.state = tempfile.mkdtemp(prefix="hudi-flight-bench-")
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "flight_server.cli", "serve", "--port", str(self.port), "--warehouse",
             str(warehouse), "--state-dir", self.state, "--processes", str(processes), *extra_args],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=REPO,
        )
        line = self.proc.stdout.readline()
        if "serving" not in line:
            raise RuntimeError(f"server did not start: {line!r}")
        time.sleep(0.5 * processes)  # let the data processes bind their ports
        self.uri = f"{scheme}://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(20)


def _service_read(uri: str, table: str, workers: int, columns: list[str] | None = None) -> int:
    from flight_server.client.session import connect

    with connect(uri, max_workers=workers) as client:
        return sum(b.num_rows for b in client.read_batches(table, columns=columns))


def _planning(uri: str, table: str, repeat: int) -> list[float]:
    client = flight.connect(uri)
    desc = flight.FlightDescriptor.for_command(json.dumps({"table": table}).encode())
    client.get_flight_info(desc)  # warm: table opened, footers cached
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        client.get_flight_info(desc)
        samples.append(time.perf_counter() - t0)
    client.close()
    return samples


def run(size: str) -> list[dict]:
    from hudi import HudiTableBuilder

    from catalog import HudiTable
    from tests.support.fixtures import extract_table

    path = _table(size)
    table = HudiTable.open(str(path))
    files = base_file_paths(path)
    nbytes = sum(os.path.getsize(f) for f in files)
    rows = table.read(columns=["_hoodie_record_key"]).num_rows
    params = {"rows": rows, "parquet_bytes": nbytes, "files": len(files), "client_workers": WORKERS,
              "load_average": os.getloadavg()[0]}
    name = f"flight_scan/{nbytes / 2**30:.2f} GiB COW"
    repeat = 3 if size == "full" else 5
    servers = {p: _Server(path.parent.parent, p) for p in (1, 2)}
    competitors = {
        "pyarrow.dataset (1 process)": lambda: ds.dataset(files, format="parquet").to_table().num_rows,
        "hudi-rs (hudi package)": lambda: sum(b.num_rows for b in HudiTableBuilder.from_base_uri(str(path)).build().read()),
        "hudi-flight library": lambda: table.read().num_rows,
        "hudi-flight": lambda: _service_read(servers[1].uri, "bench.trips", WORKERS),
        "hudi-flight --processes 2": lambda: _service_read(servers[2].uri, "bench.trips", WORKERS),
    }
    out: list[dict] = []
    try:
        for competitor, times in round_robin(competitors, rows, repeat).items():
            median = percentile(times, 50)
            out.append(row(name, competitor, "median wall time", median, "s", repeats=len(times), params=params))
            out.append(row(name, competitor, "throughput", nbytes / median / 2**20, "MiB/s", params=params))
        for processes, server in servers.items():
            plan = _planning(server.uri, "bench.trips", 20)
            out.append(row(f"planning/{name}", f"hudi-flight --processes {processes}", "median latency",
                           1000 * percentile(plan, 50), "ms", repeats=len(plan)))
    finally:
        for server in servers.values():
            server.close()

    with tempfile.TemporaryDirectory() as tmp:
        fixture = extract_table(PLAN_FIXTURE, Path(tmp))
        wh = Path(tmp) / "wh" / "fx"
        wh.mkdir(parents=True)
        fixture.rename(wh / "t")
        server = _Server(wh.parent, 1)
        try:
            fixture_plan = _planning(server.uri, "fx.t", 50)
        finally:
            server.close()
    for p in (50, 95):
        out.append(row(f"planning/{PLAN_FIXTURE}", "hudi-flight", f"p{p} latency (warm)",
                       1000 * percentile(fixture_plan, p), "ms", repeats=len(fixture_plan)))
    return out


if __name__ == "__main__":
    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r['name']:40} {r['competitor']:32} {r['metric']:22} {r['value']:10.2f} {r['unit']}")
