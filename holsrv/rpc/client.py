"""The client helper holctl and holmcp share: connect, say hello, ask, decode.

Imports only the standard library and msgspec (a test checks), so a CLI call
costs milliseconds.  If no daemon answers, `connect` starts one detached and
waits for it to say it is listening; a lock file makes two clients that
start at once end up with one daemon.
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
from typing import assert_never

from holsrv import __version__
from holsrv.errors import DaemonUnreachable, FrameError, ProtocolMismatch, error_for_code
from holsrv.rpc import framing, paths
from holsrv.rpc.messages import (
    PROTOCOL_VERSION,
    Completion,
    Definition,
    Diagnostics,
    DocumentSymbol,
    ErrorReply,
    Eval,
    GoalState,
    Hello,
    Hover,
    References,
    Request,
    Restart,
    Result,
    RetryCompile,
    Shutdown,
    Status,
    Welcome,
    WorkspaceSymbol,
)

CONNECT_TIMEOUT_S = 5.0
START_TIMEOUT_S = 30.0
# On top of the daemon's own limits: the socket, waiting for a lease, syncing
# the text, and stopping an idle server to make room.
REPLY_MARGIN_S = 30.0
# A daemon older than the limits in Welcome sends zeros; these were its defaults.
FALLBACK_REQUEST_TIMEOUT_S = 60.0
FALLBACK_LOOKUP_WAIT_S = 25.0
FALLBACK_START_WAIT_S = 25.0


def reply_timeout(request: Request, welcome: Welcome) -> float:
    """How long to wait for `request`'s reply from the daemon that sent `welcome`.

    The sum of every wait the daemon may spend on it, plus REPLY_MARGIN_S.
    """
    lsp = welcome.request_timeout_s or FALLBACK_REQUEST_TIMEOUT_S
    lookup = welcome.lookup_wait_s or FALLBACK_LOOKUP_WAIT_S
    start = welcome.start_wait_s or FALLBACK_START_WAIT_S
    # Each arm adds up the daemon's waits in order.  Too long only delays
    # noticing a hung daemon; too short throws away an answer it is about to
    # send, so every bound errs long.
    match request:
        case Diagnostics() | GoalState():
            # The own wait is the daemon's deadline for start, compile and
            # proofs; an LSP request begun just before it (goalState polls)
            # may still take request_timeout.  The start shares the deadline
            # today; start_wait is added so a daemon that waits for it
            # separately is not cut off.
            spent = max(0.0, request.wait) + start + lsp
        case Hover() | Definition() | References() | Completion() | DocumentSymbol() | WorkspaceSymbol():
            # Start, then the compile reaching the tree (lookup_wait), then the LSP request.
            spent = start + lookup + lsp
        case RetryCompile():
            # As a lookup, then a second lookup_wait for HOL's answer to the retry.
            spent = start + 2 * lookup + lsp
        case Eval():
            # Its LSP request is bounded by its own timeout instead of request_timeout.
            spent = start + max(0.0, request.timeout)
        case Restart():
            # Stopping the old server (its shutdown exchange), then the new one's start.
            spent = lsp + start
        case Status() | Shutdown():
            spent = 0.0  # answered at once, from the daemon's own state
        case _:
            assert_never(request)
    return spent + REPLY_MARGIN_S


class Client:
    """One connection to the daemon; `call` sends a request and returns its reply."""

    def __init__(self, sock: socket.socket, welcome: Welcome) -> None:
        self._sock = sock
        self.welcome = welcome

    def reply_timeout(self, request: Request) -> float:
        """How long `call` waits for `request`'s reply unless told: from this daemon's limits."""
        return reply_timeout(request, self.welcome)

    def call(self, request: Request, timeout: float | None = None) -> Result:
        """Send `request`, wait up to `timeout` s (default `reply_timeout`) for its reply; raise on an ErrorReply."""
        if timeout is None:
            timeout = self.reply_timeout(request)
        self._sock.settimeout(timeout)
        try:
            self._sock.sendall(framing.encode(request))
            body = framing.recv_body(self._sock)
        except TimeoutError:
            raise DaemonUnreachable(
                f"the daemon did not answer within {timeout:.0f}s; it carries on, ask again"
            ) from None
        except OSError as err:
            raise DaemonUnreachable(f"lost the connection to the daemon: {err}") from None
        if body is None:
            raise DaemonUnreachable("the daemon closed the connection without answering; see its log")
        reply = framing.decode(framing.reply_decoder, body)
        if isinstance(reply, ErrorReply):
            raise error_for_code(reply.code, reply.message, reply.detail)
        if isinstance(reply, Welcome):
            raise ProtocolMismatch(f"the daemon answered {type(request).__name__} with a welcome")
        return reply

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def connect(socket_path: Path | None = None, *, name: str, autostart: bool = True) -> Client:
    """Connect to the daemon on `socket_path` (default: the user's), starting it if allowed."""
    path = socket_path or paths.default_socket()
    try:
        return _handshake(_open(path), name)
    except (FileNotFoundError, ConnectionRefusedError):
        if not autostart:
            raise DaemonUnreachable(
                f"no holsrv daemon is listening on {path}; start one with `holsrv` "
                "(or `systemctl --user start holsrv`)"
            ) from None
    _start_daemon(path)
    try:
        return _handshake(_open(path), name)
    except OSError as err:
        raise DaemonUnreachable(
            f"started a daemon but cannot reach it on {path} ({err}); see {paths.log_path(path)}"
        ) from None


def _open(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_TIMEOUT_S)
    try:
        sock.connect(str(path))
    except BaseException:
        sock.close()
        raise
    return sock


def _handshake(sock: socket.socket, name: str) -> Client:
    try:
        sock.sendall(framing.encode(Hello(PROTOCOL_VERSION, name, __version__)))
        body = framing.recv_body(sock)
    except (OSError, FrameError) as err:
        sock.close()
        raise DaemonUnreachable(f"the daemon did not complete the handshake: {err}") from None
    if body is None:
        sock.close()
        raise DaemonUnreachable("the daemon closed the connection during the handshake")
    reply = framing.decode(framing.reply_decoder, body)
    if isinstance(reply, ErrorReply):
        sock.close()
        raise error_for_code(reply.code, reply.message, reply.detail)
    if not isinstance(reply, Welcome):
        sock.close()
        raise ProtocolMismatch(f"the daemon answered hello with {type(reply).__name__}")
    return Client(sock, reply)


def _start_daemon(path: Path) -> None:
    """Start a detached daemon on `path` unless another client just did."""
    paths.private_dir(path.parent)
    with open(paths.lock_path(path), "w") as lock:
        # Whoever holds the lock is starting a daemon and waits at most
        # START_TIMEOUT_S for it, so this wait is bounded too.
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            _open(path).close()
            return  # another client started it while we waited for the lock
        except OSError:
            pass
        _spawn_and_wait(path)


def _spawn_and_wait(path: Path) -> None:
    log = paths.log_path(path)
    log.parent.mkdir(parents=True, exist_ok=True)
    read_fd, write_fd = os.pipe()
    try:
        # The daemon logs to `log` itself (rotated); its stderr file only
        # catches what a crash prints before logging is set up.
        with open(log.with_name(log.name + ".stderr"), "ab") as log_file:
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
        ready = False
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)
    if not ready:
        raise DaemonUnreachable(f"could not start the holsrv daemon; see {log}")


def _read_ready(fd: int, timeout: float) -> bool:
    """True once the daemon writes its ready line; False on EOF or timeout."""
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return False
        chunk = os.read(fd, 64)
        if not chunk:
            return False
        data += chunk
    return data.startswith(b"ready")
