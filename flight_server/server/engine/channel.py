"""Messages between the serving process and an SQL engine process (:mod:`.sandbox`, :mod:`.engine_process`).

One Unix stream socket per engine process carries everything, both ways:

- serving process to engine process: requests, each a 4-byte big-endian length and that many
  bytes of pickle (the engine process trusts its parent), with file descriptors passed beside
  it (``SCM_RIGHTS``) when the statement has views streamed to it, one socket each;
- engine process to serving process: first a JSON message saying it is ready, then per request
  the result as an Arrow IPC stream (schema, batches, end of stream; only the end of stream when
  the statement failed before it had a schema) followed by its status as a JSON message (length
  and bytes, as a request). JSON only, since the serving process does not trust what runs
  client SQL; the serving process reads it all through one buffered reader kept with the process.

So a statement costs one message each way and no socket of its own (unless views stream).
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any, BinaryIO, Sequence

_HEADER = struct.Struct("!I")
#: what a request asks: a statement's result schema, or its run
SCHEMA, RUN = "schema", "run"
#: how a view reaches the engine process: an Arrow IPC stream on a passed socket, or a dataset
STREAM, DATASET = "stream", "dataset"
#: the largest message either side accepts (a request holds SQL and the views' datasets)
MAX_MESSAGE_BYTES = 64 << 20
#: the most descriptors one request passes (one per streamed view)
MAX_FDS = 256
#: bytes :func:`receive` asks for at first (a request with its datasets is a few kilobytes)
_FIRST_READ = 64 << 10
#: an Arrow IPC stream's end-of-stream marker: the whole result of a statement that failed
#: before it had a schema (its status follows)
END_OF_STREAM = b"\xff\xff\xff\xff\x00\x00\x00\x00"


class ChannelClosed(EOFError):
    """The other side closed the channel (or died) before a whole message came."""


def send(sock: socket.socket, payload: bytes, fds: Sequence[int] = ()) -> None:
    """Send one message (and ``fds`` with its first bytes)."""
    data = _framed(payload)
    sent = socket.send_fds(sock, [data], list(fds)) if fds else sock.send(data)
    if sent < len(data):
        sock.sendall(data[sent:])


def receive(sock: socket.socket, max_fds: int = 0) -> tuple[bytes, list[int]]:
    """One message and the descriptors passed with it (a request, in the engine process).

    The first read takes up to :data:`_FIRST_READ` bytes, so a request usually arrives in one
    system call: the serving process sends a request only once the previous one's status came
    (or the process was killed), so no second message can follow it.

    Raises:
        ChannelClosed: the channel ended first.
        ValueError: the message is longer than :data:`MAX_MESSAGE_BYTES`, or another message
            followed it.
    """
    fds: list[int] = []
    if max_fds:
        data, fds, _, _ = socket.recv_fds(sock, _FIRST_READ, max_fds)
    else:
        data = sock.recv(_FIRST_READ)
    if not data:
        raise ChannelClosed("the engine channel closed")
    if len(data) < _HEADER.size:
        data += _exactly(sock, _HEADER.size - len(data))
    size = _size(data[:_HEADER.size])
    payload = data[_HEADER.size:]
    if len(payload) > size:
        raise ValueError("a second message followed a request")
    return payload + _exactly(sock, size - len(payload)), fds


def write_json(sink: BinaryIO, message: dict[str, Any]) -> None:
    """Write one JSON message to ``sink`` (the engine process's buffered writer; not flushed)."""
    sink.write(_framed(json.dumps(message).encode()))


def read_json(source: BinaryIO) -> dict[str, Any]:
    """A JSON object from the engine process, read from ``source`` (the serving process's
    buffered reader of the channel); anything else is refused as a broken channel.

    Raises:
        ChannelClosed: the channel ended first, or the message is not a JSON object.
        ValueError: the message is longer than :data:`MAX_MESSAGE_BYTES`.
    """
    head = source.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise ChannelClosed("the engine channel closed")
    size = _size(head)
    payload = source.read(size)
    if len(payload) < size:
        raise ChannelClosed("the engine channel closed")
    try:
        message = json.loads(payload)
    except ValueError as err:
        raise ChannelClosed("the engine process sent no valid answer") from err
    if not isinstance(message, dict):
        raise ChannelClosed("the engine process sent no valid answer")
    return message


def _framed(payload: bytes) -> bytes:
    if len(payload) > MAX_MESSAGE_BYTES:
        raise ValueError(f"message of {len(payload)} bytes exceeds {MAX_MESSAGE_BYTES}")
    return _HEADER.pack(len(payload)) + payload


def _size(head: bytes) -> int:
    (size,) = _HEADER.unpack(head)
    if size > MAX_MESSAGE_BYTES:
        raise ValueError(f"message of {size} bytes exceeds {MAX_MESSAGE_BYTES}")
    return size


def _exactly(sock: socket.socket, size: int) -> bytes:
    parts = []
    while size > 0:
        part = sock.recv(min(size, 1 << 20))
        if not part:
            raise ChannelClosed("the engine channel closed")
        parts.append(part)
        size -= len(part)
    return b"".join(parts)


__all__ = [
    "DATASET",
    "END_OF_STREAM",
    "MAX_MESSAGE_BYTES",
    "RUN",
    "SCHEMA",
    "STREAM",
    "ChannelClosed", "read_json", "receive", "send", "write_json"]
