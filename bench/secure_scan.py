"""What security costs a read: plain vs static bearer token vs TLS + token, side by side in one run.

Three ``hudi-flight serve`` subprocesses over the same copy-on-write table (the
:mod:`bench.flight_scan` table): no credentials, a static token, and TLS (a
test CA's certificate, made here) + the same token. For each, round-robin:

* planning latency: ``get_flight_info`` of the whole table on a warm server and a connected
  client, p50 and p95;
* scan throughput: a full read through the Python client (one client per read, so each TLS read
  pays its one handshake; every endpoint reuses that client's channel), endpoints fetched in
  parallel.

"TLS + token, lz4 streams" asks for lz4-compressed IPC streams (flight_server/server/query/streams.py):
a third of the bytes to encrypt, plus compression. Wall time and CPU (server + client) are both
reported: on a loaded machine wall time mostly waits for a core. Rows carry the ratio to plain
(target: TLS + token within 10%).
``python -m bench.secure_scan [quick|full]``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from bench.common import ServedWarehouse, check_size, percentile, row
from bench.flight_scan import WORKERS, _table
from catalog import HudiTable
from flight_server.client.session import HudiFlightClient
from tests.support.certs import make_pki
from tests.support.credentials import prepare_state, token_toml

TOKEN = "bench-secure-scan-token-0123456789abcdef"
IDENT = "bench.trips"
PLAIN, TOKEN_ONLY, TLS_TOKEN = "hudi-flight", "hudi-flight (static token)", "hudi-flight (TLS + token)"
TLS_LZ4 = "hudi-flight (TLS + token, lz4 streams)"


class _Lz4Client(HudiFlightClient):
    """Asks for lz4-compressed IPC streams: fewer bytes to encrypt, more to compress."""

    stream_compression = "lz4"
PLANNING_CALLS = {"quick": 30, "full": 100}




def _servers(warehouse: Path, folder: Path) -> dict[str, tuple[ServedWarehouse, dict[str, Any]]]:
    """The servers and the client settings of each competitor (two share the TLS server)."""
    pki = make_pki(folder / "pki")
    config = folder / "token.toml"
    config.write_text(token_toml(TOKEN))
    tls = ["--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key)]

    def with_token(name: str) -> list[str]:
        state = folder / name  # the token's user may need rights in the catalog before serve starts
        prepare_state(str(state))
        return ["--config", str(config), "--state-dir", str(state)]

    servers: dict[str, tuple[ServedWarehouse, dict[str, Any]]] = {}
    try:
        servers[PLAIN] = (ServedWarehouse(warehouse, 1), {})
        servers[TOKEN_ONLY] = (ServedWarehouse(warehouse, 1, with_token("token")), {"token": TOKEN})
        servers[TLS_TOKEN] = (ServedWarehouse(warehouse, 1, [*with_token("tls"), *tls], scheme="grpc+tls"),
                              {"token": TOKEN, "tls_root_certs": pki.ca_cert.read_bytes()})
        servers[TLS_LZ4] = (servers[TLS_TOKEN][0], {**servers[TLS_TOKEN][1], "client": _Lz4Client})
    except BaseException:
        for server, _ in servers.values():
            server.close()
        raise
    return servers


def _client(uri: str, settings: dict[str, Any], **kwargs: Any) -> HudiFlightClient:
    options = dict(settings)
    cls = options.pop("client", HudiFlightClient)
    return cls(uri, **options, **kwargs)


def _read(uri: str, settings: dict[str, Any]) -> int:
    with _client(uri, settings, max_workers=WORKERS) as client:
        return sum(b.num_rows for b in client.read_batches(IDENT))


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _scans(servers: dict[str, tuple[ServedWarehouse, dict[str, Any]]], rows: int, repeat: int) -> dict[str, list[tuple[float, float]]]:
    """(wall, CPU of server + client) seconds per full read, round-robin after one warm-up round.

    CPU is the steadier measure on a loaded machine: wall time there mostly waits for a core.
    """
    samples: dict[str, list[tuple[float, float]]] = {c: [] for c in servers}
    for r in range(repeat + 1):
        for competitor, (server, settings) in servers.items():
            cpu0 = _cpu_seconds(server.process.pid) + time.process_time()
            t0 = time.perf_counter()
            got = _read(server.uri, settings)
            wall = time.perf_counter() - t0
            cpu = _cpu_seconds(server.process.pid) + time.process_time() - cpu0
            if got != rows:
                raise AssertionError(f"{competitor} read {got} rows, expected {rows}")
            if r:
                samples[competitor].append((wall, cpu))
    return samples


def _planning(client: HudiFlightClient, calls: int) -> Callable[[], list[float]]:
    """One round of planning calls on a connected client (the first call warms it)."""
    client.flight_info(IDENT)

    def one_round() -> list[float]:
        samples = []
        for _ in range(calls):
            t0 = time.perf_counter()
            client.flight_info(IDENT)
            samples.append(time.perf_counter() - t0)
        return samples

    return one_round


def run(size: str) -> list[dict]:
    check_size(size)
    path = _table(size)
    rows = HudiTable.open(str(path)).read(columns=["_hoodie_record_key"]).num_rows
    nbytes = sum(f.stat().st_size for f in path.rglob("*.parquet") if ".hoodie" not in f.parts)
    name = f"secure_scan/{rows:,} rows COW"
    params = {"rows": rows, "client_workers": WORKERS, "load_average": os.getloadavg()[0]}
    repeat = 7 if size == "full" else 5
    out: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="hudi-flight-secure-") as tmp:
        servers = _servers(path.parent.parent, Path(tmp))
        clients = {c: _client(s.uri, settings) for c, (s, settings) in servers.items()}
        try:
            # planning: interleaved rounds so load from elsewhere hits every variant alike
            rounds = {c: _planning(client, PLANNING_CALLS[size] // 5) for c, client in clients.items()}
            plan: dict[str, list[float]] = {c: [] for c in servers}
            for _ in range(5):
                for competitor, one_round in rounds.items():
                    plan[competitor].extend(one_round())
            scan = _scans(servers, rows, repeat)
        finally:
            for client in clients.values():
                client.close()
            for server in {id(s): s for s, _ in servers.values()}.values():
                server.close()
    for competitor in servers:
        p50 = percentile(plan[competitor], 50)
        wall = percentile([w for w, _ in scan[competitor]], 50)
        cpu = percentile([c for _, c in scan[competitor]], 50)
        out.append(row(f"planning/{name}", competitor, "p50 latency (warm)", 1000 * p50, "ms",
                       repeats=len(plan[competitor]), params=params))
        out.append(row(f"planning/{name}", competitor, "p95 latency (warm)", 1000 * percentile(plan[competitor], 95),
                       "ms", repeats=len(plan[competitor]), params=params))
        out.append(row(name, competitor, "median wall time", wall, "s", repeats=len(scan[competitor]), params=params))
        out.append(row(name, competitor, "throughput", nbytes / wall / 2**20, "MiB/s", params=params))
        out.append(row(name, competitor, "median CPU (server + client)", cpu, "s", repeats=len(scan[competitor]),
                       params=params))
        if competitor != PLAIN:
            base_wall = percentile([w for w, _ in scan[PLAIN]], 50)
            base_cpu = percentile([c for _, c in scan[PLAIN]], 50)
            out.append(row(f"planning/{name}", competitor, "p50 latency / plain", p50 / percentile(plan[PLAIN], 50), "x",
                           params=params))
            out.append(row(name, competitor, "scan wall time / plain", wall / base_wall, "x", params=params))
            out.append(row(name, competitor, "scan CPU / plain", cpu / base_cpu, "x", params=params))
    return out


if __name__ == "__main__":
    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r['name']:44} {r['competitor']:28} {r['metric']:24} {r['value']:10.3f} {r['unit']}")
