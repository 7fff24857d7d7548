"""Reading one CDC split: the change rows of one file group, commit by commit.

Each :class:`~catalog.table.cdc.FileGroupChange` becomes rows of
:data:`~catalog.table.cdc.CDC_SCHEMA` the way Spark's Hudi CDC query builds them
(``CDCFileGroupIterator``):

* ``CDC_LOG``: the records of the commit's ``.cdc`` log files. ``DATA_BEFORE_AFTER`` logs hold
  both images; ``DATA_BEFORE`` logs the before image, the after image comes from the group's
  slice after the commit; ``OP_KEY_ONLY`` logs only the key, both images come from the slices
  before and after the commit;
* ``BASE_FILE_INSERT``: every row of the new base file is an insert;
* ``BASE_FILE_DELETE`` and ``REPLACED``: every row of the group's last slice is a delete;
* ``LOG_FILE``: the group's rows before and after the commit, by record key: a key that
  appears is an insert, one that disappears a delete, one whose row changed an update (the
  commit's log records are the only difference between the two slices).

File slices are read with the snapshot reader (merge-on-read merge included) as of the instant
the change names, so a slice's log blocks written later do not count.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterator, Sequence

import pyarrow as pa

from catalog.errors import CorruptTableError
from catalog.format.caches import ReadCaches
from catalog.format.log_block import decode_cdc_block
from catalog.format.log_file import iter_log_blocks
from catalog.read.cdc_json import ImageWriter, avro_images
from catalog.read.context import ReadContext
from catalog.table.cdc import CDC_SCHEMA, DATA_BEFORE, DATA_BEFORE_AFTER, CdcPlan, ChangeKind, FileGroupChange
from catalog.table.files import FileSlice, Split

RECORD_KEY = "_hoodie_record_key"
INSERT, UPDATE, DELETE = "i", "u", "d"


#: reads every row of a split for a (snapshot) context through the caches given:
#: ``catalog.read.split_reader.read_split``
SliceReader = Callable[[ReadContext, Split, ReadCaches], Iterator[pa.RecordBatch]]


def read_cdc_split(
    ctx: ReadContext, split: Split, caches: ReadCaches, read_slice: SliceReader
) -> Iterator[pa.RecordBatch]:
    """The change rows of the file group ``split`` names, as batches of ``ctx.output_schema``;
    file slices are read with ``read_slice`` through ``caches``."""
    plan = ctx.cdc
    if plan is None:
        raise ValueError("read_cdc_split needs the context of a CDC query")
    group = (split.file_slice.partition, split.file_slice.file_id)
    reader = _GroupReader(ctx, plan, lambda slice_ctx, slice_split: read_slice(slice_ctx, slice_split, caches))
    for change in plan.changes.get(group, ()):
        table = reader.rows(change)
        if ctx.row_filter is not None:
            table = table.filter(ctx.row_filter)
        if table.num_rows:
            yield from table.select(ctx.output_schema.names).combine_chunks().to_batches()


class _GroupReader:
    """Builds the rows of one group's changes; remembers the last slice read (the after image
    of one commit is the before image of the next)."""

    def __init__(self, ctx: ReadContext, plan: CdcPlan,
                 read_slice: Callable[[ReadContext, Split], Iterator[pa.RecordBatch]]):
        self.ctx = ctx
        self.plan = plan
        self.read_slice = read_slice
        self.images = ImageWriter(ctx.table_schema)
        self._slice_ctx = dataclasses.replace(
            ctx,
            read_schema=ctx.table_schema,
            output_schema=ctx.table_schema,
            read_optimized=False,
            row_filter=None,
            filter_columns=(),
            cdc=None,
        )
        self._last: tuple[tuple[object, ...], pa.Table] | None = None

    def rows(self, change: FileGroupChange) -> pa.Table:
        kind = change.kind
        if kind is ChangeKind.CDC_LOG:
            return self._from_cdc_log(change)
        if kind is ChangeKind.BASE_FILE_INSERT:
            after = self.images.jackson(self._read(change.after, change.after_instant))
            return _rows(change.instant, [INSERT] * len(after), [None] * len(after), after)
        if kind in (ChangeKind.BASE_FILE_DELETE, ChangeKind.REPLACED):
            before = self.images.jackson(self._read(change.before, change.before_instant))
            return _rows(change.instant, [DELETE] * len(before), before, [None] * len(before))
        return self._compare(change)

    # -- slices ---------------------------------------------------------------------------
    def _read(self, fs: FileSlice | None, instant: str | None) -> pa.Table:
        """Every row of ``fs`` as of ``instant`` (all table columns); empty for no slice."""
        if fs is None:
            return self.ctx.table_schema.empty_table()
        key = (fs.partition, fs.file_id, fs.base_file, tuple(fs.log_files), instant)
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        ctx = dataclasses.replace(self._slice_ctx, instant=instant)
        batches = list(self.read_slice(ctx, Split(fs, fs.total_size, 0, 1.0)))
        table = pa.Table.from_batches(batches, ctx.output_schema)
        self._last = (key, table)
        return table

    def _images_by_key(self, fs: FileSlice | None, instant: str | None) -> dict[str, str]:
        table = self._read(fs, instant)
        keys = table.column(RECORD_KEY).to_pylist()
        return dict(zip(keys, self.images.jackson(table)))

    # -- inference from the slices before and after a merge-on-read log file ----------------
    def _compare(self, change: FileGroupChange) -> pa.Table:
        before = self._images_by_key(change.before, change.before_instant)
        after = self._images_by_key(change.after, change.after_instant)
        changes: list[tuple[str, str | None, str | None]] = []
        for key, image in after.items():
            previous = before.get(key)
            if previous is None:
                changes.append((INSERT, None, image))
            elif previous != image:
                changes.append((UPDATE, previous, image))
        changes.extend((DELETE, image, None) for key, image in before.items() if key not in after)
        ops, old, new = (list(column) for column in zip(*changes)) if changes else ([], [], [])
        return _rows(change.instant, ops, old, new)

    # -- .cdc log files -----------------------------------------------------------------------
    def _from_cdc_log(self, change: FileGroupChange) -> pa.Table:
        records = self._cdc_records(change)
        ops = records.column("op").to_pylist()
        mode = self.plan.logging_mode
        if mode == DATA_BEFORE_AFTER:
            before_log, after_log = avro_images(records.column("before")), avro_images(records.column("after"))
            return _rows(change.instant, ops, before_log, after_log)
        keys = records.column("record_key").to_pylist()
        after_images = self._images_by_key(change.after, change.after_instant)
        new = [None if op == DELETE else _image(after_images, key, change, "after") for op, key in zip(ops, keys)]
        if mode == DATA_BEFORE:
            old: list[str | None] = list(avro_images(records.column("before")))
        else:
            before_images = self._images_by_key(change.before, change.before_instant)
            old = [None if op == INSERT else _image(before_images, key, change, "before") for op, key in zip(ops, keys)]
        return _rows(change.instant, ops, old, new)

    def _cdc_records(self, change: FileGroupChange) -> pa.Table:
        storage = self.ctx.storage
        tables = [
            decode_cdc_block(block, block.load_content(storage))
            for path in change.cdc_files
            for block in iter_log_blocks(storage, path)
        ]
        if not tables:
            raise CorruptTableError(f"commit {change.instant}: its CDC log files hold no records")
        return pa.concat_tables(tables, promote_options="permissive")


def _image(images: dict[str, str], key: str, change: FileGroupChange, which: str) -> str:
    image = images.get(key)
    if image is None:
        raise CorruptTableError(
            f"commit {change.instant}: CDC log names record {key!r}, missing from the file slice {which} the commit"
        )
    return image


def _rows(instant: str, ops: Sequence[str], before: Sequence[str | None], after: Sequence[str | None]) -> pa.Table:
    n = len(ops)
    return pa.table(
        [
            pa.array(ops, pa.string()),
            pa.array([instant] * n, pa.string()),
            pa.array(before, pa.string()),
            pa.array(after, pa.string()),
        ],
        schema=CDC_SCHEMA,
    )


__all__ = ["read_cdc_split"]
