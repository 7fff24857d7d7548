"""Where the server's log goes and how each line looks: text, or one JSON object per line.

A JSON log is for pipelines that parse every line, so everything the process would write to
stderr goes through it: log records, warnings (``MetadataTableFallbackWarning``: its category and
message, not the source line that raised it), exceptions no one caught on a thread and those
Python can only report as "Exception ignored in". None carries a traceback or a server path: an
exception is its type, its message and the function it was raised in; a path in a message is cut
to its last part. gRPC's own C log is off (``flight_server.protocol``).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
import traceback
import warnings
from types import TracebackType
from typing import Any, TextIO

LOG_FORMATS = ("text", "json")
WARNINGS_LOG = logging.getLogger("py.warnings")
UNCAUGHT_LOG = logging.getLogger("flight_server.uncaught")

#: a file path or URL path in a message: ``/tmp/x/.hoodie/f`` or ``file:///...`` (cut to its last part)
_PATH = re.compile(r"(?:[a-z][a-z0-9+.-]*://)?(?:/[^\s'\",;:()\[\]]+){2,}")


def without_paths(text: str) -> str:
    """``text`` with every path of two or more parts cut to ``…/<last part>``."""
    return _PATH.sub(lambda m: "…/" + m.group(0).rstrip("/").rsplit("/", 1)[-1], text)


def raised_where(tb: TracebackType | None) -> str | None:
    """``module:function:line`` of the innermost frame of ``tb`` (a module name, not a path)."""
    frames = traceback.extract_tb(tb) if tb is not None else []
    if not frames:
        return None
    frame = frames[-1]
    module = frame.filename.rsplit("/", 1)[-1].removesuffix(".py")
    return f"{module}:{frame.name}:{frame.lineno}"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC), level, logger, message, a call's fields, and for a
    record with an exception its type, message and where it was raised (no traceback)."""

    converter = staticmethod(time.gmtime)  # type: ignore[assignment]

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage() if getattr(record, "call", None) else without_paths(record.getMessage()),
        }
        out.update(getattr(record, "call", None) or {})
        if record.exc_info and record.exc_info[1] is not None:
            _, err, tb = record.exc_info
            out["exception"] = without_paths(f"{type(err).__name__}: {err}".splitlines()[0])
            where = raised_where(tb)
            if where is not None:
                out["where"] = where
        return json.dumps(out, default=str)


def _log_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int,
    file: TextIO | None = None, line: str | None = None,
) -> None:
    """``warnings.showwarning`` of a JSON log: the category and the message, as a record."""
    WARNINGS_LOG.warning("%s: %s", category.__name__, message)


def _log_unraisable(unraisable: Any) -> None:
    """``sys.unraisablehook`` of a JSON log ("Exception ignored in ..." otherwise)."""
    err = unraisable.exc_value
    if err is None:
        return
    UNCAUGHT_LOG.error("exception ignored in %s", type(unraisable.object).__name__,
                       exc_info=(type(err), err, unraisable.exc_traceback))


def _log_thread_exception(args: threading.ExceptHookArgs) -> None:
    """``threading.excepthook`` of a JSON log (a thread's traceback on stderr otherwise)."""
    if args.exc_value is None or args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    UNCAUGHT_LOG.error("uncaught exception on thread %s", name,
                       exc_info=(args.exc_type, args.exc_value, args.exc_traceback))


def configure_logging(log_format: str = "text", level: int | None = None) -> None:
    """Send the server's log records to stderr in ``log_format`` (``text`` or ``json``).

    The level defaults to INFO for JSON (one line per call, for log pipelines) and to WARNING
    for text (a console stays quiet, as before structured logs existed). JSON also takes the
    warnings and the exceptions Python would print itself (the module docstring).
    """
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log_format must be one of {', '.join(LOG_FORMATS)}, not {log_format!r}")
    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
        warnings.showwarning = _log_warning
        sys.unraisablehook = _log_unraisable
        threading.excepthook = _log_thread_exception
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level if level is not None else logging.INFO if log_format == "json" else logging.WARNING)


__all__ = ["LOG_FORMATS", "JsonFormatter", "configure_logging", "raised_where", "without_paths"]
