"""The split planner on synthetic Parquet base files and hand-built file slices.

Invariant checked throughout: the row groups named by the splits of a base file cover every row
group exactly once, so reading each split's row groups and concatenating gives the file.
"""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from catalog.errors import CorruptTableError
from catalog.plan.splits import (
    FooterCache,
    RowGroupLayout,
    SplitOptions,
    SplitPlanner,
    aligned_row_groups,
    row_group_starts,
    split_weight,
)
from catalog.storage import Storage
from catalog.table.files import BaseFile, FileSlice, LogFile

MiB = 1024 * 1024
INSTANT = "20240101000000000"


def _write_base(root, partition: str, file_id: str, rows: int, row_group_size: int) -> FileSlice:
    name = f"{file_id}_0-1-0_{INSTANT}.parquet"
    folder = root / partition if partition else root
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.table({"id": pa.array(range(rows), pa.int64()), "s": pa.array([f"v{i:08d}" for i in range(rows)])})
    pq.write_table(table, folder / name, row_group_size=row_group_size, compression="none")
    size = (folder / name).stat().st_size
    return FileSlice(partition, file_id, INSTANT, BaseFile.parse(name, size))


@pytest.fixture
def storage(tmp_path):
    return Storage(str(tmp_path))


def _read_split(storage, split):
    pf = pq.ParquetFile(storage.full_path(split.file_slice.base_file_path))
    if split.row_groups is None:
        return pf.read()
    return pf.read_row_groups(list(split.row_groups))


def test_weight_clamps():
    opts = SplitOptions()
    assert split_weight(1, opts) == 0.05
    assert split_weight(64 * MiB, opts) == 0.5
    assert split_weight(10 * 128 * MiB, opts) == 1.0


def test_small_file_is_one_whole_split_planned_without_its_footer(tmp_path, storage):
    fs = _write_base(tmp_path, "p=1", "fg1", rows=100, row_group_size=10)
    footers = FooterCache()
    storage.stats.reset()
    (split,) = SplitPlanner(storage, SplitOptions(), footers).split_slice(fs)
    assert storage.stats.total == 0 and not footers.holds(storage, fs.base_file_path, fs.base_file.size)
    assert split.row_groups is None and split.length is None
    assert split.bytes == fs.base_file.size and split.estimated_rows > 0  # estimated from the size
    assert split.weight == 0.05  # tiny file, minimum weight
    assert split.partition == "p=1" and split.file_ids == ["fg1"]
    footers.parquet(storage, fs.base_file_path, fs.base_file.size)  # e.g. read by a reader since
    (split,) = SplitPlanner(storage, SplitOptions(), footers).split_slice(fs)
    assert split.estimated_rows == 100  # a cached footer's count


@pytest.mark.parametrize("target", [4096, 10_000, 33_333, 70_000])
def test_byte_ranges_cover_each_row_group_once(tmp_path, storage, target):
    fs = _write_base(tmp_path, "", "fg1", rows=20_000, row_group_size=1000)
    meta = pq.read_metadata(storage.full_path(fs.base_file_path))
    assert meta.num_row_groups == 20
    splits = SplitPlanner(storage, SplitOptions(target_split_bytes=target), FooterCache()).split_slice(fs)
    assert len(splits) > 1
    owned = [g for s in splits for g in s.row_groups]
    assert sorted(owned) == list(range(20))  # no row group read twice or lost
    starts = row_group_starts(meta)
    for s in splits:  # each split owns exactly the row groups starting in its range
        assert list(s.row_groups) == aligned_row_groups(meta, s.start, s.length)
        assert all(s.start <= starts[g] < s.start + s.length for g in s.row_groups)
        assert s.length <= target
        assert s.estimated_rows == sum(meta.row_group(g).num_rows for g in s.row_groups)
        assert 0.05 <= s.weight <= 1
    union = pa.concat_tables(_read_split(storage, s) for s in splits)
    assert sorted(union["id"].to_pylist()) == list(range(20_000))


