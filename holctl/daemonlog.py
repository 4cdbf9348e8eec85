"""Finding the log of the daemon that runs, when its file is not where `paths.log_path` says.

A daemon started on demand logs to a file beside its socket (or in the
state directory).  If that directory is deleted while it runs, it goes on
writing to the deleted file, and makes the socket again (and the log file,
`main._PrivateLog.make_again`) once the directory is back.  Until then the
name leads nowhere, but the file is still open in the daemon: on Linux it
can be read through `/proc/<pid>/fd`.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from holsrv.errors import HolsrvError
from holsrv.rpc import client


def running_pid(socket: Path) -> int | None:
    """The pid of the daemon that answers on `socket`, or None (never starts one)."""
    try:
        with client.connect(socket, name="holctl logs", autostart=False) as conn:
            return conn.welcome.pid
    except (HolsrvError, OSError):
        return None


def deleted_log(pid: int, log: Path) -> Path | None:
    """The `/proc` name of `log` as daemon `pid` still has it open after it was deleted, or None
    (not deleted, not open, not Linux, or not ours to look at)."""
    gone = f"{os.path.abspath(log)} (deleted)"  # as the kernel names an open file whose name was removed
    fds = Path(f"/proc/{pid}/fd")
    with contextlib.suppress(OSError):
        for fd in sorted(fds.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1):
            with contextlib.suppress(OSError):
                if os.readlink(fd) == gone:
                    return fd
    return None
