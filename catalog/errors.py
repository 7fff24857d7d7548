"""The error hierarchy of hudi-flight's catalog.

Every error derives from :class:`HudiError` and also from the builtin that callers (and
pyarrow.flight's status mapping) already understand:

* ``ValueError``  -> Flight INVALID_ARGUMENT (bad query, bad column, bad instant, corrupt data)
* ``KeyError``    -> Flight NOT_FOUND (unknown table in the registry)
* ``FileNotFoundError`` for a path that is not a Hudi table
* ``NotImplementedError`` -> Flight UNIMPLEMENTED (features outside our scope, e.g. Lance)
"""

from __future__ import annotations


class HudiError(Exception):
    """Root of every error raised by the catalog package."""


class TableNotFoundError(HudiError, FileNotFoundError):
    """The URI does not hold a Hudi table (no ``.hoodie/hoodie.properties``)."""


class CorruptTableError(HudiError, ValueError):
    """Table metadata or data could not be decoded (properties, instant files, HFiles, ...)."""


class UnsupportedTableError(HudiError, NotImplementedError):
    """The table uses a feature this reader does not support (table version, base file format)."""


class MissingExtraError(UnsupportedTableError):
    """The table needs an optional dependency that is not installed; the message names the extra."""

    def __init__(self, feature: str, extra: str):
        super().__init__(f"{feature} needs the {extra!r} extra: pip install 'hudi-flight[{extra}]'")
        self.extra = extra


class UnansweredError(HudiError, NotImplementedError):
    """What was asked cannot be answered the way it was asked for, exactly (e.g. aggregates the
    table's metadata does not decide); the message says why. The rows can still be read."""


class InvalidQueryError(HudiError, ValueError):
    """The read request itself is wrong: options, filters, instants."""


class ColumnNotFoundError(InvalidQueryError):
    """A column named in ``columns`` or ``filters`` is not in the table schema."""


class InvalidInstantError(InvalidQueryError):
    """An instant string is malformed, or lies before the table's first commit."""


class UnknownTableError(HudiError, KeyError):
    """A registry lookup named a table that is not registered."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep messages readable.
        return str(self.args[0]) if self.args else ""


class TableAlreadyExistsError(HudiError, ValueError):
    """A registry entry with that name already exists (and points elsewhere)."""


class StorageUnavailableError(HudiError, OSError):
    """A storage request kept failing after its retries (the message names the file)."""


class InvalidTicketError(HudiError, PermissionError):
    """A Flight ticket is forged, altered, signed by another secret, or expired."""


class CorruptBlockWarning(UserWarning):
    """A log block failed its framing checks and was skipped, as Hudi skips it."""


class MetadataTableFallbackWarning(UserWarning):
    """The metadata table could not be used; planning fell back to storage listing."""


def shown(text: str, limit: int = 64) -> str:
    """``text`` as an error message may quote it: it may come from the network, so every
    non-printable character (controls, NUL, bidirectional overrides such as U+202E) is written as
    an escape, and the result is cut to ``limit`` characters and ``…``."""
    safe = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)
    return safe if len(safe) <= limit else safe[:limit] + "…"
