"""Planning cost: metadata-table planning vs storage listing vs the ``hudi`` package (issue 8).

Plans the latest snapshot of a synthetic merge-on-read table (written by
``catalog.testing.generator``, which also writes the MDT ``files`` partition as HFiles; 20 rows
per partition, one file group per partition, 2 commits) three ways, each from a cold start (new
table object, new filesystem instance):

* hudi-flight with the metadata table (``HudiTable.open(uri, use_metadata_table=True)``);
* hudi-flight with storage listing (``use_metadata_table=False``);
* the ``hudi`` package (hudi-rs): ``HudiTable.get_file_slices()``.

Two backends:

* ``local``: the table lives on local disk, cached under ``$HUDI_FLIGHT_BENCH_DATA``
  (default ``/tmp/hudi-flight-bench``, never inside the repository) and reused between runs.
  Requests are hudi-flight's own ``Storage.stats`` count (open + planning); hudi-rs does its
  I/O in Rust, so no request count is reported for it.
* ``s3``: ``moto_server`` (from the venv) on a free 127.0.0.1 port, a bucket outside us-east-1,
  the table generated straight into it. Requests are counted server-side (the request lines
  moto logs), for all three competitors alike.

Planning time is the median of ``repeat`` cold runs (open + plan).

Table versions: every size runs on table version 8 (timeline layout 2); the S3 sizes marked v6
below also run on a table version 6 table (layout 1, as Hudi 0.14/0.15 write it: JSON commits,
MDT initialised at ``00000000000000010`` whose ``files`` logs roll to ``log.N``), the version
most lakes hold today.

Sizes (``python -m bench --size quick|full --only planning``):

* ``quick``: 100 partitions, local and S3; S3 v6 100 partitions.
* ``full``: 100, 1,000 and 10,000 partitions on local disk (all three competitors); 100, 1,000
  and 2,000 on S3 (all three; from 2,000 on, the listing and hudi-rs paths run once, as each
  run takes ~30 s on moto); and 10,000 on S3 for the metadata-table path (3 runs) plus ONE
  storage-listing run only. The hudi package and listing at 10,000 partitions on moto take
  minutes per run, so hudi-rs is not run there and listing runs once. v6 on S3: 100, 1,000 and
  2,000 partitions (as v8).

Targets: metadata-table planning <= 30 storage requests whatever the partition count, and
>= 10x faster than storage listing at 10,000 partitions.

Run standalone: ``python -m bench.planning [--backend local|s3] [--partitions 1000] [--repeat 3]
[--table-version 6|8]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from tests.support.servers import free_port

REGION = "eu-west-1"
BUCKET = "planning-bench"
ROWS_PER_PARTITION = 20
COMMITS = 2
COMPETITORS = (("hudi-flight", "mdt"), ("hudi-flight (storage listing)", "listing"), ("hudi-rs", "hudi"))
#: size -> list of (backend, partitions, {competitor key: repeat}, table version); a missing key is not run.
ALL3 = {"mdt": 3, "listing": 3, "hudi": 3}
SLOW = {"mdt": 3, "listing": 1, "hudi": 1}
SIZES: dict[str, list[tuple[str, int, dict[str, int], int]]] = {
    "quick": [("local", 100, ALL3, 8), ("s3", 100, ALL3, 8), ("s3", 100, ALL3, 6)],
    "full": [
        ("local", 100, ALL3, 8), ("local", 1000, ALL3, 8), ("local", 10000, ALL3, 8),
        ("s3", 100, ALL3, 8), ("s3", 1000, ALL3, 8), ("s3", 2000, SLOW, 8),
        ("s3", 10000, {"mdt": 3, "listing": 1}, 8),
        ("s3", 100, ALL3, 6), ("s3", 1000, ALL3, 6), ("s3", 2000, SLOW, 6),
    ],
}


class MotoServer:
    """A moto S3 server subprocess whose request log can be counted."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._dir = tempfile.mkdtemp(prefix="moto-bench-")
        self.log_path = Path(self._dir) / "requests.log"
        moto = shutil.which("moto_server", path=str(Path(sys.executable).parent)) or "moto_server"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [moto, "-H", "127.0.0.1", "-p", str(self.port)], stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("moto_server did not start")

    def request_count(self) -> int:
        """Requests served so far (moto logs one line per HTTP request, with its method)."""
        self._log.flush()
        # werkzeug colours some lines (a 206 of a ranged GET, 304, 4xx): strip the colour codes first
        text = re.sub(r"\x1b\[[0-9;]*m", "", self.log_path.read_text(errors="replace"))
        methods = ('"GET ', '"HEAD ', '"POST ', '"PUT ')
        return sum(1 for line in text.splitlines() if any(m in line for m in methods))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()
        shutil.rmtree(self._dir, ignore_errors=True)


