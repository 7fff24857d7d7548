"""The Python client of a hudi-flight server: one Flight session for every client-side surface.

>>> client = connect("grpc://127.0.0.1:8815")                                 # doctest: +SKIP
>>> client.read("ns.trips", columns=["id"], filters=[("city", "=", "sf")])    # doctest: +SKIP

The CLI, the Spark source and the SQL driver all talk to the server through this class, so there
is one URI syntax, one retry policy and one error mapping:

* planned work is plain data (:class:`PlannedEndpoint`: ticket bytes, location strings, weight),
  because Spark pickles readers and partitions and pyarrow's Flight objects do not pickle;
* an endpoint is read from its first location and, if the stream fails for a transport reason,
  once more from the next one (or the same server), skipping the rows already delivered (a
  split always streams its rows in the same order), so nothing is duplicated or lost; an
  endpoint that is not a split (a Flight SQL statement result, whose row order may change when
  run again) is retried only if no row had been delivered yet;
* Flight status errors become builtins whose message names the server and the request:
  unreachable -> :class:`ConnectionError`, unknown table -> :class:`LookupError`, refused
  credentials -> :class:`PermissionError`, bad query -> :class:`ValueError`, unsupported ->
  :class:`NotImplementedError`.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Generator, Iterator, Mapping

import pyarrow as pa
import pyarrow.flight as flight

from catalog.errors import CorruptBlockWarning
from catalog.plan.options import ReadOptions, read_options

DEFAULT_PORT = 8815
DEFAULT_URI = f"grpc://127.0.0.1:{DEFAULT_PORT}"
_SCHEMES = ("grpc", "grpc+tcp", "grpc+tls")
_REUSE_CONNECTION = "arrow-flight-reuse-connection"
_DONE = object()


def normalize_uri(uri: str) -> str:
    """``host:port`` / ``grpc://host[:port]`` -> a URI pyarrow.flight accepts."""
    uri = uri.strip()
    if not uri:
        raise ValueError(f"the hudi-flight server URI is empty; pass e.g. {DEFAULT_URI}")
    if "://" not in uri:
        uri = f"grpc://{uri}"
    scheme, rest = uri.split("://", 1)
    if scheme not in _SCHEMES:
        raise ValueError(f"unsupported hudi-flight URI scheme {scheme!r} in {uri!r}; use grpc:// or grpc+tls://")
    if ":" not in rest.rsplit("]", 1)[-1]:
        rest = f"{rest}:{DEFAULT_PORT}"
    return f"{scheme}://{rest}"


def _first_line(err: BaseException) -> str:
    """The server's message without gRPC's debug context lines."""
    text = str(err.args[0] if isinstance(err, KeyError) and err.args else err)
    return text.split(". Detail:")[0].splitlines()[0] if text else type(err).__name__


@contextlib.contextmanager
def translated_errors(uri: str, what: str) -> Iterator[None]:
    """Turn Flight status errors into builtins whose message names the server and the request."""
    try:
        yield
    except (flight.FlightUnavailableError, flight.FlightTimedOutError) as err:
        raise ConnectionError(f"hudi-flight server {uri} is unreachable ({what}): {_first_line(err)}") from err
    except KeyError as err:  # NOT_FOUND arrives as pyarrow.lib.ArrowKeyError, a KeyError
        raise LookupError(f"{what}: {_first_line(err)}") from err
    except (flight.FlightUnauthenticatedError, flight.FlightUnauthorizedError) as err:
        raise PermissionError(f"{what} refused by {uri}: {_first_line(err)}") from err
    except pa.ArrowInvalid as err:  # INVALID_ARGUMENT
        raise ValueError(f"{what} rejected by {uri}: {_first_line(err)}") from err
    except pa.ArrowNotImplementedError as err:  # UNIMPLEMENTED
        raise NotImplementedError(f"{what}: {_first_line(err)}") from err


@dataclass(frozen=True)
class PlannedEndpoint:
    """One endpoint of a planned query, as picklable plain data."""

    ticket: bytes
    locations: tuple[str, ...]
    weight: float
    metadata: Mapping[str, Any]


@dataclass(frozen=True)
class QueryPlan:
    """A planned query: its schema, endpoints and the server's estimates."""

    schema: pa.Schema
    endpoints: list[PlannedEndpoint]
    total_records: int
    total_bytes: int


def command(table: str, options: ReadOptions) -> bytes:
    """The JSON command of a query (interfaces.md section 2)."""
    return json.dumps({"table": table, **options.to_json()}, separators=(",", ":")).encode()


def _location_uri(location: flight.Location) -> str:
    uri = location.uri
    return uri.decode() if isinstance(uri, bytes) else str(uri)


