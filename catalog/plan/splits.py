"""Weighted split planning: pruned file slices -> units of parallel work (Flight endpoints).

Modelled on Trino's Hudi split manager (and RFC-40's background split loader):

* a file slice with log files is one split (the MOR merge needs the whole slice), weighted by the
  slice's total size; so is a Lance base file (Hudi 1.2), whose row count comes from its footer,
  and a bootstrap skeleton file (stitched to its source file by row position);
* a base file without logs is cut into byte ranges of ``target_split_bytes`` (optionally smaller
  for the first ``initial_split_count`` splits of a query). A range owns the Parquet row groups
  whose first byte lies inside it, so the ranges tile the file and every row group (hence every
  row) belongs to exactly one split; ranges that own no row group are dropped. A file that fits
  in one range (Hudi's default file size, 120 MB, fits the default 128 MB) is one whole split
  planned from the size the listing gives: no footer is read (on an object store, a request
  per file); its rows are estimated from its bytes unless its footer is cached already. Only a
  file cut into several ranges has its footer read, to find the row groups each range owns;
* an ORC base file without logs is cut into runs of consecutive stripes of about
  ``target_split_bytes`` (``Split.row_groups`` numbers the stripes), each stripe weighed at its
  share of the file (pyarrow reads the stripe count from the footer, not the stripes' sizes);
* weight = clamp(split bytes / ``standard_split_bytes``, ``min_weight``, 1), Trino's
  size-based split weight, so tiny files get small weights.

Planning streams: :meth:`SplitPlanner.plan` consumes the (lazily listed) slices in a background
thread and reads the Parquet footers it needs on a thread pool; splits are yielded as soon as
they are ready, before later partitions are even listed. Footers are cached per (path, size):
Hudi base files are immutable, so a warm planner does no footer IO (the reader of a remote
file takes its footer from the same cache).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from catalog.errors import CorruptTableError
from catalog.format.lance import LanceFooter, read_lance_footer
from catalog.format.orc import OrcFooter, read_orc_footer
from catalog.format.parquet_ranges import read_footer
from catalog.lru import BoundedLRU, CacheListener
from catalog.parallel import bounded_parallel
from catalog.storage import Storage
from catalog.table.files import FileSlice, Split

MiB = 1024 * 1024
DEFAULT_TARGET_SPLIT_BYTES = 128 * MiB
# Log-only slices carry no footer; estimate their rows from bytes (Avro records of a few
# hundred bytes are typical for Hudi log blocks). Only used for the endpoint's estimate.
_LOG_BYTES_PER_ROW_GUESS = 200
# The same for a Parquet base file whose footer planning does not read (compressed columnar rows
# of a Hudi table, its meta columns included, take about a hundred bytes).
_PARQUET_BYTES_PER_ROW_GUESS = 100


@dataclass(frozen=True)
class SplitOptions:
    """Knobs of the split planner (defaults follow Trino's Hudi connector)."""

    target_split_bytes: int = DEFAULT_TARGET_SPLIT_BYTES
    initial_split_bytes: int | None = None  # None: same as target_split_bytes
    initial_split_count: int = 0
    standard_split_bytes: int = DEFAULT_TARGET_SPLIT_BYTES  # the size that has weight 1
    min_weight: float = 0.05
    max_workers: int = 4

    def __post_init__(self) -> None:
        if self.target_split_bytes <= 0 or self.standard_split_bytes <= 0:
            raise ValueError("split sizes must be positive")
        if self.initial_split_bytes is not None and self.initial_split_bytes <= 0:
            raise ValueError("initial_split_bytes must be positive")
        if not 0 < self.min_weight <= 1:
            raise ValueError("min_weight must be in (0, 1]")
        if self.max_workers < 1:
            raise ValueError("max_workers must be >= 1")


def split_weight(nbytes: int, options: SplitOptions) -> float:
    """Trino's size-based weight: clamp(bytes / standard, min_weight, 1)."""
    return min(1.0, max(options.min_weight, nbytes / options.standard_split_bytes))


def row_group_starts(metadata: pq.FileMetaData) -> list[int]:
    """File offset of each row group's first byte (its first column chunk's first page)."""
    starts = []
    for i in range(metadata.num_row_groups):
        col = metadata.row_group(i).column(0)
        offset = col.data_page_offset
        if col.has_dictionary_page and col.dictionary_page_offset:
            offset = min(offset, col.dictionary_page_offset)
        starts.append(offset)
    return starts


def row_group_bytes(metadata: pq.FileMetaData, index: int) -> int:
    rg = metadata.row_group(index)
    return sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))


