"""Request bodies bounded before they are held, in every server mode (issue 39).

For each mode of ``hudi-flight serve`` (one process, the default; ``--processes 2``; both with
TLS too; a cluster coordinator; a worker registered with it), with credentials (a valid static bearer token) and
without: 16 clients send a 200 MB command at once (``get_flight_info``), while one legitimate
client loops over a point read (plan and stream). Reported per mode: the growth of the server's
process-tree RSS from before the bodies to the peak while they were sent (target < 256 MiB), the
legitimate requests answered and failed (target 0 failed), the bodies refused and the median
time to refuse one (most of it the client's: it builds and sends its 200 MB message). The relay in
front of every mode (ending TLS where it is on) cuts a message whose gRPC prefix declares more
than the bound (``runtime/h2_guard.py``). Not part of the test suite:
``python -m bench --only bodies --size quick``.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import generated_once, row, table_dir, tree_rss

BODIES = 16
BODY_BYTES = 200 << 20
NAMESPACE, TABLE = "bodies", "trips"
TOKEN, TOKEN_USER = "bench-bodies-token", "bencher"
ROWS = {"quick": 20_000, "full": 200_000}


def _warehouse(size: str) -> Path:
    from hudi_generator.generator import GeneratorSpec

    spec = GeneratorSpec(rows=ROWS[size], partitions=4, files_per_partition=1, commits=1, table_name=TABLE)
    warehouse = table_dir("bodies", size) / "wh"
    generated_once(warehouse / NAMESPACE / TABLE, spec, warehouse / f"{TABLE}-{ROWS[size]}.done")
    return warehouse


class _Bearer:
    """Client middleware sending the static token (``flight.ClientMiddlewareFactory``)."""

    @staticmethod
    def factory() -> Any:
        import pyarrow.flight as flight

        class Header(flight.ClientMiddleware):
            def sending_headers(self) -> dict[str, str]:
                return {"authorization": f"Bearer {TOKEN}"}

        class Factory(flight.ClientMiddlewareFactory):
            def start_call(self, info: flight.CallInfo) -> flight.ClientMiddleware:
                return Header()

        return Factory()


@dataclass(frozen=True)
class Target:
    """Where a client connects, and the CA it trusts (``None``: cleartext)."""

    uri: str
    ca: bytes | None = None

    def connect(self, middleware: list[Any]) -> Any:
        import pyarrow.flight as flight

        return flight.connect(self.uri, middleware=middleware, **({"tls_root_certs": self.ca} if self.ca else {}))


def _legitimate(target: Target) -> int:
    import pyarrow.flight as flight

    with target.connect([]) as client:
        info = client.get_flight_info(flight.FlightDescriptor.for_path(NAMESPACE, TABLE))
        return sum(client.do_get(e.ticket).read_all().num_rows for e in info.endpoints[:1])


def _send(target: Target, body: bytes, credentials: bool) -> tuple[bool, float]:
    """One body; whether the server refused it, and how soon."""
    import pyarrow.flight as flight

    t0 = time.perf_counter()
    with target.connect([_Bearer.factory()] if credentials else []) as client:
        try:
            client.get_flight_info(flight.FlightDescriptor.for_command(body), flight.FlightCallOptions(timeout=120))
        except flight.FlightError:
            return True, time.perf_counter() - t0
    return False, time.perf_counter() - t0


def _measure(target: Target, pids: list[int], credentials: bool, body: bytes) -> dict[str, Any]:
    _legitimate(target)  # warm
    before = sum(tree_rss(p) for p in pids)
    peak, done = before, threading.Event()
    answered, failed = [0], [0]

    def legitimate() -> None:
        while not done.is_set():
            try:
                _legitimate(target)
                answered[0] += 1
            except Exception:  # a failed legitimate request is what this counts
                failed[0] += 1

    def watch() -> None:
        nonlocal peak
        while not done.wait(0.05):
            peak = max(peak, sum(tree_rss(p) for p in pids))

    threads = [threading.Thread(target=legitimate), threading.Thread(target=watch)]
    for t in threads:
        t.start()
    try:
        with ThreadPoolExecutor(BODIES) as pool:
            outcomes = list(pool.map(lambda _: _send(target, body, credentials), range(BODIES)))
        time.sleep(1.0)  # the legitimate client keeps going a moment after
    finally:
        done.set()
        for t in threads:
            t.join(120)
    return {"growth": max(0, peak - before), "answered": answered[0], "failed": failed[0],
            "refused": sum(r for r, _ in outcomes), "refuse_seconds": statistics.median(s for _, s in outcomes)}


def _modes(warehouse: Path, root: Path, config: Path) -> Any:
    """(mode name, where clients connect, serving pids) for each mode, started one after the other."""
    from tests.support.certs import make_pki
    from tests.support.processes import ServeProcess

    secret = root / "secret.hex"
    secret.write_text("ab" * 32 + "\n")
    secret.chmod(0o600)

    def common(name: str) -> list[str]:
        return ["--warehouse", str(warehouse), "--catalog-url", f"sqlite:///{root / 'catalog.db'}",
                "--state-dir", str(root / name), "--secret-file", str(secret), "--config", str(config)]

    pki = make_pki(root / "pki")
    tls = ["--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key)]
    for name, processes, secure in (("one process", 1, False), ("one process, TLS", 1, True),
                                    ("2 processes", 2, False), ("2 processes, TLS", 2, True)):
        folder = name.replace(", ", "-").replace(" ", "-")
        served = ServeProcess("--port", "0", "--processes", str(processes), *(tls if secure else []),
                              *common(folder), log=root / f"{folder}.log")
        try:
            if secure:
                yield name, Target(f"grpc+tls://127.0.0.1:{served.port}", pki.ca_cert.read_bytes()), [served.pid]
            else:
                yield name, Target(served.uri), [served.pid]
        finally:
            served.stop()
    coordinator = ServeProcess("--port", "0", "--role", "coordinator", *common("coordinator"),
                               log=root / "coordinator.log")
    try:
        yield "coordinator", Target(coordinator.uri), [coordinator.pid]
        worker = ServeProcess("--port", "0", "--role", "worker", "--coordinator", coordinator.uri,
                              *common("worker"), log=root / "worker.log")
        try:
            yield "worker", Target(worker.uri), [worker.pid]
        finally:
            worker.stop()
    finally:
        coordinator.stop()


def run(size: str) -> list[dict]:
    warehouse = _warehouse(size)
    root = Path(tempfile.mkdtemp(prefix="hudi-flight-bench-bodies-"))
    config = root / "serve.json"
    # a static token for the bodies sent with credentials; anonymous reads stay on for the
    # legitimate client (loopback)
    config.write_text(json.dumps({"server": {"tokens": {TOKEN: TOKEN_USER}, "anonymous_read": "on"}}))
    body = json.dumps({"table": f"{NAMESPACE}.{TABLE}", "pad": "x" * BODY_BYTES}).encode()
    out: list[dict] = []
    for mode, target, pids in _modes(warehouse, root, config):
        for credentials in (False, True):
            got = _measure(target, pids, credentials, body)
            params = {"mode": mode, "credentials": credentials, "bodies": BODIES, "body_mib": BODY_BYTES >> 20}
            name = f"bodies/{mode}, {'with' if credentials else 'without'} credentials"
            out += [
                row(name, "hudi-flight", "process-tree RSS growth", got["growth"] / (1 << 20), "MiB", params=params),
                row(name, "hudi-flight", "bodies refused", got["refused"], "bodies", params=params),
                row(name, "hudi-flight", "median time to refuse a body", got["refuse_seconds"] * 1000, "ms",
                    params=params),
                row(name, "hudi-flight", "legitimate requests answered", got["answered"], "requests", params=params),
                row(name, "hudi-flight", "legitimate requests failed", got["failed"], "requests", params=params),
            ]
    return out


if __name__ == "__main__":  # pragma: no cover - manual runs
    import sys

    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r['name']:<48} {r['metric']:<32} {r['value']:>10.2f} {r['unit']}")
