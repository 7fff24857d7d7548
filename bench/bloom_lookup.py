"""Record-key point lookups on the tables Hudi's writer wrote with its ``BLOOM`` index and the
metadata table's ``bloom_filters`` (``tests/data/tables/<release>/{cow,mor}_bloom_index``: 9 file
groups over 3 partitions, key ranges overlapping so column stats cannot tell them apart; on
merge-on-read 4 of the 9 slices have log files), with and without pruning by the bloom filters,
side by side in one run, every other pruner on in both.

Each of the tables' 27 written ids and one never written (inside every file's key range) is looked
up with ``filters=[("id", "=", key)]``:

* ``cold``: a fresh ``HudiTable.open`` per lookup; the splits planned, and the storage requests
  (``Storage.stats``) and process CPU time of planning and reading (the open excluded);
* ``warm``: one opened table answers every lookup (as a server's cached state does), after one
  round that warmed it: storage requests and CPU time per lookup.

Sizes: ``quick``: Hudi 0.15.0 and 1.2.0; ``full``: every release that wrote the tables. The rows
of both modes must be equal (else the benchmark fails).
"""

from __future__ import annotations

import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from statistics import median
from typing import Iterator, Sequence
from unittest import mock

from bench.common import row
from catalog import HudiTable
from catalog.plan.prune import BloomFilterPruner

RELEASES = {"quick": ("0.15.0", "1.2.0"), "full": ("0.15.0", "1.0.2", "1.1.1", "1.2.0")}
TABLES = ("cow_bloom_index", "mor_bloom_index")
KEYS = [f"id{i:03d}" for i in range(27)] + ["id0105"]
MODES = ("bloom filters", "no bloom filters")


@contextmanager
def _mode(mode: str) -> Iterator[None]:
    if mode == MODES[0]:
        yield
        return
    with mock.patch.object(BloomFilterPruner, "prune", lambda self, slices, filters: list(slices)):
        yield


def _lookup(table: HudiTable, key: str) -> tuple[int, int, float, int]:
    """(splits, storage requests, CPU seconds, rows) of planning and reading one key."""
    filters = [("id", "=", key)]
    table.storage.stats.reset()
    start = time.process_time()
    splits = len(list(table.scan(filters=filters).splits))
    rows = table.read(filters=filters).num_rows
    return splits, table.storage.stats.total, time.process_time() - start, rows


def measure(path: str, keys: Sequence[str] = KEYS) -> dict[str, dict[str, float]]:
    """Per mode: mean splits, mean cold and warm storage requests, median cold and warm CPU ms."""
    out: dict[str, dict[str, float]] = {}
    found: dict[str, list[int]] = {}
    for mode in MODES:
        with _mode(mode):
            cold = [_lookup(HudiTable.open(path), key) for key in keys]
            table = HudiTable.open(path)
            for key in keys:
                _lookup(table, key)
            warm = [_lookup(table, key) for key in keys]
        found[mode] = [c[3] for c in cold] + [w[3] for w in warm]
        out[mode] = {
            "splits": sum(c[0] for c in cold) / len(keys),
            "cold requests": sum(c[1] for c in cold) / len(keys),
            "warm requests": sum(w[1] for w in warm) / len(keys),
            "cold cpu ms": median(c[2] for c in cold) * 1000,
            "warm cpu ms": median(w[2] for w in warm) * 1000,
        }
    if found[MODES[0]] != found[MODES[1]]:
        raise AssertionError(f"{path}: the lookups found other rows with the bloom filters")
    return out


_UNITS = {"splits": "splits", "cold requests": "requests", "warm requests": "requests",
          "cold cpu ms": "ms", "warm cpu ms": "ms"}


def run(size: str) -> list[dict]:
    from tests.support.written import WrittenTable  # the committed Hudi-written tables

    rows = []
    with tempfile.TemporaryDirectory(prefix="hudi-flight-bloom-") as tmp:
        for release in RELEASES[size]:
            for name in TABLES:
                path = str(WrittenTable(release, name).extract(Path(tmp)))
                for mode, metrics in measure(path).items():
                    for metric, value in metrics.items():
                        rows.append(row(f"{release}/{name} point lookup", mode, f"{metric} per lookup", value,
                                        _UNITS[metric], lookups=len(KEYS)))
    return rows
