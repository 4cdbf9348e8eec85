"""Where the daemon's socket, locks, log and leftover-server record live, and
opening those files safely.

Only the standard library: clients import this.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from holsrv import facilities
from holsrv.errors import SocketPathTooLong

SOCKET_ENV = "HOLSRV_SOCKET"


def default_socket() -> Path:
    """`$HOLSRV_SOCKET`, else `$XDG_RUNTIME_DIR/holsrv/holsrv.sock`, else a
    private directory under the system temp dir named for the user id."""
    explicit = os.environ.get(SOCKET_ENV)
    return Path(explicit) if explicit else _builtin_socket()


def _builtin_socket() -> Path:
    """The first of `$XDG_RUNTIME_DIR/holsrv`, `$TMPDIR/holsrv-UID` (Linux only) and
    `/tmp/holsrv-UID` where the socket's path fits a Unix socket address.

    macOS has no XDG_RUNTIME_DIR, and its TMPDIR (/var/folders/…/T/) is long
    enough that a deeper path would not fit its 104 bytes: there the socket
    goes straight to the short per-user directory under /tmp, made private
    and checked (`private_dir`) as any socket directory is.  The daemon binds
    the socket again if /tmp's cleaning removes it.
    """
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    places = [Path(runtime) / "holsrv"] if runtime and Path(runtime).is_dir() else []
    if facilities.LINUX:
        places.append(Path(os.environ.get("TMPDIR", "/tmp")) / f"holsrv-{os.getuid()}")
    for place in places:
        if fits(place / "holsrv.sock"):
            return place / "holsrv.sock"
    return Path("/tmp") / f"holsrv-{os.getuid()}" / "holsrv.sock"


def fits(socket: Path) -> bool:
    """Whether `socket` fits a Unix socket address here (`facilities.socket_path_max`)."""
    return len(os.fsencode(socket)) <= facilities.socket_path_max()


def checked_socket(socket: Path) -> Path:
    """`socket`, if a daemon can listen on it; else SocketPathTooLong saying the limit and the fix
    (instead of the `AF_UNIX path too long` a bind or connect would raise)."""
    if not fits(socket):
        size, limit = len(os.fsencode(socket)), facilities.socket_path_max()
        raise SocketPathTooLong(
            f"the socket path {socket} is {size} bytes, longer than a Unix socket address holds here "
            f"({limit} bytes; {facilities.SUN_PATH_PORTABLE - 1} on macOS): give --socket or {SOCKET_ENV} "
            f"a shorter path (e.g. /tmp/holsrv-{os.getuid()}/holsrv.sock), or leave both unset"
        )
    return socket


def state_dir() -> Path:
    """The user's state directory for holsrv (daemon logs)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "holsrv"


SOCKET_FIX = f"set {SOCKET_ENV} to a path in a directory of your own (mode 0700), or leave it unset"


def private_dir(path: Path, fix: str = SOCKET_FIX) -> Path:
    """`path` as a directory only we can change: made 0700 if missing, else checked.

    Refuses (PermissionError, naming the directory and the fix) a symlink, a
    directory of another user, or one anyone may write to: there another user
    could put their own socket (or a symlink) where ours should be.  An
    existing directory is never chmodded: it may be a shared one, such as /tmp.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path, 0o700)
        made = True
    except FileExistsError:
        made = False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as err:
        if os.path.islink(path):
            raise PermissionError(
                f"{path} is a symbolic link; holsrv keeps its files only in a real directory: {fix}"
            ) from None
        raise type(err)(err.errno, f"{path} cannot be used as holsrv's directory ({err.strerror}): {fix}") from None
    try:
        if made:
            os.fchmod(fd, 0o700)  # ours: the umask may have taken bits away
        info = os.fstat(fd)
    finally:
        os.close(fd)
    if info.st_uid != os.getuid():
        raise PermissionError(f"{path} belongs to uid {info.st_uid}, not to you (uid {os.getuid()}): {fix}")
    if info.st_mode & stat.S_IWOTH:
        # Even with the sticky bit (/tmp): others may create the socket's name first.
        raise PermissionError(
            f"{path} is writable by every user (mode {stat.S_IMODE(info.st_mode):04o}), so another user "
            f"could put a socket or file of theirs where holsrv's should be: {fix}"
        )
    return path


def open_private(path: Path, flags: int) -> int:
    """Open (creating 0600) one of the daemon's own regular files, never through a symlink.

    A symlink planted at `path` is refused (PermissionError) instead of letting
    us truncate or write its target; so are a FIFO, a device and a file of
    another user.
    """
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise PermissionError(
                f"{path} is a symbolic link; holsrv never writes through one: remove it"
            ) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PermissionError(f"{path} is not a regular file; remove it")
        if info.st_uid != os.getuid():
            raise PermissionError(f"{path} belongs to uid {info.st_uid}, not to you; remove it")
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.fchmod(fd, 0o600)  # a file of ours left by an older version
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def lock_path(socket: Path) -> Path:
    """Held (flock) by the daemon on `socket` for its whole life: one daemon per socket."""
    return socket.with_name(socket.name + ".lock")


def start_lock_path(socket: Path) -> Path:
    """Held by a client while it starts a daemon, so two clients start one.

    Not `lock_path`: the daemon it starts takes that one for good.
    """
    return socket.with_name(socket.name + ".start")


def servers_record(socket: Path) -> Path:
    """Pids, start times and marker of the HOL servers a daemon on `socket` runs."""
    return socket.with_name(socket.name + ".servers")


def log_path(socket: Path) -> Path:
    """Log of a daemon started on demand; one per socket so tests do not mix."""
    if socket == _builtin_socket():
        return state_dir() / "holsrv.log"
    return socket.with_name(socket.name + ".log")
