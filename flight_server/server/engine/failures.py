"""How the engine says a statement failed: a kind, a message a client may read, and whether the
engine process that ran it may serve another statement.

The engine (:mod:`.duckdb_engine`) raises :class:`EngineFailure` for every failure it knows; an
engine process sends the failure's fields as the statement's status, and the serving process
turns them into the client's error in one place (:mod:`.client_errors`). Nothing here imports the
server: it runs in engine processes.
"""

from __future__ import annotations

import re

from flight_server.server.engine.settings import EngineSettings

#: the statement is wrong (its SQL, a value, a table's data): the message is the client's
INVALID = "invalid"
#: it needed more memory than ``sql_memory_limit`` or its process could allocate
MEMORY = "memory"
#: the engine's own deadline passed (a backstop: the serving process's deadline comes first)
TIMEOUT = "timeout"
#: the process grew past the SQL memory budget while it ran, and was interrupted
GREW = "grew"
#: the client went away, or the server is shutting down (an in-process engine's watch)
CANCELLED, SHUTDOWN = "cancelled", "shutdown"
#: reading one of its streamed views failed (the serving process holds that error)
SOURCE = "source"
#: anything unexpected: the client learns no more than that (details go to the operator's log)
FAILED = "failed"

#: kinds after which the engine's state is suspect: its process is retired, never reused
RETIRING = frozenset({MEMORY, GREW, FAILED})


def told(kind: str, settings: EngineSettings) -> str:
    """What a client is told of a failure of ``kind`` (but :data:`INVALID`, whose words are the
    engine's own): the bound it met, where there is one."""
    if kind == MEMORY:
        return f"limit sql_memory_limit ({settings.memory_limit}) exceeded: the query needs more memory"
    if kind == TIMEOUT:
        return f"limit sql_timeout_seconds ({settings.timeout_seconds:g}) exceeded: the query was cancelled"
    if kind == GREW:
        return f"the server's SQL queries grew past {settings.memory_budget}; the query was cancelled"
    if kind == CANCELLED:
        return "the query was cancelled: the client went away"
    if kind == SHUTDOWN:
        return "the server is shutting down; the query was cancelled"
    if kind == SOURCE:
        return "SQL engine: reading a table failed"
    return "SQL engine: the query failed"


#: DuckDB's error class at the start of its message ("Binder Error: ", "Conversion Error: ", ...)
_ERROR_CLASS = re.compile(r"^(?:[A-Z][A-Za-z]*(?: [A-Za-z]+)*) Error: ")
#: DuckDB's wording of a name error, and the words a client is told instead (a column list is
#: added by the serving process, which knows the tables: :mod:`flight_server.server.sql.hints`)
_REWORDED = (
    (re.compile(r'^Referenced column "(?P<name>[^"]*)" not found in FROM clause!?'), 'column "{name}" not found'),
    (re.compile(r'^Values list "(?P<table>[^"]*)" does not have a column named "(?P<name>[^"]*)"'),
     'column "{name}" not found in {table}'),
    (re.compile(r'^Table "(?P<table>[^"]*)" does not have a column named "(?P<name>[^"]*)"'),
     'column "{name}" not found in {table}'),
    (re.compile(r'^Referenced table "(?P<name>[^"]*)" not found!?'), 'table or alias "{name}" not found in the query'),
    (re.compile(r"^Scalar Function with name (?P<name>\S+) does not exist!?"), "function {name} does not exist"),
    (re.compile(r"^(?P<words>No function matches the given name and argument types '[^']*')\..*"),
     "{words}: add an explicit CAST"),
)


def plain_words(text: str) -> str:
    """The first line of an engine message as a client reads it: without DuckDB's error class
    (``Binder Error:``) or its exclamation marks, name errors in SQL's words, and a "Did you
    mean" line kept (the candidate lists of the engine's views are not: they name its views)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "the statement failed"
    first = _ERROR_CLASS.sub("", lines[0])
    for pattern, words in _REWORDED:
        found = pattern.match(first)
        if found:
            first = words.format(**found.groupdict())
            break
    suggestion = next((line for line in lines[1:] if line.startswith("Did you mean")), None)
    return f"{first} ({suggestion})" if suggestion else first


class EngineFailure(Exception):
    """A statement the engine could not finish.

    Attributes:
        kind: one of the kinds above.
        message: what the client is told (no server path, no traceback): for :data:`INVALID`
            the engine's words, else :func:`told`.
        retire: the engine that ran it must not run another statement (an allocation failed, or
            the engine failed in a way that is not the statement's fault: its state is suspect).
    """

    def __init__(self, kind: str, settings: EngineSettings, message: str = "", retire: bool | None = None):
        self.kind = kind
        self.message = message or told(kind, settings)
        self.retire = kind in RETIRING if retire is None else retire
        super().__init__(self.message)


__all__ = [
    "CANCELLED", "FAILED", "GREW", "INVALID", "MEMORY", "RETIRING", "SHUTDOWN", "SOURCE", "TIMEOUT", "EngineFailure",
    "plain_words", "told",
]
