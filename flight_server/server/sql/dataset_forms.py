"""The pickled form of a view's dataset, as the serving process sends it to an engine process.

Pickling an Arrow dataset of a plan's base files costs about a tenth of a millisecond a file
(each fragment pickles its format's options anew): more than the rest of a warm statement's work
in the serving process. A statement run again plans the same files, and they pickle to the same
bytes; so the bytes are kept, keyed by everything the pickle holds (:func:`_key`): the dataset's
schema (its metadata included), format and filesystem, and each fragment's path and row groups.
A dataset whose pickle may hold anything else (a partition expression, a fragment of another
format or filesystem, or of an in-memory buffer) is pickled each time. The engine process keeps
the dataset by these bytes in turn (:mod:`.worker`), with its footers.
"""

from __future__ import annotations

import pickle

import pyarrow.compute as pc
import pyarrow.dataset as ds

from catalog.lru import BoundedLRU

#: bytes of pickled datasets kept (a few kilobytes per file; the key about as much again)
DATASET_FORM_CACHE_BYTES = 16 << 20
_TRUE = pc.scalar(True)
_DatasetKey = tuple[bytes, bytes, bytes, tuple[tuple[str, tuple[int, ...] | None], ...]]


class DatasetForms:
    """Pickled datasets by :func:`_key` (a dataset without one is pickled each time)."""

    def __init__(self, max_bytes: int = DATASET_FORM_CACHE_BYTES):
        self._kept: BoundedLRU[_DatasetKey, bytes] = BoundedLRU("sql engine process datasets", max_bytes)

    def pickled(self, dataset: ds.Dataset) -> bytes:
        key = _key(dataset)
        if key is None:
            return pickle.dumps(dataset)
        found = self._kept.get(key)
        if found is None:
            found = pickle.dumps(dataset)
            self._kept.put(key, found, 2 * len(found) + sum(len(path) for path, _ in key[3]))
        return found


def _key(dataset: ds.Dataset) -> _DatasetKey | None:
    """What the pickle of ``dataset`` holds, found without pickling its fragments, or ``None``
    when it may hold more (then it is pickled each time).

    A fragment's pickle is its ``__reduce__``: its format's ``make_fragment`` and its path (or
    buffer), filesystem, partition expression and row groups (``None``: every one); any other
    shape keeps the dataset out."""
    if type(dataset) is not ds.FileSystemDataset or not dataset.partition_expression.equals(_TRUE):
        return None
    form, filesystem = dataset.format, dataset.filesystem
    if type(form) is not ds.ParquetFileFormat:
        return None
    files = []
    for fragment in dataset.get_fragments():
        make, arguments = fragment.__reduce__()
        if getattr(make, "__func__", None) is not ds.ParquetFileFormat.make_fragment or len(arguments) != 4:
            return None
        path, fragment_filesystem, expression, row_groups = arguments
        if not isinstance(path, str) or not expression.equals(_TRUE) or not fragment_filesystem.equals(filesystem):
            return None
        if not make.__self__.equals(form):
            return None
        files.append((path, None if row_groups is None else tuple(row_groups)))
    return (dataset.schema.serialize().to_pybytes(), pickle.dumps(form), pickle.dumps(filesystem), tuple(files))


__all__ = ["DATASET_FORM_CACHE_BYTES", "DatasetForms"]
