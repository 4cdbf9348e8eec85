"""Starting a detached daemon when no daemon answers, and waiting for it to listen.

A lock file makes two clients that start at once end up with one daemon.
Imports only the standard library and msgspec (a test checks).
"""

from __future__ import annotations

import fcntl
import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

from holsrv.errors import DaemonUnreachable
from holsrv.rpc import paths

CONNECT_TIMEOUT_S = 5.0
START_TIMEOUT_S = 30.0
# What a daemon started only to find one running says (holsrv.main), and how
# long to wait for the running one to make its deleted socket again (it looks
# every 2 s).
ALREADY_RUNNING = "ready (already running)"
SOCKET_BACK_S = 10.0
SOCKET_POLL_S = 0.05


def open_socket(path: Path) -> socket.socket:
    """A connected socket to `path` (raises what `connect` raises when nothing listens, and
    SocketPathTooLong for a path no socket can have)."""
    paths.checked_socket(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_TIMEOUT_S)
    try:
        sock.connect(str(path))
    except BaseException:
        sock.close()
        raise
    return sock


def not_listening(path: Path) -> DaemonUnreachable:
    return DaemonUnreachable(
        f"no holsrv daemon is listening on {path}; start one with `holsrv` (or `systemctl --user start holsrv`)"
    )


def start_daemon(path: Path) -> None:
    """Start a detached daemon on `path` unless another client just did.

    Blocks up to about START_TIMEOUT_S (a little more when a daemon that is
    shutting down still holds the socket's lock).
    """
    paths.private_dir(path.parent)
    # Not the daemon's own lock (`paths.lock_path`), which the daemon we start
    # takes for its whole life: with one file, it would wait for us and we for it.
    with os.fdopen(paths.open_private(paths.start_lock_path(path), os.O_RDWR), "r+b") as lock:
        # Whoever holds the lock is starting a daemon, for a bounded time
        # (see above), so this wait is bounded too.
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            open_socket(path).close()
            return  # another client started it while we waited for the lock
        except OSError:
            pass
        deadline = time.monotonic() + START_TIMEOUT_S
        while _spawn_and_wait(path) == ALREADY_RUNNING:
            # A daemon holds the socket's lock but did not answer: its socket
            # file was deleted (it makes a new one within seconds), or it is
            # shutting down (it lets go of the lock once its servers are
            # stopped, and then the next start succeeds).
            if _wait_for_socket(path, SOCKET_BACK_S, _lock_holder(path)) or time.monotonic() > deadline:
                return


def _spawn_and_wait(path: Path) -> str:
    """Start a daemon on `path`; its ready line once it listens (or found one running)."""
    log = paths.log_path(path)
    paths.private_dir(log.parent, fix=f"set XDG_STATE_HOME to a directory of your own (holsrv logs to {log})")
    read_fd, write_fd = os.pipe()
    try:
        # The daemon logs to `log` itself (rotated, 0600); its stderr file only
        # catches what a crash prints before logging is set up.
        stderr_fd = paths.open_private(log.with_name(log.name + ".stderr"), os.O_WRONLY | os.O_APPEND)
        with os.fdopen(stderr_fd, "ab") as log_file:
            # --detach: the daemon forks away and this child exits at once, so
            # the daemon is nobody's child (no zombie in a long-lived holmcp).
            launcher = subprocess.Popen(
                [sys.executable, "-m", "holsrv", "--detach", "--socket", str(path),
                 "--ready-fd", str(write_fd), "--log-file", str(log)],
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=log_file,
                pass_fds=(write_fd,),
                start_new_session=True,
            )
        os.close(write_fd)
        write_fd = -1
        launcher.wait(timeout=START_TIMEOUT_S)
        ready = _read_ready(read_fd, START_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        launcher.kill()
        launcher.wait()
        ready = ""
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)
    if not ready.startswith("ready"):
        said = _last_line(log.with_name(log.name + ".stderr"))
        raise DaemonUnreachable(f"could not start the holsrv daemon{': ' + said if said else ''}; see {log}")
    return ready


def _last_line(path: Path, limit: int = 2000) -> str:
    """The last line a daemon that would not start printed (a bad config file says where), if any."""
    try:
        with open(path, "rb") as text:
            text.seek(max(0, text.seek(0, os.SEEK_END) - limit))
            lines = text.read(limit).decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1].removeprefix("Error: ") if lines else ""


def _lock_holder(path: Path) -> int | None:
    """The pid the daemon holding `path`'s lock wrote into it, if it says."""
    try:
        with os.fdopen(paths.open_private(paths.lock_path(path), os.O_RDONLY), "rb") as lock:
            return int(lock.read(32).strip() or b"x")
    except (OSError, ValueError):
        return None


def _wait_for_socket(path: Path, timeout: float, holder: int | None) -> bool:
    """True once something accepts connections on `path`; False after `timeout`
    seconds, or as soon as the daemon `holder` has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            open_socket(path).close()
            return True
        except OSError:
            if holder is not None and not _running(holder):
                return False
            # Another process makes the socket: there is nothing to wait on
            # but the file system, so look again shortly.
            time.sleep(SOCKET_POLL_S)
    return False


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # no signal: only asks whether it exists
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _read_ready(fd: int, timeout: float) -> str:
    """The daemon's ready line, once it writes one; "" on EOF or timeout."""
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return ""
        chunk = os.read(fd, 64)
        if not chunk:
            return ""
        data += chunk
    return data.split(b"\n", 1)[0].decode("ascii", "replace")
