"""An SQL engine process: runs the statements one serving process sends it, one at a time.

Started by :mod:`.sandbox` through :mod:`.entry` (``FD SETTINGS ALLOWANCE`` as arguments) with
only the channel socket ``FD`` open, a scrubbed environment and, where the kernel allows, no
network. It imports nothing of the server (tests/test_layout.py). Before it reads a request it
bounds itself: its address space (``RLIMIT_AS``: every allocation past it fails, so a query
that builds gigabytes of strings fails with an out-of-memory error instead of growing the
machine), no core files, and death with its parent (``PR_SET_PDEATHSIG``). Before each
statement its CPU time is bounded to the statement's deadline (``RLIMIT_CPU``: the kernel ends a
statement that outlives it even if the serving process cannot). It runs the locked-down
in-process :class:`~.duckdb_engine.Engine` (pooled databases, native views, bound statements kept
between statements) over the views the request names: Arrow IPC streams fed by the serving
process through passed sockets, or datasets of local base files. The result goes back on the
channel as an Arrow IPC stream followed by a JSON status (:mod:`.channel`), in one buffered
write when it is small. A statement whose failure retires the process (:mod:`.failures`: a memory
or allocation failure, an unexpected engine error) is the last one it answers.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import pickle
import resource
import signal
import socket
import sys
import traceback
from typing import Any, BinaryIO, Iterable, Mapping, TypeAlias, cast

import pyarrow as pa
import pyarrow.dataset as ds

from flight_server.server.engine import channel
from flight_server.server.engine.channel import DATASET, SCHEMA, STREAM
from flight_server.server.engine.duckdb_engine import Engine, engine_failure
from flight_server.server.engine.failures import FAILED, SOURCE, EngineFailure
from flight_server.server.engine.settings import EngineSettings

_PR_SET_PDEATHSIG = 1
#: CPU seconds a statement may use per engine thread, beyond its deadline's wall seconds
_CPU_SLACK_SECONDS = 5
#: seconds past the statement's deadline at which this process's own engine gives up
_DEADLINE_SLACK_SECONDS = 30
View: TypeAlias = "pa.RecordBatchReader | ds.Dataset"


def _address_space() -> int:
    """This process's virtual memory size now (0 where ``/proc`` does not tell)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _bound_process(allowance: int) -> None:
    """Bound this process before it runs any SQL (see the module docstring): its address space
    may grow by ``allowance`` bytes past what the interpreter and the engine's libraries take."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    now = _address_space()
    if allowance > 0 and now > 0:
        resource.setrlimit(resource.RLIMIT_AS, (now + allowance, now + allowance))
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the parent died before the death signal was asked for
        sys.exit(0)


def _network() -> str:
    """``none`` when this process sees no network interface but loopback (its own namespace)."""
    try:
        names = {name for _, name in socket.if_nameindex()}
    except OSError:
        return "unknown"
    return "none" if names <= {"lo"} else "shared"


class _CpuBound:
    """Lets each statement use at most its deadline's worth of CPU on every engine thread: the
    soft ``RLIMIT_CPU`` is the CPU seconds used so far plus that allowance, set again whenever
    it moves (once a second of CPU is used: statements of milliseconds mostly find it set)."""

    def __init__(self, settings: EngineSettings):
        self._allowed = int(settings.timeout_seconds * max(1, settings.threads)) + _CPU_SLACK_SECONDS
        self._hard = resource.getrlimit(resource.RLIMIT_CPU)[1]  # a hard limit never rises
        self._soft: int | None = None

    def next_statement(self) -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        soft = int(usage.ru_utime + usage.ru_stime) + self._allowed
        if self._hard != resource.RLIM_INFINITY:
            soft = min(self._hard, soft)
        if soft != self._soft:
            resource.setrlimit(resource.RLIMIT_CPU, (soft, self._hard))
            self._soft = soft


class _Datasets:
    """The datasets of local base files this process was sent, by key (``.dataset_forms``): a
    statement run again gets the same dataset, whose fragments already hold their footers'
    schemas (unpickled anew, each would read its files' footers again). Which ones it keeps, the
    serving process decides (``HeldForms``): it names a kept one by its key alone, and says
    which ones to drop."""

    def __init__(self) -> None:
        self._kept: dict[int, ds.Dataset] = {}

    def drop(self, keys: Iterable[int]) -> None:
        for key in keys:
            self._kept.pop(key, None)

    def get(self, key: int, pickled: bytes | None) -> ds.Dataset:
        if pickled is None:
            return self._kept[key]
        dataset = self._kept[key] = pickle.loads(pickled)
        return dataset


def _views(
    specs: Mapping[str, tuple[str, Any]], streams: list[BinaryIO], datasets: _Datasets, settings: EngineSettings
) -> dict[str, View]:
    """The request's views: ``streams[i]`` carries the view whose spec is ``(STREAM, i)``; a dataset's
    spec is ``(DATASET, (key, pickled bytes or None: kept))``."""
    views: dict[str, View] = {}
    for name, (kind, value) in specs.items():
        if kind == STREAM:
            try:
                views[name] = pa.ipc.open_stream(streams[value])
            except (pa.ArrowInvalid, OSError) as err:  # its source failed before the first batch
                raise EngineFailure(SOURCE, settings) from err
        elif kind == DATASET:
            views[name] = datasets.get(*value)
        else:
            raise ValueError(f"unknown view kind {kind!r}")
    return views


def _failure(err: BaseException, settings: EngineSettings) -> dict[str, Any]:
    """The status of a failed statement: its kind, the words a client may read (no path, no
    traceback) and whether this process must end (:attr:`.EngineFailure.retire`)."""
    failure = engine_failure(err, settings)
    return {"error": failure.kind, "message": failure.message, "retire": failure.retire}


#: bytes the engine process gathers before it writes to the channel (a small result and its
#: status leave in one write)
_WRITE_BUFFER = 64 << 10
#: how results are written (given, so no stream looks the default up in the environment again)
_IPC_OPTIONS = pa.ipc.IpcWriteOptions()


class _BrokenChannel(Exception):
    """Writing the result failed inside an Arrow IPC message: the serving process could not
    find the status after it, so this process ends instead of answering (the serving process
    sees the channel close without a status, and the statement fails)."""


def _write(sink: BinaryIO, schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> None:
    """Write the result as an Arrow IPC stream; the engine's failures (raised by ``batches``,
    between messages) still end it with the end-of-stream marker, so the status can follow."""
    try:
        writer = pa.ipc.new_stream(sink, schema, options=_IPC_OPTIONS)
    except Exception as err:
        raise _BrokenChannel from err
    try:
        for batch in batches:
            try:
                writer.write_batch(batch)
            except Exception as err:
                raise _BrokenChannel from err
    finally:
        try:
            writer.close()
        except Exception as err:
            raise _BrokenChannel from err


def serve(control: socket.socket, sink: BinaryIO, engine: Engine) -> None:
    """Answer requests until the channel closes (or breaks), or a statement's failure retires
    this process (the serving process retires it too: it starts no statement here again);
    ``sink`` writes to ``control``."""
    datasets = _Datasets()
    cpu = _CpuBound(engine.settings)
    while True:
        try:
            payload, fds = channel.receive(control, channel.MAX_FDS)
        except channel.ChannelClosed:
            return
        request = pickle.loads(payload)
        datasets.drop(request.get("drop", ()))
        streams: list[BinaryIO] = [os.fdopen(fd, "rb") for fd in fds]  # the streamed views, in order
        status: dict[str, Any] = {"ok": True}
        read, declined = engine.file_views.read, engine.file_views.declined
        started = False  # whether the result stream began (else only its end is written)
        try:
            cpu.next_statement()
            if request["op"] == SCHEMA:
                schemas = {name: pa.ipc.read_schema(pa.py_buffer(data)) for name, data in request["views"].items()}
                schema, batches = engine.result_schema(request["sql"], schemas), iter(())
            else:
                views = _views(request["views"], streams, datasets, engine.settings)
                schema, batches = engine.run(request["sql"], views)
            started = True
            _write(sink, schema, batches)
        except _BrokenChannel:
            return
        except BaseException as err:  # every failure is told
            status = _failure(err, engine.settings)
            if status["error"] == FAILED:
                traceback.print_exc()  # to the operator's log (the client is told no more than "failed")
        finally:
            for stream in streams:
                with contextlib.suppress(OSError):
                    stream.close()
        status["native_views"] = [engine.file_views.read - read, engine.file_views.declined - declined]
        try:
            if not started:
                sink.write(channel.END_OF_STREAM)
            channel.write_json(sink, status)
            sink.flush()
        except OSError:  # the serving process closed the channel
            return
        if status.get("retire"):  # its engine's state is suspect: it serves no other statement
            return


def main(argv: list[str]) -> None:
    fd, settings_json, allowance = int(argv[1]), argv[2], int(argv[3])
    control = socket.socket(fileno=fd)
    settings = EngineSettings(**json.loads(settings_json))
    # the serving process kills a statement at its deadline; this engine's own watch is a backstop
    engine = Engine(dataclasses.replace(settings, timeout_seconds=settings.timeout_seconds + _DEADLINE_SLACK_SECONDS))
    _bound_process(allowance)
    sink = cast(BinaryIO, control.makefile("wb", buffering=_WRITE_BUFFER))
    channel.write_json(sink, {"ready": True, "network": _network()})
    sink.flush()
    serve(control, sink, engine)


if __name__ == "__main__":
    main(sys.argv)
