"""The operations side of one server: metrics, health checks, the per-call log line.

:class:`Operations` is what the service talks to. Metrics are recorded when the server has a
``metrics_port`` or when a parent process chose the multiprocess directory (a ``--processes``
child); otherwise prometheus_client is not even imported and recording costs nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa

from catalog.lru import CacheListener
from catalog.storage import add_request_listener
from flight_server.server.config import ServerConfig
from flight_server.server.engine.sandbox import AdmissionListener
from flight_server.server.ops.call_log import MIDDLEWARE_KEY, CallLogFactory, CallRecord
from flight_server.server.ops.live import LIVE_DIR_ENV, LiveCalls
from flight_server.server.ops.metrics import MULTIPROC_ENV, Metrics, process_metrics, serve_metrics

log = logging.getLogger(__name__)


class Operations:
    """Metrics, health and call logging of one :class:`HudiFlightServer`."""

    def __init__(self, config: ServerConfig):
        self.config = config
        wanted = config.ops.metrics_port is not None or bool(os.environ.get(MULTIPROC_ENV))
        self.metrics: Metrics | None = process_metrics(config.state_path) if wanted else None
        if self.metrics is not None:
            add_request_listener(self.metrics.storage_request)
        self.metrics_server: Any = None
        self.health: Any = None
        # the calls in flight, kept only for a server that shows them (the web console); the
        # processes of `serve --processes N` publish theirs for the first one's console
        folder = os.environ.get(LIVE_DIR_ENV)
        shown = config.ops.console_port is not None or bool(folder)
        self.live: LiveCalls | None = LiveCalls(Path(folder) if folder else None) if shown else None

    # -- wiring ------------------------------------------------------------------------------
    def middleware(self) -> dict[str, Any]:
        return {MIDDLEWARE_KEY: CallLogFactory(self._completed if self.metrics is not None else None, self.live)}

    @property
    def cache_listener(self) -> CacheListener | None:
        return self.metrics.cache_event if self.metrics is not None else None

    @property
    def admission_listener(self) -> AdmissionListener | None:
        return self.metrics.admission_event if self.metrics is not None else None

    def start(self) -> None:
        """Open the metrics and health ports (the catalog is loaded: report SERVING)."""
        config = self.config
        if config.ops.metrics_port is not None:
            tls = config.operations_tls("metrics")
            self.metrics_server = serve_metrics(config.ops.metrics_host or config.host, config.ops.metrics_port, tls)
        if config.ops.health_port is not None:
            from flight_server.server.ops.health import HealthServer

            self.health = HealthServer(config.ops.health_host or config.host, config.ops.health_port,
                                       config.operations_tls("health"))
            self.health.serving()

    def stopping(self) -> None:
        """The server begins to shut down: health checks answer NOT_SERVING from now on."""
        if self.health is not None:
            self.health.not_serving()

    def close(self) -> None:
        if self.live is not None:
            self.live.close()
        if self.health is not None:
            self.health.stop()
        if self.metrics_server is not None:
            self.metrics_server.shutdown()
            self.metrics_server.server_close()

    @property
    def metrics_port(self) -> int | None:
        return self.metrics_server.server_address[1] if self.metrics_server is not None else None

    # -- recording ---------------------------------------------------------------------------
    def _completed(self, record: CallRecord, status: str, seconds: float) -> None:
        if self.metrics is not None:
            metrics = self.metrics
            metrics.child(metrics.calls, record.method, status).inc()
            metrics.child(metrics.call_seconds, record.method).observe(seconds)

    @contextlib.contextmanager
    def planning(self) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            if self.metrics is not None:
                self.metrics.planning_seconds.observe(time.perf_counter() - started)

    def streamed(self, batches: Iterator[Any], record: CallRecord | None = None) -> Iterator[Any]:
        """``batches`` (a do_get stream), counted: rows, bytes, and the stream while it is open,
        in the metrics and on the call's ``record`` (its live cost)."""
        metrics = self.metrics
        if metrics is None and (record is None or self.live is None):
            yield from batches
            return
        if metrics is not None:
            metrics.active_streams.inc()
        try:
            for item in batches:
                batch = item[0] if isinstance(item, tuple) else item
                if isinstance(batch, pa.RecordBatch):
                    rows, nbytes = batch.num_rows, batch.nbytes
                    if metrics is not None:
                        metrics.rows.inc(rows)
                        metrics.bytes.inc(nbytes)
                    if record is not None:
                        record.streamed(rows, nbytes)
                yield item
        finally:
            if metrics is not None:
                metrics.active_streams.dec()


__all__ = ["Operations"]