@dataclass(frozen=True)
class RowGroupLayout:
    """Where a Parquet file's row groups lie and what they hold: first byte, compressed bytes
    and rows of each (read off the footer once; walking every column chunk's metadata costs
    more than the rest of splitting a point query's one file)."""

    starts: tuple[int, ...]
    nbytes: tuple[int, ...]
    rows: tuple[int, ...]

    @classmethod
    def of(cls, metadata: pq.FileMetaData) -> "RowGroupLayout":
        groups = range(metadata.num_row_groups)
        return cls(
            tuple(row_group_starts(metadata)),
            tuple(row_group_bytes(metadata, i) for i in groups),
            tuple(metadata.row_group(i).num_rows for i in groups),
        )

    def memory_bytes(self) -> int:
        """What keeping it costs (three tuples of ints)."""
        return 200 + 3 * 36 * len(self.starts)


@dataclass(frozen=True)
class CachedFooter:
    """A Parquet footer as the footer cache keeps it: the metadata and its row-group layout."""

    metadata: pq.FileMetaData
    layout: RowGroupLayout


def aligned_row_groups(metadata: pq.FileMetaData, start: int, length: int) -> list[int]:
    """Row groups whose first byte lies in ``[start, start + length)``."""
    end = start + length
    return [i for i, s in enumerate(row_group_starts(metadata)) if start <= s < end]


class FooterCache(BoundedLRU[tuple[str, int], "CachedFooter | LanceFooter | OrcFooter"]):
    """An LRU of base file footers (Parquet footers, Lance and ORC row counts) keyed by (normalised full
    path, size), bounded in bytes (each footer counts its serialized size plus object overhead);
    thread safe.

    The key is normalised so that aliases of one file (``a//b``, ``a/./b``, ``a/x/../b``) share
    one entry; a footer larger than the whole budget is returned without being cached.
    """

    def __init__(self, max_bytes: int = 256 << 20, listener: CacheListener | None = None):
        super().__init__("footers", max_bytes, listener=listener)

    @staticmethod
    def _key(storage: Storage, rel_path: str, size: int) -> tuple[str, int]:
        return storage.file_uri(rel_path), size

    def holds(self, storage: Storage, rel_path: str, size: int) -> bool:
        """Whether the footer of ``rel_path`` is cached (no statistics are counted)."""
        return self.peek(self._key(storage, rel_path, size)) is not None

    def lance_footer(self, storage: Storage, rel_path: str, size: int) -> LanceFooter:
        """The footer facts of the Lance base file ``rel_path`` of ``size`` bytes (read on a miss)."""
        key = self._key(storage, rel_path, size)
        hit = self.get(key)
        if isinstance(hit, LanceFooter):
            return hit
        footer = read_lance_footer(storage, rel_path, size)
        self.put(key, footer, 256)
        return footer

    def orc_footer(self, storage: Storage, rel_path: str, size: int) -> OrcFooter:
        """The row and stripe counts of the ORC base file ``rel_path`` of ``size`` bytes (read on a miss)."""
        key = self._key(storage, rel_path, size)
        hit = self.get(key)
        if isinstance(hit, OrcFooter):
            return hit
        footer = read_orc_footer(storage, rel_path)
        self.put(key, footer, 256)
        return footer

    def footer(self, storage: Storage, rel_path: str, size: int) -> pq.FileMetaData:
        """The footer of the Parquet base file ``rel_path`` of ``size`` bytes (read on a miss)."""
        return self.parquet(storage, rel_path, size).metadata

    def cached_parquet(self, storage: Storage, rel_path: str, size: int) -> CachedFooter | None:
        """The footer and layout of the Parquet base file ``rel_path``, if cached (nothing is read)."""
        hit = self.peek(self._key(storage, rel_path, size))
        return hit if isinstance(hit, CachedFooter) else None

    def parquet(self, storage: Storage, rel_path: str, size: int) -> CachedFooter:
        """The footer and row-group layout of the Parquet base file ``rel_path`` of ``size`` bytes
        (read on a miss)."""
        key = self._key(storage, rel_path, size)
        hit = self.get(key)
        if isinstance(hit, CachedFooter):
            return hit
        try:
            metadata = read_footer(storage, rel_path, size)  # one ranged read of the tail
        except FileNotFoundError as err:  # e.g. cleaned after the slices were listed
            raise FileNotFoundError(f"base file missing: {storage.uri}/{rel_path}") from err
        except (pa.ArrowInvalid, OSError) as err:
            raise CorruptTableError(f"cannot read Parquet base file {storage.uri}/{rel_path}: {err}") from err
        entry = CachedFooter(metadata, RowGroupLayout.of(metadata))
        # plus the Python and C++ objects
        self.put(key, entry, int(metadata.serialized_size) + 512 + entry.layout.memory_bytes())
        return entry


