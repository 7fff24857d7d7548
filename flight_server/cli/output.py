"""What the CLI prints: result tables, output files and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa


class CliError(Exception):
    """A usage problem reported as one line."""


def format_table(table: pa.Table, max_rows: int = 50) -> str:
    """A plain-text grid of the first ``max_rows`` rows (display only)."""
    shown = table.slice(0, max_rows)
    names = shown.column_names
    cells = [[("null" if v is None else str(v))[:40] for v in col.to_pylist()] for col in shown.columns]
    widths = [max([len(n)] + [len(c) for c in col]) for n, col in zip(names, cells)]
    lines = [" | ".join(n.ljust(w) for n, w in zip(names, widths)), "-+-".join("-" * w for w in widths)]
    for r in range(shown.num_rows):
        lines.append(" | ".join(col[r].ljust(w) for col, w in zip(cells, widths)))
    footer = f"({table.num_rows} rows"
    footer += f", first {max_rows} shown)" if table.num_rows > max_rows else ")"
    return "\n".join(lines + [footer])


def write_output(table: pa.Table, path: str) -> None:
    """Write ``table`` as Parquet or CSV, chosen by the file extension."""
    suffix = Path(path).suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, path)
    elif suffix == ".csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, path)
    else:
        raise CliError(f"--output {path!r}: use a .parquet or .csv file name")


def one_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    # Flight errors carry gRPC debug context after the message: keep the first line.
    return text.splitlines()[0]


__all__ = ["CliError", "format_table", "one_line", "write_output"]