def test_only_files_cut_into_ranges_have_their_footers_read(tmp_path, storage):
    """Files of several sizes planned together, the first splits small: the files that fit one
    range are whole splits planned from their size, the others read their footer and tile their
    row groups; every row is read once, and a metadata count is exact all the same."""
    from catalog.plan.count import count_rows
    from catalog.plan.options import ReadOptions
    from catalog.read.context import ReadContext

    small = _write_base(tmp_path, "p=1", "fg1", rows=50, row_group_size=10)
    large = [_write_base(tmp_path, f"p={i}", f"fg{i}", rows=8_000, row_group_size=500) for i in (2, 3)]
    target = large[0].base_file.size // 3
    assert small.base_file.size < target // 4
    opts = SplitOptions(target_split_bytes=target, initial_split_bytes=target // 4, initial_split_count=2)
    footers = FooterCache()
    storage.stats.reset()
    splits = list(SplitPlanner(storage, opts, footers).plan([small, *large]))
    assert storage.stats.total == 2  # the two files cut into ranges: one ranged read of each tail
    assert not footers.holds(storage, small.base_file_path, small.base_file.size)
    by_file = {fs.file_id: [s for s in splits if s.file_slice.file_id == fs.file_id] for fs in (small, *large)}
    (whole,) = by_file["fg1"]
    assert whole.row_groups is None and whole.length is None and whole.bytes == small.base_file.size
    for fs in large:
        owned = [g for s in by_file[fs.file_id] for g in s.row_groups]
        assert sorted(owned) == list(range(16))  # no row group read twice or lost
        assert all(0.05 <= s.weight <= 1 for s in by_file[fs.file_id])
    ids = sorted(i for s in splits for i in _read_split(storage, s)["id"].to_pylist())
    assert ids == sorted(list(range(50)) + list(range(8_000)) * 2)
    schema = pa.schema([("id", pa.int64()), ("s", pa.string())])
    context = ReadContext(storage=storage, config=None, commits=frozenset(), table_schema=schema,  # count reads neither
                          read_schema=schema, output_schema=schema, instant=INSTANT)
    assert count_rows(context, splits, ReadOptions(), footers) == 16_050


def test_initial_splits_are_smaller(tmp_path, storage):
    fs = _write_base(tmp_path, "", "fg1", rows=20_000, row_group_size=500)
    size = fs.base_file.size
    opts = SplitOptions(target_split_bytes=size // 2, initial_split_bytes=size // 8, initial_split_count=3)
    splits = SplitPlanner(storage, opts, FooterCache()).split_slice(fs, budget=_budget(3))
    lengths = [s.length for s in splits]
    assert lengths[:3] == [size // 8] * 3
    assert lengths[3] == size // 2  # then the regular target (the last range is the remainder)
    assert sum(lengths) == size and [s.start for s in splits][1:] == [sum(lengths[:i]) for i in range(1, len(lengths))]
    assert sorted(g for s in splits for g in s.row_groups) == list(range(40))


def _budget(n):
    from catalog.plan.splits import _InitialBudget

    return _InitialBudget(n)


def test_slice_with_logs_is_one_split_weighted_by_total_size(tmp_path, storage):
    fs = _write_base(tmp_path, "", "fg1", rows=20_000, row_group_size=1000)
    log = LogFile.parse(f".fg1_{INSTANT}.log.1_0-1-0", size=30 * MiB)
    mor = FileSlice("", "fg1", INSTANT, fs.base_file, [log])
    (split,) = SplitPlanner(storage, SplitOptions(target_split_bytes=4096), FooterCache()).split_slice(mor)
    assert split.row_groups is None
    assert split.bytes == fs.base_file.size + 30 * MiB
    assert split.weight == pytest.approx((fs.base_file.size + 30 * MiB) / (128 * MiB))
    assert split.estimated_rows > 20_000


def test_log_only_slice(storage):
    log = LogFile.parse(f".fg9_{INSTANT}.log.1_0-1-0", size=1000)
    (split,) = SplitPlanner(storage).split_slice(FileSlice("p", "fg9", INSTANT, None, [log]))
    assert split.bytes == 1000 and split.weight == 0.05 and split.estimated_rows > 0


def test_footer_cache_avoids_io(tmp_path, storage):
    fs = _write_base(tmp_path, "", "fg1", rows=100, row_group_size=10)
    cache = FooterCache()
    planner = SplitPlanner(storage, SplitOptions(target_split_bytes=fs.base_file.size // 3), cache)  # cut: a footer
    planner.split_slice(fs)
    requests = storage.stats.total
    planner.split_slice(fs)
    assert storage.stats.total == requests == 1  # the footer: one ranged read of the tail


def test_footer_cache_keeps_the_row_group_layout(tmp_path, storage, monkeypatch):
    """The layout is read off the footer once, charged with it, and splits a cached file without
    walking its column chunks again."""
    import catalog.plan.splits as splits

    fs = _write_base(tmp_path, "", "fg1", rows=100, row_group_size=10)
    meta = pq.read_metadata(storage.full_path(fs.base_file_path))
    cache = FooterCache()
    footer = cache.parquet(storage, fs.base_file_path, fs.base_file.size)
    layout = footer.layout
    assert layout == RowGroupLayout.of(meta) and layout.starts == tuple(row_group_starts(meta))
    assert layout.rows == (10,) * 10 and sum(layout.nbytes) == sum(
        meta.row_group(i).total_byte_size for i in range(10))  # uncompressed: compressed == raw
    assert cache.stats().bytes == meta.serialized_size + 512 + layout.memory_bytes()

    walked = []
    monkeypatch.setattr(splits, "row_group_bytes", lambda *a: walked.append(a) or 0)
    target = fs.base_file.size // 3
    parts = SplitPlanner(storage, SplitOptions(target_split_bytes=target), cache).split_slice(fs)
    assert walked == [] and sum(s.estimated_rows for s in parts) == 100
    assert sorted(g for s in parts for g in s.row_groups) == list(range(10))


def test_plan_streams_before_listing_finishes(tmp_path, storage):
    """The first partition's splits come out while the slice source is still blocked."""
    first = _write_base(tmp_path, "p=1", "fg1", rows=10, row_group_size=10)
    last = _write_base(tmp_path, "p=2", "fg2", rows=10, row_group_size=10)
    release = threading.Event()

    def slices():
        yield first
        release.wait(10)  # "listing the last partition" takes until the consumer has a split
        yield last

    it = SplitPlanner(storage, SplitOptions(), FooterCache()).plan(slices())
    t0 = time.monotonic()
    got = next(it)
    assert got.partition == "p=1" and time.monotonic() - t0 < 5
    release.set()
    assert [s.partition for s in it] == ["p=2"]


def test_plan_propagates_listing_errors(storage):
    def slices():
        raise FileNotFoundError("partition vanished")
        yield  # pragma: no cover

    with pytest.raises(FileNotFoundError, match="vanished"):
        list(SplitPlanner(storage).plan(slices()))


def test_plan_propagates_footer_errors(tmp_path, storage):
    name = f"fg1_0-1-0_{INSTANT}.parquet"
    (tmp_path / name).write_bytes(b"not parquet at all")
    fs = FileSlice("", "fg1", INSTANT, BaseFile.parse(name, 18))
    cut = SplitOptions(target_split_bytes=8)  # the file is cut into ranges: its footer is read
    with pytest.raises(CorruptTableError, match=name):
        list(SplitPlanner(storage, cut, FooterCache()).plan([fs]))
    assert len(list(SplitPlanner(storage, footer_cache=FooterCache()).plan([fs]))) == 1  # whole: no footer read
    (tmp_path / name).unlink()  # gone after listing (a cleaner): a FileNotFoundError naming it
    with pytest.raises(FileNotFoundError, match=name):
        list(SplitPlanner(storage, cut, FooterCache()).plan([fs]))


@pytest.mark.parametrize("kwargs", [{"target_split_bytes": 0}, {"min_weight": 0}, {"max_workers": 0}])
def test_bad_options(kwargs):
    with pytest.raises(ValueError):
        SplitOptions(**kwargs)


def test_closing_the_plan_early_drops_the_queued_footer_reads(tmp_path, storage):
    """A consumer that stops (e.g. past its planning deadline) leaves no queued work behind."""
    fs = _write_base(tmp_path, "", "fg1", rows=10, row_group_size=10)
    calls = []

    class SlowPlanner(SplitPlanner):
        def split_slice(self, fs, budget=None):
            calls.append(fs)
            time.sleep(0.05)
            return super().split_slice(fs, budget)

    it = SlowPlanner(storage, SplitOptions(max_workers=1), FooterCache()).plan([fs] * 50)
    next(it)
    it.close()
    assert len(calls) < 10


def test_a_small_plan_is_split_on_the_consumers_thread(tmp_path, storage, monkeypatch):
    """A point query's few slices start no thread; a stream of slices, or several footers to
    read, still go to the background loader."""
    one = _write_base(tmp_path, "p=1", "fg1", rows=10, row_group_size=10)
    two = _write_base(tmp_path, "p=2", "fg2", rows=10, row_group_size=10)
    backgrounds = []
    real = SplitPlanner._in_background

    def recording(self, slices, budget):
        backgrounds.append(True)
        return real(self, slices, budget)

    monkeypatch.setattr(SplitPlanner, "_in_background", recording)
    cut = SplitOptions(target_split_bytes=one.base_file.size // 2)  # files cut into ranges: footers read
    cache = FooterCache()
    planner = SplitPlanner(storage, cut, cache)
    assert {s.partition for s in planner.plan([one])} == {"p=1"} and not backgrounds  # one footer to read
    assert {s.partition for s in planner.plan([one, two])} == {"p=1", "p=2"} and not backgrounds  # one read
    assert {s.partition for s in planner.plan(iter([one]))} == {"p=1"} and backgrounds == [True]  # a stream
    cold = SplitPlanner(storage, cut, FooterCache())
    assert {s.partition for s in cold.plan([one, two])} == {"p=1", "p=2"} and backgrounds == [True, True]
    whole = SplitPlanner(storage, SplitOptions(), FooterCache())  # whole files: no footer to read
    assert [s.partition for s in whole.plan([one, two])] == ["p=1", "p=2"] and backgrounds == [True, True]
