"""The CPU clock bench.sql_rpc_cost reads another process's CPU time from."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench.sql_rpc_cost import _cpu_ns, _process_clock


def test_a_process_clock_counts_the_cpu_of_every_thread_of_another_process() -> None:
    burn = "import threading, time\n" \
           "def spin():\n    end = time.thread_time() + 0.2\n    while time.thread_time() < end: pass\n" \
           "t = threading.Thread(target=spin); t.start(); t.join()\nprint('done', flush=True)\ntime.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", burn], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"done\n"  # the thread has ended
        clock = _process_clock(child.pid)
        spent = _cpu_ns(clock)
        assert 0.2e9 <= spent < 5e9  # the ended thread's 0.2 s included
        assert _cpu_ns(_process_clock(os.getpid())) >= time.process_time_ns() * 0.9
    finally:
        child.kill()
        child.wait()
    assert _cpu_ns(clock) == 0  # gone: counts no more
