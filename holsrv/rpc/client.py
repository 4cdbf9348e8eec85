"""The client helper holctl and holmcp share: connect, say hello, ask, decode.

Imports only the standard library and msgspec (a test checks), so a CLI call
costs milliseconds.  If no daemon answers, `connect` starts one detached and
waits for it to say it is listening; a lock file makes two clients that
start at once end up with one daemon.  holmcp's asyncio client
(`holsrv.rpc.aclient`) shares the hello, the welcome check, the reply
timeouts and the daemon start from here.
"""

from __future__ import annotations

import fcntl
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import assert_never

from holsrv import __version__
from holsrv.errors import DaemonUnreachable, FrameError, ProtocolMismatch, error_for_code
from holsrv.rpc import framing, limits, paths
from holsrv.rpc.messages import (
    PROTOCOL_VERSION,
    Completion,
    Definition,
    Diagnostics,
    DocumentSymbol,
    ErrorReply,
    Eval,
    GoalDiff,
    GoalState,
    Hello,
    Holmake,
    Hover,
    Logs,
    Progress,
    References,
    Reply,
    Request,
    Restart,
    Result,
    RetryCompile,
    Search,
    Shutdown,
    Status,
    Stop,
    Try,
    Welcome,
    WorkspaceSymbol,
)

CONNECT_TIMEOUT_S = 5.0
START_TIMEOUT_S = 30.0
# What a daemon started only to find one running says (holsrv.main), and how
# long to wait for the running one to make its deleted socket again (it looks
# every 2 s).
ALREADY_RUNNING = "ready (already running)"
SOCKET_BACK_S = 10.0
SOCKET_POLL_S = 0.05
# On top of the daemon's own limits: the socket, waiting for a lease, syncing
# the text, and stopping an idle server to make room.
REPLY_MARGIN_S = 30.0
# A daemon older than the limits in Welcome sends zeros; these were its defaults.
FALLBACK_REQUEST_TIMEOUT_S = 60.0
FALLBACK_LOOKUP_WAIT_S = 25.0
FALLBACK_START_WAIT_S = 25.0
FALLBACK_HOLMAKE_TIMEOUT_S = 1800.0  # a daemon that does not say its holmake_timeout_s
FALLBACK_TRY_TIMEOUT_S = 30.0
FALLBACK_TRIAL_WAIT_S = 30.0
# What a client passes on in Hello.settings besides every HOLSRV_* variable:
# the names the reference tool reads, which the daemon also honours.
REFERENCE_SETTINGS = ("HOL_BIN", "HOLDIR", "HOL_LSP_EXTRA_PATH", "HOL_LSP_MCP_MAX_SERVERS")


def given_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings this client was given in its environment, for Hello.settings.

    A daemon started by another client has its own; it answers with a warning
    for each that differs, instead of the client's being ignored in silence.
    """
    env = os.environ if environ is None else environ
    return {k: v for k, v in sorted(env.items()) if k.startswith("HOLSRV_") or k in REFERENCE_SETTINGS}


def hello(name: str, settings: Mapping[str, str] | None = None) -> Hello:
    """The first frame of a connection: our protocol, name and given settings."""
    return Hello(PROTOCOL_VERSION, name, __version__, dict(given_settings() if settings is None else settings))


def welcomed(reply: Reply) -> Welcome:
    """The daemon's answer to hello, or the error it means."""
    if isinstance(reply, ErrorReply):
        raise error_for_code(reply.code, reply.message, reply.detail)
    if not isinstance(reply, Welcome):
        raise ProtocolMismatch(f"the daemon answered hello with {type(reply).__name__}")
    return reply


