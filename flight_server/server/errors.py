"""The one mapping from server-side errors to what a Flight client sees.

pyarrow maps ``ValueError`` to INVALID_ARGUMENT, ``KeyError`` to NOT_FOUND and
``NotImplementedError`` to UNIMPLEMENTED by itself; this module adds ticket problems
(UNAUTHENTICATED), vanished table data (NOT_FOUND) and turns anything unexpected into
INTERNAL with a generic message (the details go to the server log, not to the client).
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable, Iterator, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from catalog.errors import InvalidTicketError, UnknownTableError

log = logging.getLogger("flight_server")
F = TypeVar("F", bound=Callable[..., Any])


def translated(err: Exception) -> Exception:
    """The exception a Flight client should see for ``err`` (``err`` itself when pyarrow maps it)."""
    if isinstance(err, InvalidTicketError):
        return flight.FlightUnauthenticatedError(str(err))
    if isinstance(err, FileNotFoundError):
        return UnknownTableError(f"table data not found: {err}")
    if isinstance(err, (flight.FlightError, ValueError, KeyError, NotImplementedError)):
        return err
    log.error("internal error", exc_info=err)
    return flight.FlightInternalError(f"internal error ({type(err).__name__}); see the server log")


def flight_errors(fn: F) -> F:
    """Decorate an RPC handler: translate its errors at the boundary."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as err:
            new = translated(err)
            if new is err:
                raise
            raise new from err

    return wrapper  # type: ignore[return-value]


def stream_errors(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The same translation for errors raised while a ``do_get`` stream is being produced."""
    try:
        yield from batches
    except Exception as err:
        new = translated(err)
        if new is err:
            raise
        raise new from err


__all__ = ["flight_errors", "stream_errors", "translated"]
