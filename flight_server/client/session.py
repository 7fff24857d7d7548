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
* a refusal for load (the server's retry hint, flight_server.protocol.retry) is retried with
  exponential backoff and jitter, waiting at least what the server asks, for up to
  :attr:`HudiFlightClient.busy_retry_seconds`; then it is raised as :class:`ServerBusyError`;
* Flight status errors become builtins whose message names the server and the request:
  unreachable -> :class:`ConnectionError`, unknown table -> :class:`LookupError`, refused
  credentials -> :class:`PermissionError`, bad query -> :class:`ValueError`, unsupported ->
  :class:`NotImplementedError`.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Generator, Iterator, Mapping, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from catalog.errors import CorruptBlockWarning
from catalog.parallel import bounded_parallel
from catalog.plan.options import ReadOptions, read_options
from flight_server.client.credentials import PemSource, bearer_header, tls_client_kwargs
from flight_server.protocol import wire
from flight_server.protocol.headers import ALL_ENDPOINTS_HEADER, COMPRESSION_HEADER
from flight_server.protocol.retry import decode as decode_retry_hint
from flight_server.protocol.wire import DEFAULT_PORT, DEFAULT_URI, PLAIN_SCHEME, SCHEMES, TABLE_KEY, TLS_SCHEME

_REUSE_CONNECTION = "arrow-flight-reuse-connection"
R = TypeVar("R")


class ServerBusyError(ConnectionError):
    """The server refused a call for load (one of its budgets is full) and asks to retry later.

    Attributes:
        limit: the server's bound that refused (e.g. ``max_streams_per_user``).
        retry_after: the wait the server asked for, in seconds.
    """

    def __init__(self, message: str, limit: str, retry_after: float):
        super().__init__(message)
        self.limit = limit
        self.retry_after = retry_after


def normalize_uri(uri: str) -> str:
    """``host:port`` / ``grpc://host[:port]`` -> a URI pyarrow.flight accepts."""
    uri = uri.strip()
    if not uri:
        raise ValueError(f"the hudi-flight server URI is empty; pass e.g. {DEFAULT_URI}")
    if "://" not in uri:
        uri = f"{PLAIN_SCHEME}://{uri}"
    scheme, rest = uri.split("://", 1)
    if scheme not in SCHEMES:
        raise ValueError(f"unsupported hudi-flight URI scheme {scheme!r} in {uri!r}; use grpc:// or grpc+tls://")
    if ":" not in rest.rsplit("]", 1)[-1]:
        rest = f"{rest}:{DEFAULT_PORT}"
    return f"{scheme}://{rest}"


def _first_line(err: BaseException) -> str:
    """The server's message without gRPC's debug context lines."""
    text = str(err.args[0] if isinstance(err, KeyError) and err.args else err)
    return text.split(". Detail:")[0].splitlines()[0] if text else type(err).__name__


def _is_tls(uri: str) -> bool:
    return uri.startswith(f"{TLS_SCHEME}://")


#: what gRPC's last error says (lower case) -> what it means, in one line: gRPC's own text (its
#: addresses, its TSI and SSL codes, "failed to connect to all addresses") never reaches the user
_TRANSPORT_REASONS = (
    (("dns resolution failed", "errors resolving", "domain name not found", "name or service not known"),
     "the host name does not resolve"),
    (("wrong version number", "wrong_version_number", "packet length too long", "http_request"),
     "the server does not speak TLS: use grpc:// (or start it with a TLS certificate)"),
    (("certificate verify failed", "certificate_verify_failed", "self-signed", "self signed",
      "unable to get local issuer"),
     "the server's TLS certificate is not trusted: give its CA with --tls-root-cert (tls_root_certs)"),
    (("hostname mismatch", "subject alternative name", "peer name"),
     "the server's TLS certificate does not name this host: connect by a name it carries"),
    (("certificate required", "alert certificate", "peer did not return a certificate"),
     "the server requires a client certificate signed by its client CA: give --tls-cert and --tls-key"),
    (("connection refused", "failed to connect to remote host"),
     "nothing listens there: is the server running, on this host and port?"),
    (("deadline exceeded", "timed out", "timeout"), "no answer in time: the server is down, unreachable or overloaded"),
)


def _transport_reason(uri: str, message: str) -> str:
    """What a failed connection most likely means, from gRPC's last error, in one line."""
    text = message.lower()
    for needles, reason in _TRANSPORT_REASONS:
        if any(needle in text for needle in needles):
            return reason
    if "handshake" in text or "ssl" in text:
        return "the TLS handshake failed: the server may not speak TLS, or its certificate is not trusted"
    if "socket closed" in text or "connection reset" in text or "end of tcp stream" in text:
        if _is_tls(uri):
            return ("the server closed the TLS connection: it may not speak TLS, or it requires a client "
                    "certificate signed by its client CA")
        return f"the server closed the connection: it may require TLS, use {TLS_SCHEME}://"
    return "the connection failed"


def _unreachable(uri: str, what: str, err: BaseException) -> ConnectionError:
    """The one-line error of a request that reached no server: the server's own words when it
    answered (a server's unavailable status has no gRPC text), else what the transport error means."""
    text = str(err)
    transport = text.startswith("Flight returned") or "failed to connect" in text or "last error" in text
    reason = _transport_reason(uri, text) if transport else _first_line(err)
    return ConnectionError(f"hudi-flight server {uri} is unreachable ({what}): {reason}")


#: how the server's refusals by a named limit begin ("limit sql_timeout_seconds (10) exceeded: ...")
_SERVER_LIMIT = "limit "


@contextlib.contextmanager
def translated_errors(uri: str, what: str) -> Iterator[None]:
    """Turn Flight status errors into builtins whose message names the server and the request."""
    try:
        yield
    except flight.FlightUnavailableError as err:
        hint = decode_retry_hint(err.extra_info)
        message = _first_line(err)
        if hint is not None:
            raise ServerBusyError(f"hudi-flight server {uri} is busy ({what}): {message}", hint.limit,
                                  hint.retry_after) from err
        raise _unreachable(uri, what, err) from err
    except flight.FlightTimedOutError as err:
        message = _first_line(err)
        if message.startswith(_SERVER_LIMIT):  # the server ran out of time: asking again meets the same limit
            raise TimeoutError(f"hudi-flight server {uri} stopped the request ({what}): {message}") from err
        raise _unreachable(uri, what, err) from err
    except KeyError as err:  # NOT_FOUND arrives as pyarrow.lib.ArrowKeyError, a KeyError
        raise LookupError(f"{what}: {_first_line(err)}") from err
    except (flight.FlightUnauthenticatedError, flight.FlightUnauthorizedError) as err:
        raise PermissionError(f"{what} refused by {uri}: {_first_line(err)}") from err
    except pa.ArrowInvalid as err:  # INVALID_ARGUMENT
        raise ValueError(f"{what} rejected by {uri}: {_first_line(err)}") from err
    except pa.ArrowNotImplementedError as err:  # UNIMPLEMENTED
        raise NotImplementedError(f"{what}: {_first_line(err)}") from err
    except OSError as err:  # pyarrow's get_schema loses the Flight error class; the status is in the text
        text = str(err)
        if any(f"Detail: {status}" in text for status in ("Unavailable", "TimedOut")):
            raise _unreachable(uri, what, err) from err
        if not any(f"Detail: {status}" in text for status in ("Unauthenticated", "Unauthorized")):
            raise
        raise PermissionError(f"{what} refused by {uri}: {_first_line(err)}") from err


class Backoff:
    """Waits between the attempts of a call the server refused for load: exponential, with
    jitter, never shorter than the server's hint, for up to ``budget_seconds`` in all."""

    def __init__(self, budget_seconds: float, first: float = 0.05, longest: float = 5.0):
        self._deadline = time.monotonic() + budget_seconds
        self._next = first
        self._longest = longest

    def wait(self, err: ServerBusyError) -> bool:
        """Sleep before the next attempt; ``False`` (no sleep) once the budget is spent."""
        pause = max(err.retry_after, self._next) * random.uniform(1.0, 1.5)
        if time.monotonic() + pause > self._deadline:
            return False
        time.sleep(pause)
        self._next = min(2 * self._next, self._longest)
        return True


@dataclass(frozen=True)
class PlannedEndpoint:
    """One endpoint of a planned query, as picklable plain data."""

    ticket: bytes
    locations: tuple[str, ...]
    weight: float
    metadata: Mapping[str, Any]


@dataclass(frozen=True)
class _EndpointDone:
    """Queued by a fetch thread once its endpoint delivered every batch."""

    endpoint: PlannedEndpoint


@dataclass(frozen=True)
class QueryPlan:
    """A planned query: its schema, endpoints and the server's estimates."""

    schema: pa.Schema
    endpoints: list[PlannedEndpoint]
    total_records: int
    total_bytes: int


def command(table: str, options: ReadOptions) -> bytes:
    """The JSON command of a query (docs/flight.md)."""
    return json.dumps({TABLE_KEY: table, **options.to_json()}, separators=(",", ":")).encode()


def _location_uri(location: flight.Location) -> str:
    uri = location.uri
    return uri.decode() if isinstance(uri, bytes) else str(uri)


class HudiFlightClient:
    """A connection to one hudi-flight server (plus any data servers its endpoints name).

    Args:
        uri: ``grpc://host:port`` (``host:port`` accepted), ``grpc+tls://host:port`` for TLS.
        token: bearer token (a static token of the server, or one from the basic-auth handshake).
        user, password: log in with Flight's basic-auth handshake once; the bearer token the
            server returns is sent on every later call.
        tls_root_certs: PEM (bytes, text or a file path) of the CAs that sign the server
            certificate (default: the system's roots).
        cert_chain, private_key: PEM client certificate and its key, for mutual TLS.
        timeout: seconds per call (``None``: no deadline).
        max_workers: endpoints fetched in parallel by :meth:`read_batches`.
        **client_kwargs: passed to every :class:`pyarrow.flight.FlightClient`.

    The TLS settings and the credentials apply to every server the client talks to, including
    the other locations endpoints name. A client connected with TLS never follows a plaintext
    location (it reads that endpoint from this server instead), so credentials never travel
    in the clear.

    Raises:
        ValueError: bad URI, unreadable PEM, or TLS settings with a plaintext URI.
        PermissionError: the server refused ``user``/``password``.
        ConnectionError: the server is unreachable (for the handshake).
    """

    #: IPC buffer compression asked of the server for do_get streams (``"lz4"``, ``"zstd"``;
    #: ``None``: the server's default). For slow links: on loopback, even with TLS, compressing
    #: costs about what it saves (bench/secure_scan.py), so it is off by default.
    stream_compression: str | None = None

    #: how long, in all, a call refused for load is retried before :class:`ServerBusyError`
    busy_retry_seconds: float = 30.0

    def __init__(
        self,
        uri: str = DEFAULT_URI,
        *,
        token: str | None = None,
        user: str | None = None,
        password: str | None = None,
        tls_root_certs: PemSource | None = None,
        cert_chain: PemSource | None = None,
        private_key: PemSource | None = None,
        timeout: float | None = None,
        max_workers: int = 8,
        **client_kwargs: Any,
    ):
        self.uri = normalize_uri(uri)
        self.max_workers = max_workers
        tls = tls_client_kwargs(tls_root_certs, cert_chain, private_key)
        if tls and not _is_tls(self.uri):
            raise ValueError(f"TLS settings ({', '.join(tls)}) need a {TLS_SCHEME}:// URI, got {self.uri}")
        if token and user is not None:
            raise ValueError("give either token or user/password, not both")
        self._timeout = timeout
        codec = self.stream_compression
        # every call says the client reads every endpoint (it fetches them all, in parallel)
        self._headers = [(ALL_ENDPOINTS_HEADER.encode(), b"true")]
        if codec:
            self._headers.append((COMPRESSION_HEADER.encode(), codec.encode()))
        self.options = self._call_options([bearer_header(token)] if token else [])
        self._client_kwargs = {**client_kwargs, **tls}
        self._clients: dict[tuple[str, int], flight.FlightClient] = {}
        self._lock = threading.Lock()
        with translated_errors(self.uri, "connect"):
            self.flight = self._client(self.uri)
        if user is not None:
            self._authenticate(user, password)

    def _retrying(self, call: Callable[[], R], idempotent: bool = False) -> R:
        """``call()``, tried again with backoff while the server refuses it for load; an
        ``idempotent`` call (planning, a schema) is also tried once more when its connection broke
        (a server that closed an idle connection, or a process restarted): gRPC reconnects."""
        backoff = Backoff(self.busy_retry_seconds)
        reconnect = idempotent
        while True:
            try:
                return call()
            except ServerBusyError as err:
                if not backoff.wait(err):
                    raise
            except ConnectionError:
                if not reconnect:
                    raise
                reconnect = False

    def _authenticate(self, user: str, password: str | None) -> None:
        """Flight's basic-auth handshake; later calls send the bearer header it returns."""
        if password is None:
            raise ValueError(f"user {user!r} needs a password")
        def login() -> tuple[bytes, bytes]:
            with translated_errors(self.uri, f"logging in as {user!r}"):
                return self.flight.authenticate_basic_token(user, password, self.options)

        header = self._retrying(login)
        self.options = self._call_options([header])

    def _call_options(self, credentials: list[tuple[bytes, bytes]]) -> flight.FlightCallOptions:
        return flight.FlightCallOptions(timeout=self._timeout, headers=credentials + self._headers)

    def _client(self, uri: str, lane: int = 0) -> flight.FlightClient:
        """The connection to ``uri``; parallel fetches use ``lane`` connections of their own, so
        that a server running several processes behind one port (``serve --processes N``, which
        balances by connection) streams them in parallel."""
        if uri.startswith(_REUSE_CONNECTION):
            uri = self.uri
        with self._lock:
            client = self._clients.get((uri, lane))
            if client is None:
                client = self._clients[(uri, lane)] = flight.FlightClient(uri, **self._client_kwargs)
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

        def call() -> list[flight.Result]:
            with translated_errors(self.uri, f"action {name}"):
                return list(self.flight.do_action(flight.Action(name, payload), self.options))

        results = self._retrying(call)
        return json.loads(results[0].body.to_pybytes()) if results else None

    def namespaces(self) -> list[str]:
        return self.action(wire.LIST_NAMESPACES)

    def tables(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.action(wire.LIST_TABLES, {"namespace": namespace} if namespace else {})

    def table_info(self, table: str) -> dict[str, Any]:
        return self.action(wire.TABLE_INFO, {"table": table})

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
        return self.action(wire.REGISTER_TABLE, body)

    def unregister(self, table: str) -> dict[str, Any]:
        return self.action(wire.UNREGISTER_TABLE, {"table": table})

    def refresh(self, table: str | None = None) -> dict[str, Any]:
        return self.action(wire.REFRESH_TABLE, {"table": table} if table else {})

    def health(self) -> dict[str, Any]:
        return self.action(wire.HEALTH)

    # -- planning ------------------------------------------------------------------------
    def flight_info(self, table: str, options: ReadOptions | None = None, /, **kwargs: Any) -> flight.FlightInfo:
        """Plan a query: the raw ``FlightInfo`` with one endpoint per split."""
        descriptor = flight.FlightDescriptor.for_command(command(table, read_options(options, **kwargs)))

        def call() -> flight.FlightInfo:
            with translated_errors(self.uri, f"planning {table}"):
                return self.flight.get_flight_info(descriptor, self.options)

        return self._retrying(call, idempotent=True)

    def plan(self, table: str, options: ReadOptions | None = None, /, **kwargs: Any) -> QueryPlan:
        """Plan a query: its schema and endpoints as plain data."""
        return query_plan(self.flight_info(table, options, **kwargs))

    def plan_descriptor(self, descriptor: flight.FlightDescriptor, what: str) -> QueryPlan:
        """Plan any descriptor (a Flight SQL command, for one): its schema and endpoints."""
        def call() -> QueryPlan:
            with translated_errors(self.uri, what):
                return query_plan(self.flight.get_flight_info(descriptor, self.options))

        return self._retrying(call, idempotent=True)

    def schema(self, table: str, options: ReadOptions | None = None, /, **kwargs: Any) -> pa.Schema:
        """The result schema of a query, without planning it."""
        descriptor = flight.FlightDescriptor.for_command(command(table, read_options(options, **kwargs)))

        def call() -> pa.Schema:
            with translated_errors(self.uri, f"schema of {table}"):
                return self.flight.get_schema(descriptor, self.options).schema

        return self._retrying(call, idempotent=True)

    # -- reading -------------------------------------------------------------------------
    def _targets(self, endpoint: PlannedEndpoint) -> list[str]:
        """Where to read an endpoint, in order: its locations, then this server (the one that
        planned it; with no locations, twice: one retry). A TLS client never follows a plaintext
        location: credentials would cross the network in the clear."""
        uris = [self.uri if u.startswith(_REUSE_CONNECTION) else u for u in endpoint.locations]
        if _is_tls(self.uri):
            uris = [u for u in uris if _is_tls(u)]
        uris = list(dict.fromkeys([*uris, self.uri]))
        return uris if len(uris) > 1 else uris * 2

    def fetch(self, endpoint: PlannedEndpoint, lane: int = 0) -> Generator[pa.RecordBatch, None, None]:
        """Stream one endpoint's record batches. A stream that breaks for a transport reason
        (server gone, connection reset) resumes at the next location, skipping the rows already
        delivered (a split streams its rows in one order), so no row is lost or repeated; any
        other error is raised at once. A refusal for load is retried on the same server after a
        backoff (:meth:`_retrying`'s policy)."""
        delivered = 0
        targets = self._targets(endpoint)
        ticket = flight.Ticket(endpoint.ticket)
        backoff = Backoff(self.busy_retry_seconds)
        attempt = 0
        while True:
            target = targets[attempt]
            try:
                with translated_errors(target, "reading an endpoint"):
                    reader = self._client(target, lane).do_get(ticket, self.options)
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
            except ServerBusyError as err:
                if (delivered and "weight" not in endpoint.metadata) or not backoff.wait(err):
                    raise
            except ConnectionError:
                if attempt == len(targets) - 1 or (delivered and "weight" not in endpoint.metadata):
                    raise
                attempt += 1

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

    def fetch_all(
        self, endpoints: list[PlannedEndpoint], on_endpoint_done: Callable[[PlannedEndpoint], None] | None = None
    ) -> Iterator[pa.RecordBatch]:
        """Fetch endpoints in parallel; yield batches as they arrive.

        ``on_endpoint_done`` is called, on the consuming thread, once an endpoint has delivered
        all its batches (a progress display counts these: a plan's row total is an estimate).
        """
        if not endpoints:
            return
        lanes = min(self.max_workers, len(endpoints))

        def fetched(endpoint: PlannedEndpoint, lane: int) -> Iterator[pa.RecordBatch | _EndpointDone]:
            yield from self.fetch(endpoint, lane)
            yield _EndpointDone(endpoint)

        # every failure of a stream, starting it included, reaches the consumer: never lost rows
        for item in bounded_parallel(endpoints, fetched, lanes, 4 * self.max_workers, "hudi-flight-fetch"):
            if isinstance(item, _EndpointDone):
                if on_endpoint_done is not None:
                    on_endpoint_done(item.endpoint)
            else:
                yield item

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
    "ServerBusyError",
    "command",
    "connect",
    "normalize_uri",
    "query_plan",
    "translated_errors",
]
