"""Table generator speed: writing a merge-on-read table (2 commits, metadata table with
column_stats) of 200k rows / 1,000 partitions (quick) or 2M rows / 10,000 partitions (full)."""

from __future__ import annotations

import shutil
import sys
import time

from bench.common import row, table_dir

SIZES = {"quick": (200_000, 1_000), "full": (2_000_000, 10_000)}


def run(size: str) -> list[dict]:
    from hudi_generator.generator import MERGE_ON_READ, GeneratorSpec, generate

    rows, partitions = SIZES[size]
    target = table_dir("generate_table", size) / "trips"
    shutil.rmtree(target, ignore_errors=True)
    spec = GeneratorSpec(rows=rows, partitions=partitions, commits=2, table_type=MERGE_ON_READ,
                         metadata_table=True, column_stats=True, workers=2)
    t0 = time.perf_counter()
    result = generate(str(target), spec)
    elapsed = time.perf_counter() - t0
    shutil.rmtree(target, ignore_errors=True)
    name = f"generate/MOR {rows:,} rows, {partitions:,} partitions, 2 commits, MDT + column_stats"
    params = {"rows": rows, "partitions": partitions, "files": result.files_written, "bytes": result.bytes_written}
    return [
        row(name, "hudi-flight generator", "wall time", elapsed, "s", params=params),
        row(name, "hudi-flight generator", "throughput", rows / elapsed, "rows/s", params=params),
    ]


if __name__ == "__main__":
    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r['name']:70} {r['metric']:12} {r['value']:12.2f} {r['unit']}")