def _credentials() -> dict[str, str]:
    return {"key": "testing", "secret": "testing"}


def storage_options(endpoint: str) -> dict[str, Any]:
    creds = _credentials()
    return {
        **creds,
        "client_kwargs": {"endpoint_url": endpoint, "region_name": REGION},
        "skip_instance_cache": True,  # every run starts cold: no cached listings
        "use_listings_cache": False,
    }


def hudi_options(endpoint: str) -> dict[str, str]:
    creds = _credentials()
    return {
        "aws_endpoint_url": endpoint,
        "aws_allow_http": "true",
        "aws_access_key_id": creds["key"],
        "aws_secret_access_key": creds["secret"],
        "aws_region": REGION,
    }


def create_bucket(endpoint: str) -> None:
    import boto3

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client("s3", endpoint_url=endpoint, region_name=REGION)
    client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})


def bench_data_dir() -> Path:
    """Where generated local benchmark tables are cached (outside the repository)."""
    return Path(os.environ.get("HUDI_FLIGHT_BENCH_DATA", "/tmp/hudi-flight-bench"))


def table_spec(partitions: int, rows_per_partition: int = ROWS_PER_PARTITION, commits: int = COMMITS,
               table_version: int = 8):
    from hudi_generator.generator import MERGE_ON_READ, GeneratorSpec

    return GeneratorSpec(
        rows=partitions * rows_per_partition,
        partitions=partitions,
        files_per_partition=1,
        commits=commits,
        update_fraction=0.05,
        delete_fraction=0.0,
        table_type=MERGE_ON_READ,
        metadata_table=True,
        workers=8,
        table_version=table_version,
    )


def build_table(uri: str, partitions: int, options: dict[str, Any] | None = None, **spec_kw: Any) -> None:
    from hudi_generator.generator import generate

    opts = {k: v for k, v in (options or {}).items() if k not in ("skip_instance_cache", "use_listings_cache")}
    generate(uri, table_spec(partitions, **spec_kw), opts or None)


