"""The first code an engine process runs: the script the serving process starts (by its path,
``python .../engine/entry.py FD SETTINGS ALLOWANCE``), before any module can start a thread.

A process with threads cannot enter a user namespace, and importing pyarrow (or anything of the
project, whose packages import it) starts some; so this script imports nothing but the standard
library until the process has, where the kernel allows it, a user and a network namespace of its
own: this user mapped to itself (files read and spilled as before) and no network interface but
a loopback that is down. Where the kernel refuses, the process runs without them (the engine's
own lock-down still holds); :mod:`.engine_process` tells which in its first message. Then it runs
:func:`.engine_process.main`.
"""

import ctypes
import os
import sys

_CLONE_NEWUSER, _CLONE_NEWNET = 0x10000000, 0x40000000


def _own_namespaces() -> None:
    uid, gid = os.geteuid(), os.getegid()
    if ctypes.CDLL(None, use_errno=True).unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        return
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


if __name__ == "__main__":
    # run as a script, its folder leads the module path: its neighbours are modules of a package,
    # imported through it, never as top-level modules
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]
    _own_namespaces()
    from flight_server.server.engine.engine_process import main

    main(sys.argv)
