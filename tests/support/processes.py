"""``hudi-flight serve`` in real processes on loopback, for the topology tests: start, wait for
the start-up line (with a deadline), signal, stop. Nothing here sleeps on a guess."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, TypeVar

REPO = Path(__file__).resolve().parents[2]
START_SECONDS = 90.0
_READY = re.compile(r"hudi-flight serving \d+ table\(s\) on grpc(?:\+tcp|\+tls)?://[^:]+:(\d+)")
T = TypeVar("T")


class ServeProcess:
    """One ``hudi-flight serve ARGS`` process; :attr:`port` once it printed its start-up line
    (``wait=False``: start now, :meth:`ready` later, so several processes start side by side;
    ``repo``: serve the code of another checkout, e.g. a benchmark's peer commit)."""

    port: int
    uri: str

    def __init__(self, *args: str, log: Path, wait: bool = True, repo: Path = REPO):
        self.args = args
        self.log = log
        with open(log, "ab") as err:
            self.proc = subprocess.Popen(
                # tables registered straight into the catalog live in the system temp folder
                [sys.executable, "-m", "flight_server.cli", "serve", "--host", "127.0.0.1",
                 "--allow-root", tempfile.gettempdir(), *args],
                stdout=subprocess.PIPE, stderr=err, cwd=repo,
                env={**os.environ, "PYTHONPATH": str(repo)},
            )
        if wait:
            self.ready()

    def ready(self) -> "ServeProcess":
        """Wait for the start-up line (with a deadline); sets :attr:`port` and :attr:`uri`."""
        self.port = self._wait_ready()
        self.uri = f"grpc://127.0.0.1:{self.port}"
        return self

    def _wait_ready(self) -> int:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + START_SECONDS
        line = b""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if ready:
                line = self.proc.stdout.readline()
                match = _READY.search(line.decode(errors="replace"))
                if match:
                    return int(match.group(1))
            if self.proc.poll() is not None:
                break
        self.stop()
        raise RuntimeError(f"server did not start ({line!r}); log:\n{self.log.read_text()[-3000:]}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def stop(self) -> int:
        """SIGTERM and wait (SIGKILL after 20 s); returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode


def poll(check: Callable[[], T], timeout: float, what: str, every: float = 0.1) -> T:
    """``check()``'s first truthy value, polling until ``timeout`` seconds pass (then fail)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


__all__ = ["ServeProcess", "poll"]
