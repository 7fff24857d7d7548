"""One log line per RPC (the log's format: :mod:`.logs`).

Every RPC is logged by the ``flight_server.calls`` logger when it completes, with the method, the
status, the duration in ms and what the service noted about it (:func:`note`): the user that
:meth:`HudiFlightServer.authorize` returned, the table, the pinned instant and the number of
endpoints; a failed call also with its reason (the message its client got, never a traceback).
Only these named fields are logged: never headers, tokens, passwords or storage options.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any, Callable

import pyarrow.flight as flight

from flight_server.server.errors import reason
from flight_server.server.ops.live import LiveCalls

CALL_LOG = logging.getLogger("flight_server.calls")
MIDDLEWARE_KEY = "hudi-call-log"
#: the only facts of a call that reach the log
NOTED = ("user", "table", "instant", "endpoints")


class CallRecord(flight.ServerMiddleware):
    """What one call did; logged (and handed to ``completed``) when it ends. While it runs,
    ``live`` (the web console's live queries) holds it; ``kind`` says what it does beyond its
    method, ``rows`` and ``bytes`` what it streamed so far."""

    def __init__(self, method: str, completed: Callable[["CallRecord", str, float], None] | None,
                 live: LiveCalls | None = None):
        self.method = method
        self.started = time.perf_counter()
        self.fields: dict[str, Any] = {}
        self.kind: str | None = None
        self.rows = 0
        self.bytes = 0
        self._completed = completed
        self._live = live
        self._live_id = live.started(self) if live is not None else 0

    def streamed(self, rows: int, nbytes: int) -> None:
        """Count a batch this call sent (one thread streams a call: plain additions)."""
        self.rows += rows
        self.bytes += nbytes

    def call_completed(self, exception: BaseException | None) -> None:
        if self._live is not None:
            self._live.ended(self._live_id)
        seconds = time.perf_counter() - self.started
        status = _status(exception)
        if self._completed is not None:
            self._completed(self, status, seconds)
        if not CALL_LOG.isEnabledFor(logging.INFO):  # e.g. text logs at WARNING: no line to build
            return
        call = {"method": self.method, "status": status, "duration_ms": round(seconds * 1000, 3), **self.fields}
        if exception is not None:
            call["reason"] = reason(exception)  # what the client was told, last (a text line's spaces)
        text = " ".join(f"{k}={v}" for k, v in call.items())
        CALL_LOG.info("call %s", text, extra={"call": call})


def _status(exception: BaseException | None) -> str:
    if exception is None:
        return "OK"
    for kind, name in (
        (flight.FlightUnauthenticatedError, "UNAUTHENTICATED"),
        (flight.FlightUnauthorizedError, "PERMISSION_DENIED"),
        (flight.FlightUnavailableError, "UNAVAILABLE"),
        (flight.FlightTimedOutError, "DEADLINE_EXCEEDED"),
        (flight.FlightCancelledError, "CANCELLED"),
        (flight.FlightInternalError, "INTERNAL"),
        (KeyError, "NOT_FOUND"),
        (ValueError, "INVALID_ARGUMENT"),
        (NotImplementedError, "UNIMPLEMENTED"),
    ):
        if isinstance(exception, kind):
            return name
    return "ERROR"


class CallLogFactory(flight.ServerMiddlewareFactory):
    """Records every call that is logged, measured or shown live.

    Args:
        completed: hears every completed call (``None``: no one does, e.g. no metrics).
        live: keeps the calls in flight (``None``: no one shows them).
    """

    def __init__(self, completed: Callable[[CallRecord, str, float], None] | None, live: LiveCalls | None = None):
        self._completed = completed
        self._live = live

    def start_call(self, info: flight.CallInfo, headers: dict[str, list[Any]]) -> CallRecord | None:
        if self._completed is None and self._live is None and not CALL_LOG.isEnabledFor(logging.INFO):
            return None  # no line to log, no one to tell: no record, and gRPC calls back no Python
        return CallRecord(_method_name(info.method), self._completed, self._live)


@functools.lru_cache(maxsize=32)  # one entry per Flight method
def _method_name(method: flight.FlightMethod) -> str:
    return str(method).rsplit(".", 1)[-1].lower()


def record_of(context: flight.ServerCallContext) -> CallRecord | None:
    """The current call's record (``None``: the call is neither logged, measured nor shown)."""
    record = context.get_middleware(MIDDLEWARE_KEY)
    return record if isinstance(record, CallRecord) else None


def note(context: flight.ServerCallContext, kind: str | None = None, **fields: Any) -> None:
    """Attach facts about the current call (only :data:`NOTED` names) to its log line, and what
    kind of work it is (``kind``: shown with the live calls, not logged)."""
    record = record_of(context)
    if record is not None:
        record.fields.update({k: v for k, v in fields.items() if k in NOTED and v is not None})
        if kind is not None:
            record.kind = kind


__all__ = [
    "CALL_LOG", "CallLogFactory", "CallRecord", "note", "record_of",
]
