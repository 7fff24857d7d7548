"""Write the matrix of one Hudi release with Hudi's own Spark writer and store Hudi's read results.

Runs in the Spark venv (``.cache/spark35``), one JVM per release::

    .cache/spark35/bin/python -m tests.data.factory.writer --release 1.2.0 --out tests/data/tables

For every spec: run its steps, then ask Spark's Hudi datasource the stored queries (see
``oracle``) and save table and answers (see ``archive``). A step Hudi refuses is recorded with
its error in ``<release>/refused.json`` and the factory moves on.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tests.data.factory import archive, oracle, spark_steps
from tests.data.factory.specs import TABLE_VERSIONS, TableSpec, specs_for
from tests.data.factory.timeline import completed_instants, data_instants, table_version

REFUSED = "refused.json"


def build_table(spark, spec: TableSpec, release: str, work: Path, out: Path) -> str | None:
    """Write ``spec`` under ``work``, archive it with Hudi's answers in ``out``; Hudi's error if it refused."""
    root = work / spec.name
    base = root / archive.TABLE_FOLDER if spec.bootstraps else root
    try:
        spark_steps.run_steps(spark, spec, release, base)
    except Exception as exc:  # noqa: BLE001 - any refusal by Hudi is recorded, the matrix goes on
        return spark_steps.java_error(exc)
    instants = data_instants(base)
    manifest = archive.Manifest(
        release=release,
        name=spec.name,
        table_type=spec.table_type,
        table_version=table_version(base),
        features=list(spec.features),
        steps=[spark_steps.describe(step) for step in spec.steps],
        instants=[i.as_json() for i in completed_instants(base)],
    )
    manifest.queries, results = oracle.ask_hudi(spark, spec, base, instants, manifest.table_version)
    archive.pack_table(root, out / f"{spec.name}{archive.TABLE_SUFFIX}")
    archive.pack_expected(out / f"{spec.name}{archive.EXPECTED_SUFFIX}", manifest, results)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", required=True, choices=sorted(TABLE_VERSIONS))
    parser.add_argument("--out", type=Path, required=True, help="folder holding <release>/")
    parser.add_argument("--jars", type=Path, default=Path(".cache/jars"))
    parser.add_argument("--tables", help="comma-separated spec names (default: the whole matrix)")
    args = parser.parse_args(argv)
    names = args.tables.split(",") if args.tables else None
    out = args.out / args.release
    out.mkdir(parents=True, exist_ok=True)
    refused_path = out / REFUSED
    refused: dict[str, str] = json.loads(refused_path.read_text()) if refused_path.exists() else {}
    spark = spark_steps.session(args.release, args.jars)
    work = Path(tempfile.mkdtemp(prefix=f"hudi-factory-{args.release}-"))
    try:
        for spec in specs_for(args.release, names):  # in the order ``--tables`` names them
            started = time.monotonic()
            error = build_table(spark, spec, args.release, work, out)
            refused.pop(spec.name, None)
            if error is not None:
                refused[spec.name] = error
                for stale in (out / f"{spec.name}{archive.TABLE_SUFFIX}", out / f"{spec.name}{archive.EXPECTED_SUFFIX}"):
                    stale.unlink(missing_ok=True)
            status = "refused: " + error if error else "ok"
            print(f"[{args.release}] {spec.name}: {status} ({time.monotonic() - started:.0f}s)", flush=True)
            refused_path.write_text(json.dumps(refused, indent=1, sort_keys=True) + "\n")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
