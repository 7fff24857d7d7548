"""The pickled form of a view's dataset, as the serving process sends it to an engine process.

Pickling an Arrow dataset of a plan's base files costs about a tenth of a millisecond a file
(each fragment pickles its format's options anew): more than the rest of a warm statement's work
in the serving process. A dataset does not change, and the catalog hands out the very same
dataset object for the same files in the same schema (:class:`catalog.plan.dataset.Fragments`);
so its pickle is kept with it, for as long as the dataset lives, under a key of its own.

An engine process keeps the datasets it was sent (:mod:`.engine_process`), with their footers; which ones,
the serving process decides (:class:`HeldForms`, one per engine process): a dataset the process
holds is named by its key alone, so a statement run again sends, copies and unpickles no file
list (a few kilobytes per file of the scan). The serving process counts a form as held only once
a statement that sent it answered ``ok`` (the engine process stored it before running), and tells
the process which ones to drop, with its next request, when they no longer fit.
"""

from __future__ import annotations

import itertools
import pickle
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterable

import pyarrow.dataset as ds

#: what an engine process may keep of the datasets it was sent, each charged four times its
#: pickled size (the dataset object, its fragments and their footers)
HELD_BYTES = 16 << 20


@dataclass(frozen=True, eq=False)
class DatasetForm:
    """A dataset's pickled bytes and the key that names them (unique within the serving process)."""

    key: int
    pickled: bytes

    @property
    def held_bytes(self) -> int:
        return 4 * len(self.pickled)


class DatasetForms:
    """Pickled datasets, each kept while its dataset lives."""

    def __init__(self) -> None:
        self._kept: weakref.WeakKeyDictionary[ds.Dataset, DatasetForm] = weakref.WeakKeyDictionary()
        self._keys = itertools.count()
        self._lock = threading.Lock()

    def form(self, dataset: ds.Dataset) -> DatasetForm:
        with self._lock:
            found = self._kept.get(dataset)
        if found is None:
            pickled = pickle.dumps(dataset)
            with self._lock:
                found = self._kept.setdefault(dataset, DatasetForm(next(self._keys), pickled))
        return found


class HeldForms:
    """The dataset forms one engine process holds, by key: at most ``max_bytes`` of them (see
    :attr:`DatasetForm.held_bytes`), the least recently used dropped first. Used only by the
    statement the process is lent to (no lock)."""

    def __init__(self, max_bytes: int = HELD_BYTES):
        self.max_bytes = max_bytes
        self._held: OrderedDict[int, int] = OrderedDict()  # key -> charged bytes
        self._bytes = 0
        self._dropped: list[int] = []

    def sent(self, form: DatasetForm) -> tuple[int, bytes | None]:
        """What a request carries of ``form``: its key, and its bytes unless the process holds them."""
        if form.key in self._held:
            self._held.move_to_end(form.key)
            return form.key, None
        return form.key, form.pickled

    def to_drop(self) -> list[int]:
        """The keys the process is to drop before the request that carries them (taken once)."""
        dropped, self._dropped = self._dropped, []
        return dropped

    def stored(self, forms: Iterable[DatasetForm]) -> None:
        """The process answered a request carrying ``forms`` ``ok``: it holds them now."""
        for form in forms:
            if form.key not in self._held:
                self._held[form.key] = form.held_bytes
                self._bytes += form.held_bytes
        while self._bytes > self.max_bytes and self._held:
            key, charged = self._held.popitem(last=False)
            self._bytes -= charged
            self._dropped.append(key)


__all__ = ["HELD_BYTES", "DatasetForm", "DatasetForms", "HeldForms"]