def local_table(partitions: int, base: Path | None = None, log: Callable[[str], None] = print, **spec_kw: Any) -> str:
    """A cached local table with ``partitions`` partitions; generated (atomically) when missing."""
    spec = table_spec(partitions, **spec_kw)
    base = base or bench_data_dir()
    version = "" if spec.table_version == 8 else f"-v{spec.table_version}"
    path = base / "planning" / f"mor-p{partitions}-r{spec.rows}-c{spec.commits}{version}" / "trips"
    if (path / ".hoodie" / "hoodie.properties").exists():
        return str(path)
    tmp = path.parent.with_name(path.parent.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    t0 = time.perf_counter()
    build_table(str(tmp / "trips"), partitions, None, **spec_kw)
    shutil.rmtree(path.parent, ignore_errors=True)
    tmp.rename(path.parent)
    log(f"generated {partitions} partitions locally in {time.perf_counter() - t0:.1f}s at {path}")
    return str(path)


def _median(values: list[float]) -> float:
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def measure_ours(
    uri: str, options: dict[str, Any] | None, use_mdt: bool, server: MotoServer | None, repeat: int
) -> dict[str, Any]:
    """Cold open + plan with hudi-flight; requests by ``Storage.stats`` and (on S3) server-side."""
    from catalog import HudiTable, ReadOptions
    from catalog.plan.planner import file_slices

    times, plan_requests, total_requests, server_requests, slices, kind = [], 0, 0, None, 0, ""
    for _ in range(repeat):
        before = server.request_count() if server else 0
        t0 = time.perf_counter()
        table = HudiTable.open(uri, options, use_metadata_table=use_mdt)
        opened = table.storage.stats.total
        planned = list(file_slices(table.state, ReadOptions()))
        times.append(time.perf_counter() - t0)
        total_requests = table.storage.stats.total
        plan_requests = total_requests - opened
        if server:
            server_requests = server.request_count() - before
        slices = len(planned)
        kind = type(table.state.listing).__name__
    return {
        "seconds": _median(times),
        "runs": repeat,
        "requests_planning": plan_requests,
        "requests_total": total_requests,
        "requests_server": server_requests,
        "requests": server_requests if server else total_requests,
        "slices": slices,
        "listing": kind,
    }


def measure_hudi(uri: str, options: dict[str, str] | None, server: MotoServer | None, repeat: int) -> dict[str, Any]:
    """Cold build + ``get_file_slices()`` with the ``hudi`` package; requests only on S3."""
    from hudi import HudiTableBuilder

    times, server_requests, slices = [], None, 0
    for _ in range(repeat):
        before = server.request_count() if server else 0
        t0 = time.perf_counter()
        builder = HudiTableBuilder.from_base_uri(uri)
        if options:
            builder = builder.with_storage_options(options)
        planned = builder.build().get_file_slices()
        times.append(time.perf_counter() - t0)
        if server:
            server_requests = server.request_count() - before
        slices = len(planned)
    return {"seconds": _median(times), "runs": repeat, "requests_server": server_requests,
            "requests": server_requests, "slices": slices}


def _measure_all(uri, options, hopts, server, repeats, log) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for key in ("mdt", "listing", "hudi"):
        n = repeats.get(key, 0)
        if n <= 0:
            continue
        t0 = time.perf_counter()
        if key == "hudi":
            results[key] = measure_hudi(uri, hopts, server, n)
        else:
            results[key] = measure_ours(uri, options, key == "mdt", server, n)
        log(f"  {key}: {n} run(s) in {time.perf_counter() - t0:.1f}s -> {results[key]['seconds']:.3f}s median, "
            f"{results[key]['requests']} requests, {results[key]['slices']} slices")
    return results


def benchmark(
    partitions: int,
    backend: str = "s3",
    repeats: dict[str, int] | None = None,
    log: Callable[[str], None] = print,
    data_dir: Path | None = None,
    **spec_kw: Any,
) -> dict[str, Any]:
    """Measure the competitors in ``repeats`` (key -> number of runs) on one table."""
    repeats = dict(ALL3 if repeats is None else repeats)
    if backend == "local":
        uri = local_table(partitions, data_dir, log, **spec_kw)
        results = _measure_all(uri, None, None, None, repeats, log)
    elif backend == "s3":
        server = MotoServer()
        try:
            create_bucket(server.endpoint)
            uri = f"s3://{BUCKET}/trips"
            options = storage_options(server.endpoint)
            t0 = time.perf_counter()
            build_table(uri, partitions, options, **spec_kw)
            log(f"generated {partitions} partitions on moto in {time.perf_counter() - t0:.1f}s")
            results = _measure_all(uri, options, hudi_options(server.endpoint), server, repeats, log)
        finally:
            server.stop()
    else:
        raise ValueError(f"unknown backend {backend!r}; expected 'local' or 's3'")
    results.update(partitions=partitions, backend=backend, table_version=spec_kw.get("table_version", 8))
    if "mdt" in results and results["mdt"]["listing"] != "MetadataTableListing":
        raise RuntimeError("the metadata table was not used for planning")
    counts = {k: results[k]["slices"] for k in ("mdt", "listing", "hudi") if k in results}
    if len(set(counts.values())) > 1:
        raise RuntimeError(f"slice counts differ: {counts}")
    if "mdt" in results:
        for k in ("listing", "hudi"):
            if k in results:
                results[f"speedup_vs_{k}"] = results[k]["seconds"] / results["mdt"]["seconds"]
    return results


def rows_for(res: dict[str, Any]) -> list[dict]:
    from bench.common import row

    where = "S3/moto" if res["backend"] == "s3" else "local disk"
    version = res.get("table_version", 8)
    name = f"planning/{res['partitions']:,} partitions ({where})" + (f" v{version}" if version != 8 else "")
    rows = []
    for who, k in COMPETITORS:
        if k not in res:
            continue
        m = res[k]
        params = {"partitions": res["partitions"], "backend": res["backend"], "slices": m["slices"],
                  "table_version": version}
        rows.append(row(name, who, "median wall time", m["seconds"], "s", params=params, repeats=m["runs"]))
        if m["requests"] is not None:
            how = "server-side" if res["backend"] == "s3" else "Storage.stats"
            rows.append(row(name, who, "storage requests", m["requests"], "requests",
                            params={**params, "counted": how}, repeats=m["runs"]))
    return rows


def run(size: str) -> list[dict]:
    """Harness entry (``python -m bench``)."""
    from bench.common import check_size

    rows: list[dict] = []
    for backend, parts, repeats, version in SIZES[check_size(size)]:
        print(f"[planning] {backend} {parts} partitions v{version} {repeats}", file=sys.stderr, flush=True)
        res = benchmark(parts, backend, repeats, log=lambda msg: print(f"[planning] {msg}", file=sys.stderr, flush=True),
                        table_version=version)
        rows += rows_for(res)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("local", "s3"), default="s3")
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip", nargs="*", default=[], choices=("mdt", "listing", "hudi"))
    parser.add_argument("--table-version", type=int, choices=(6, 8), default=8)
    args = parser.parse_args(argv)
    repeats = {k: args.repeat for k in ("mdt", "listing", "hudi") if k not in args.skip}
    res = benchmark(args.partitions, args.backend, repeats, table_version=args.table_version)
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
