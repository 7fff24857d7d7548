"""Messages between the serving process and an SQL engine process (:mod:`.sandbox`, :mod:`.worker`).

A message is a 4-byte big-endian length and that many bytes, sent over a Unix stream socket,
optionally with file descriptors passed beside it (``SCM_RIGHTS``): the sockets a statement's
views and result stream through, as Arrow IPC streams. The serving process sends pickled
requests (the engine process trusts its parent); the engine process answers with JSON only,
since the serving process does not trust what runs client SQL.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any, Sequence

_HEADER = struct.Struct("!I")
#: what a request asks: a statement's result schema, or its run
SCHEMA, RUN = "schema", "run"
#: how a view reaches the engine process: an Arrow IPC stream on a passed socket, or a dataset
STREAM, DATASET = "stream", "dataset"
#: the largest message either side accepts (a request holds SQL and the views' datasets)
MAX_MESSAGE_BYTES = 64 << 20
#: the most descriptors one request passes (a result and one per streamed view)
MAX_FDS = 256


class ChannelClosed(EOFError):
    """The other side closed the channel (or died) before a whole message came."""


def send(sock: socket.socket, payload: bytes, fds: Sequence[int] = ()) -> None:
    """Send one message (and ``fds`` with its first bytes)."""
    if len(payload) > MAX_MESSAGE_BYTES:
        raise ValueError(f"message of {len(payload)} bytes exceeds {MAX_MESSAGE_BYTES}")
    data = _HEADER.pack(len(payload)) + payload
    sent = socket.send_fds(sock, [data], list(fds)) if fds else sock.send(data)
    if sent < len(data):
        sock.sendall(data[sent:])


def receive(sock: socket.socket, max_fds: int = 0) -> tuple[bytes, list[int]]:
    """One message and the descriptors passed with it.

    Raises:
        ChannelClosed: the channel ended first.
        ValueError: the message is longer than :data:`MAX_MESSAGE_BYTES`.
    """
    fds: list[int] = []
    if max_fds:
        head, fds, _, _ = socket.recv_fds(sock, _HEADER.size, max_fds)
    else:
        head = sock.recv(_HEADER.size)
    head = head + _exactly(sock, _HEADER.size - len(head)) if head else head
    if len(head) < _HEADER.size:
        raise ChannelClosed("the engine channel closed")
    (size,) = _HEADER.unpack(head)
    if size > MAX_MESSAGE_BYTES:
        raise ValueError(f"message of {size} bytes exceeds {MAX_MESSAGE_BYTES}")
    return _exactly(sock, size), fds


def _exactly(sock: socket.socket, size: int) -> bytes:
    parts = []
    while size > 0:
        part = sock.recv(min(size, 1 << 20))
        if not part:
            raise ChannelClosed("the engine channel closed")
        parts.append(part)
        size -= len(part)
    return b"".join(parts)


def send_json(sock: socket.socket, message: dict[str, Any]) -> None:
    send(sock, json.dumps(message).encode())


def receive_json(sock: socket.socket) -> dict[str, Any]:
    """A JSON object from the engine process (anything else is refused as a broken channel)."""
    payload, _ = receive(sock)
    try:
        message = json.loads(payload)
    except ValueError as err:
        raise ChannelClosed("the engine process sent no valid answer") from err
    if not isinstance(message, dict):
        raise ChannelClosed("the engine process sent no valid answer")
    return message


__all__ = [
    "DATASET",
    "MAX_MESSAGE_BYTES",
    "RUN",
    "SCHEMA",
    "STREAM",
    "ChannelClosed", "receive", "receive_json", "send", "send_json"]
