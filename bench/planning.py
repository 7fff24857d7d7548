"""Planning cost on S3: metadata-table planning vs storage listing vs the ``hudi`` package.

Starts ``moto_server`` (from the venv) on a free 127.0.0.1 port, creates a bucket outside
us-east-1, writes a synthetic table with the generator (``catalog.testing.generator``, which
also writes the MDT ``files`` partition as HFiles) straight to that bucket, then plans the latest
snapshot three ways, each from a cold start (new table object, new filesystem instance):

* hudi-flight with the metadata table (``use_metadata_table=True``);
* hudi-flight with storage listing (``use_metadata_table=False``);
* the ``hudi`` package: ``HudiTable.get_file_slices()``.

Storage requests are counted twice: by hudi-flight's ``Storage.stats`` (our two paths only) and
server-side, by counting the request lines moto logs (all three). Planning time is the median of
``--repeat`` cold runs. Run: ``python -m bench.planning [--partitions 2000]`` or via
``python -m bench --only planning``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REGION = "eu-west-1"
BUCKET = "planning-bench"
SIZES = {"quick": 200, "full": 2000}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MotoServer:
    """A moto S3 server subprocess whose request log can be counted."""

    def __init__(self) -> None:
        self.port = _free_port()
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
        text = self.log_path.read_text(errors="replace")
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


def build_table(uri: str, partitions: int, options: dict[str, Any]) -> None:
    from catalog.testing.generator import MERGE_ON_READ, GeneratorSpec, generate

    spec = GeneratorSpec(
        rows=partitions * 4,
        partitions=partitions,
        files_per_partition=1,
        commits=3,
        update_fraction=0.05,
        delete_fraction=0.0,
        table_type=MERGE_ON_READ,
        metadata_table=True,
        workers=8,
    )
    generate(uri, spec, {k: v for k, v in options.items() if k not in ("skip_instance_cache", "use_listings_cache")})


def _median(values: list[float]) -> float:
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def measure_ours(uri: str, options: dict[str, Any], use_mdt: bool, server: MotoServer, repeat: int) -> dict[str, Any]:
    from catalog.table import HudiTable

    times, plan_requests, total_requests, server_requests, slices = [], 0, 0, 0, 0
    for _ in range(repeat):
        before = server.request_count()
        t0 = time.perf_counter()
        table = HudiTable.open(uri, options, use_metadata_table=use_mdt)
        opened = table.storage.stats.total
        planned = list(table.scan().plan_slices())
        times.append(time.perf_counter() - t0)
        total_requests = table.storage.stats.total
        plan_requests = total_requests - opened
        server_requests = server.request_count() - before
        slices = len(planned)
        kind = type(table.listing).__name__
    return {
        "seconds": _median(times),
        "requests_planning": plan_requests,
        "requests_total": total_requests,
        "requests_server": server_requests,
        "slices": slices,
        "listing": kind,
    }


def measure_hudi(uri: str, endpoint: str, server: MotoServer, repeat: int) -> dict[str, Any]:
    from hudi import HudiTableBuilder

    times, server_requests, slices = [], 0, 0
    for _ in range(repeat):
        before = server.request_count()
        t0 = time.perf_counter()
        table = HudiTableBuilder.from_base_uri(uri).with_storage_options(hudi_options(endpoint)).build()
        planned = table.get_file_slices()
        times.append(time.perf_counter() - t0)
        server_requests = server.request_count() - before
        slices = len(planned)
    return {"seconds": _median(times), "requests_server": server_requests, "slices": slices}


def benchmark(partitions: int, repeat: int = 3, log: Callable[[str], None] = print) -> dict[str, Any]:
    server = MotoServer()
    try:
        create_bucket(server.endpoint)
        uri = f"s3://{BUCKET}/trips"
        options = storage_options(server.endpoint)
        t0 = time.perf_counter()
        build_table(uri, partitions, options)
        log(f"generated {partitions} partitions on moto in {time.perf_counter() - t0:.1f}s")
        results = {
            "partitions": partitions,
            "mdt": measure_ours(uri, options, True, server, repeat),
            "listing": measure_ours(uri, options, False, server, repeat),
            "hudi": measure_hudi(uri, server.endpoint, server, repeat),
        }
    finally:
        server.stop()
    if results["mdt"]["listing"] != "MetadataTableListing":
        raise RuntimeError("the metadata table was not used for planning")
    if not results["mdt"]["slices"] == results["listing"]["slices"] == results["hudi"]["slices"]:
        raise RuntimeError(f"slice counts differ: {results}")
    results["speedup_vs_listing"] = results["listing"]["seconds"] / results["mdt"]["seconds"]
    results["speedup_vs_hudi"] = results["hudi"]["seconds"] / results["mdt"]["seconds"]
    return results


def run(size: str) -> list[dict]:
    """Harness entry (``python -m bench``)."""
    from bench.common import check_size, row

    parts = SIZES[check_size(size)]
    res = benchmark(parts, repeat=3, log=lambda _msg: None)
    name = f"planning/{parts} partitions (S3)"
    params = {"partitions": parts, "slices": res["mdt"]["slices"]}
    competitors = (("hudi-flight", "mdt"), ("hudi-flight (storage listing)", "listing"), ("hudi-rs", "hudi"))
    rows = [row(name, who, "median wall time", res[k]["seconds"], "s", params=params) for who, k in competitors]
    rows += [
        row(name, who, "storage requests", res[k]["requests_server"], "requests", params=params) for who, k in competitors
    ]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=SIZES["full"])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    res = benchmark(args.partitions, args.repeat)
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
