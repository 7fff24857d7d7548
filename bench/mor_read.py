"""Merge-on-read snapshot read: hudi-flight vs the ``hudi`` package (hudi-rs), same table, one run.

The table (generated once per size with :mod:`catalog.testing.generator`): ``full`` = 2 million
rows in 8 file groups, then one delta commit that updates 10% of the keys through Avro log blocks
(and deletes 1%); ``quick`` = 100k rows, same shape. Both readers return the same rows (checked
on the row count and a key checksum before timing); reported: median wall time and rows/s,
plus our read-optimized read of the same table (base files only) to show the merge's share.

``python -m bench.mor_read [quick|full]`` prints the side-by-side numbers.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from bench.common import check_size, measure, row, table_dir
from catalog import HudiTable
from hudi_generator.generator import MERGE_ON_READ, GeneratorSpec, generate

ROWS = {"quick": 100_000, "full": 2_000_000}
REPEATS = {"quick": 3, "full": 3}


def _spec(size: str) -> GeneratorSpec:
    return GeneratorSpec(
        rows=ROWS[size],
        partitions=4,
        files_per_partition=2,
        commits=2,
        update_fraction=0.10,
        delete_fraction=0.01,
        table_type=MERGE_ON_READ,
        metadata_table=False,
        workers=2,
    )


def ensure_table(size: str) -> Path:
    """The benchmark table for ``size``, generated on first use."""
    path = table_dir("mor_read", size) / "trips"
    if not (path / ".hoodie" / "hoodie.properties").exists():
        generate(str(path), _spec(size))
    return path


def _ours(path: Path) -> pa.Table:
    return HudiTable.open(str(path)).read()


def _theirs(path: Path) -> pa.Table:
    from hudi import HudiTableBuilder

    return pa.Table.from_batches(HudiTableBuilder.from_base_uri(str(path)).build().read())


def _fingerprint(t: pa.Table) -> tuple[int, int]:
    keys = t.column("_hoodie_record_key")
    return t.num_rows, pc.sum(pc.utf8_length(keys)).as_py() + len(pc.unique(keys))


def run(size: str) -> list[dict]:
    size = check_size(size)
    path = ensure_table(size)
    ours, theirs = _ours(path), _theirs(path)
    if _fingerprint(ours) != _fingerprint(theirs):
        raise AssertionError(f"readers disagree: {_fingerprint(ours)} vs {_fingerprint(theirs)}")
    rows = ours.num_rows
    params = {"rows": ROWS[size], "updated": "10%", "deleted": "1%", "log_blocks": "avro"}
    out = []
    for competitor, fn in (("hudi-flight", _ours), ("hudi-rs", _theirs)):
        t = measure(lambda fn=fn: fn(path), repeat=REPEATS[size], warmup=0)
        name = f"mor_read/{ROWS[size]:,} rows snapshot"
        out.append(row(name, competitor, "median wall time", t.median, "s", repeats=t.repeats, params=params))
        out.append(row(name, competitor, "throughput", rows / t.median, "rows/s", repeats=t.repeats, params=params))
    # Context: the base files alone (no log merge), to separate base reading from merge cost.
    ro = measure(lambda: HudiTable.open(str(path)).read(query_type="read_optimized"), repeat=REPEATS[size], warmup=0)
    out.append(row(f"mor_read/{ROWS[size]:,} rows read-optimized", "hudi-flight", "median wall time", ro.median, "s",
                   repeats=ro.repeats, params=params))
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    size = args[0] if args else "full"
    for r in run(size):
        print(f"{r['name']:40s} {r['competitor']:12s} {r['metric']:17s} {r['value']:>14,.3f} {r['unit']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
