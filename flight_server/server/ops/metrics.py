"""Prometheus metrics of the server, summed over every process of one server.

prometheus_client's multiprocess mode keeps each process's values in memory-mapped files of one
directory (``PROMETHEUS_MULTIPROC_DIR``) and sums them when ``/metrics`` is scraped, so the
``--processes N`` children of a server count into the same totals. The directory is private,
under the state dir (``<state_dir>/metrics``); it must be chosen before prometheus_client is
imported, which only this module does, and only once metrics are wanted. Files left by processes
that are gone are removed when a server starts (their counts restart, as a restarted server's do).

Names (docs/flight.md, "Operations"):

* ``hudi_flight_calls_total{method,status}``, ``hudi_flight_call_seconds{method}`` (histogram);
* ``hudi_flight_rows_streamed_total``, ``hudi_flight_bytes_streamed_total``,
  ``hudi_flight_active_streams``;
* ``hudi_flight_storage_requests_total{kind}`` (list, info, open, read),
  ``hudi_flight_storage_read_bytes_total``;
* ``hudi_flight_cache_hits_total{cache}``, ``hudi_flight_cache_misses_total{cache}``,
  ``hudi_flight_cache_evictions_total{cache}``, ``hudi_flight_cache_bytes{cache}``
  (caches: ``table_states``, ``footers``, ``point_reads``, ``log_blocks``, ``split_results``,
  ``disk``, and the SQL room's: ``sql_templates``, ``sql_analyses``, ``sql_generic_analyses``,
  ``sql_parameter_places``, ``sql_result_schemas``, ``sql_wire_schemas``, ``sql_fragments``,
  ``sql_fragment_datasets``, ``sql_scan_facts``, ``sql_metadata_counts``; every ``bytes`` figure in bytes);
* ``hudi_flight_planning_seconds`` (histogram);
* the fair queue of SQL work (``engine.admission``), per user (the authenticated name, else
  ``anonymous``): ``hudi_flight_sql_queued{user}`` and ``hudi_flight_sql_running{user}`` (now),
  ``hudi_flight_sql_refused_total{user}``, and ``hudi_flight_sql_queue_wait_seconds`` (histogram
  of the time admitted work waited: ``histogram_quantile(0.99, ...)`` is its p99).
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

from flight_server.server.security.state_files import private_dir, process_alive
from flight_server.server.security.tls import TlsFiles

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_DB_FILE = re.compile(r"^[a-z_]+_(\d+)\.db$")
_lock = threading.Lock()
_metrics: "Metrics | None" = None


def prepare_dir(state_path: Path) -> Path:
    """The multiprocess directory of this server: ``$PROMETHEUS_MULTIPROC_DIR`` when a parent
    process already chose it, else ``<state_path>/metrics`` (created private and exported, so
    child processes inherit it); files of processes no longer alive are removed."""
    chosen = os.environ.get(MULTIPROC_ENV)
    folder = Path(chosen) if chosen else state_path / "metrics"
    private_dir(folder)
    os.environ.setdefault(MULTIPROC_ENV, str(folder))
    for path in folder.glob("*.db"):
        m = _DB_FILE.match(path.name)
        if m and int(m.group(1)) != os.getpid() and not process_alive(int(m.group(1))):
            path.unlink(missing_ok=True)
    return folder


class Metrics:
    """The metric objects of this process (one set per process, shared by its servers)."""

    def __init__(self) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        self.calls = Counter("hudi_flight_calls", "Flight RPCs completed", ["method", "status"], registry=None)
        self.call_seconds = Histogram("hudi_flight_call_seconds", "RPC latency", ["method"], registry=None)
        self.rows = Counter("hudi_flight_rows_streamed", "rows streamed by do_get", registry=None)
        self.bytes = Counter("hudi_flight_bytes_streamed", "Arrow bytes streamed by do_get", registry=None)
        self.active_streams = Gauge(
            "hudi_flight_active_streams", "do_get streams open", registry=None, multiprocess_mode="livesum"
        )
        self.storage_requests = Counter(
            "hudi_flight_storage_requests", "storage requests", ["kind"], registry=None
        )
        self.storage_bytes = Counter("hudi_flight_storage_read_bytes", "bytes read from storage", registry=None)
        self.cache_hits = Counter("hudi_flight_cache_hits", "cache hits", ["cache"], registry=None)
        self.cache_misses = Counter("hudi_flight_cache_misses", "cache misses", ["cache"], registry=None)
        self.cache_evictions = Counter("hudi_flight_cache_evictions", "cache evictions", ["cache"], registry=None)
        self.cache_bytes = Gauge(
            "hudi_flight_cache_bytes", "bytes held per cache", ["cache"], registry=None, multiprocess_mode="livesum"
        )
        self.planning_seconds = Histogram("hudi_flight_planning_seconds", "time to plan a query", registry=None)
        self.sql_queued = Gauge(
            "hudi_flight_sql_queued", "SQL work waiting for admission", ["user"], registry=None,
            multiprocess_mode="livesum",
        )
        self.sql_running = Gauge(
            "hudi_flight_sql_running", "SQL work admitted and running", ["user"], registry=None,
            multiprocess_mode="livesum",
        )
        self.sql_refused = Counter("hudi_flight_sql_refused", "SQL work refused by admission", ["user"], registry=None)
        self.sql_queue_wait = Histogram(
            "hudi_flight_sql_queue_wait_seconds", "time SQL work waited for admission", registry=None,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, float("inf")),
        )
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}

    def child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, kept: prometheus_client takes a lock and builds a key on
        every ``labels`` call (a dozen per query). The label values are bounded sets (methods,
        statuses, cache and storage-request kinds); a race makes the same child twice, harmlessly."""
        key = (id(metric), values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found

    def storage_request(self, kind: str, nbytes: int) -> None:
        self.child(self.storage_requests, kind).inc()
        if nbytes:
            self.storage_bytes.inc(nbytes)

    def admission_event(self, user: str, event: str, amount: float) -> None:
        """What the fair queue of SQL work tells (``engine.admission.AdmissionListener``)."""
        if event == "queued":
            self.child(self.sql_queued, user).inc(amount)
        elif event == "running":
            self.child(self.sql_running, user).inc(amount)
        elif event == "refused":
            self.child(self.sql_refused, user).inc(amount)
        elif event == "wait":
            self.sql_queue_wait.observe(amount)

    def cache_event(self, cache: str, event: str, amount: int) -> None:
        if event == "hit":
            self.child(self.cache_hits, cache).inc(amount)
        elif event == "miss":
            self.child(self.cache_misses, cache).inc(amount)
        elif event == "eviction":
            self.child(self.cache_evictions, cache).inc(amount)
        elif event == "bytes":
            self.child(self.cache_bytes, cache).set(amount)


class _Pid:
    """This process's id, read once and again in a forked child: prometheus_client checks the
    process identifier on every increment (to notice a fork), and ``os.getpid`` is a system call
    each time (a dozen per query)."""

    value = os.getpid()

    @classmethod
    def refresh(cls) -> None:
        cls.value = os.getpid()

    @classmethod
    def get(cls) -> int:
        return cls.value


os.register_at_fork(after_in_child=_Pid.refresh)


def _identify_by_cached_pid() -> None:
    """Multiprocess values keyed by :class:`_Pid` (prometheus_client's documented hook for the
    process identifier); before the first metric object is made."""
    from prometheus_client import values

    values.ValueClass = values.MultiProcessValue(process_identifier=_Pid.get)


def process_metrics(state_path: Path) -> Metrics:
    """This process's metrics, recording into the server's multiprocess directory."""
    global _metrics
    with _lock:
        if _metrics is None:
            prepare_dir(state_path)
            _identify_by_cached_pid()
            _metrics = Metrics()
        return _metrics


def _registry() -> Any:
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    return registry


def exposition() -> bytes:
    """The Prometheus text of every process of the server (the multiprocess directory)."""
    from prometheus_client import generate_latest

    return generate_latest(_registry())


def serve_metrics(host: str, port: int, tls: TlsFiles | None = None) -> Any:
    """Serve :func:`exposition` at ``http(s)://host:port/metrics`` on a daemon thread (HTTPS with
    ``tls``'s certificate); returns the HTTP server (``.shutdown()`` stops it,
    ``.server_address`` has the bound port)."""
    from prometheus_client import start_http_server

    files: dict[str, Any] = {}
    if tls is not None:
        tls.server_kwargs()  # checks the files, with errors naming the options
        files = {"certfile": tls.cert, "keyfile": tls.key}
    server, _ = start_http_server(port, addr=host, registry=_registry(), **files)
    return server


__all__ = ["MULTIPROC_ENV", "Metrics", "exposition", "prepare_dir", "process_metrics", "serve_metrics"]
