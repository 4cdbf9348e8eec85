"""Where the daemon's socket, lock, log and leftover-server record live.

Only the standard library: clients import this.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

SOCKET_ENV = "HOLSRV_SOCKET"


def default_socket() -> Path:
    """`$HOLSRV_SOCKET`, else `$XDG_RUNTIME_DIR/holsrv/holsrv.sock`, else a
    private directory under the system temp dir named for the user id."""
    explicit = os.environ.get(SOCKET_ENV)
    return Path(explicit) if explicit else _builtin_socket()


def _builtin_socket() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "holsrv" / "holsrv.sock"
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    return tmp / f"holsrv-{os.getuid()}" / "holsrv.sock"


def state_dir() -> Path:
    """The user's state directory for holsrv (daemon logs)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "holsrv"


def private_dir(path: Path) -> Path:
    """Create `path` as a 0700 directory owned by us, or refuse a foreign one."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.stat()
    if info.st_uid != os.getuid():
        raise PermissionError(f"{path} belongs to another user; set {SOCKET_ENV} to a path of yours")
    if stat.S_IMODE(info.st_mode) & 0o077:
        path.chmod(0o700)
    return path


def lock_path(socket: Path) -> Path:
    return socket.with_name(socket.name + ".lock")


def servers_record(socket: Path) -> Path:
    """Pids and start times of the HOL servers a daemon on `socket` runs."""
    return socket.with_name(socket.name + ".servers")


def log_path(socket: Path) -> Path:
    """Log of a daemon started on demand; one per socket so tests do not mix."""
    if socket == _builtin_socket():
        return state_dir() / "holsrv.log"
    return socket.with_name(socket.name + ".log")
