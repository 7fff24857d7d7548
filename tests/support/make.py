"""``make TARGET`` for tests: one build at a time across the parallel test workers (two workers
building the same target at once remove each other's intermediate files), nothing to do when
the target is up to date."""

from __future__ import annotations

import fcntl
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / ".cache" / "make.lock"


def run_make(target: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """``make -s TARGET`` in the repository, holding the tests' build lock; its output captured."""
    LOCK.parent.mkdir(exist_ok=True)
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return subprocess.run(["make", "-s", "-C", str(REPO), target], capture_output=True, text=True,
                              timeout=timeout)
