"""The calls a server is answering now, with what they cost so far (the web console's live queries).

Every RPC already has a :class:`~.call_log.CallRecord` while it runs (its method, start, and the
user, table and instant the service notes); :class:`LiveCalls` keeps the records of the calls in
flight, and a stream adds the rows and bytes it has sent to its record as it sends them. Only a
server that shows them (``console_port``) keeps them: otherwise no record is made for a call that
is neither logged nor measured, and nothing is counted.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol


class Recorded(Protocol):
    """What :class:`LiveCalls` reads of a call's record (``call_log.CallRecord``)."""

    method: str
    kind: str | None
    started: float  # time.perf_counter()
    fields: dict[str, Any]
    rows: int
    bytes: int


@dataclass(frozen=True)
class LiveCall:
    """One call in flight, as it stood when asked."""

    id: int
    method: str
    kind: str
    user: str | None
    table: str | None
    instant: str | None
    seconds: float  # elapsed
    rows: int  # streamed so far
    bytes: int


class LiveCalls:
    """The records of the calls in flight (bounded by the calls gRPC runs at once)."""

    def __init__(self) -> None:
        self._calls: dict[int, Recorded] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def started(self, record: Recorded) -> int:
        """Keep ``record`` until :meth:`ended`; returns its id."""
        number = next(self._ids)
        with self._lock:
            self._calls[number] = record
        return number

    def ended(self, number: int) -> None:
        with self._lock:
            self._calls.pop(number, None)

    def snapshot(self) -> list[LiveCall]:
        """The calls in flight, oldest first."""
        now = time.perf_counter()
        with self._lock:
            records = list(self._calls.items())
        out = []
        for number, record in records:
            fields = dict(record.fields)
            out.append(LiveCall(
                number, record.method, record.kind or record.method, fields.get("user"), fields.get("table"),
                fields.get("instant"), max(0.0, now - record.started), record.rows, record.bytes,
            ))
        return sorted(out, key=lambda c: -c.seconds)


__all__ = ["LiveCall", "LiveCalls"]
