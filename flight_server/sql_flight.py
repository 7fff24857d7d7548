"""Plain-data access to a hudi-flight server, shared by the Spark source and the DB-API driver.

Everything here speaks only the public Flight contract (interfaces.md section 2) with a stock
``pyarrow.flight.FlightClient``; nothing imports the ``catalog`` package, so it runs on a Spark
executor or a BI host that can merely reach the server. Planned work is handed around as plain
data (:class:`PlannedEndpoint`: ticket bytes, location strings, weight), because Spark pickles
readers and partitions and pyarrow's Flight objects do not pickle.

Connection failures become :class:`ConnectionError` naming the server URI; an unknown table
surfaces as :class:`LookupError` and a rejected query as :class:`ValueError`, each with the
server's message.
"""

from __future__ import annotations

import contextlib
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.flight as flight

DEFAULT_PORT = 8815


def normalize_uri(uri: str) -> str:
    """``host:port`` / ``grpc://host:port`` -> a URI pyarrow.flight accepts (``grpc+tcp://`` kept)."""
    uri = uri.strip()
    if not uri:
        raise ValueError("the hudi-flight server URI is empty; pass e.g. grpc://127.0.0.1:8815")
    if "://" not in uri:
        uri = f"grpc://{uri}"
    scheme, rest = uri.split("://", 1)
    if scheme not in ("grpc", "grpc+tcp", "grpc+tls"):
        raise ValueError(f"unsupported hudi-flight URI scheme {scheme!r} in {uri!r}; use grpc:// or grpc+tls://")
    if ":" not in rest.rsplit("]", 1)[-1]:
        rest = f"{rest}:{DEFAULT_PORT}"
    return f"{scheme}://{rest}"


@contextlib.contextmanager
def translated_errors(uri: str, what: str) -> Iterator[None]:
    """Turn Flight status errors into builtins whose message names the server and the request."""
    try:
        yield
    except flight.FlightUnavailableError as err:
        raise ConnectionError(f"hudi-flight server {uri} is unreachable ({what}): {_first_line(err)}") from err
    except flight.FlightTimedOutError as err:
        raise ConnectionError(f"hudi-flight server {uri} timed out ({what}): {_first_line(err)}") from err
    except KeyError as err:  # NOT_FOUND arrives as pyarrow.lib.ArrowKeyError, a KeyError
        raise LookupError(f"{what}: {_first_line(err)}") from err
    except (flight.FlightUnauthenticatedError, flight.FlightUnauthorizedError) as err:
        raise PermissionError(f"{what} refused by {uri}: {_first_line(err)}") from err
    except pa.ArrowInvalid as err:  # INVALID_ARGUMENT
        raise ValueError(f"{what} rejected by {uri}: {_first_line(err)}") from err
    except pa.ArrowNotImplementedError as err:  # UNIMPLEMENTED
        raise NotImplementedError(f"{what}: {_first_line(err)}") from err


def _first_line(err: BaseException) -> str:
    """The server's message without gRPC's debug context lines."""
    text = str(err.args[0] if isinstance(err, KeyError) and err.args else err)
    return text.split(". Detail:")[0].splitlines()[0] if text else type(err).__name__


@dataclass(frozen=True)
class PlannedEndpoint:
    """One endpoint of a planned query, as picklable plain data."""

    ticket: bytes
    locations: tuple[str, ...]
    weight: float
    metadata: Mapping[str, Any]


def query_command(
    table: str,
    *,
    columns: Sequence[str] | None = None,
    filters: Sequence[Sequence[Any]] | None = None,
    query_type: str | None = None,
    as_of: str | None = None,
    start: str | None = None,
    end: str | None = None,
    limit: int | None = None,
) -> bytes:
    """The JSON command of a query (``None`` options are left out, meaning the server default)."""
    doc: dict[str, Any] = {"table": table}
    if columns is not None:
        doc["columns"] = list(columns)
    if filters:
        doc["filters"] = [list(f) for f in filters]
    for key, value in (("query_type", query_type), ("as_of", as_of), ("start", start), ("end", end), ("limit", limit)):
        if value is not None:
            doc[key] = value
    return json.dumps(doc, separators=(",", ":")).encode()


