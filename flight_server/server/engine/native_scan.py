"""The engine's errors reading a native view (an Arrow dataset of a plan's base files,
:func:`catalog.plan.dataset.base_file_dataset`), told as the split reader tells them."""

from __future__ import annotations

from typing import Mapping

from catalog.errors import CorruptTableError


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


__all__ = ["native_read_error"]
