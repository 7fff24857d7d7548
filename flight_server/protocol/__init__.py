"""Arrow Flight SQL wire messages, shared by the server and the clients.

Every Flight SQL command travels as a ``google.protobuf.Any`` (in a
``FlightDescriptor.for_command``, a ``Ticket``, an ``Action`` body or a result). :func:`pack`
wraps a message, :func:`unpack` recognises one by its type URL. The message classes come from
``flight_sql.proto`` compiled with grpcio-tools (``make protocol``); nothing here parses
protobuf bytes by hand.
"""

from __future__ import annotations

import os

from catalog.optional import optional_dependency

# gRPC's C core logs a failed TLS handshake (and more) to stderr in its own format, before any
# caller can see it: the server's log would not be all JSON, a client's error would come with two
# lines of gRPC text. Its errors reach both as statuses anyway; set GRPC_VERBOSITY to see its log.
os.environ.setdefault("GRPC_VERBOSITY", "NONE")

with optional_dependency("client", "the Flight client and server (Flight SQL messages)"):
    from google.protobuf import any_pb2
    from google.protobuf.message import DecodeError, Message

    from flight_server.protocol import flight_session_pb2 as session
    from flight_server.protocol import flight_sql_pb2 as sql

_TYPE_PREFIX = "type.googleapis.com/"
_PACKAGE = "arrow.flight.protocol.sql."
#: full message name -> class, for every message declared in flight_sql.proto
MESSAGES: dict[str, type[Message]] = {
    _PACKAGE + name: getattr(sql, name) for name in sql.DESCRIPTOR.message_types_by_name
}


def pack(message: Message) -> bytes:
    """``message`` wrapped in a serialised ``google.protobuf.Any``."""
    wrapper = any_pb2.Any()
    wrapper.Pack(message)
    return wrapper.SerializeToString()


def type_name(data: bytes) -> str | None:
    """The full message name of a serialised ``Any`` (``None``: not an ``Any`` at all)."""
    wrapper = any_pb2.Any()
    try:
        wrapper.ParseFromString(data)
    except DecodeError:
        return None
    if not wrapper.type_url.startswith(_TYPE_PREFIX):
        return None
    return wrapper.type_url[len(_TYPE_PREFIX):]


def unpack(data: bytes) -> Message | None:
    """The Flight SQL message in a serialised ``Any``, or ``None`` when ``data`` is not one of
    the messages declared here (JSON commands, hudi-flight tickets, unknown Flight SQL types).

    Raises:
        ValueError: a known Flight SQL type whose payload does not decode.
    """
    wrapper = any_pb2.Any()
    try:
        wrapper.ParseFromString(data)
    except DecodeError:
        return None
    name = wrapper.type_url[len(_TYPE_PREFIX):] if wrapper.type_url.startswith(_TYPE_PREFIX) else None
    cls = MESSAGES.get(name or "")
    if cls is None:
        return None
    message = cls()
    try:
        unpacked = wrapper.Unpack(message)
    except DecodeError:  # protobuf raises on a corrupt payload instead of returning False
        unpacked = False
    if not unpacked:
        raise ValueError(f"malformed Flight SQL message {name}")
    return message


__all__ = ["MESSAGES", "pack", "session", "sql", "type_name", "unpack"]