class FlightSession:
    """A connected client plus the few calls the Spark source and the DB-API driver need.

    Args:
        uri: the server, ``grpc://host:port`` (``host:port`` accepted).
        timeout: seconds per RPC (``None``: no deadline).
        token: bearer token for a server started with ``auth_tokens``.
    """

    def __init__(self, uri: str, timeout: float | None = 60.0, token: str | None = None):
        self.uri = normalize_uri(uri)
        headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
        self._options = flight.FlightCallOptions(timeout=timeout, headers=headers)
        with translated_errors(self.uri, "connect"):
            self.client = flight.FlightClient(self.uri)
        self._data_clients: dict[str, flight.FlightClient] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        for client in self._data_clients.values():
            client.close()
        self._data_clients.clear()
        self.client.close()

    def __enter__(self) -> "FlightSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- metadata ----------------------------------------------------------------------------
    def action(self, name: str, body: Mapping[str, Any] | None = None) -> Any:
        """Run a JSON action and return its decoded result."""
        payload = json.dumps(dict(body or {})).encode()
        with translated_errors(self.uri, f"action {name}"):
            results = list(self.client.do_action(flight.Action(name, payload), self._options))
        return json.loads(results[0].body.to_pybytes()) if results else None

    def schema(self, command: bytes) -> pa.Schema:
        """The result schema of a query, without planning it."""
        table = json.loads(command)["table"]
        with translated_errors(self.uri, f"schema of {table}"):
            return self.client.get_schema(flight.FlightDescriptor.for_command(command), self._options).schema

    def plan(self, command: bytes) -> tuple[pa.Schema, list[PlannedEndpoint]]:
        """Plan a query: its schema and endpoints as plain data."""
        table = json.loads(command)["table"]
        with translated_errors(self.uri, f"planning {table}"):
            info = self.client.get_flight_info(flight.FlightDescriptor.for_command(command), self._options)
        endpoints = []
        for ep in info.endpoints:
            meta = json.loads(ep.app_metadata) if ep.app_metadata else {}
            endpoints.append(
                PlannedEndpoint(
                    ticket=ep.ticket.ticket,
                    locations=tuple(_location_uri(loc) for loc in ep.locations),
                    weight=float(meta.get("weight", 1.0)),
                    metadata=meta,
                )
            )
        return info.schema, endpoints

    # -- data --------------------------------------------------------------------------------
    def _client_for(self, location: str) -> flight.FlightClient:
        if location == self.uri or location.startswith("arrow-flight-reuse-connection:"):
            return self.client
        with self._lock:
            client = self._data_clients.get(location)
            if client is None:
                client = self._data_clients[location] = flight.FlightClient(location)
            return client

    def _open(self, endpoint: PlannedEndpoint) -> flight.FlightStreamReader:
        """Open an endpoint's stream on its first reachable location (none listed: this server)."""
        targets = list(endpoint.locations) or [self.uri]
        ticket = flight.Ticket(endpoint.ticket)
        for location in targets[:-1]:
            try:
                with translated_errors(location, "reading an endpoint"):
                    return self._client_for(location).do_get(ticket, self._options)
            except ConnectionError:
                continue  # the next location is a retry target for the same ticket
        with translated_errors(targets[-1], "reading an endpoint"):
            return self._client_for(targets[-1]).do_get(ticket, self._options)

    def fetch(self, endpoint: PlannedEndpoint) -> Iterator[pa.RecordBatch]:
        """Stream one endpoint's record batches."""
        reader = self._open(endpoint)
        with translated_errors(self.uri, "reading an endpoint"):
            for chunk in reader:
                yield chunk.data

    def read_all(self, command: bytes, workers: int = 8) -> pa.Table:
        """Plan and read a whole query into one table, endpoints fetched in parallel."""
        schema, endpoints = self.plan(command)
        if not endpoints:
            return schema.empty_table()
        with ThreadPoolExecutor(min(workers, len(endpoints))) as pool:
            parts = list(pool.map(lambda ep: list(self.fetch(ep)), endpoints))
        return pa.Table.from_batches([b for part in parts for b in part], schema=schema)


def _location_uri(location: flight.Location) -> str:
    uri = location.uri
    return uri.decode() if isinstance(uri, bytes) else str(uri)


__all__ = ["FlightSession", "PlannedEndpoint", "normalize_uri", "query_command", "translated_errors"]
