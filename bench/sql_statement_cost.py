"""Server CPU per Flight SQL statement at quick size: this tree against a peer commit, side by side.

The fixed cost of a statement (analysis, planning, tickets, the RPCs), not the engine's work: on
the point-query table of :mod:`bench.latency` (Parquet base files, metadata table with the
record index), through the ADBC Flight SQL driver, each warm statement run over and over:

* ``bound point query``: ``SELECT * FROM bench.trips WHERE uuid = ?`` with a random live key
  bound (the cursor keeps its prepared statement: DoPut, GetFlightInfo, DoGet per query);
* ``bound point query, prepared each time``: the same on a new cursor per query (adds
  CreatePreparedStatement and its close);
* ``count(*)``: answered from the footers, the engine never runs;
* ``filtered aggregate``: :data:`bench.flight_sql.AGGREGATE`, run by the engine;
* ``SELECT * partitions``: ``adbc_execute_partitions`` of one region's rows (a partition per
  split, answered by the split endpoints), each partition read in turn.

The peer is the server at ``PEER_COMMIT`` (the last one whose engine ran inside the serving
process, before the sandbox of :mod:`flight_server.server.engine.sandbox`), checked out into a ``git
worktree`` under ``.cache/`` as :mod:`bench.point_query` does. Both servers run at once; the
statements alternate between them, round after round, and the median of the rounds' CPU per
statement is reported: user + system time of the server's whole process tree (``/proc``), so the
engine processes' CPU counts too (they are the server's children and live between statements).

Run alone with ``python -m bench.sql_statement_cost [quick]``.
"""

from __future__ import annotations

import random
import sys
import tempfile
from typing import Any, Callable

from bench.common import median, row
from bench.flight_sql import AGGREGATE
from bench.latency import NAMESPACE, TABLE, _table
from bench.point_query import REPO, peer_tree, serve_trees
from bench.process_cpu import tree_cpu_seconds

PEER_COMMIT = "91816c9"
ROUNDS = 5
STATEMENTS = 100  # per round, statement and server
WARMUP = 20


def _statements(rows: int) -> dict[str, Callable[[Any, random.Random], Any]]:
    table = f"{NAMESPACE}.{TABLE}"
    point = f"SELECT * FROM {table} WHERE uuid = ?"

    def key(rnd: random.Random) -> tuple[str]:
        return (f"trip-{rnd.randrange(rows):010d}",)

    def bound(cursor: Any, rnd: random.Random) -> Any:
        cursor.execute(point, parameters=key(rnd))
        found = cursor.fetch_arrow_table().num_rows
        if found != 1:
            raise AssertionError(f"a live key found {found} rows")
        return found

    def prepared(cursor: Any, rnd: random.Random) -> Any:
        with cursor.connection.cursor() as fresh:
            return bound(fresh, rnd)

    def partitions(cursor: Any, rnd: random.Random) -> Any:
        planned, _ = cursor.adbc_execute_partitions(f"SELECT * FROM {table} WHERE region = 'region-00001'")
        rows = 0
        for partition in planned:
            cursor.adbc_read_partition(partition)
            rows += sum(batch.num_rows for batch in cursor.fetch_record_batch())
        return rows

    def scalar(sql: str) -> Callable[[Any, random.Random], Any]:
        def run(cursor: Any, rnd: random.Random) -> Any:
            cursor.execute(sql)
            return cursor.fetch_arrow_table().to_pylist()

        return run

    return {
        "bound point query": bound,
        "bound point query, prepared each time": prepared,
        "count(*)": scalar(f"SELECT count(*) FROM {table}"),
        "filtered aggregate": scalar(AGGREGATE.format(table)),
        "SELECT * partitions": partitions,
    }


def run(size: str) -> list[dict]:
    import adbc_driver_flightsql.dbapi as adbc

    if size != "quick":
        return []  # a fixed cost: the quick table shows it best
    warehouse, spec = _table(size)
    trees = {"hudi-flight": (REPO, {}), f"hudi-flight @ {PEER_COMMIT}": (peer_tree(PEER_COMMIT), {})}
    params = {"rows": spec.rows, "rounds": ROUNDS, "statements": STATEMENTS}
    out = []
    with tempfile.TemporaryDirectory(prefix="hudi-flight-sql-cost-") as tmp:
        servers = serve_trees(warehouse, trees, tmp)
        connections: dict[str, Any] = {}
        try:
            for name, server in servers.items():
                connections[name] = adbc.connect(server.uri, autocommit=True)
            for label, statement in _statements(spec.rows).items():
                rnd = random.Random(7)
                cursors = {name: conn.cursor() for name, conn in connections.items()}
                answers = {name: [statement(cursor, rnd) for _ in range(WARMUP)][-1] for name, cursor in cursors.items()}
                if len({str(answer) for answer in answers.values()}) != 1:
                    raise AssertionError(f"{label}: the servers disagree: {answers}")
                per_round: dict[str, list[float]] = {name: [] for name in servers}
                for _ in range(ROUNDS):
                    for name, cursor in cursors.items():
                        before = tree_cpu_seconds(servers[name].pid)
                        for _ in range(STATEMENTS):
                            statement(cursor, rnd)
                        per_round[name].append(1000 * (tree_cpu_seconds(servers[name].pid) - before) / STATEMENTS)
                for cursor in cursors.values():
                    cursor.close()
                for name, values in per_round.items():
                    out.append(row(f"sql statement cost/{label} ({spec.rows:,} rows)", name, "server CPU per statement",
                                   median(values), "ms", repeats=ROUNDS, params=params))
        finally:
            for conn in connections.values():
                conn.close()
            for server in servers.values():
                server.stop()
    return out


if __name__ == "__main__":
    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r['name']:72} {r['competitor']:26} {r['value']:8.2f} {r['unit']}")
