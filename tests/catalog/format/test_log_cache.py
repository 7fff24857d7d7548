"""Log files of MOR point reads kept as immutable bytes: the same rows as a plain read, no log file
read when warm, and a file keyed by its path and listed size."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from catalog import HudiTable
from catalog.errors import CorruptBlockWarning
from catalog.format import log_file
from catalog.format.caches import ReadCaches
from catalog.format.log_cache import DecodedLogBlocks, KeyRows
from catalog.format.row_groups import DecodedRowGroups
from catalog.plan.options import ReadOptions
from catalog.plan.planner import plan
from catalog.read.split_reader import read_splits
from catalog.state import TableState
from catalog.storage import add_request_listener, remove_request_listener
from catalog.table.files import FileSlice
from hudi_generator.generator import MERGE_ON_READ, GeneratorSpec
from tests.support.compare import assert_same_rows
from tests.support.fixtures import all_table_names, is_mor

MOR = GeneratorSpec(rows=2000, partitions=2, row_group_size=400, commits=3, table_type=MERGE_ON_READ,
                    record_index=True)
#: a tail that starts like a block but is none: read, it is reported as a corrupt block
GARBAGE = b"#HUDI#" + bytes(30)


class Caches:
    def __init__(self) -> None:
        self.decoded = DecodedRowGroups(64 << 20)
        self.logs = DecodedLogBlocks(64 << 20)

    @property
    def read(self) -> ReadCaches:
        return ReadCaches(row_groups=self.decoded, log_blocks=self.logs)


def _point(state: TableState, keys: list[str], caches: Caches | None) -> pa.Table:
    scan = plan(state, ReadOptions(filters=[("uuid", "in", keys)]))
    assert scan.context.point is not None
    read = caches.read if caches is not None else ReadCaches()
    batches = list(read_splits(scan.context, list(scan.splits), caches=read))
    return pa.Table.from_batches(batches, schema=scan.schema).sort_by("uuid")


def _log_keys(path: str) -> dict[str, list[str]]:
    """Keys the log files decide: updated, deleted and inserted by them, and untouched ones."""
    table = HudiTable.open(path)
    snapshot = {r["uuid"]: r for r in table.read().to_pylist()}
    base = {r["uuid"]: r for r in table.read(query_type="read_optimized").to_pylist()}
    kinds = {
        "updated": sorted(k for k in snapshot.keys() & base.keys() if snapshot[k] != base[k]),
        "deleted": sorted(base.keys() - snapshot.keys()),
        "inserted": sorted(snapshot.keys() - base.keys()),
        "untouched": sorted(k for k in snapshot.keys() & base.keys() if snapshot[k] == base[k]),
    }
    return {kind: keys[:: max(1, len(keys) // 4)][:4] for kind, keys in kinds.items()}


def _slice_of(state: TableState, key: str) -> FileSlice:
    (split,) = list(plan(state, ReadOptions(filters=[("uuid", "=", key)])).splits)
    assert split.file_slice.has_logs
    return split.file_slice


def test_point_reads_match_plain_reads_and_read_no_log_file_when_warm(generated_table):
    path = generated_table(MOR)
    kinds = _log_keys(path)
    assert all(kinds[k] for k in ("updated", "deleted", "untouched"))
    lookups = [[key] for keys in kinds.values() for key in keys] + [[kinds["updated"][0], kinds["deleted"][0]]]
    state = HudiTable.open(path).state
    caches = Caches()
    expected = [_point(state, keys, None) for keys in lookups]
    assert [_point(state, keys, caches) for keys in lookups] == expected  # cold
    state.storage.stats.reset()
    assert [_point(state, keys, caches) for keys in lookups] == expected  # warm
    assert state.storage.stats.total == 0
    stats = caches.logs.stats()
    assert stats.hits > 0 and 0 < stats.bytes <= stats.max_bytes
    assert sum(t.num_rows for t in expected[: len(kinds["updated"])]) == len(kinds["updated"])
    assert all(t.num_rows == 0 for t in expected[len(kinds["updated"]) : len(kinds["updated"]) + len(kinds["deleted"])])


@pytest.mark.parametrize("name", [n for n in all_table_names() if is_mor(n)])
def test_point_reads_of_spark_written_tables_match_plain_reads(fixture_table, name):
    """Avro log blocks, table versions 6 to 9, with and without meta fields, Lance base files: keys
    the snapshot or the base files hold (updated, deleted, inserted by logs), one by one and all
    together, cold and warm, as a plain read answers them."""
    table = HudiTable.open(fixture_table(name))
    column = table.record_key_fields[0]
    keys = set(table.read(columns=[column])[column].to_pylist())
    keys |= set(table.read(columns=[column], query_type="read_optimized")[column].to_pylist())
    # a key of another type (integer keys of the Parquet-log fixtures) is no point read: the same
    # lookups then go the ordinary way with the caches wired in, and must answer the same
    values = sorted(k for k in keys if isinstance(k, str)) or sorted(k for k in keys if k is not None)
    if not values:  # a table without rows: nothing to look up
        assert table.read().num_rows == 0
        return
    lookups = [[k] for k in values[:: max(1, len(values) // 6)]] + [values]
    caches = Caches()
    for keys_ in lookups * 2:  # cold, then warm
        filters = [(column, "in", keys_)]
        scan = plan(table.state, ReadOptions(filters=filters))
        got = pa.Table.from_batches(list(read_splits(scan.context, list(scan.splits), caches=caches.read)),
                                    schema=scan.schema)
        assert_same_rows(got, table.read(filters=filters), f"{name} {keys_}")


def test_a_cold_slice_reads_each_log_file_whole_without_asking_its_size(generated_table):
    path = generated_table(MOR)
    key = _log_keys(path)["updated"][0]
    state = HudiTable.open(path).state
    logs = _slice_of(state, key).log_files
    requests: list[tuple[str, int]] = []

    def listen(kind: str, nbytes: int) -> None:
        requests.append((kind, nbytes))

    add_request_listener(listen)
    try:
        _point(state, [key], Caches())
    finally:
        remove_request_listener(listen)
    assert len(logs) > 1 and all(log.size for log in logs)
    assert "info" not in {kind for kind, _ in requests}
    # the local base file is read by Arrow (opens only): every read is a whole log file
    assert sorted(n for kind, n in requests if kind == "read") == sorted(log.size for log in logs)


def test_log_files_past_the_whole_read_bound_are_walked_block_by_block(generated_table, monkeypatch):
    path = generated_table(MOR)
    key = _log_keys(path)["updated"][0]
    state = HudiTable.open(path).state
    first, *others = _slice_of(state, key).log_files
    monkeypatch.setattr(log_file, "WHOLE_READ_BYTES", first.size)
    expected = _point(state, [key], None)
    caches = Caches()
    state.storage.stats.reset()
    assert _point(state, [key], caches).equals(expected)
    # the first file whole; the others walked (opened), only their blocks' contents read by range
    assert others and first.size <= state.storage.stats.bytes_read < first.size + sum(o.size for o in others)
    state.storage.stats.reset()
    assert _point(state, [key], caches).equals(expected)
    assert state.storage.stats.total == 0


def test_a_log_file_rewritten_under_its_name(generated_copy):
    """Another size is another file (read again); the same size is not detected: its cached
    contents keep being served, as docs/flight.md ("Immutable files") says."""
    path = generated_copy(MOR)
    key = _log_keys(path)["updated"][0]
    open_state = lambda: HudiTable.open(path, use_metadata_table=False).state  # noqa: E731  sizes as listed now
    paths = [Path(path) / p for p in _slice_of(HudiTable.open(path).state, key).log_file_paths]
    log = [p for p in paths if key.encode() in p.read_bytes()][-1]  # the key's latest update
    original = log.read_bytes()
    state = open_state()
    caches = Caches()
    expected = _point(state, [key], caches)
    assert expected.num_rows == 1

    log.write_bytes(original + GARBAGE)  # another size: read again, its corrupt tail reported
    state = open_state()
    misses = caches.logs.stats().misses
    for _ in range(2):  # and reported again when the cached index answers
        with pytest.warns(CorruptBlockWarning, match="corrupt log block"):
            assert _point(state, [key], caches).equals(expected)
    assert caches.logs.stats().misses > misses

    other = key.replace("trip-", "trip-X")[: len(key)]
    log.write_bytes(original.replace(key.encode(), other.encode()))  # the same size, the update moved
    state = open_state()
    misses = caches.logs.stats().misses
    assert _point(state, [key], caches).equals(expected)  # served from the cache
    assert caches.logs.stats().misses == misses
    assert not _point(state, [key], None).equals(expected)  # what storage now holds


def test_a_log_file_shorter_than_listed_is_read_by_its_stored_size(generated_copy):
    """The listed size is a hint: the file is read as storage holds it, its cut last block
    reported as corrupt (not decoded from mixed bytes, not refused as a whole)."""
    path = generated_copy(MOR)
    key = _log_keys(path)["updated"][0]
    state = HudiTable.open(path).state  # sizes from the metadata table: as written
    log = Path(path) / _slice_of(state, key).log_file_paths[-1]
    log.write_bytes(log.read_bytes()[:-1])
    with pytest.warns(CorruptBlockWarning, match="corrupt log block"):
        ours = _point(state, [key], Caches())
    with pytest.warns(CorruptBlockWarning, match="corrupt log block"):
        assert ours.equals(_point(HudiTable.open(path, use_metadata_table=False).state, [key], None))


def test_key_rows_find_every_row_of_a_key_in_row_order():
    keys = pa.array(["b", "a", None, "b", "c"])
    for array in (keys, keys.dictionary_encode()):  # a Parquet block's keys may come dictionary-encoded
        rows = KeyRows.of(array)
        assert rows.positions(["b"]) == [0, 3]
        assert rows.positions(["c", "b", "a"]) == [0, 1, 3, 4]
        assert rows.positions(["z"]) == [] and rows.positions([]) == []
        assert None not in rows.rows  # a null key is no key: no lookup finds it
        assert rows.nbytes > 0


def test_a_blocks_key_rows_are_found_once_per_file_version(generated_table):
    path = generated_table(MOR)
    state = HudiTable.open(path).state
    fs = _slice_of(state, _log_keys(path)["updated"][0])
    files = [(p, log.size) for p, log in zip(fs.log_file_paths, fs.log_files)]
    block = DecodedLogBlocks(1 << 20).blocks(state.storage, files)[0]
    logs = DecodedLogBlocks(1 << 20)
    calls = []

    def keys() -> pa.Array:
        calls.append(1)
        return pa.array(["k1", "k2", "k1"])

    first = logs.key_rows(state.storage, block, 100, ("uuid",), keys)
    assert logs.key_rows(state.storage, block, 100, ("uuid",), keys) is first and len(calls) == 1
    assert first.positions(["k1"]) == [0, 2]
    logs.key_rows(state.storage, block, 101, ("uuid",), keys)  # another size: another file version
    logs.key_rows(state.storage, block, 100, ("other",), keys)  # other key fields: other keys
    assert len(calls) == 3
    unsized = DecodedLogBlocks(1 << 20)  # a file of unknown size is never kept
    unsized.key_rows(state.storage, block, 0, ("uuid",), keys)
    unsized.key_rows(state.storage, block, 0, ("uuid",), keys)
    assert len(calls) == 5 and unsized.stats().bytes == 0
