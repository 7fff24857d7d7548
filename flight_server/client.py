"""Python client of the hudi-flight service.

>>> client = connect("grpc://127.0.0.1:8815")            # doctest: +SKIP
>>> client.read("ns.trips", columns=["id"], filters=[("city", "=", "sf")])  # doctest: +SKIP

``read_batches`` plans the query, then fetches every endpoint on a thread pool, following the
endpoint's locations; an endpoint that fails for a transport reason is retried once on another
location, skipping the rows already delivered (a split always streams its rows in the same
order), so nothing is duplicated or lost. Batches are yielded as they arrive.
"""

from __future__ import annotations

import json
import queue
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa
import pyarrow.flight as flight

_RETRYABLE = (flight.FlightUnavailableError, flight.FlightTimedOutError, flight.FlightInternalError, OSError)
_DONE = object()


def _normalise_uri(uri: str) -> str:
    return "grpc://" + uri if "://" not in uri else uri


class HudiFlightClient:
    """A connection to one hudi-flight server (plus any data servers its endpoints name).

    Args:
        uri: ``grpc://host:port`` (``host:port`` is accepted too).
        max_workers: endpoints fetched in parallel.
        token: bearer token for a server started with ``auth_tokens``.
        **client_kwargs: passed to :class:`pyarrow.flight.FlightClient` for every connection.
    """

    def __init__(
        self, uri: str = "grpc://127.0.0.1:8815", max_workers: int = 8, token: str | None = None, **client_kwargs: Any
    ):
        self.uri = _normalise_uri(uri)
        self.max_workers = max_workers
        headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
        self.options = flight.FlightCallOptions(headers=headers)
        self._client_kwargs = client_kwargs
        self._clients: dict[str, flight.FlightClient] = {}
        self._lock = threading.Lock()
        self.flight = self._client(self.uri)

    def _client(self, uri: str) -> flight.FlightClient:
        with self._lock:
            client = self._clients.get(uri)
            if client is None:
                client = self._clients[uri] = flight.FlightClient(uri, **self._client_kwargs)
            return client

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()

    def __enter__(self) -> "HudiFlightClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- actions -------------------------------------------------------------------------
    def action(self, name: str, body: dict[str, Any] | None = None) -> Any:
        """Run a service action; returns its decoded JSON result."""
        results = list(self.flight.do_action(flight.Action(name, json.dumps(body or {}).encode()), self.options))
        return json.loads(results[0].body.to_pybytes()) if results else None

    def namespaces(self) -> list[str]:
        return self.action("list-namespaces")

    def tables(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.action("list-tables", {"namespace": namespace} if namespace else {})

    def table_info(self, table: str) -> dict[str, Any]:
        return self.action("table-info", {"table": table})

    def register(
        self,
        table: str,
        uri: str,
        storage_options: dict[str, Any] | None = None,
        properties: dict[str, str] | None = None,
        replace: bool = False,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"table": table, "uri": uri, "replace": replace}
        if storage_options:
            body["storage_options"] = storage_options
        if properties:
            body["properties"] = properties
        return self.action("register-table", body)

    def unregister(self, table: str) -> dict[str, Any]:
        return self.action("unregister-table", {"table": table})

    def refresh(self, table: str | None = None) -> dict[str, Any]:
        return self.action("refresh-table", {"table": table} if table else {})

    def health(self) -> dict[str, Any]:
        return self.action("health")

    # -- queries -------------------------------------------------------------------------
    @staticmethod
    def command(table: str, **options: Any) -> bytes:
        """The JSON command for a query (``None`` options are left out)."""
        doc: dict[str, Any] = {"table": table}
        for key, value in options.items():
            if value is not None:
                doc[key] = [list(f) for f in value] if key == "filters" else value
        return json.dumps(doc).encode()

    def plan(self, table: str, **options: Any) -> flight.FlightInfo:
        """Plan a query: the ``FlightInfo`` with one endpoint per split."""
        descriptor = flight.FlightDescriptor.for_command(self.command(table, **options))
        return self.flight.get_flight_info(descriptor, self.options)

    def schema(self, table: str, **options: Any) -> pa.Schema:
        descriptor = flight.FlightDescriptor.for_command(self.command(table, **options))
        return self.flight.get_schema(descriptor, self.options).schema

    def _attempts(self, endpoint: flight.FlightEndpoint) -> list[flight.FlightClient]:
        uris = [loc.uri.decode() if isinstance(loc.uri, bytes) else loc.uri for loc in endpoint.locations]
        uris = [u for u in uris if not u.startswith("arrow-flight-reuse-connection")]
        if not uris:
            return [self.flight, self.flight]
        clients = [self._client(u) for u in uris[:2]]
        return clients if len(clients) == 2 else clients + [self.flight]

    def _fetch(self, endpoint: flight.FlightEndpoint, emit: Callable[[pa.RecordBatch], bool]) -> None:
        """Stream one endpoint into ``emit`` (which returns False to stop), retrying once."""
        delivered = 0
        attempts = self._attempts(endpoint)
        for attempt, client in enumerate(attempts):
            try:
                reader = client.do_get(endpoint.ticket, self.options)
                skip = delivered
                for chunk in reader:
                    batch = chunk.data
                    if skip:
                        if batch.num_rows <= skip:
                            skip -= batch.num_rows
                            continue
                        batch, skip = batch.slice(skip), 0
                    delivered += batch.num_rows
                    if not emit(batch):
                        reader.cancel()
                        return
                return
            except _RETRYABLE:
                if attempt == len(attempts) - 1:
                    raise

    def read_batches(
        self,
        table: str,
        columns: Sequence[str] | None = None,
        filters: Sequence[tuple] | None = None,
        query_type: str | None = None,
        as_of: str | None = None,
        start: str | None = None,
        end: str | None = None,
        limit: int | None = None,
        on_plan: Callable[[flight.FlightInfo], None] | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Plan the query and yield its record batches as endpoints deliver them (any order)."""
        info = self.plan(
            table, columns=list(columns) if columns is not None else None, filters=filters,
            query_type=query_type, as_of=as_of, start=start, end=end, limit=limit,
        )
        if on_plan is not None:
            on_plan(info)
        yield from self.fetch(info)

    def fetch(self, info: flight.FlightInfo) -> Iterator[pa.RecordBatch]:
        """Fetch every endpoint of a planned query in parallel; yield batches as they arrive."""
        endpoints = list(info.endpoints)
        if not endpoints:
            return
        results: queue.Queue = queue.Queue(maxsize=4 * self.max_workers)
        stopped = threading.Event()

        def emit(batch: pa.RecordBatch) -> bool:
            while not stopped.is_set():
                try:
                    results.put(batch, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def run(endpoint: flight.FlightEndpoint) -> None:
            try:
                self._fetch(endpoint, emit)
            except BaseException as err:  # handed to the consumer, which re-raises it
                emit(err)  # type: ignore[arg-type]

        pool = ThreadPoolExecutor(min(self.max_workers, len(endpoints)), thread_name_prefix="hudi-flight-fetch")
        futures = [pool.submit(run, ep) for ep in endpoints]

        def finish() -> None:
            wait(futures)  # run() reports its own errors; cancelled ones need no report
            emit(_DONE)  # type: ignore[arg-type]

        threading.Thread(target=finish, daemon=True).start()
        try:
            while True:
                item = results.get()
                if item is _DONE:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stopped.set()
            pool.shutdown(wait=False, cancel_futures=True)

    def read(self, table: str, **options: Any) -> pa.Table:
        """The query result as one table (arguments as for :meth:`read_batches`)."""
        schema_holder: list[pa.Schema] = []
        batches = list(self.read_batches(table, on_plan=lambda info: schema_holder.append(info.schema), **options))
        return pa.Table.from_batches(batches, schema=schema_holder[0])


def connect(uri: str = "grpc://127.0.0.1:8815", **kwargs: Any) -> HudiFlightClient:
    """Connect to a hudi-flight server (see :class:`HudiFlightClient`)."""
    return HudiFlightClient(uri, **kwargs)


__all__ = ["HudiFlightClient", "connect"]
