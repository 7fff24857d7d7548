"""Flight scan throughput and planning latency.

* Throughput: a copy-on-write table (generated; >= 1 GB of Parquet for ``full``) read
  - through the service (``hudi-flight serve --processes N`` in a subprocess, the Python client
    fetching every endpoint in parallel over loopback); with 2 processes both with
    ``--process-endpoints`` (endpoints name each process's own port) and as served by default
    (every byte through the one-port relay),
  - through a cluster: a coordinator with 1 and with 2 workers (each a process), the client
    planning at the coordinator and streaming from the workers its endpoints name,
  - by ``pyarrow.dataset`` over the same base files in this one process (the ceiling),
  - by the ``hudi`` package's ``read_stream()`` (hudi-rs) and by ``HudiTable.read_batches``
    (in-process library);
  every reader but ``pyarrow.dataset`` (``to_table``) streams its batches and counts their rows.
* CPU time per GiB of Parquet read: the server's (its process tree) and this process's (the
  client, or the in-process reader).
* Planning latency: ``get_flight_info`` on a warm server, for a fixture table and the big table.

Run alone with ``python -m bench.flight_scan [quick|full]`` or through ``python -m bench``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.flight as flight

from bench.common import base_file_paths, check_size, generated_once, percentile, round_robin, row
from bench.process_cpu import tree_cpu_seconds

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
    from hudi_generator.generator import GeneratorSpec

    rows, partitions, rg = SIZES[size]
    path = _data_dir(size) / "wh" / "bench" / "trips"
    spec = GeneratorSpec(rows=rows, partitions=partitions, files_per_partition=1, row_group_size=rg,
                         commits=1, metadata_table=True, table_name="trips")
    generated_once(path, spec, path.parent / f"trips-{rows}-{partitions}-{rg}.done")
    return path


class _Cluster:
    """A coordinator scanning the warehouse and ``workers`` workers sharing its catalog and secret."""

    def __init__(self, warehouse: Path, workers: int):
        from tests.support.processes import ServeProcess, poll

        self.root = Path(tempfile.mkdtemp(prefix="hudi-flight-bench-cluster-"))
        secret = self.root / "secret.hex"
        secret.write_text(os.urandom(32).hex())
        secret.chmod(0o600)
        shared = ["--catalog-url", f"sqlite:///{self.root / 'catalog.db'}", "--secret-file", str(secret)]
        self.coordinator = ServeProcess("--port", "0", "--role", "coordinator", "--warehouse", str(warehouse),
                                        "--state-dir", str(self.root / "c"), *shared, log=self.root / "c.log")
        self.uri = self.coordinator.uri
        started = [ServeProcess("--port", "0", "--role", "worker", "--coordinator", self.uri, "--state-dir",
                                str(self.root / f"w{i}"), *shared, log=self.root / f"w{i}.log", wait=False)
                   for i in range(workers)]
        self.workers = [w.ready() for w in started]
        expected = {f"grpc+tcp://127.0.0.1:{w.port}" for w in self.workers}
        with flight.connect(self.uri) as client:
            def registered() -> bool:
                body = next(iter(client.do_action(flight.Action("health", b"{}")))).body.to_pybytes()
                return set(json.loads(body).get("workers", [])) == expected

            poll(registered, 30, f"{workers} worker(s) registered")

    def close(self) -> None:
        for p in [*self.workers, self.coordinator]:
            p.stop()
        shutil.rmtree(self.root, ignore_errors=True)



class CpuMeter:
    """CPU seconds of each metered call: the server's process tree and this process."""

    def __init__(self) -> None:
        self.samples: dict[str, list[tuple[float, float]]] = {}

    def metered(self, label: str, server_pid: int | None, fn: Callable[[], int]) -> Callable[[], int]:
        def call() -> int:
            server = tree_cpu_seconds(server_pid) if server_pid is not None else 0.0
            client = time.process_time()
            result = fn()
            client = time.process_time() - client
            server = tree_cpu_seconds(server_pid) - server if server_pid is not None else 0.0
            self.samples.setdefault(label, []).append((server, client))
            return result

        return call

    def medians(self) -> dict[str, tuple[float, float]]:
        return {label: (percentile([s for s, _ in got], 50), percentile([c for _, c in got], 50))
                for label, got in self.samples.items()}


