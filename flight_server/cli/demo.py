"""``hudi-flight demo``: what hudi-flight is for, in one screenful.

It writes a small warehouse (a copy-on-write and a merge-on-read table with a metadata table,
from the table generator when it is installed, else the Spark-written fixture tables beside the
repository), serves it on a free loopback port and shows, each in a few lines:

1. planning from the metadata table: the storage requests of a plan against a storage listing;
2. the weighted endpoints of one query, fetched in parallel;
3. a time-travel read (ISO-8601 instant) next to the current state;
4. a Flight SQL query through the ADBC Flight SQL driver (SQL runs on the server).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
import zipfile
from pathlib import Path

import pyarrow as pa

from catalog import HudiTable
from flight_server.cli.output import CliError, format_table
from flight_server.client.session import HudiFlightClient, connect

NAMESPACE = "demo"
# Fixture fallback: table name in the demo namespace -> fixture zip (relative to fixtures/hudi).
_FIXTURES = {
    "trips_cow": "sample_table/cow/v9_txns_simple_meta",
    "trips_mor": "sample_table/mor/avro/v9_txns_simple_meta",
}


def _fixtures_dir() -> Path | None:
    candidates = [os.environ.get("HUDI_FLIGHT_FIXTURES"), Path(__file__).resolve().parents[3] / "shared" / "fixtures",
                  Path.cwd().parent / "shared" / "fixtures"]
    for c in candidates:
        if c and (Path(c) / "hudi").is_dir():
            return Path(c)
    return None


def _generate(warehouse: Path) -> list[str] | None:
    """Write the demo tables with the generator; ``None`` when it is not installed."""
    try:
        from hudi_generator import generator
    except ModuleNotFoundError:
        return None
    tables = []
    for table_type, name in ((generator.COPY_ON_WRITE, "trips_cow"), (generator.MERGE_ON_READ, "trips_mor")):
        spec = generator.GeneratorSpec(rows=4000, partitions=40, commits=3, table_type=table_type,
                                       metadata_table=True, table_name=name)
        generator.generate(str(warehouse / NAMESPACE / name), spec)
        tables.append(name)
    return tables


def _unzip_fixtures(warehouse: Path) -> list[str]:
    root = _fixtures_dir()
    if root is None:
        raise CliError("no table generator and no fixtures found (set HUDI_FLIGHT_FIXTURES)")
    for name, fixture in _FIXTURES.items():
        target = warehouse / NAMESPACE
        target.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(root / "hudi" / f"{fixture}.zip") as zf:
            members = [m for m in zf.namelist() if not m.startswith("__MACOSX")]
            zf.extractall(target, members)
        (target / fixture.rsplit("/", 1)[-1]).rename(target / name)
    return list(_FIXTURES)


def write_demo_warehouse(warehouse: Path) -> list[str]:
    """Write the demo tables under ``warehouse/demo/``; returns their names."""
    return _generate(warehouse) or _unzip_fixtures(warehouse)


def _planning(path: Path) -> str:
    """Storage requests of opening and planning the table, from the metadata table and by listing."""
    counts = []
    for use_mdt in (True, False):
        table = HudiTable.open(str(path), use_metadata_table=use_mdt)
        planned = sum(1 for _ in table.scan().splits)
        counts.append((table.storage.stats.total, planned, len(table.state.listing.list_partitions())))
    (mdt, splits, partitions), (listing, _, _) = counts
    return (f"   {partitions} partitions, {splits} splits: {mdt} storage requests from the metadata table, "
            f"{listing} by listing storage")


def _endpoints(client: HudiFlightClient, table: str) -> str:
    plan = client.plan(table)
    low, high = (f"{w:.2f}" for w in (min(e.weight for e in plan.endpoints), max(e.weight for e in plan.endpoints)))
    weights = f"each weighted {low}" if low == high else f"weights {low} to {high}"
    started = time.perf_counter()
    rows = sum(batch.num_rows for batch in client.fetch_all(plan.endpoints))
    seconds = time.perf_counter() - started
    return (f"   {len(plan.endpoints)} endpoints ({weights}), fetched "
            f"{client.max_workers} at a time: {rows:,} rows in {seconds:.2f} s")


def _iso(instant: str) -> str:
    return f"{instant[:4]}-{instant[4:6]}-{instant[6:8]}T{instant[8:10]}:{instant[10:12]}:{instant[12:14]}"


def _time_travel(client: HudiFlightClient, table: str, first: str) -> str:
    then = client.read(table, columns=["uuid", "fare"], as_of=_iso(first))
    now = client.read(table, columns=["uuid", "fare"])
    before = dict(zip(then["uuid"].to_pylist(), then["fare"].to_pylist()))
    changed = next((u, f) for u, f in zip(now["uuid"].to_pylist(), now["fare"].to_pylist()) if before.get(u) != f)
    return (f"   as_of {_iso(first)}: {then.num_rows:,} rows; now: {now.num_rows:,} rows "
            f"({changed[0]}: fare {before.get(changed[0])} then, {changed[1]} now)")


def _flight_sql(uri: str, sql: str) -> pa.Table | str:
    try:
        import adbc_driver_flightsql.dbapi as adbc
    except ModuleNotFoundError:
        return "   (the ADBC Flight SQL driver is not installed: pip install adbc-driver-flightsql)"
    # autocommit: nothing is written, and asked to turn it off the driver warns that it cannot
    with adbc.connect(uri, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetch_arrow_table()


def _show(client: HudiFlightClient, uri: str, wh: Path, names: list[str]) -> None:
    tables = {t["table"]: client.table_info(t["table"]) for t in client.tables(NAMESPACE)}
    print(", ".join(f"{name} ({info['table_type']}, v{info['table_version']}, {len(info['timeline'])} instants)"
                    for name, info in tables.items()))
    cow, mor = (f"{NAMESPACE}.{name}" for name in names)
    print(f"\n1. Plan {cow} from its metadata table, not a storage listing")
    print(_planning(wh / NAMESPACE / names[0]))
    print(f"\n2. SELECT * FROM {mor}: one endpoint per weighted split, read in parallel")
    print(_endpoints(client, mor))
    first = tables[mor]["timeline"][0]["requested_time"]
    print(f"\n3. Time travel on {mor} (an ISO-8601 instant)")
    print(_time_travel(client, mor, first))
    sql = (f"SELECT region, count(*) AS trips, round(avg(fare), 2) AS avg_fare FROM {mor} "
           "GROUP BY region ORDER BY region")
    print(f"\n4. Flight SQL through the ADBC driver (runs on the server):\n   {sql}")
    result = _flight_sql(uri, sql)
    print(result if isinstance(result, str) else format_table(result, max_rows=4, more=f"{result.num_rows - 4} more"))


def run_demo(warehouse: str | None = None, keep: bool = False) -> int:
    """The whole demo; prints what it does and what came back."""
    from flight_server.server.config import ServerConfig
    from flight_server.server.service import HudiFlightServer

    tmp = Path(tempfile.mkdtemp(prefix="hudi-flight-demo-"))
    wh = Path(warehouse) if warehouse else tmp / "warehouse"
    try:
        names = write_demo_warehouse(wh)
        config = ServerConfig(port=0, warehouses=[str(wh)], state_dir=str(tmp / "state"), refresh_interval_seconds=0)
        server = HudiFlightServer(config)
        thread = threading.Thread(target=server.serve, daemon=True)
        thread.start()
        try:
            uri = f"grpc://127.0.0.1:{server.port}"
            print(f"hudi-flight demo: serving {wh} on {uri}")
            with connect(uri) as client:
                _show(client, uri, wh, names)
        finally:
            server.shutdown()
            thread.join(10)
        print(f"\ndemo done; {_afterwards(wh, kept=keep or warehouse is not None)}")
        return 0
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)  # the server's state; a --warehouse of the caller stays


def _afterwards(wh: Path, kept: bool) -> str:
    """How to serve the demo's tables again (the last line of the demo)."""
    if kept:
        return f"serve its tables with: hudi-flight serve --warehouse {wh}"
    return ("its temporary warehouse is removed (hudi-flight demo --warehouse DIR keeps the tables in DIR; "
            "hudi-flight serve --warehouse DIR then serves them)")


__all__ = ["run_demo", "write_demo_warehouse"]