def result_of(request: Request, reply: Reply) -> Result:
    """The result a reply frame carries; an ErrorReply becomes its error."""
    if isinstance(reply, ErrorReply):
        raise error_for_code(reply.code, reply.message, reply.detail)
    if isinstance(reply, Welcome | Progress):
        raise ProtocolMismatch(f"the daemon answered {type(request).__name__} with a {type(reply).__name__}")
    return reply


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
            spent = limits.bounded(request.wait) + start + lsp
        case Hover() | Definition() | References() | Completion() | DocumentSymbol() | WorkspaceSymbol():
            # Start, then the compile reaching the tree (lookup_wait), then the LSP
            # request; a caller's own wait replaces both waits.
            waits = start + lookup if request.wait is None else 2 * limits.bounded(request.wait)
            spent = waits + lsp
        case RetryCompile():
            # As a lookup, then a second lookup_wait for HOL's answer to the retry.
            spent = start + 2 * lookup + lsp
        case Eval():
            # Its LSP request is bounded by its own timeout instead of request_timeout.
            spent = start + limits.bounded(request.timeout)
        case Restart() | Stop():
            # Stopping the old server (its shutdown exchange), then the new one's start.
            spent = lsp + start
        case Status() | Shutdown() | Logs():
            spent = 0.0  # answered at once, from the daemon's own state
        case Search():
            # A lookup, then (for an empty answer) HOL parsing the pattern alone.
            waits = start + lookup if request.wait is None else 2 * limits.bounded(request.wait)
            spent = waits + 2 * lsp
        case Holmake():
            # The daemon kills a Holmake at its own limit and then answers.
            spent = welcome.holmake_timeout_s or FALLBACK_HOLMAKE_TIMEOUT_S
        case Try():
            # Start and compile, then each candidate's own limit, then the
            # restored text's compile (lookup_wait) and one LSP request late.
            each = welcome.try_timeout_s or FALLBACK_TRY_TIMEOUT_S
            if request.timeout is not None:
                each = limits.bounded(request.timeout)
            trial = welcome.trial_wait_s or FALLBACK_TRIAL_WAIT_S  # other calls on the file finishing first
            each += limits.try_release_s(each)  # HOL letting go of the candidate before
            spent = start + trial + limits.bounded(request.wait) + len(request.tactics) * each + lookup + 2 * lsp
        case GoalDiff():
            spent = 2 * (limits.bounded(request.wait) + start + lsp)
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

    def call(
        self, request: Request, timeout: float | None = None, on_progress: Callable[[Progress], None] | None = None
    ) -> Result:
        """Send `request`, wait up to `timeout` s (default `reply_timeout`) for its reply; raise on an ErrorReply.

        `Progress` frames that come first (a request with `progress=True`) go to `on_progress`.
        """
        if timeout is None:
            timeout = self.reply_timeout(request)
        deadline = time.monotonic() + timeout
        try:
            self._sock.settimeout(timeout)
            self._sock.sendall(framing.encode(request))
            while True:
                # One deadline for the whole call, however many progress frames come.
                self._sock.settimeout(max(0.001, deadline - time.monotonic()))
                body = framing.recv_body(self._sock)
                if body is None:
                    raise DaemonUnreachable("the daemon closed the connection without answering; see its log")
                reply = framing.decode(framing.reply_decoder, body)
                if not isinstance(reply, Progress):
                    return result_of(request, reply)
                if on_progress is not None:
                    on_progress(reply)
        except TimeoutError:
            raise DaemonUnreachable(
                f"the daemon did not answer within {timeout:.0f}s; it carries on, ask again"
            ) from None
        except OSError as err:
            raise DaemonUnreachable(f"lost the connection to the daemon: {err}") from None

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def connect(
    socket_path: Path | None = None, *, name: str, autostart: bool = True, settings: Mapping[str, str] | None = None
) -> Client:
    """Connect to the daemon on `socket_path` (default: the user's), starting it if allowed.

    `settings` go in the hello (default: `given_settings()`).
    """
    path = socket_path or paths.default_socket()
    try:
        return _handshake(_open(path), name, settings)
    except (FileNotFoundError, ConnectionRefusedError):
        if not autostart:
            raise not_listening(path) from None
    start_daemon(path)
    try:
        return _handshake(_open(path), name, settings)
    except OSError as err:
        raise DaemonUnreachable(
            f"started a daemon but cannot reach it on {path} ({err}); see {paths.log_path(path)}"
        ) from None


def not_listening(path: Path) -> DaemonUnreachable:
    return DaemonUnreachable(
        f"no holsrv daemon is listening on {path}; start one with `holsrv` (or `systemctl --user start holsrv`)"
    )


def _open(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_TIMEOUT_S)
    try:
        sock.connect(str(path))
    except BaseException:
        sock.close()
        raise
    return sock


def _handshake(sock: socket.socket, name: str, settings: Mapping[str, str] | None) -> Client:
    try:
        sock.sendall(framing.encode(hello(name, settings)))
        body = framing.recv_body(sock)
        if body is None:
            raise DaemonUnreachable("the daemon closed the connection during the handshake")
        return Client(sock, welcomed(framing.decode(framing.reply_decoder, body)))
    except (OSError, FrameError) as err:
        sock.close()
        raise DaemonUnreachable(f"the daemon did not complete the handshake: {err}") from None
    except BaseException:
        sock.close()
        raise


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
            _open(path).close()
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
            _open(path).close()
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
