"""One blocking connection to the daemon: connect (starting it if allowed), hello, call, close.

Imports only the standard library and msgspec (a test checks), so a CLI call
costs milliseconds.  If no daemon answers, `connect` starts one detached
(`autostart`).  Connecting, the hello and what a call caught in a daemon's
restart does are `connecting`'s, shared with holmcp's asyncio client
(`holsrv.rpc.aclient`) and the editor bridge; the call protocol is `calls`.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from holsrv.errors import DaemonUnreachable, HolsrvError
from holsrv.rpc import connecting, framing, paths
from holsrv.rpc.autostart import open_socket, start_daemon
from holsrv.rpc.calls import hello, reply_timeout, result_of
from holsrv.rpc.messages import Progress, Request, Result, Welcome

# Re-exported: the daemon's tests speak the wire through this module.
__all__ = ["Client", "connect", "hello", "open_socket", "paths", "start_daemon"]

# Dials the daemon again, by a deadline (time.monotonic), for a call caught in its restart.
Redial = Callable[[float], "tuple[socket.socket, Welcome]"]


class _Broken(Exception):
    """The connection failed before the reply came; `unread`: the daemon surely never read the request."""

    def __init__(self, why: str, *, unread: bool = False) -> None:
        super().__init__(why)
        self.unread = unread


class Client:
    """One connection to the daemon; `call` sends a request and returns its reply.

    A call caught in a restart of the daemon (its refusal `daemon_restarting`,
    or the connection closed before the reply) is sent once more on a new
    connection when that is safe (`connecting.resend`), if the client knows
    how to dial again (`redial`).
    """

    def __init__(self, sock: socket.socket, welcome: Welcome, redial: Redial | None = None) -> None:
        self._sock = sock
        self.welcome = welcome
        self._redial = redial

    def reply_timeout(self, request: Request) -> float:
        """How long `call` waits for `request`'s reply unless told: from this daemon's limits."""
        return reply_timeout(request, self.welcome)

    def call(
        self, request: Request, timeout: float | None = None, on_progress: Callable[[Progress], None] | None = None
    ) -> Result:
        """Send `request`, wait up to `timeout` s (default `reply_timeout`) for its reply; raise on an ErrorReply.

        `Progress` frames that come first (a request with `progress=True`) go to `on_progress`.
        """
        refusal: HolsrvError | None = None  # the daemon's, if it refused the call as it went away
        try:
            return self._exchange(request, timeout, on_progress)
        except _Broken as broken:
            if connecting.acts(request) and not broken.unread:
                raise connecting.lost_during(request, broken) from None
            if self._redial is None:
                raise DaemonUnreachable(f"{broken}; see its log") from None
            deadline = time.monotonic() + connecting.switch_wait(None)
        except HolsrvError as err:
            if not connecting.switch_of(err) or self._redial is None:
                raise
            if not connecting.resend(request):
                raise connecting.not_resent(request, err) from None
            refusal, deadline = err, time.monotonic() + connecting.switch_wait(err)
            connecting.gone_blocking(self._sock, deadline)  # the daemon closes it as it goes
        # The daemon restarted: once more, on a new connection to the one that took over.
        self._sock.close()
        try:
            self._sock, self.welcome = self._redial(deadline)
        except HolsrvError as err:
            if refusal is None:
                raise  # the connection broke, and no daemon is there now: what the dial found
            raise connecting.not_taken_again(request, refusal, err) from None
        try:
            return self._exchange(request, timeout, on_progress)
        except _Broken as broken:
            raise connecting.lost_twice(broken) from None
        except HolsrvError as err:
            if connecting.switch_of(err):
                raise connecting.caught(request, err, "refused twice") from None
            raise

    def _exchange(
        self, request: Request, timeout: float | None, on_progress: Callable[[Progress], None] | None
    ) -> Result:
        if timeout is None:
            timeout = self.reply_timeout(request)
        deadline = time.monotonic() + timeout
        try:
            self._sock.settimeout(timeout)
            self._sock.sendall(framing.encode(request))
        except TimeoutError:
            raise DaemonUnreachable(
                f"the daemon did not answer within {timeout:.0f}s; it carries on, ask again"
            ) from None
        except OSError as err:
            # A Unix socket either takes the bytes for the peer or refuses
            # them (EPIPE: the daemon closed it): a refused request was never read.
            raise _Broken(f"lost the connection to the daemon: {err}", unread=True) from None
        try:
            while True:
                # One deadline for the whole call, however many progress frames come.
                self._sock.settimeout(max(0.001, deadline - time.monotonic()))
                body = framing.recv_body(self._sock)
                if body is None:
                    raise _Broken("the daemon closed the connection without answering")
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
            raise _Broken(f"lost the connection to the daemon: {err}") from None

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

    def redial(deadline: float) -> tuple[socket.socket, Welcome]:
        return connecting.redial_blocking(path, name, settings, autostart_daemon=autostart, deadline=deadline)

    return Client(*connecting.open_blocking(path, name, settings, autostart_daemon=autostart), redial)


def _handshake(sock: socket.socket, name: str, settings: Mapping[str, str] | None) -> Client:
    """A Client on a connected `sock` (hello and welcome within its timeout); it does not dial again."""
    return Client(*connecting.handshake_blocking(sock, name, settings))

