"""One blocking connection to the daemon: connect (starting it if allowed), hello, call, close.

Imports only the standard library and msgspec (a test checks), so a CLI call
costs milliseconds.  If no daemon answers, `connect` starts one detached
(`autostart`).  holmcp's asyncio client (`holsrv.rpc.aclient`) shares the
call protocol (`calls`) and the daemon start with it.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from holsrv.errors import DaemonUnreachable, FrameError
from holsrv.rpc import framing, paths
from holsrv.rpc.autostart import not_listening, open_socket, start_daemon
from holsrv.rpc.calls import hello, reply_timeout, result_of, welcomed
from holsrv.rpc.messages import Progress, Request, Result, Welcome


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
        return _handshake(open_socket(path), name, settings)
    except (FileNotFoundError, ConnectionRefusedError):
        if not autostart:
            raise not_listening(path) from None
    start_daemon(path)
    try:
        return _handshake(open_socket(path), name, settings)
    except OSError as err:
        raise DaemonUnreachable(
            f"started a daemon but cannot reach it on {path} ({err}); see {paths.log_path(path)}"
        ) from None


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
