"""Operations through real ``hudi-flight serve`` processes: Prometheus metrics summed over two
processes sharing one multiprocess directory, gRPC health checking, JSON call logs.

Two servers share a state dir (catalog, secret and the metrics directory), as the processes of
one server do; each is queried once and either one's ``/metrics`` shows both calls.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import grpc
import pyarrow.flight as flight
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from flight_server.protocol import pack, sql
from hudi_generator.generator import GeneratorSpec
from tests.support.credentials import TOKEN_USER, prepare_state, token_settings
from tests.support.servers import free_port

REPO = Path(__file__).resolve().parents[4]
TOKEN = "tok-do-not-log-4f1e"
DEADLINE = 60.0


def _wait(check, what: str, proc: subprocess.Popen):
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited while waiting for {what}")
        try:
            return check()
        except Exception:
            time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class Served:
    def __init__(self, state: Path, warehouse: str, log: Path):
        self.port, self.metrics_port, self.health_port = free_port(), free_port(), free_port()
        config = state.parent / f"config-{self.port}.json"
        config.write_text(json.dumps({**token_settings(TOKEN), "refresh_interval_seconds": 0}))
        prepare_state(str(state))  # the token's user may read every table
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "flight_server.cli", "serve", "--port", str(self.port), "--warehouse", warehouse,
             "--state-dir", str(state), "--config", str(config), "--metrics-port", str(self.metrics_port),
             "--health-port", str(self.health_port), "--log-format", "json"],
            stdout=subprocess.DEVNULL, stderr=log.open("w"), cwd=REPO,
            env={**{k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"},
                 "PYTHONPATH": str(REPO)},
        )
        self.client = flight.connect(f"grpc://127.0.0.1:{self.port}")
        self.options = flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {TOKEN}".encode())])

    def ready(self) -> None:
        """The Flight port answers, then the operations ports: they open once the catalog is
        loaded, after gRPC began listening (the health port reports SERVING only then)."""
        _wait(lambda: list(self.client.list_flights(options=self.options)), "the Flight port", self.proc)
        _wait(self.metrics, "the metrics port", self.proc)
        _wait(self._serving, "the health port", self.proc)

    def _serving(self) -> None:
        with grpc.insecure_channel(f"127.0.0.1:{self.health_port}") as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        if reply.status != health_pb2.HealthCheckResponse.SERVING:
            raise AssertionError(f"health is {reply.status}")

    def query(self) -> int:
        (info,) = list(self.client.list_flights(options=self.options))
        plan = self.client.get_flight_info(info.descriptor, self.options)
        return sum(self.client.do_get(ep.ticket, self.options).read_all().num_rows for ep in plan.endpoints)

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as resp:
            return resp.read().decode()

    def stop(self) -> None:
        self.client.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(20)


def _sample(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        metric, _, rest = key.partition("{")
        got = ",".join(sorted(rest.rstrip("}").split(","))) if rest else ""
        if metric == name and got == want:
            return float(value)
    return 0.0


@pytest.fixture(scope="module")
def pair(generated_table, tmp_path_factory):
    table = generated_table(GeneratorSpec(rows=200, partitions=2))
    warehouse = tmp_path_factory.mktemp("wh")
    shutil.copytree(table, warehouse / "trips")
    state = tmp_path_factory.mktemp("ops") / "state"
    logs = tmp_path_factory.mktemp("logs")
    first = Served(state, str(warehouse), logs / "a.log")
    first.ready()  # creates the catalog and the secret the second one shares
    second = None
    try:
        second = Served(state, str(warehouse), logs / "b.log")
        second.ready()
        yield first, second, state
    finally:
        for s in (first, second):
            if s is not None:
                s.stop()


def test_metrics_sum_over_every_process(pair):
    first, second, state = pair
    rows = first.query() + second.query()
    text = first.metrics()
    assert _sample(text, "hudi_flight_calls_total", method="get_flight_info", status="OK") == 2
    assert _sample(text, "hudi_flight_calls_total", method="do_get", status="OK") >= 2
    assert _sample(text, "hudi_flight_rows_streamed_total") == rows > 0
    assert _sample(second.metrics(), "hudi_flight_rows_streamed_total") == rows
    for kind in ("list", "read"):
        assert _sample(text, "hudi_flight_storage_requests_total", kind=kind) > 0
    assert _sample(text, "hudi_flight_cache_misses_total", cache="table_states") >= 2
    assert _sample(text, "hudi_flight_planning_seconds_count") >= 2
    assert "hudi_flight_call_seconds_bucket" in text and "hudi_flight_cache_bytes" in text
    assert len(list((state / "metrics").glob("counter_*.db"))) >= 2


def test_sql_admission_is_measured_per_user(pair):
    """The fair queue of SQL work tells the metrics what runs and waits, per user."""
    first, _, _ = pair
    before = _sample(first.metrics(), "hudi_flight_sql_queue_wait_seconds_count")
    descriptor = flight.FlightDescriptor.for_command(pack(sql.CommandStatementQuery(query="SELECT 6 * 7 AS answer")))
    info = first.client.get_flight_info(descriptor, first.options)
    assert first.client.do_get(info.endpoints[0].ticket, first.options).read_all().to_pylist() == [{"answer": 42}]
    text = first.metrics()
    # the schema step and the execution: each admitted through the queue
    assert _sample(text, "hudi_flight_sql_queue_wait_seconds_count") == before + 2
    assert f'hudi_flight_sql_running{{user="{TOKEN_USER}"}} 0.0' in text


def test_health_answers_serving(pair):
    first, _, _ = pair
    with grpc.insecure_channel(f"127.0.0.1:{first.health_port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "arrow.flight.protocol.FlightService"):
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_json_call_logs_name_the_call_and_no_secret(pair):
    first, _, _ = pair
    first.query()
    lines = []

    def logged():
        found = [json.loads(line) for line in first.log.read_text().splitlines() if line.strip()]
        assert any(r.get("method") == "do_get" for r in found)
        return found

    lines = _wait(logged, "call log lines", first.proc)
    calls = [r for r in lines if r.get("logger") == "flight_server.calls"]
    plan = next(r for r in calls if r["method"] == "get_flight_info")
    assert plan["status"] == "OK" and plan["user"] and plan["table"].endswith("trips")
    assert plan["instant"] and plan["endpoints"] >= 1 and plan["duration_ms"] > 0
    fetch = next(r for r in calls if r["method"] == "do_get")
    assert fetch["instant"] == plan["instant"] and fetch["table"] == plan["table"]
    assert TOKEN not in first.log.read_text()


def test_health_turns_not_serving_on_shutdown(pair):
    _, second, _ = pair
    with grpc.insecure_channel(f"127.0.0.1:{second.health_port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        watch = stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=30)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        second.proc.terminate()
        statuses = []
        try:
            for reply in watch:
                statuses.append(reply.status)
        except grpc.RpcError:
            pass  # the health server went away after reporting
        assert health_pb2.HealthCheckResponse.NOT_SERVING in statuses
    second.proc.wait(20)


def test_calls_are_recorded_only_when_logged_or_measured():
    """Without metrics and with the call log below INFO, no record is made (gRPC then calls back
    no Python for it); with either, every call has its record."""
    import logging

    from flight_server.server.ops.call_log import CALL_LOG, CallLogFactory, CallRecord

    info = flight.CallInfo(flight.FlightMethod.DO_GET)
    heard = []
    level = CALL_LOG.level
    try:
        CALL_LOG.setLevel(logging.WARNING)
        assert CallLogFactory(None).start_call(info, {}) is None
        record = CallLogFactory(lambda *args: heard.append(args[1])).start_call(info, {})
        assert isinstance(record, CallRecord) and record.method == "do_get"
        record.call_completed(None)
        assert heard == ["OK"]
        CALL_LOG.setLevel(logging.INFO)
        assert isinstance(CallLogFactory(None).start_call(info, {}), CallRecord)
    finally:
        CALL_LOG.setLevel(level)


def test_failed_calls_log_the_reason_the_client_got(caplog):
    """A JSON call-log line of a failed call says why, in the client's words (no traceback)."""
    import logging

    from flight_server.server.errors import translated
    from flight_server.server.ops.call_log import CALL_LOG, CallRecord
    from flight_server.server.ops.logs import JsonFormatter

    caplog.set_level(logging.INFO, logger=CALL_LOG.name)
    try:
        raise ValueError("filter: column 'amount' is int64; 'abc' is not a 64-bit integer")
    except ValueError as err:
        public = translated(err)
    CallRecord("get_flight_info", None).call_completed(public)
    CallRecord("do_get", None).call_completed(None)
    failed, ok = (json.loads(JsonFormatter().format(r)) for r in caplog.records)
    assert failed["status"] == "INVALID_ARGUMENT"
    assert failed["reason"] == "filter: column 'amount' is int64; 'abc' is not a 64-bit integer"
    assert ok["status"] == "OK" and "reason" not in ok
    assert "Traceback" not in caplog.text and "Detail" not in caplog.text


_FORKED_COUNTS = """
import os, sys
from pathlib import Path
from flight_server.server.ops.metrics import exposition, process_metrics
state = Path(sys.argv[1])
metrics = process_metrics(state)
metrics.storage_request("open", 0)
child = os.fork()
if child == 0:
    metrics.storage_request("open", 0)
    os._exit(0)
os.waitpid(child, 0)
files = sorted(p.name for p in (state / "metrics").glob("counter_*.db"))
print(len(files), f"counter_{os.getpid()}.db" in files, f"counter_{child}.db" in files)
print([line for line in exposition().decode().splitlines() if line.startswith('hudi_flight_storage_requests_total')])
"""


def test_metrics_of_a_forked_child_count_in_its_own_file(tmp_path):
    """The process identifier is cached (no system call per increment) yet a forked child still
    records into a file of its own pid, and the totals sum both processes."""
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    out = subprocess.run([sys.executable, "-c", _FORKED_COUNTS, str(tmp_path)], capture_output=True, text=True,
                         env=env, check=True, timeout=60).stdout.splitlines()
    assert out[0] == "2 True True"
    assert "hudi_flight_storage_requests_total{kind=\"open\"} 2.0" in out[1]