_DEFAULT_FOOTER_CACHE = FooterCache()


def default_footer_cache() -> FooterCache:
    """The process-wide footer cache (planners given none use it)."""
    return _DEFAULT_FOOTER_CACHE
_WAITING_SPLITS = 4096  # splits planned ahead of the consumer
#: plans of at most this many file slices are split inline (see :meth:`SplitPlanner.plan`)
INLINE_SLICES = 4


@dataclass
class _InitialBudget:
    """How many of the query's first splits still use ``initial_split_bytes``."""

    remaining: int
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, wanted: int) -> int:
        with self.lock:
            got = min(self.remaining, wanted)
            self.remaining -= got
            return got


class SplitPlanner:
    """Turns file slices of one table into weighted splits.

    Args:
        storage: the table's storage (footers are read through it).
        options: split sizes and weights.
        footer_cache: shared footer cache; the process-wide one by default.
    """

    def __init__(
        self,
        storage: Storage,
        options: SplitOptions | None = None,
        footer_cache: FooterCache | None = None,
    ):
        self.storage = storage
        self.options = options or SplitOptions()
        self.footers = footer_cache if footer_cache is not None else _DEFAULT_FOOTER_CACHE

    def _split(self, fs: FileSlice, nbytes: int, rows: int, **kw) -> Split:
        return Split(fs, nbytes, rows, split_weight(nbytes, self.options), **kw)

    def split_slice(self, fs: FileSlice, budget: _InitialBudget | None = None) -> list[Split]:
        """The splits of one file slice."""
        base = fs.base_file
        if base is None:  # log-only slice (MOR insert into a new file group)
            size = fs.total_size
            return [self._split(fs, size, max(1, size // _LOG_BYTES_PER_ROW_GUESS))]
        base_path = fs.base_file_path
        assert base_path is not None  # base is not None
        if base.extension == "lance":
            # Never cut (Lance pages are not aligned to byte ranges): one split, rows from the footer.
            rows = self.footers.lance_footer(self.storage, base_path, base.size).num_rows
            return [self._split(fs, fs.total_size, self._with_log_rows(fs, rows))]
        if base.extension == "orc":
            orc_footer = self.footers.orc_footer(self.storage, base_path, base.size)
            if fs.has_logs or fs.bootstrap_source is not None or orc_footer.num_stripes <= 1:
                return [self._split(fs, fs.total_size, self._with_log_rows(fs, orc_footer.num_rows))]
            return self._stripes(fs, orc_footer)
        if base.extension != "parquet":
            # Other formats are refused by the reader; plan them as one unit so it says so.
            return [self._split(fs, fs.total_size, 0)]
        if fs.has_logs or fs.bootstrap_source is not None:
            # a skeleton file is stitched to its source file by row position: read it whole
            return [self._split(fs, fs.total_size, self._with_log_rows(fs, self._base_rows(fs)))]
        n_small = self._small_ranges(base.size, budget)
        first = self.options.initial_split_bytes if n_small else self.options.target_split_bytes
        assert first is not None  # small ranges are granted only when it is set
        if 0 < base.size <= first:  # one range: the whole file, no footer needed
            return [self._split(fs, base.size, self._base_rows(fs))]
        return self._byte_ranges(fs, self.footers.parquet(self.storage, base_path, base.size), n_small)

    def _small_ranges(self, size: int, budget: _InitialBudget | None) -> int:
        """How many of the first byte ranges of a base file of ``size`` bytes are of
        ``initial_split_bytes`` (the file's share of the query's initial small splits)."""
        small = self.options.initial_split_bytes
        if budget is None or not small or small >= self.options.target_split_bytes:
            return 0
        return budget.take(-(-size // small))

    def _base_rows(self, fs: FileSlice) -> int:
        """The rows of the slice's Parquet base file: its cached footer's count, else estimated
        from its size (an estimate only: nothing exact is derived from it, see
        :mod:`catalog.plan.count`)."""
        base, path = fs.base_file, fs.base_file_path
        assert base is not None and path is not None
        cached = self.footers.cached_parquet(self.storage, path, base.size)
        if cached is not None:
            return int(cached.metadata.num_rows)
        return max(1, base.size // _PARQUET_BYTES_PER_ROW_GUESS)

    @staticmethod
    def _with_log_rows(fs: FileSlice, base_rows: int) -> int:
        """Estimated rows of a slice: its base file's plus its logs', at the base file's bytes per row."""
        assert fs.base_file is not None
        size = fs.base_file.size
        if not fs.has_logs or not size:
            return base_rows
        return base_rows + round((fs.total_size - size) * base_rows / size)

    def _stripes(self, fs: FileSlice, footer: OrcFooter) -> list[Split]:
        """Splits of consecutive stripes of an ORC base file, about ``target_split_bytes`` each.
        pyarrow gives no stripe sizes or row counts: each stripe is weighed at its share of the
        file (ORC writers cut stripes of one size)."""
        assert fs.base_file is not None  # only slices with a base file are cut into stripes
        count = footer.num_stripes
        per_stripe = max(1, fs.base_file.size // count)
        per_split = max(1, self.options.target_split_bytes // per_stripe)
        out = []
        for first in range(0, count, per_split):
            stripes = tuple(range(first, min(first + per_split, count)))
            rows = footer.num_rows * len(stripes) // count
            out.append(self._split(fs, per_stripe * len(stripes), rows, row_groups=stripes))
        return out

    def _byte_ranges(self, fs: FileSlice, footer: CachedFooter, n_small: int) -> list[Split]:
        """The byte ranges of a base file (the first ``n_small`` of ``initial_split_bytes``), each
        owning the row groups that start in it (read off the footer)."""
        assert fs.base_file is not None  # only slices with a base file are cut into byte ranges
        size = fs.base_file.size
        if not size:  # size unknown to the listing: do not cut
            return [self._split(fs, footer.metadata.serialized_size, footer.metadata.num_rows)]
        layout = footer.layout
        target = self.options.target_split_bytes
        small = self.options.initial_split_bytes
        # Clamped so that a writer's odd offsets can never leave a row group without an owner.
        starts = [min(max(s, 0), size - 1) for s in layout.starts]
        out: list[Split] = []
        pos = 0
        while pos < size:
            length = min(small if small and n_small > 0 else target, size - pos)
            n_small -= 1
            groups = tuple(i for i, s in enumerate(starts) if pos <= s < pos + length)
            if groups:
                nbytes = sum(layout.nbytes[i] for i in groups)
                rows = sum(layout.rows[i] for i in groups)
                out.append(self._split(fs, nbytes, rows, start=pos, length=length, row_groups=groups))
            pos += length
        if not out:  # a footer-only file (no row groups): still one split, it yields nothing
            out.append(self._split(fs, size, 0))
        return out

    def _footer_reads(self, slices: Iterable[FileSlice]) -> int:
        """How many footers splitting ``slices`` may read from storage (a base file cut into
        several ranges; a first range may be smaller than the target: counted by the target,
        it may read one footer more than counted here, never fewer)."""
        reads = 0
        target = self.options.target_split_bytes
        for fs in slices:
            base, path = fs.base_file, fs.base_file_path
            if base is None or path is None or base.extension != "parquet" or fs.has_logs:
                continue
            if fs.bootstrap_source is None and (not base.size or base.size > target):
                reads += not self.footers.holds(self.storage, path, base.size)
        return reads

    def plan(self, slices: Iterable[FileSlice]) -> Iterator[Split]:
        """Split ``slices``; yield splits as they become ready (nothing happens before the first
        ``next``).

        A small plan (a sequence of at most ``INLINE_SLICES`` slices with at most one footer not
        cached: a point query) is split on the consumer's thread: starting threads would cost more
        than the work. Otherwise ``max_workers`` threads draw the slices (so partition listing
        overlaps with footer reads and with the consumer, see :func:`bounded_parallel`). Errors
        are re-raised to the consumer; closing the iterator early stops the background work.
        """
        opts = self.options
        budget = _InitialBudget(opts.initial_split_count) if opts.initial_split_count else None
        if isinstance(slices, Sequence) and len(slices) <= INLINE_SLICES and self._footer_reads(slices) <= 1:
            for fs in slices:
                yield from self.split_slice(fs, budget)
            return
        yield from self._in_background(iter(slices), budget)

    def _in_background(self, slices: Iterator[FileSlice], budget: _InitialBudget | None) -> Iterator[Split]:
        # Joined when closed: a thread still reading footers when the interpreter exits could
        # touch Arrow during finalization (see Storage.arrow_filesystem).
        return bounded_parallel(
            slices, lambda fs, _: self.split_slice(fs, budget), self.options.max_workers, _WAITING_SPLITS, "hudi-splits"
        )


__all__ = [
    "DEFAULT_TARGET_SPLIT_BYTES",
    "CachedFooter",
    "FooterCache",
    "RowGroupLayout",
    "SplitOptions",
    "SplitPlanner",
    "aligned_row_groups",
    "row_group_starts",
    "split_weight",
]