class HudiFlightClient:
    """A connection to one hudi-flight server (plus any data servers its endpoints name).

    Args:
        uri: ``grpc://host:port`` (``host:port`` accepted).
        token: bearer token for a server that requires one.
        timeout: seconds per call (``None``: no deadline).
        max_workers: endpoints fetched in parallel by :meth:`read_batches`.
        **client_kwargs: passed to every :class:`pyarrow.flight.FlightClient`.
    """

    def __init__(
        self,
        uri: str = DEFAULT_URI,
        *,
        token: str | None = None,
        timeout: float | None = None,
        max_workers: int = 8,
        **client_kwargs: Any,
    ):
        self.uri = normalize_uri(uri)
        self.max_workers = max_workers
        headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
        self.options = flight.FlightCallOptions(timeout=timeout, headers=headers)
        self._client_kwargs = client_kwargs
        self._clients: dict[str, flight.FlightClient] = {}
        self._lock = threading.Lock()
        with translated_errors(self.uri, "connect"):
            self.flight = self._client(self.uri)

    def _client(self, uri: str) -> flight.FlightClient:
        if uri.startswith(_REUSE_CONNECTION):
            uri = self.uri
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

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- actions -------------------------------------------------------------------------
    def action(self, name: str, body: Mapping[str, Any] | None = None) -> Any:
        """Run a service action; returns its decoded JSON result."""
        payload = json.dumps(dict(body or {})).encode()
        with translated_errors(self.uri, f"action {name}"):
            results = list(self.flight.do_action(flight.Action(name, payload), self.options))
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
        storage_options: Mapping[str, Any] | None = None,
        properties: Mapping[str, str] | None = None,
        replace: bool = False,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"table": table, "uri": uri, "replace": replace}
        if storage_options:
            body["storage_options"] = dict(storage_options)
        if properties:
            body["properties"] = dict(properties)
        return self.action("register-table", body)

    def unregister(self, table: str) -> dict[str, Any]:
        return self.action("unregister-table", {"table": table})

    def refresh(self, table: str | None = None) -> dict[str, Any]:
        return self.action("refresh-table", {"table": table} if table else {})

    def health(self) -> dict[str, Any]:
        return self.action("health")

    # -- planning ------------------------------------------------------------------------
    def flight_info(self, table: str, options: ReadOptions | None = None, /, **kwargs: Any) -> flight.FlightInfo:
        """Plan a query: the raw ``FlightInfo`` with one endpoint per split."""
        descriptor = flight.FlightDescriptor.for_command(command(table, read_options(options, **kwargs)))
        with translated_errors(self.uri, f"planning {table}"):
            return self.flight.get_flight_info(descriptor, self.options)

    def plan(self, table: str, options: ReadOptions | None = None, /, **kwargs: Any) -> QueryPlan:
        """Plan a query: its schema and endpoints as plain data."""
        return query_plan(self.flight_info(table, options, **kwargs))

    def plan_descriptor(self, descriptor: flight.FlightDescriptor, what: str) -> QueryPlan:
        """Plan any descriptor (a Flight SQL command, for one): its schema and endpoints."""
        with translated_errors(self.uri, what):
            return query_plan(self.flight.get_flight_info(descriptor, self.options))

    def schema(self, table: str, options: ReadOptions | None = None, /, **kwargs: Any) -> pa.Schema:
        """The result schema of a query, without planning it."""
        descriptor = flight.FlightDescriptor.for_command(command(table, read_options(options, **kwargs)))
        with translated_errors(self.uri, f"schema of {table}"):
            return self.flight.get_schema(descriptor, self.options).schema

    # -- reading -------------------------------------------------------------------------
    def _targets(self, endpoint: PlannedEndpoint) -> list[str]:
        """Where to read an endpoint: its first two locations, else this server twice."""
        uris = [u for u in endpoint.locations if not u.startswith(_REUSE_CONNECTION)][:2]
        if not uris:
            return [self.uri, self.uri]
        return uris if len(uris) == 2 else uris + [self.uri]

    def fetch(self, endpoint: PlannedEndpoint) -> Generator[pa.RecordBatch, None, None]:
        """Stream one endpoint's record batches, retrying once elsewhere on a transport failure."""
        delivered = 0
        targets = self._targets(endpoint)
        ticket = flight.Ticket(endpoint.ticket)
        for attempt, target in enumerate(targets):
            try:
                with translated_errors(target, "reading an endpoint"):
                    reader = self._client(target).do_get(ticket, self.options)
                    skip = delivered
                    for chunk in reader:
                        _warn_corrupt_blocks(chunk.app_metadata)
                        batch = chunk.data
                        if skip:
                            if batch.num_rows <= skip:
                                skip -= batch.num_rows
                                continue
                            batch, skip = batch.slice(skip), 0
                        delivered += batch.num_rows
                        yield batch
                return
            except ConnectionError:
                if attempt == len(targets) - 1 or (delivered and "weight" not in endpoint.metadata):
                    raise

    def read_batches(
        self,
        table: str,
        options: ReadOptions | None = None,
        /,
        *,
        on_plan: Callable[[QueryPlan], None] | None = None,
        **kwargs: Any,
    ) -> Iterator[pa.RecordBatch]:
        """Plan the query and yield its record batches as endpoints deliver them (any order)."""
        plan = self.plan(table, options, **kwargs)
        if on_plan is not None:
            on_plan(plan)
        yield from self.fetch_all(plan.endpoints)

    def fetch_all(self, endpoints: list[PlannedEndpoint]) -> Iterator[pa.RecordBatch]:
        """Fetch endpoints in parallel; yield batches as they arrive."""
        if not endpoints:
            return
        results: queue.Queue = queue.Queue(maxsize=4 * self.max_workers)
        stopped = threading.Event()

        def emit(item: Any) -> bool:
            while not stopped.is_set():
                try:
                    results.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def run(endpoint: PlannedEndpoint) -> None:
            stream = self.fetch(endpoint)
            try:
                for batch in stream:
                    if not emit(batch):
                        return
            except BaseException as err:  # handed to the consumer, which re-raises it
                emit(err)
            finally:
                stream.close()

        pool = ThreadPoolExecutor(min(self.max_workers, len(endpoints)), thread_name_prefix="hudi-flight-fetch")
        futures = [pool.submit(run, ep) for ep in endpoints]

        def finish() -> None:
            wait(futures)  # run() reports its own errors; cancelled ones need no report
            emit(_DONE)

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

    def stream(self, plan: QueryPlan) -> pa.RecordBatchReader:
        """A planned query as a streaming reader: endpoints fetched in parallel, batches handed
        on as they arrive (in any order), nothing held beyond a small queue. Closing the reader
        (or dropping it) stops the fetching."""
        return pa.RecordBatchReader.from_batches(plan.schema, self.fetch_all(plan.endpoints))

    def reader(self, table: str, options: ReadOptions | None = None, /, **kwargs: Any) -> pa.RecordBatchReader:
        """Plan the query and return its result as a streaming ``pyarrow.RecordBatchReader``."""
        return self.stream(self.plan(table, options, **kwargs))

    def read(self, table: str, options: ReadOptions | None = None, /, **kwargs: Any) -> pa.Table:
        """The query result as one table."""
        plans: list[QueryPlan] = []
        batches = list(self.read_batches(table, options, on_plan=plans.append, **kwargs))
        return pa.Table.from_batches(batches, schema=plans[0].schema)


