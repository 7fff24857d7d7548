"""The one mapping from server-side errors to what a Flight client sees.

pyarrow maps ``ValueError`` to INVALID_ARGUMENT, ``KeyError`` to NOT_FOUND and
``NotImplementedError`` to UNIMPLEMENTED by itself; this module adds ticket problems
(UNAUTHENTICATED), vanished table data (NOT_FOUND), storage that keeps failing (UNAVAILABLE)
and turns anything unexpected into INTERNAL with a generic message (the details go to the
server log, not to the client).

pyarrow appends ``". Detail: Python exception: "`` and the Python traceback (with chained causes,
file paths and, for catalog errors, SQL parameters) to the status message of every non-Flight
exception, and every client (ADBC, JDBC, pyarrow) shows that message whole. The codes
INVALID_ARGUMENT, NOT_FOUND and UNIMPLEMENTED can only be sent that way (pyarrow's Flight errors
carry the other codes), so errors that reach the client are re-raised as fresh, *public*
exceptions: same status code, a clean message, and a traceback that :func:`_format_exception`
renders as the status in words: ``<message>. Detail: Python exception: invalid argument``. No
class name, path or traceback leaves the server; the prefix is pyarrow's own.
"""

from __future__ import annotations

import functools
import logging
import threading
import traceback
from typing import Any, Callable, Iterator, TypeVar

import pyarrow as pa
import pyarrow.flight as flight
from sqlalchemy.exc import SQLAlchemyError

from catalog.errors import HudiError, InvalidTicketError, StorageUnavailableError, UnknownTableError

log = logging.getLogger("flight_server")
F = TypeVar("F", bound=Callable[..., Any])


_PUBLIC = "_hudi_flight_public"


class ServerError(HudiError):
    """The root of every error the server raises itself (the reader's errors have ``HudiError``).

    Each subclass also derives from the builtin that picks its Flight status (``ValueError``:
    INVALID_ARGUMENT, ``KeyError``: NOT_FOUND, ...), so :func:`translated` maps them like any other.
    """


class PublicInvalid(ServerError, ValueError):
    """INVALID_ARGUMENT with a clean message."""

    status = "invalid argument"


class PublicNotFound(ServerError, KeyError):
    """NOT_FOUND with a clean message."""

    status = "not found"

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class PublicUnimplemented(ServerError, NotImplementedError):
    """UNIMPLEMENTED with a clean message."""

    status = "not implemented"


def _public(err: Exception) -> Exception:
    setattr(err, _PUBLIC, True)
    return err


_original_format_exception = traceback.format_exception
_install_lock = threading.Lock()


def _format_exception(exc: Any, *args: Any, **kwargs: Any) -> list[str]:
    """``traceback.format_exception`` that shows a public exception as its status in words.

    pyarrow's ``PythonErrorDetail`` formats the status detail with this function; for the
    exceptions built here the client so sees ``<message>. Detail: Python exception: <status>``.
    """
    value = args[0] if args else kwargs.get("value", exc)
    if isinstance(value, BaseException) and getattr(value, _PUBLIC, False):
        return [str(getattr(value, "status", "failed"))]
    return _original_format_exception(exc, *args, **kwargs)


def install() -> None:
    """Route traceback formatting through :func:`_format_exception` (idempotent)."""
    with _install_lock:
        if traceback.format_exception is not _format_exception:
            traceback.format_exception = _format_exception  # type: ignore[assignment]


def translated(err: Exception) -> Exception:
    """The public exception a Flight client should see for ``err``."""
    if getattr(err, _PUBLIC, False):
        return err
    if isinstance(err, flight.FlightError):
        return err  # pyarrow sends these without a traceback
    if isinstance(err, InvalidTicketError):
        return flight.FlightUnauthenticatedError(str(err))
    if isinstance(err, StorageUnavailableError):  # names the file relative to the table: no server path
        return flight.FlightUnavailableError(str(err))
    if isinstance(err, SQLAlchemyError):
        log.error("catalog database error", exc_info=err)
        return flight.FlightInternalError("catalog database error; see the server log")
    if isinstance(err, FileNotFoundError):
        return _public(PublicNotFound(f"table data not found: {err}"))
    if isinstance(err, ValueError):
        return _public(PublicInvalid(str(err)))
    if isinstance(err, KeyError):
        message = str(err) if isinstance(err, UnknownTableError) or not err.args else str(err.args[0])
        return _public(PublicNotFound(message))
    if isinstance(err, NotImplementedError):
        return _public(PublicUnimplemented(str(err)))
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


class PublicPermissionDenied(ServerError, PermissionError):
    """A refused caller, where no Flight status can be sent (see :func:`schema_errors`)."""

    status = "permission denied"


class PublicInternal(ServerError, RuntimeError):
    """An internal error, where no Flight status can be sent (see :func:`schema_errors`)."""

    status = "failed"


def schema_errors(fn: F) -> F:
    """:func:`flight_errors` for ``get_schema``.

    pyarrow (26) does not turn a ``FlightError`` raised by ``get_schema`` into its Flight status
    (its ``_get_schema`` callback lacks the ``except FlightError`` the other RPCs have): the
    client would get UNKNOWN with the server's traceback. So Flight errors are sent as clean
    builtin errors instead: refused credentials or rights as a ``PermissionError`` (UNKNOWN,
    message kept, pyarrow clients raise ``OSError``), the others as a ``RuntimeError``.
    """
    inner = flight_errors(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return inner(*args, **kwargs)
        except (flight.FlightUnauthenticatedError, flight.FlightUnauthorizedError) as err:
            raise _public(PublicPermissionDenied(_message(err))) from None
        except flight.FlightError as err:
            raise _public(PublicInternal(_message(err))) from None

    return wrapper  # type: ignore[return-value]


def _message(err: BaseException) -> str:
    return str(err).split(". Detail:")[0]


def reason(err: BaseException, limit: int = 500) -> str:
    """The first line of the message a client sees for ``err`` (already :func:`translated`: no
    traceback, no server path), at most ``limit`` characters: the reason of a call's log line."""
    lines = _message(err).strip().splitlines()
    text = lines[0] if lines else type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def stream_errors(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The same translation for errors raised while a ``do_get`` stream is being produced."""
    try:
        yield from batches
    except Exception as err:
        new = translated(err)
        if new is err:
            raise
        raise new from err


install()

__all__ = [
    "PublicInvalid",
    "PublicNotFound",
    "ServerError",
    "flight_errors",
    "install",
    "reason",
    "schema_errors",
    "stream_errors",
    "translated",
]
