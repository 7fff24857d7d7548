"""CPU time of a process tree, read from ``/proc`` (Linux): a server with its worker processes, or
a Spark driver with its JVM and the JVM's Python workers.

Standard library only: :mod:`bench.spark_hudi_job` imports it from the Hudi writer's own
environment.
"""

from __future__ import annotations

import os
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and every live descendant (``/proc``)."""
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # exited meanwhile
            continue
        fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) "
        stats[int(entry)] = fields
        children.setdefault(int(fields[1]), []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        fields = stats.get(current)
        if fields is not None:
            total += int(fields[11]) + int(fields[12])  # utime, stime
        todo.extend(children.get(current, []))
    return total / TICKS
