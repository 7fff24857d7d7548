"""The calls a server is answering now, with what they cost so far (the web console's live queries).

Every RPC already has a :class:`~.call_log.CallRecord` while it runs (its method, start, and the
user, table and instant the service notes); :class:`LiveCalls` keeps the records of the calls in
flight, and a stream adds the rows and bytes it has sent to its record as it sends them. Only a
server that shows them (``console_port``) keeps them: otherwise no record is made for a call that
is neither logged nor measured, and nothing is counted.

``serve --processes N`` answers calls in N processes and shows the console from the first: each
process then publishes its calls in flight once a second to ``<state_dir>/live/<pid>.json`` (the
folder named by ``$HUDI_FLIGHT_LIVE_DIR``, chosen before the processes start), and
:meth:`LiveCalls.everywhere` adds the other live processes' calls to its own.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from flight_server.server.security.state_files import private_dir, process_alive

log = logging.getLogger(__name__)

#: the folder the processes of one server publish their calls in (set by ``runtime.serve``)
LIVE_DIR_ENV = "HUDI_FLIGHT_LIVE_DIR"
#: how often a process publishes its calls in flight (how stale another process's figures may be)
PUBLISH_SECONDS = 1.0


class Recorded(Protocol):
    """What :class:`LiveCalls` reads of a call's record (``call_log.CallRecord``)."""

    method: str
    kind: str | None
    started: float  # time.perf_counter()
    fields: dict[str, Any]
    rows: int
    bytes: int


@dataclass(frozen=True)
class LiveCall:
    """One call in flight, as it stood when asked (``process``: the serving process's pid)."""

    id: int
    process: int
    method: str
    kind: str
    user: str | None
    table: str | None
    instant: str | None
    seconds: float  # elapsed
    rows: int  # streamed so far
    bytes: int


def prepare_folder(state_path: Path) -> Path:
    """The publishing folder of a server's processes (private), without the files of processes
    that are gone."""
    folder = private_dir(state_path / "live")
    for path in folder.glob("*.json"):
        if not path.stem.isdigit() or not process_alive(int(path.stem)):
            path.unlink(missing_ok=True)
    return folder


class LiveCalls:
    """The records of the calls in flight (bounded by the calls gRPC runs at once).

    Args:
        folder: where this process publishes its calls and reads the other processes' (``None``:
            a server of one process).
    """

    def __init__(self, folder: Path | None = None):
        self._calls: dict[int, Recorded] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._folder = folder
        self._stop = threading.Event()
        if folder is not None:
            threading.Thread(target=self._publish_loop, name="hudi-live-calls", daemon=True).start()

    def started(self, record: Recorded) -> int:
        """Keep ``record`` until :meth:`ended`; returns its id."""
        number = next(self._ids)
        with self._lock:
            self._calls[number] = record
        return number

    def ended(self, number: int) -> None:
        with self._lock:
            self._calls.pop(number, None)

    def snapshot(self) -> list[LiveCall]:
        """This process's calls in flight, oldest first."""
        now = time.perf_counter()
        with self._lock:
            records = list(self._calls.items())
        out = []
        for number, record in records:
            fields = dict(record.fields)
            out.append(LiveCall(
                number, self._pid, record.method, record.kind or record.method, fields.get("user"),
                fields.get("table"), fields.get("instant"), max(0.0, now - record.started), record.rows, record.bytes,
            ))
        return sorted(out, key=lambda c: -c.seconds)

    def everywhere(self) -> list[LiveCall]:
        """The calls in flight of every process of the server, oldest first."""
        calls = self.snapshot()
        if self._folder is not None:
            calls += self._published()
        return sorted(calls, key=lambda c: -c.seconds)

    def close(self) -> None:
        """Stop publishing (a process leaving takes its calls with it)."""
        self._stop.set()
        if self._folder is not None:
            (self._folder / f"{self._pid}.json").unlink(missing_ok=True)

    # -- between processes -------------------------------------------------------------------
    def _publish_loop(self) -> None:
        published = True  # an empty list is written once, then nothing while idle
        while not self._stop.wait(PUBLISH_SECONDS):
            calls = self.snapshot()
            if calls or published:
                try:
                    self._publish(calls)
                except OSError as err:  # a full disk must not end the process; the console shows less
                    log.warning("cannot publish the calls in flight: %s", err)
            published = bool(calls)

    def _publish(self, calls: list[LiveCall]) -> None:
        assert self._folder is not None
        text = json.dumps({"at": time.time(), "calls": [asdict(c) for c in calls]})
        handle, temporary = tempfile.mkstemp(dir=self._folder, prefix=".live-")
        try:
            with os.fdopen(handle, "w") as out:
                out.write(text)
            os.replace(temporary, self._folder / f"{self._pid}.json")
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)

    def _published(self) -> list[LiveCall]:
        assert self._folder is not None
        out = []
        now = time.time()
        for path in self._folder.glob("*.json"):
            if not path.stem.isdigit() or int(path.stem) == self._pid or not process_alive(int(path.stem)):
                continue
            try:
                doc = json.loads(path.read_text())
                aged = max(0.0, now - float(doc["at"]))
                out += [replace(call, seconds=call.seconds + aged) for call in map(_call, doc["calls"])]
            except (OSError, ValueError, KeyError, TypeError):  # gone meanwhile, or not ours
                continue
        return out


def _call(fields: dict[str, Any]) -> LiveCall:
    return LiveCall(**{name: fields[name] for name in LiveCall.__dataclass_fields__})


__all__ = ["LIVE_DIR_ENV", "LiveCall", "LiveCalls", "prepare_folder"]
