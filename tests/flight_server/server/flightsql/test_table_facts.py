"""A scan's schema and metadata count are made once per table state and read options: the next
table state (a commit the table cache has seen) plans and counts again, and so do other options."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import adbc_driver_flightsql.dbapi as adbc
import pyarrow as pa
import pytest

from catalog import HudiTable
from catalog.plan.options import ReadOptions
from flight_server.server.config import ServerConfig
from flight_server.server.flightsql.table_facts import TableFacts
from flight_server.server.query.tickets import PinnedScan
from flight_server.server.registry import Registry
from hudi_generator.generator import GeneratorSpec, generate
from tests.support.counting_fs import CountingFileSystem, register
from tests.support.servers import running_server


class _State:
    """Stands for a table state: only its identity matters."""


@dataclass(frozen=True)
class _Entry:
    identifier: str = "ns.t"
    base_uri: str = "file:///t"


@dataclass
class _Table:
    entry: _Entry
    state: _State


@dataclass
class _Planned:
    schema: pa.Schema
    pinned: PinnedScan


class _Call:
    """Opens the table at :attr:`state`; counts its plans; fails planning when told."""

    def __init__(self) -> None:
        self.state, self.entry = _State(), _Entry()
        self.plans, self.fails = 0, False

    def open(self, identifier: str) -> Any:
        return _Table(self.entry, self.state)

    def plan(self, identifier: str, options: ReadOptions) -> Any:
        self.plans += 1
        if self.fails:
            raise ValueError("unknown column")
        schema = pa.schema([("id", pa.int64())]).with_metadata({"plan": str(self.plans)})
        return _Planned(schema, PinnedScan(identifier, self.entry.base_uri, f"{self.plans:03d}", options))


class _Count:
    def __init__(self, answer: int | None) -> None:
        self.answer, self.calls = answer, 0

    def __call__(self, planned: Any) -> int | None:
        self.calls += 1
        return self.answer


def test_a_count_is_planned_and_counted_once_per_state_and_options():
    facts, call, count = TableFacts(), _Call(), _Count(42)
    first = facts.count(call, "ns.t", ReadOptions(), count)
    assert first is not None and first[1] == 42
    assert facts.count(call, "ns.t", ReadOptions(), count) == first  # the same pinned scan
    assert (call.plans, count.calls) == (1, 1)
    assert facts.count(call, "ns.t", ReadOptions(filters=[("id", ">", 3)]), count) is not None
    assert (call.plans, count.calls) == (2, 2)  # other options: their own count


def test_the_next_table_state_plans_and_counts_again():
    facts, call, count = TableFacts(), _Call(), _Count(7)
    facts.count(call, "ns.t", ReadOptions(), count)
    call.state, count.answer = _State(), 8
    counted = facts.count(call, "ns.t", ReadOptions(), count)
    assert counted is not None and counted[1] == 8 and counted[0].instant == "002"


def test_a_table_registered_elsewhere_plans_again():
    facts, call = TableFacts(), _Call()
    facts.schema(call, "ns.t", ReadOptions())
    call.entry = _Entry(base_uri="file:///elsewhere")
    facts.schema(call, "ns.t", ReadOptions())
    assert call.plans == 2


def test_a_scan_counted_by_reading_is_not_listed_again():
    facts, call, count = TableFacts(), _Call(), _Count(None)
    assert facts.count(call, "ns.t", ReadOptions(), count) is None
    assert facts.count(call, "ns.t", ReadOptions(), count) is None
    assert count.calls == 1


def test_a_schema_is_planned_once_per_state_and_a_failed_plan_is_not_kept():
    facts, call = TableFacts(), _Call()
    call.fails = True
    with pytest.raises(ValueError):
        facts.schema(call, "ns.t", ReadOptions())
    call.fails = False
    schema = facts.schema(call, "ns.t", ReadOptions())
    assert facts.schema(call, "ns.t", ReadOptions()) is schema
    assert call.plans == 2
    call.state = _State()
    assert facts.schema(call, "ns.t", ReadOptions()).metadata == {b"plan": b"3"}


def test_the_facts_are_bounded_in_bytes_and_reported():
    events: list[tuple[str, str, int]] = []
    probe = TableFacts(listener=lambda *event: events.append(event))
    probe.schema(_Call(), "ns.t", ReadOptions(as_of="2024-01-01"))
    entry = next(amount for name, event, amount in events if (name, event) == ("sql_scan_facts", "bytes"))
    assert entry > 300  # in bytes: its key's text, the schema's wire form and the pin
    facts, call = TableFacts(max_bytes=2 * entry + entry // 2), _Call()
    for as_of in ("2024-01-01", "2024-01-02", "2024-01-03", "2024-01-01"):
        facts.schema(call, "ns.t", ReadOptions(as_of=as_of))
    assert call.plans == 4  # the first was evicted


def test_a_commit_is_seen_by_the_next_statement(tmp_path):
    """Through ADBC: the kept count and scans serve statements until the next one after a
    commit (the table cache's next state), which plans and counts again: a count from
    metadata and one by the engine."""
    path = tmp_path / "t"
    generate(str(path), GeneratorSpec(rows=200, partitions=2, commits=2, metadata_table=False))
    timeline = path / ".hoodie" / "timeline"
    pending = tmp_path / "pending"
    pending.mkdir()
    second = sorted(p for p in timeline.iterdir() if p.name.startswith("20250101000010000"))
    for instant_file in second:  # the second commit has not happened yet
        instant_file.rename(pending / instant_file.name)
    before = HudiTable.open(str(path)).read(columns=["_hoodie_record_key"]).num_rows
    registry = Registry("sqlite://")
    registry.register_table("ns.t", str(path))
    config = ServerConfig(port=0, state_dir=str(tmp_path / "state"), secret="ab" * 32, refresh_interval_seconds=0)
    sql = "SELECT count(*) AS n FROM ns.t"
    by_engine = "SELECT count(*) AS n FROM ns.t WHERE 1 = 1"
    with running_server(config, registry=registry) as server, adbc.connect(f"grpc://127.0.0.1:{server.port}", autocommit=True) as conn:
        with conn.cursor() as cursor:
            assert [_scalar(cursor, q) for q in (sql, sql, by_engine, by_engine)] == [before] * 4
            for instant_file in second:
                (pending / instant_file.name).rename(instant_file)
            after = HudiTable.open(str(path)).read(columns=["_hoodie_record_key"]).num_rows
            assert after != before
            assert _scalar(cursor, sql) == _scalar(cursor, by_engine) == after
            routes = server.app.flight_sql.statements.routes
            assert routes.native + routes.streamed == 3  # only those WHERE 1 = 1 ran the engine


def _scalar(cursor: Any, sql: str) -> int:
    cursor.execute(sql)
    return cursor.fetch_arrow_table().column(0)[0].as_py()


def test_a_warm_statement_lists_the_timeline_once_and_nothing_else(tmp_path):
    """A warm count(*) and a warm aggregate: one timeline listing in all (the table opened once,
    the kept scans and count: no split listed, no footer read again)."""
    register()
    path = tmp_path / "t"
    generate(str(path), GeneratorSpec(rows=200, partitions=2, commits=1, column_stats=True))
    registry = Registry("sqlite://")
    registry.register_table("ns.t", f"countfs://{path}")
    config = ServerConfig(port=0, state_dir=str(tmp_path / "state"), secret="ab" * 32, refresh_interval_seconds=0)
    statements = ["SELECT count(*) AS n FROM ns.t", "SELECT count(*) AS n FROM ns.t WHERE 1 = 1"]
    with running_server(config, registry=registry) as server, adbc.connect(f"grpc://127.0.0.1:{server.port}", autocommit=True) as conn:
        with conn.cursor() as cursor:
            for sql in statements:
                warm = _scalar(cursor, sql)
                CountingFileSystem.reset()
                assert _scalar(cursor, sql) == warm == 200
                requests = [(kind, p) for kind, p in CountingFileSystem.reset() if kind == "list" or "/.hoodie/" in p]
                assert requests == [("list", f"{path}/.hoodie/timeline")], sql