def query_plan(info: flight.FlightInfo) -> QueryPlan:
    """A ``FlightInfo`` as plain data. Endpoint metadata that is not a JSON object (a Flight SQL
    server's, say) is ignored; such endpoints weigh 1."""
    endpoints = []
    for ep in info.endpoints:
        meta = _json_object(ep.app_metadata)
        locations = tuple(_location_uri(loc) for loc in ep.locations)
        endpoints.append(PlannedEndpoint(ep.ticket.ticket, locations, float(meta.get("weight", 1.0)), meta))
    return QueryPlan(info.schema, endpoints, info.total_records, info.total_bytes)


def _json_object(data: bytes | None) -> dict[str, Any]:
    try:
        doc = json.loads(data) if data else {}
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def connect(uri: str = DEFAULT_URI, **kwargs: Any) -> HudiFlightClient:
    """Connect to a hudi-flight server (see :class:`HudiFlightClient`)."""
    return HudiFlightClient(uri, **kwargs)



def _warn_corrupt_blocks(app_metadata: Any) -> None:
    """Turn the server's ``{"corrupt_blocks": [...]}`` batch metadata (log blocks it skipped as
    corrupt while reading, as Hudi does) into a :class:`CorruptBlockWarning` here, per block."""
    if not app_metadata:
        return
    try:
        notes = json.loads(app_metadata.to_pybytes()).get("corrupt_blocks") or []
    except (ValueError, AttributeError):
        return
    for note in notes:
        warnings.warn(CorruptBlockWarning(f"server skipped {note}"), stacklevel=4)

__all__ = [
    "DEFAULT_URI",
    "HudiFlightClient",
    "PlannedEndpoint",
    "QueryPlan",
    "command",
    "connect",
    "normalize_uri",
    "query_plan",
    "translated_errors",
]
