"""ORC base files (``hoodie.table.base.file.format=ORC``) -> record batches in the table schema.

pyarrow's ORC reader decodes one stripe at a time, on the calling thread (no Arrow thread calls
back into Python: see :mod:`catalog.format.parquet`). Stripes are what a split owns of an ORC
file, as row groups are of a Parquet file (``Split.row_groups`` numbers stripes here): the
planner reads the stripe count from the file's tail (:func:`read_orc_footer`). pyarrow offers no
stripe statistics, so no stripe is skipped by them: the filter is applied to the decoded
batches exactly (the metadata table's column stats still prune whole files). Batches are then
cast to the table schema by name, as Parquet's are.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.orc as orc

from catalog.errors import CorruptTableError, HudiError
from catalog.format.base_file import BaseFileRead
from catalog.format.parquet import conform_batches, file_columns_to_read
from catalog.storage import Storage


@dataclass(frozen=True)
class OrcFooter:
    """What the planner needs of an ORC file."""

    num_rows: int
    num_stripes: int


@contextmanager
def _orc_file(storage: Storage, path: str) -> Iterator[orc.ORCFile]:
    """``path`` opened by pyarrow's ORC reader: through Arrow's own filesystem for a local table,
    else through an fsspec file object (read on the calling thread)."""
    where = f"{storage.uri}/{path}"
    arrow_fs = storage.arrow_filesystem()
    try:
        if arrow_fs is None:
            opened: Any = storage.open(path)
        else:
            storage.stats.add("open")
            opened = arrow_fs.open_input_file(storage.full_path(path))
    except FileNotFoundError as err:  # e.g. cleaned after the plan was made
        raise FileNotFoundError(f"base file missing: {where}") from err
    with opened as fh:
        try:
            yield orc.ORCFile(fh)
        except (FileNotFoundError, ConnectionError, TimeoutError, HudiError):
            raise  # storage trouble or a cast the table schema refuses, not a damaged file
        except (pa.ArrowInvalid, OSError) as err:  # Arrow reports undecodable streams as OSError
            raise CorruptTableError(f"cannot decode ORC base file {where}: {err}") from err


def read_orc_footer(storage: Storage, path: str) -> OrcFooter:
    """The row and stripe counts of the ORC file ``path`` (from its footer)."""
    with _orc_file(storage, path) as file:
        return OrcFooter(num_rows=file.nrows, num_stripes=file.nstripes)


def read_orc(storage: Storage, file: BaseFileRead) -> Iterator[pa.RecordBatch]:
    """Stream the rows of one ORC base file as batches of ``file.schema``, stripe by stripe
    (``file.row_groups`` number the stripes to read; ``None``: all).

    The fields of ``file`` mean what they mean for :func:`catalog.format.parquet.read_parquet`;
    the filter is always applied to the decoded batches.
    """
    with _orc_file(storage, file.path) as orc_file:
        columns, rename = file_columns_to_read(file.schema, orc_file.schema, file.source_names, file.constants)
        wanted = range(orc_file.nstripes) if file.row_groups is None else file.row_groups
        yield from conform_batches(
            (_stripe(orc_file, index, columns) for index in wanted), file.schema, constants=file.constants,
            filter=file.filter, rename=rename, adapt=file.adapt,
        )


def _stripe(file: orc.ORCFile, index: int, columns: list[str]) -> pa.RecordBatch:
    """Stripe ``index`` with ``columns``; with none (a count, or only absent columns) its row count
    is kept by reading the first column and dropping it."""
    if columns:
        return file.read_stripe(index, columns=columns)
    return file.read_stripe(index, columns=file.schema.names[:1]).select([])


__all__ = ["OrcFooter", "read_orc", "read_orc_footer"]
