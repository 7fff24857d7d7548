"""What the CLI prints and writes: result grids like a SQL shell's, a progress line, output
files and one-line errors."""

from __future__ import annotations

import datetime
import os
import shutil
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any, TextIO

import pyarrow as pa

ELLIPSIS = "…"
#: a cell is never wider than this, whatever the terminal
MAX_CELL_WIDTH = 48
#: nor narrower than this, however many columns share the terminal
MIN_CELL_WIDTH = 8
#: bytes of a binary value shown (as hex) before the ellipsis
BINARY_PREFIX = 16
OUTPUT_FORMATS = (".parquet", ".csv")


class CliError(Exception):
    """A usage problem reported as one line."""


# -- cells -----------------------------------------------------------------------------------


def _nested_text(value: Any) -> str:
    """A value inside a list, map or struct: strings quoted, so that ``['a, b']`` reads right."""
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return cell_text(value)


def cell_text(value: Any) -> str:
    """One value as a SQL shell shows it: ``NULL``, hex for binary, ``{k: v}`` for structs and
    maps, ``[a, b]`` for lists, ISO dates and times."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        shown = data[:BINARY_PREFIX].hex()
        return f"0x{shown}{ELLIPSIS if len(data) > BINARY_PREFIX else ''}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_nested_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list) and value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return "{" + ", ".join(f"{_nested_text(k)}: {_nested_text(v)}" for k, v in value) + "}"  # a map
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_nested_text(v) for v in value) + "]"
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (datetime.date, datetime.time, Decimal)):
        return str(value)
    return str(value).replace("\n", "\\n").replace("\t", "\\t")


def cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, an ellipsis marking a cut."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + ELLIPSIS


def terminal_width() -> int:
    return shutil.get_terminal_size((120, 24)).columns


def format_table(
    table: pa.Table, max_rows: int | None = None, width: int | None = None, more: str = "",
    vertical: bool | None = None,
) -> str:
    """A grid of the first ``max_rows`` rows of ``table`` (all of them for ``None``), each column
    at most its share of ``width`` (the terminal's by default), cut cells ending in an ellipsis;
    the footer counts the rows and adds ``more`` (e.g. ``"12 more rows"``).

    ``vertical``: one ``column | value`` line per field and a header per record, like psql's
    ``\\x``; ``None`` chooses it when the grid would cut a column name (a wide table's names, e.g.
    ``_hoodie_commit_time``, would all read ``_hoodie…``).
    """
    shown = table if max_rows is None else table.slice(0, max_rows)
    names = shown.column_names
    width = width or terminal_width()
    share = (width - 3 * max(len(names) - 1, 0)) // max(len(names), 1)
    cap = max(MIN_CELL_WIDTH, min(MAX_CELL_WIDTH, share))
    if vertical or (vertical is None and any(len(n) > cap for n in names)):
        lines = _records(shown, width)
    else:
        lines = _grid(shown, cap)
    count = f"{shown.num_rows} row" + ("" if shown.num_rows == 1 else "s")
    return "\n".join(lines + [f"({count} shown; {more})" if more else f"({count})"])


def _grid(shown: pa.Table, cap: int) -> list[str]:
    cells = [[cut(cell_text(v), cap) for v in col.to_pylist()] for col in shown.columns]
    headers = [cut(n, cap) for n in shown.column_names]
    widths = [max([len(h)] + [len(c) for c in col]) for h, col in zip(headers, cells)]
    lines = [" | ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(),
             "-+-".join("-" * w for w in widths)]
    for r in range(shown.num_rows):
        lines.append(" | ".join(col[r].ljust(w) for col, w in zip(cells, widths)).rstrip())
    return lines


def _records(shown: pa.Table, width: int) -> list[str]:
    """Each row as ``-[ RECORD n ]`` and one ``name | value`` line per column, values cut to
    what the terminal has left beside the names."""
    names = [cut(n, MAX_CELL_WIDTH) for n in shown.column_names]
    name_width = max((len(n) for n in names), default=0)
    value_width = max(MIN_CELL_WIDTH, width - name_width - 3)
    rows = shown.to_pylist()
    lines = []
    for number, row in enumerate(rows, 1):
        title = f"-[ RECORD {number} ]"
        lines.append(title + "-" * max(name_width + 3 - len(title), 1))  # to where the values start
        for name, value in zip(names, row.values()):
            lines.append(f"{name.ljust(name_width)} | {cut(cell_text(value), value_width)}".rstrip())
    return lines


# -- progress --------------------------------------------------------------------------------


class Progress:
    """``reading ns.t: 3/8 endpoints, 12,345 of ~40,000 rows (30%)`` rewritten in place on a
    terminal; it ends at the real count (endpoints done out of planned), never at an estimate.

    The total is the server's estimate (``total_records``: from footers where cached, else from
    file sizes; a merge-on-read slice counts its log records too, so it over-counts updates), so
    it is shown with ``~`` and the percentage stays below 100 until every endpoint is done.
    """

    def __init__(self, what: str, stream: TextIO | None = None):
        self.what = what
        self.stream = stream or sys.stderr
        self.endpoints = 0
        self.done = 0
        self.rows = 0
        self.estimate = -1
        self._shown = 0

    def planned(self, endpoints: int, estimated_rows: int = -1) -> None:
        self.endpoints = endpoints
        self.estimate = estimated_rows
        self._show()

    def add_rows(self, rows: int) -> None:
        self.rows += rows
        self._show()

    def endpoint_done(self) -> None:
        self.done += 1
        self._show()

    def percent(self) -> int | None:
        """How far the read is, in percent (``None``: nothing to tell it from)."""
        if self.endpoints and self.done >= self.endpoints:
            return 100
        if self.estimate > 0:
            return min(99, self.rows * 100 // self.estimate)
        return self.done * 100 // self.endpoints if self.endpoints else None

    def line(self) -> str:
        text = f"reading {self.what}: {self.done}/{self.endpoints} endpoints, {self.rows:,}"
        finished = self.endpoints and self.done >= self.endpoints
        text += " rows" if finished or self.estimate < 0 else f" of ~{self.estimate:,} rows"
        percent = self.percent()
        return text if percent is None else f"{text} ({percent}%)"

    def _show(self) -> None:
        text = self.line()
        self.stream.write("\r" + text.ljust(self._shown))
        self.stream.flush()
        self._shown = len(text)

    def close(self) -> None:
        """Clear the line (the result follows on stdout)."""
        if self._shown:
            self.stream.write("\r" + " " * self._shown + "\r")
            self.stream.flush()


# -- output files ----------------------------------------------------------------------------


def output_format(path: str) -> str:
    """The format of an ``--output`` file, from its extension, checked before anything is read."""
    suffix = Path(path).suffix.lower()
    if suffix not in OUTPUT_FORMATS:
        raise CliError(f"--output {path}: unknown file type {suffix or '(none)'}; use a .parquet or .csv file name")
    return suffix


def check_output_schema(path: str, schema: pa.Schema) -> None:
    """Refuse, before reading, a result CSV cannot hold (nested columns, binary)."""
    if output_format(path) != ".csv":
        return
    nested = [f.name for f in schema if pa.types.is_nested(f.type) or pa.types.is_dictionary(f.type)]
    if nested:
        raise CliError(
            f"--output {path}: CSV cannot hold the nested column(s) {', '.join(nested)}; "
            "write .parquet, or leave them out with --columns"
        )


class OutputFile:
    """Batches streamed into a Parquet or CSV file; the file appears complete or not at all."""

    def __init__(self, path: str, schema: pa.Schema):
        check_output_schema(path, schema)
        self.path = path
        self.rows = 0
        self._partial = f"{path}.partial"
        if output_format(path) == ".parquet":
            import pyarrow.parquet as pq

            self._writer: Any = pq.ParquetWriter(self._partial, schema)
        else:
            import pyarrow.csv as pacsv

            self._writer = pacsv.CSVWriter(self._partial, schema)

    def write(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)
        self.rows += batch.num_rows

    def __enter__(self) -> "OutputFile":
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self._writer.close()
        if exc_type is None:
            os.replace(self._partial, self.path)
        else:
            Path(self._partial).unlink(missing_ok=True)


def one_line(err: BaseException) -> str:
    """The error as one line: an OS error says what it could not find or open (not ``[Errno 2]``)."""
    if isinstance(err, OSError) and err.strerror and err.filename is not None:
        if isinstance(err, FileNotFoundError):
            return f"{err.filename} does not exist"
        if isinstance(err, PermissionError):
            return f"no permission to open {err.filename}"
        return f"{err.filename}: {err.strerror[:1].lower()}{err.strerror[1:]}"
    text = str(err).strip() or type(err).__name__
    # Flight errors carry gRPC debug context after the message: keep the first line.
    return text.splitlines()[0]


__all__ = [
    "CliError",
    "OutputFile",
    "Progress",
    "cell_text",
    "check_output_schema",
    "cut",
    "format_table",
    "one_line",
    "output_format",
]
