"""Server CPU per RPC of a Flight SQL bound point query: this tree against a peer commit, side by side.

A prepared statement executed with one key after another (``SELECT * FROM bench.trips WHERE
uuid = ?``, the point-query table of :mod:`bench.latency`) is three RPCs per execution, the ones
the ADBC driver sends for a cursor that keeps its prepared statement: DoPut (bind the key; answers
a bound handle), GetFlightInfo (the bound handle: analysis, planning, endpoints) and DoGet (each
endpoint's ticket). Here a ``pyarrow.flight`` client sends exactly those, one at a time, and reads
the CPU time the server spent on each from the server process's CPU-time clock (Linux's
``CLOCK_PROCESS_CPUTIME_ID`` of another process: nanoseconds, every thread, ended ones included)
before and after the RPC: where a query's CPU goes, RPC by RPC. The sum is reported too, next to
the process tree's user + system time over the same executions (``/proc/<pid>/stat``, clock
ticks): equal when the one serving process is the whole tree.
An RPC whose handler does next to nothing (``ClosePreparedStatement``, sent after each execution
and measured apart) shows what any RPC costs before its handler's work.

Both servers are ``hudi-flight serve`` (one process), warmed up with a touch of every row group and
record-index block (:func:`bench.point_query._steady_warmup`), then asked the same random keys,
round after round, alternating; the median of the rounds is reported. The peer is ``PEER_COMMIT``
(before this round's Flight SQL changes), checked out as :mod:`bench.point_query` does.

Run alone with ``python -m bench.sql_rpc_cost [quick]``.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from typing import Any, Callable

import pyarrow as pa
import pyarrow.flight as flight

from bench.common import median, row
from bench.latency import NAMESPACE, TABLE, _table
from bench.point_query import REPO, _steady_warmup, peer_tree, serve_trees
from bench.process_cpu import tree_cpu_seconds

PEER_COMMIT = "a6b67c1"
ROUNDS = 7
EXECUTIONS = 100  # per round and server
RPCS = ("DoPut (bind)", "GetFlightInfo (bound handle)", "DoGet")
#: an RPC whose handler does next to nothing (the body is checked, nothing is kept): what any RPC
#: costs the server (gRPC, the middleware: authentication, call log, ...); not part of an execution
FLOOR = "DoAction ClosePreparedStatement (an RPC's floor)"


def _process_clock(pid: int) -> int:
    """The CPU-time clock of process ``pid`` (Linux: ``clock_getcpuclockid``; every thread of the
    process, ended ones included, in nanoseconds)."""
    return ((~pid) << 3) | 2  # the kernel's process clock id: (~pid << 3) | CPUCLOCK_SCHED


def _cpu_ns(clock: int) -> int:
    """Nanoseconds on CPU of the process of ``clock`` (0 once it exited)."""
    try:
        return time.clock_gettime_ns(clock)
    except OSError:
        return 0


class _Execution:
    """A prepared statement of one server, executed RPC by RPC with each RPC's server CPU noted."""

    def __init__(self, uri: str, pid: int, sql_text: str):
        from flight_server.protocol import pack, sql, unpack
        from flight_server.protocol.headers import ALL_ENDPOINTS_HEADER

        self.client = flight.connect(uri)
        # what the ADBC driver's user-agent tells the server: it reads every endpoint
        self.options = flight.FlightCallOptions(headers=[(ALL_ENDPOINTS_HEADER.encode(), b"true")])
        self.pid = pid
        self.clock = _process_clock(pid)
        self.cpu: dict[str, list[int]] = {name: [] for name in (*RPCS, FLOOR)}
        self._pack, self._sql = pack, sql
        body = pack(sql.ActionCreatePreparedStatementRequest(query=sql_text))
        result = next(iter(self.client.do_action(flight.Action("CreatePreparedStatement", body))))
        created = unpack(result.body.to_pybytes())
        assert isinstance(created, sql.ActionCreatePreparedStatementResult)
        self.handle = created.prepared_statement_handle
        self._close = flight.Action("ClosePreparedStatement", pack(sql.ActionClosePreparedStatementRequest(
            prepared_statement_handle=self.handle)))

    def _timed(self, name: str, call: Callable[[], Any]) -> Any:
        before = _cpu_ns(self.clock)
        out = call()
        self.cpu[name].append(_cpu_ns(self.clock) - before)
        return out

    def __call__(self, key: str) -> int:
        from tests.support.flight_sql import bind

        parameters = pa.record_batch([pa.array([key])], names=["0"])
        bound = self._timed(RPCS[0], lambda: bind(self.client, self.handle, parameters))
        command = self._pack(self._sql.CommandPreparedStatementQuery(prepared_statement_handle=bound))
        info = self._timed(RPCS[1], lambda: self.client.get_flight_info(
            flight.FlightDescriptor.for_command(command), self.options))
        rows = self._timed(RPCS[2], lambda: sum(self.client.do_get(e.ticket).read_all().num_rows for e in info.endpoints))
        self._timed(FLOOR, lambda: list(self.client.do_action(self._close)))  # handles are stateless: still usable
        return rows


