"""Reaching the daemon, once for the three clients that do it: connect, start, hello, welcome; and a
call caught in a daemon's restart.

holctl's blocking client (`client`), holmcp's asyncio client (`aclient`) and
the editor bridge (`holctl.lsp.link`) open a connection the same way:
connect within CONNECT_TIMEOUT_S; if nobody listens, start a daemon when
allowed (`autostart.start_daemon`, one lock file for every client) and
connect again; send the hello; check the welcome.  A blocking socket and an
asyncio stream cannot share I/O code, so everything but the I/O is here:
the first frames, the welcome check, the start decision, the error each
failure gives, and what a call caught in a restart does (`Switch`).  The
blocking shell is here too (`open_blocking`, `redial_blocking`); the
asyncio one is `aconnecting`.  Each shell only moves bytes.

Imports only the standard library and msgspec (a test checks): holctl loads it.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from pathlib import Path

from holsrv.errors import DaemonRestarting, DaemonStopping, DaemonUnreachable, FrameError, HolsrvError, error_for_code
from holsrv.rpc import autostart, calls, framing, paths
from holsrv.rpc.messages import Request, Welcome

# What `connect` raises when no daemon listens on the socket (and only then is one started).
NOBODY = (FileNotFoundError, ConnectionRefusedError)

# Requests whose reply may be lost after the daemon acted on them: eval runs
# the user's code, restart and stop act on a server, shutdown and
# restartDaemon on the daemon.  Sending one twice could run it twice, so a
# broken connection is reported instead.  Every other request only asks
# (retryCompile at most re-queues a compile of a blocked file), so it is sent
# again once.  By wire tag, so a request type added later is named here even
# before this module imports it.
NOT_RESENT = frozenset({"eval", "restart", "stop", "shutdown", "restartDaemon"})


def acts(request: Request) -> bool:
    """Whether `request` acts (NOT_RESENT): never sent twice when the daemon may have begun it."""
    return request.__struct_config__.tag in NOT_RESENT


def lost_during(request: Request, why: object) -> DaemonUnreachable:
    """The error of an acting `request` whose connection broke after the daemon may have read it."""
    return DaemonUnreachable(
        f"lost the connection to the daemon during {type(request).__name__} ({why}): it stopped or "
        "was restarting, and it may or may not have acted; check with status, then ask again"
    )

# How long a call caught in a daemon's restart waits for a daemon to take
# connections again before it gives up with `caught`.  After `daemon_restarting`:
# the daemon drains (up to 5 s), waits for its HOL servers to fall quiet (up
# to 3 s), then execs and adopts them (no heap to load), and a connection made
# meanwhile waits in the socket's backlog: RESTART_WAIT_S covers that with a
# margin for a loaded machine.  Otherwise (daemon_stopping, a connection that
# closed) a new daemon is started at once if allowed, which has its own bound
# (autostart.START_TIMEOUT_S) inside one attempt, or systemd restarts one.
SWITCH_WAIT_S = 10.0
RESTART_WAIT_S = 30.0
# The pause between two attempts to reach a daemon that is not back yet: nothing
# to wait on but another process making its socket, so look again shortly.
REDIAL_PAUSE_S = 0.05


def opening(name: str, settings: Mapping[str, str] | None, then: Request | None = None) -> bytes:
    """The first bytes of a connection: the hello, and `then` after it in the same write.

    In one write: a daemon that refuses us (another user) reads once, says why
    in a frame and closes; a second write landing after that would reset the
    connection and lose its word.
    """
    first = framing.encode(calls.hello(name, settings))
    return first if then is None else first + framing.encode(then)


def welcome_of(body: bytes | None) -> Welcome:
    """The daemon's Welcome from its first frame; its refusal (protocol_mismatch for a client it
    finds too old or new, peer_refused, daemon_restarting) as the error of its code."""
    if body is None:
        raise DaemonUnreachable("the daemon closed the connection during the handshake")
    return calls.welcomed(framing.decode(framing.reply_decoder, body))


def cannot_connect(path: Path, err: BaseException) -> DaemonUnreachable:
    return DaemonUnreachable(f"cannot connect to the daemon on {path}: {err or 'timed out'}")


def unfinished(err: BaseException) -> DaemonUnreachable:
    return DaemonUnreachable(f"the daemon did not complete the handshake: {err or 'timed out'}")


def unreachable_after_start(path: Path, err: BaseException) -> DaemonUnreachable:
    return DaemonUnreachable(
        f"started a daemon but cannot reach it on {path} ({err or 'timed out'}); see {paths.log_path(path)}"
    )


def may_start(path: Path, allowed: bool) -> None:
    """Nobody listens on `path`: return if a daemon may be started, else the error that says how to start one."""
    if not allowed:
        raise autostart.not_listening(path) from None


# -- a call caught in the switch -------------------------------------------------

# The daemon's refusals of a call because it is going away.  Neither says for
# sure that the daemon never began the call: `daemon_restarting` answers a
# request that came while it drains (never begun) but also one still running
# when the drain's bound passed (cut short: an eval may have run part of its
# code); `daemon_stopping` likewise answers a request read ahead (never begun)
# and one cut short in flight (`Daemon._cut_short`).  So only a request that
# asks goes again; one that acts (NOT_RESENT) gets a clear "ask again".
SWITCH_CODES = (DaemonRestarting.code, DaemonStopping.code)


def resend(request: Request) -> bool:
    """Whether a request refused with one of SWITCH_CODES goes once more to the next daemon."""
    return not acts(request)


def caught(request: Request, refusal: HolsrvError, why: str) -> HolsrvError:
    """The answer for a call the switch caught and that is not, or no longer, sent again (`why`): the
    daemon's refusal (`daemon_restarting`, `daemon_stopping`: its code kept) saying to ask again."""
    if refusal.code == DaemonRestarting.code:
        message = f"the daemon was restarting during {type(request).__name__}; ask again in a moment ({why})"
    else:
        message = f"{refusal} ({why})"
    return error_for_code(refusal.code, message, refusal.detail)