def _counted(batches: Iterable[pa.RecordBatch]) -> int:
    """Rows of a stream of batches, none kept, as a client of the service streams (a whole 1 GiB
    table is ~5 GiB in memory: three held at once are more than a shared machine has)."""
    return sum(b.num_rows for b in batches)


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
    from tests.support.processes import ServeProcess

    state = Path(tempfile.mkdtemp(prefix="hudi-flight-bench-"))
    setups = {"p1": ["--processes", "1"], "p2": ["--processes", "2", "--process-endpoints"],
              "p2-relay": ["--processes", "2"]}
    servers = {key: ServeProcess("--port", "0", "--warehouse", str(path.parent.parent), "--state-dir",
                                 str(state / key), *args, log=state / f"{key}.log")
               for key, args in setups.items()}
    clusters = {w: _Cluster(path.parent.parent, w) for w in (1, 2)}
    cpu = CpuMeter()
    competitors = {
        # to_table: Dataset.to_batches's read-ahead made it 3x slower, and burn twice the CPU, on a loaded machine
        "pyarrow.dataset (1 process)": cpu.metered("pyarrow.dataset (1 process)", None, lambda: ds.dataset(
            files, format="parquet").to_table().num_rows),
        "hudi-rs (hudi package)": cpu.metered("hudi-rs (hudi package)", None, lambda: _counted(
            HudiTableBuilder.from_base_uri(str(path)).build().read_stream())),
        "hudi-flight library": cpu.metered("hudi-flight library", None, lambda: _counted(table.read_batches())),
        **{label: cpu.metered(label, servers[key].pid, lambda key=key: _service_read(servers[key].uri, "bench.trips", WORKERS))
           for label, key in (("hudi-flight", "p1"), ("hudi-flight --processes 2 --process-endpoints", "p2"),
                              ("hudi-flight --processes 2 (relay)", "p2-relay"))},
        "hudi-flight coordinator + 1 worker": lambda: _service_read(clusters[1].uri, "bench.trips", WORKERS),
        "hudi-flight coordinator + 2 workers": lambda: _service_read(clusters[2].uri, "bench.trips", WORKERS),
    }
    out: list[dict] = []
    try:
        for competitor, times in round_robin(competitors, rows, repeat).items():
            median = percentile(times, 50)
            out.append(row(name, competitor, "median wall time", median, "s", repeats=len(times), params=params))
            out.append(row(name, competitor, "throughput", nbytes / median / 2**20, "MiB/s", params=params))
        gib = nbytes / 2**30
        for competitor, (server, client) in cpu.medians().items():
            out.append(row(name, competitor, "server CPU per GiB", server / gib, "s", params=params))
            out.append(row(name, competitor, "client CPU per GiB", client / gib, "s", params=params))
        for processes in (1, 2):
            plan = _planning(servers[f"p{processes}"].uri, "bench.trips", 20)
            out.append(row(f"planning/{name}", f"hudi-flight --processes {processes}", "median latency",
                           1000 * percentile(plan, 50), "ms", repeats=len(plan)))
    finally:
        for server in servers.values():
            server.stop()
        for cluster in clusters.values():
            cluster.close()
        shutil.rmtree(state, ignore_errors=True)

    with tempfile.TemporaryDirectory() as tmp:
        fixture = extract_table(PLAN_FIXTURE, Path(tmp))
        wh = Path(tmp) / "wh" / "fx"
        wh.mkdir(parents=True)
        fixture.rename(wh / "t")
        server = ServeProcess("--port", "0", "--warehouse", str(wh.parent), "--state-dir", f"{tmp}/state",
                              log=Path(tmp) / "serve.log")
        try:
            fixture_plan = _planning(server.uri, "fx.t", 50)
        finally:
            server.stop()
    for p in (50, 95):
        out.append(row(f"planning/{PLAN_FIXTURE}", "hudi-flight", f"p{p} latency (warm)",
                       1000 * percentile(fixture_plan, p), "ms", repeats=len(fixture_plan)))
    return out


if __name__ == "__main__":
    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r['name']:40} {r['competitor']:32} {r['metric']:22} {r['value']:10.2f} {r['unit']}")