def run(size: str) -> list[dict]:
    if size != "quick":
        return []  # a fixed cost per query: the quick table shows it best
    warehouse, spec = _table(size)
    trees = {"hudi-flight": (REPO, {}), f"hudi-flight @ {PEER_COMMIT}": (peer_tree(PEER_COMMIT), {})}
    text = f"SELECT * FROM {NAMESPACE}.{TABLE} WHERE uuid = ?"
    params = {"rows": spec.rows, "rounds": ROUNDS, "executions": EXECUTIONS}
    out = []
    with tempfile.TemporaryDirectory(prefix="hudi-flight-sql-rpc-") as tmp:
        servers = serve_trees(warehouse, trees, tmp)
        try:
            executions = {name: _Execution(server.uri, server.pid, text) for name, server in servers.items()}
            for execute in executions.values():
                for key in _steady_warmup(warehouse, spec.rows):
                    if execute(key) != 1:
                        raise AssertionError(f"key {key} did not find exactly one row")
                for values in execute.cpu.values():
                    values.clear()
            rnd = random.Random(11)
            per_round: dict[str, dict[str, list[float]]] = {
                n: {r: [] for r in (*RPCS, FLOOR, "sum", "tree")} for n in servers
            }
            for _ in range(ROUNDS):
                keys = [f"trip-{rnd.randrange(spec.rows):010d}" for _ in range(EXECUTIONS)]
                for name, execute in executions.items():
                    for values in execute.cpu.values():
                        values.clear()
                    before = tree_cpu_seconds(servers[name].pid)
                    for key in keys:
                        if execute(key) != 1:
                            raise AssertionError(f"key {key} did not find exactly one row")
                    tree = 1000 * (tree_cpu_seconds(servers[name].pid) - before) / len(keys)
                    rpcs = {rpc: sum(values) / len(keys) / 1e6 for rpc, values in execute.cpu.items()}
                    for rpc, value in rpcs.items():
                        per_round[name][rpc].append(value)
                    per_round[name]["sum"].append(sum(rpcs[rpc] for rpc in RPCS))
                    per_round[name]["tree"].append(tree - rpcs[FLOOR])
            for name, rounds in per_round.items():
                for rpc in (*RPCS, FLOOR):
                    out.append(row(f"sql rpc cost/{rpc} ({spec.rows:,} rows)", name, "server CPU per RPC",
                                   median(rounds[rpc]), "ms", repeats=ROUNDS, params=params))
                out.append(row(f"sql rpc cost/all three RPCs ({spec.rows:,} rows)", name,
                               "server CPU per execution (sum of RPCs)", median(rounds["sum"]), "ms", repeats=ROUNDS,
                               params=params))
                out.append(row(f"sql rpc cost/all three RPCs ({spec.rows:,} rows)", name,
                               "server CPU per execution (process tree)", median(rounds["tree"]), "ms",
                               repeats=ROUNDS, params=params))
        finally:
            for server in servers.values():
                server.stop()
    return out


if __name__ == "__main__":
    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r['name']:60} {r['competitor']:26} {r['metric']:40} {r['value']:8.3f} {r['unit']}")
