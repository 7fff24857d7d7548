"""The one place where what went wrong with a statement becomes the error its client gets.

Three things can end a statement before its result is whole: its watch in the serving process
(deadline, the client gone, shutdown: :mod:`.watchdog`), the engine process's status (the
failure kinds of :mod:`.failures`), or the engine process dying without a status (its address
space bound, its CPU time). Each becomes one error here, in the project's classes: the bounds
are named, a refusal for load carries a retry hint, and nothing the engine process says is
passed on but the words of an :data:`~.failures.INVALID` failure (cut to a length).
"""

from __future__ import annotations

import signal
from typing import Any, Mapping

import pyarrow.flight as flight

from catalog.errors import CorruptTableError, InvalidQueryError, shown
from flight_server.server.engine import failures
from flight_server.server.engine.admission import RETRY_SECONDS
from flight_server.server.engine.settings import EngineSettings, parse_bytes
from flight_server.server.engine.views import Views
from flight_server.server.security.budgets import ServerBusyError


def failure_error(kind: str, settings: EngineSettings, message: object = None) -> Exception:
    """The client's error for a failure of ``kind``; ``message``: the engine's words, told only
    for an :data:`~.failures.INVALID` one."""
    told = failures.told(kind, settings)
    if kind == failures.INVALID and isinstance(message, str):
        return InvalidQueryError(shown(message, 500))
    if kind == failures.TIMEOUT:
        return flight.FlightTimedOutError(told)
    if kind == failures.GREW:
        return ServerBusyError("sql_memory_budget", parse_bytes(settings.memory_budget) >> 20, told, RETRY_SECONDS)
    if kind == failures.CANCELLED:
        return flight.FlightCancelledError(told)
    if kind == failures.SHUTDOWN:
        return flight.FlightUnavailableError(told)
    if kind in (failures.MEMORY, failures.SOURCE):
        return InvalidQueryError(told)
    return InvalidQueryError(failures.told(failures.FAILED, settings))


def stopped_error(reason: str | None, settings: EngineSettings) -> Exception | None:
    """The error of a statement its watch stopped for ``reason`` (a failure kind; ``None``: it
    was not stopped)."""
    return None if reason is None else failure_error(reason, settings)


def status_error(status: dict[str, Any] | None, ended_by: int | None, settings: EngineSettings) -> Exception | None:
    """The error of a statement by its engine process's status (``None``: it succeeded);
    without a status, by the signal that ended the process (``ended_by``)."""
    if status is None:
        if ended_by == signal.SIGXCPU:
            return flight.FlightTimedOutError(
                f"limit sql_timeout_seconds ({settings.timeout_seconds:g}) exceeded: the query used its CPU time"
            )
        return InvalidQueryError(
            f"limit sql_process_memory ({settings.process_allowance() >> 20} MiB) or an engine failure ended the "
            "query's engine process"
        )
    if status.get("ok"):
        return None
    return failure_error(str(status.get("error")), settings, status.get("message"))


def statement_error(
    status: dict[str, Any] | None, ended_by: int | None, settings: EngineSettings, views: Views
) -> Exception | None:
    """:func:`status_error`, but when the statement failed because reading one of its ``views``
    failed, that error instead (:func:`source_error`): the reader's, as every read tells it."""
    if status is not None and status.get("ok"):
        return views.failure
    if status is not None and status.get("error") in (failures.INVALID, failures.SOURCE):
        source = source_error(views, status.get("message"))
        if source is not None:
            return source
    return status_error(status, ended_by, settings)


def source_error(views: Views, message: object) -> Exception | None:
    """The error of reading one of ``views`` that failed the statement: the first error a
    streamed view's source raised, else a native view's file the engine could not read, named
    in its ``message`` (:func:`native_read_error`); ``None``: the failure was not the views'."""
    if views.failure is not None:
        return views.failure
    return native_read_error(message, views.native_tables()) if isinstance(message, str) else None


def reusable(status: dict[str, Any] | None) -> bool:
    """Whether the engine process that answered ``status`` may run the next statement: it
    answered, and its failure (if any) was the statement's own (the retirement rule: an engine
    that met a memory or allocation failure, or any unexpected engine error, is never reused)."""
    if status is None:
        return False
    if status.get("ok") is True:
        return True
    kept = (failures.INVALID, failures.SOURCE, failures.TIMEOUT)
    return status.get("error") in kept and status.get("retire") is False


def native_read_error(message: str, tables: Mapping[str, str]) -> Exception | None:
    """The error to report when the engine failed reading the native view of one of
    ``tables`` (view -> table): a file removed since its footer was read is NOT_FOUND and an
    undecodable one INVALID_ARGUMENT, as on the Python-fed stream, naming the table rather than
    a server path. ``None``: the engine's ``message`` is about something else."""
    for view, table in tables.items():
        if f"registered as '{view}' failed" in message:
            # ENOENT: the engine may cut its message inside a long path, so the errno is checked too
            if "[errno 2]" in message or "No such file" in message or "not found" in message.lower():
                return FileNotFoundError(f"a base file of table {table} is missing (removed since planning)")
            return CorruptTableError(f"cannot decode a Parquet base file of table {table}")
    return None


__all__ = [
    "failure_error", "native_read_error", "reusable", "source_error", "statement_error", "status_error",
    "stopped_error",
]
