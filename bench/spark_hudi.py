"""hudi-flight against Spark's own Hudi reader (the JVM peer), on tables written by Hudi itself.

The tables come from Hudi's Spark writer (:mod:`bench.spark_hudi_job`, Hudi 1.1.1 bundle,
PySpark 3.5 in the writer's own environment): a copy-on-write and a merge-on-read table of the
same rows, a metadata table with the record index, many partitions, and an upsert of a tenth of
the keys (so the merge-on-read table merges log files). They are written once per size and kept
under ``bench/results/data``.

Measured side by side in one run, medians after a warm-up:

* planning the merge-on-read table from its metadata table (hudi-flight: open + file slices, cold
  per run; Spark: ``load(path).inputFiles()`` in a warm session);
* a full scan of the copy-on-write table and a snapshot of the merge-on-read one (Spark writes
  into the ``noop`` sink, so every row is materialised; hudi-flight reads a ``pyarrow.Table``);
* a point query by record key on the merge-on-read table (record index on both sides).

Both sides run on the same two cores; Spark uses ``local[2]``. Row counts are checked equal.
Run alone with ``python -m bench.spark_hudi [quick|full]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.common import DATA_DIR, measure, row

REPO = Path(__file__).resolve().parents[1]
WRITER_PYTHON = REPO / ".cache" / "spark35" / "bin" / "python"
HUDI_RELEASE = "1.1.1"
BUNDLE = REPO / ".cache" / "jars" / f"hudi-spark3.5-bundle_2.12-{HUDI_RELEASE}.jar"
JOB = Path(__file__).resolve().parent / "spark_hudi_job.py"
#: partitions and rows of the written tables
SHAPES = {"quick": (100, 100_000), "full": (2_000, 1_000_000)}
POINT_KEY = "key-000004242"


def hudi_job(*args: str) -> dict[str, Any]:
    """Run the JVM-side job (:mod:`bench.spark_hudi_job`) in the writer's environment; its last
    line is ``RESULT <json>``."""
    if not WRITER_PYTHON.exists() or not BUNDLE.exists():
        raise RuntimeError("Hudi's Spark writer is not set up: run `make hudi-writer` first")
    env = dict(os.environ, PYSPARK_PYTHON=str(WRITER_PYTHON), SPARK_LOCAL_IP="127.0.0.1", PYTHONPATH=str(REPO))
    done = subprocess.run(
        [str(WRITER_PYTHON), str(JOB), *args, "--jar", str(BUNDLE)],
        env=env, capture_output=True, text=True, check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"Spark job {args[0]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def hudi_written_tables(size: str) -> tuple[Path, Path]:
    """The copy-on-write and merge-on-read tables of ``size``, written by Hudi on first use, as
    ``<folder>/cow`` and ``<folder>/mor``; the folder's name is a namespace ``hudi-flight serve
    --warehouse <folder>`` can serve them under."""
    partitions, rows = SHAPES[size]
    base = DATA_DIR / f"hudi_{HUDI_RELEASE.replace('.', '_')}_{partitions}p_{rows}r"
    cow, mor = base / "cow", base / "mor"
    if not (base / "DONE").exists():
        print(f"[bench] writing {partitions} partitions x {rows} rows with Hudi {HUDI_RELEASE} ...", file=sys.stderr)
        hudi_job("write", "--out", str(base), "--partitions", str(partitions), "--rows", str(rows))
        (base / "DONE").write_text("written by Hudi's Spark writer\n")
    return cow, mor


def _ours(cow: Path, mor: Path, repeat: int) -> dict[str, dict[str, float]]:
    from catalog import HudiTable, ReadOptions
    from catalog.plan.planner import file_slices

    def plan() -> int:
        table = HudiTable.open(str(mor))
        return len(list(file_slices(table.state, ReadOptions())))

    def scan(path: Path) -> int:
        return HudiTable.open(str(path)).read().num_rows

    def point() -> int:
        return HudiTable.open(str(mor)).read(filters=[("uuid", "=", POINT_KEY)]).num_rows

    cases = {
        "planning_mor": plan,
        "cow_scan": lambda: scan(cow),
        "mor_snapshot": lambda: scan(mor),
        "point_query": point,
    }
    out = {}
    for name, fn in cases.items():
        timing = measure(fn, repeat=repeat)
        out[name] = {"seconds": timing.median, "value": timing.result}
    return out


def run(size: str) -> list[dict]:
    cow, mor = hudi_written_tables(size)
    partitions, rows = SHAPES[size]
    repeat = 3 if size == "full" else 5
    spark = hudi_job("measure", "--cow", str(cow), "--mor", str(mor), "--key", POINT_KEY, "--repeat", str(repeat))
    ours = _ours(cow, mor, repeat)
    if ours["point_query"]["value"] != spark["point_query"]["value"] or ours["point_query"]["value"] != 1:
        raise AssertionError(f"point query rows differ: ours {ours['point_query']}, Spark {spark['point_query']}")
    if ours["mor_snapshot"]["value"] != spark["mor_count"]["value"]:
        raise AssertionError(f"snapshot rows differ: ours {ours['mor_snapshot']}, Spark {spark['mor_count']}")
    params = {"partitions": partitions, "rows": rows, "hudi": HUDI_RELEASE, "spark": "local[2]"}
    labels = {
        "planning_mor": "planning (MOR, metadata table)",
        "cow_scan": "COW full scan",
        "mor_snapshot": "MOR snapshot",
        "point_query": "point query by record key",
    }
    out = []
    for key, label in labels.items():
        name = f"spark_hudi/{label} ({partitions} partitions, Hudi-written)"
        for competitor, result in (("hudi-flight", ours), ("Spark Hudi reader (JVM)", spark)):
            out.append(row(name, competitor, "median wall time", result[key]["seconds"], "s",
                           params=params, repeats=repeat))
    return out


if __name__ == "__main__":
    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r['name']:70} {r['competitor']:28} {r['value']:.4f} {r['unit']}")
