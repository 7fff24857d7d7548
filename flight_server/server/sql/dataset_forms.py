"""The pickled form of a view's dataset, as the serving process sends it to an engine process.

Pickling an Arrow dataset of a plan's base files costs about a tenth of a millisecond a file
(each fragment pickles its format's options anew): more than the rest of a warm statement's work
in the serving process. A dataset does not change, and the catalog hands out the very same
dataset object for the same files in the same schema (:class:`catalog.plan.dataset.Fragments`);
so its pickle is kept with it, for as long as the dataset lives. The engine process keeps the
dataset by these bytes in turn (:mod:`.worker`), with its footers.
"""

from __future__ import annotations

import pickle
import threading
import weakref

import pyarrow.dataset as ds


class DatasetForms:
    """Pickled datasets, each kept while its dataset lives."""

    def __init__(self) -> None:
        self._kept: weakref.WeakKeyDictionary[ds.Dataset, bytes] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def pickled(self, dataset: ds.Dataset) -> bytes:
        with self._lock:
            found = self._kept.get(dataset)
        if found is None:
            found = pickle.dumps(dataset)
            with self._lock:
                self._kept[dataset] = found
        return found


__all__ = ["DatasetForms"]
