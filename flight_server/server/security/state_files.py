"""State files of the server (the embedded catalog database, the ticket secret): created 0600
in a 0700 folder (every folder the server creates under its state dir, such as the disk cache's,
is 0700), so other local users can read neither the catalog nor the signing secret."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import sqlalchemy as sa

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """Create ``path`` and every missing folder above it (mode 0700, not the umask's 0755 that
    ``mkdir(parents=True)`` gives the ones above); tighten ``path`` to 0700 when it exists and is ours."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for folder in reversed(missing):
        folder.mkdir(mode=DIR_MODE, exist_ok=True)
    st = path.stat()
    if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077:
        path.chmod(DIR_MODE)
    return path


def private_file(path: Path) -> Path:
    """Create ``path`` empty (mode 0600) when missing; tighten it to 0600 when it is ours."""
    if not path.parent.exists():
        private_dir(path.parent)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    except FileExistsError:
        st = path.stat()
        if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077:
            path.chmod(FILE_MODE)
    return path


def private_sqlite(url: str) -> None:
    """For a file-backed SQLite catalog URL, create the database file 0600 before SQLite does."""
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        return
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        database = str(parsed.database)
        if not database.startswith("file:"):
            private_file(Path(database))


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (per-process state of dead ones may be removed)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


__all__ = ["private_dir", "private_file", "private_sqlite", "process_alive"]