def not_resent(request: Request, refusal: HolsrvError) -> HolsrvError:
    """A call that acts, refused as the daemon went away: not sent again, since it may have begun."""
    return caught(request, refusal, "not sent again: the daemon may have begun it")


def not_taken_again(request: Request, refusal: HolsrvError, dialled: HolsrvError) -> HolsrvError:
    """A call refused as the daemon went away, and no daemon to take it within the wait (`dialled`: why)."""
    return caught(request, refusal, f"no daemon took the call again within {switch_wait(refusal):g}s: {dialled}")


def lost_twice(why: object) -> DaemonUnreachable:
    """A call whose connection broke on the daemon that took over too."""
    return DaemonUnreachable(f"lost the connection to the daemon twice: {why}; see its log")


def switch_wait(refusal: HolsrvError | None) -> float:
    """How long to wait for a daemon to take the call again after `refusal` (None: the connection closed)."""
    return RESTART_WAIT_S if refusal is not None and refusal.code == DaemonRestarting.code else SWITCH_WAIT_S


def switch_of(err: HolsrvError) -> bool:
    """Whether a daemon's error says it is going away and did not answer (SWITCH_CODES)."""
    return err.code in SWITCH_CODES


# -- the blocking shell ----------------------------------------------------------------


def open_blocking(
    path: Path, name: str, settings: Mapping[str, str] | None, *, autostart_daemon: bool
) -> tuple[socket.socket, Welcome]:
    """A connection to the daemon on `path`, welcomed; a daemon started first if none listens and allowed.
    A daemon that refuses the hello because it is restarting is waited for (`redial_blocking`)."""
    try:
        return _opened(path, name, settings, autostart_daemon)
    except DaemonRestarting as refusal:
        deadline = time.monotonic() + switch_wait(refusal)
        return redial_blocking(path, name, settings, autostart_daemon=autostart_daemon, deadline=deadline)


def _opened(
    path: Path, name: str, settings: Mapping[str, str] | None, autostart_daemon: bool,
    hello_timeout: float = autostart.CONNECT_TIMEOUT_S,
) -> tuple[socket.socket, Welcome]:
    try:
        return handshake_blocking(_timed(_dial(path), hello_timeout), name, settings)
    except NOBODY:
        may_start(path, autostart_daemon)
    autostart.start_daemon(path)
    try:
        return handshake_blocking(_timed(autostart.open_socket(path), hello_timeout), name, settings)
    except OSError as err:
        raise unreachable_after_start(path, err) from None


def _timed(sock: socket.socket, timeout: float) -> socket.socket:
    sock.settimeout(timeout)
    return sock


def _dial(path: Path) -> socket.socket:
    try:
        return autostart.open_socket(path)
    except NOBODY:
        raise
    except OSError as err:  # TimeoutError included: a daemon that does not take connections
        raise cannot_connect(path, err) from None


def handshake_blocking(
    sock: socket.socket, name: str, settings: Mapping[str, str] | None
) -> tuple[socket.socket, Welcome]:
    """Hello and welcome on a connected `sock`, within its own timeout; the socket closed on any failure."""
    try:
        sock.sendall(opening(name, settings))
        return sock, welcome_of(framing.recv_body(sock))
    except (OSError, FrameError) as err:
        sock.close()
        raise unfinished(err) from None
    except BaseException:
        sock.close()
        raise


def redial_blocking(
    path: Path, name: str, settings: Mapping[str, str] | None, *, autostart_daemon: bool, deadline: float
) -> tuple[socket.socket, Welcome]:
    """`open_blocking` again and again until a daemon welcomes us or `deadline` (time.monotonic) passes."""
    while True:
        try:
            # A connection made while a daemon restarts waits in the backlog for the successor: up to the deadline.
            return _opened(path, name, settings, autostart_daemon,
                           max(autostart.CONNECT_TIMEOUT_S, deadline - time.monotonic()))
        except (DaemonUnreachable, DaemonRestarting):
            if time.monotonic() >= deadline:
                raise
        time.sleep(REDIAL_PAUSE_S)  # a pause between attempts (see REDIAL_PAUSE_S), bounded by `deadline`


def gone_blocking(sock: socket.socket, deadline: float) -> None:
    """Wait (until `deadline`) for the daemon to close `sock`, as it closes every connection when it
    restarts: a connection made before that could reach the daemon that is going away."""
    try:
        while time.monotonic() < deadline:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            if not sock.recv(65536):
                return
    except OSError:
        return
