"""The asyncio client holmcp keeps: daemon connections reused across calls, one per call in flight.

Why one connection per call in flight, from a small pool, rather than many
calls multiplexed on one connection: the daemon answers the requests of a
connection in order, one at a time, so a hover would queue behind a 25 s
diagnostics; and a call abandoned mid-reply (an MCP cancel) would leave its
reply on the connection for the next caller to misread.  Here a call that
ends with its reply hands the connection back to the idle pool; one that is
cancelled, times out or fails closes it.  The daemon carries on with an
abandoned request (giving up waiting never cancels) and its reply goes
nowhere.

Connections die when the daemon restarts, and a busy daemon closes the
connections idle longest (saying so in a `connection_closed` frame).  An
idle one seen closed is dropped before use; a call whose connection breaks
before its reply is sent once more on a new connection (starting a daemon
if allowed) unless the request acts rather than asks (`NOT_RESENT`) and
the daemon may have read it.

The blocking helper (`holsrv.rpc.client`) stays for holctl, which must not
import asyncio; this module shares its hello, welcome check, reply timeouts
and daemon start.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from holsrv.errors import DaemonUnreachable, FrameError
from holsrv.rpc import autostart, calls, framing, paths
from holsrv.rpc.messages import ErrorReply, Eval, Progress, Reply, Request, Restart, Result, Shutdown, Stop, Welcome

# Requests whose reply may be lost after the daemon acted on them: eval runs
# the user's code, restart and stop act on a server, shutdown on the daemon.
# Sending one twice could run it twice, so a broken connection is reported
# instead.  Every other request only asks (retryCompile at most re-queues a
# compile of a blocked file), so it is sent again once.
NOT_RESENT = (Eval, Restart, Stop, Shutdown)
# Idle connections kept for the next calls; more in flight at once are opened
# as needed and closed when they end, so a burst leaves no sockets behind.
MAX_IDLE = 4
# The frame a daemon sends on an idle connection it closes to make room for others.
CONNECTION_CLOSED = "connection_closed"

ProgressHandler = Callable[[Progress], Awaitable[None]]


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    welcome: Welcome

    def usable(self) -> bool:
        """False once the daemon closed it (it restarted) or we did."""
        return not (self.reader.at_eof() or self.writer.is_closing())

    def close(self) -> None:
        self.writer.close()


class _Broken(Exception):
    """The connection failed before the reply came; `unread`: the daemon surely never read the request."""

    def __init__(self, why: str, *, unread: bool = False) -> None:
        super().__init__(why)
        self.unread = unread


class AsyncClient:
    """Calls to the daemon on `socket` from one event loop; `call` is safe to run concurrently."""

    def __init__(
        self,
        socket: Path | None = None,
        *,
        name: str,
        autostart: bool = True,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self.socket = socket or paths.default_socket()
        self.name = name
        self.autostart = autostart
        self.settings = dict(calls.given_settings() if settings is None else settings)
        self._idle: list[_Connection] = []
        self._starting = asyncio.Lock()

    async def call(self, request: Request, on_progress: ProgressHandler | None = None) -> tuple[Result, Welcome]:
        """Send `request`; return its result and the Welcome of the daemon that answered.

        Progress frames go to `on_progress` as they come.  A daemon error is
        raised as its HolsrvError; a daemon that cannot be reached, or that
        does not answer within `calls.reply_timeout`, as DaemonUnreachable.
        """
        conn = await self._take()
        try:
            return await self._exchange(conn, request, on_progress)
        except _Broken as broken:
            if isinstance(request, NOT_RESENT) and not broken.unread:
                raise DaemonUnreachable(
                    f"lost the connection to the daemon during {type(request).__name__} ({broken}); it may or "
                    "may not have acted: check with status before sending it again"
                ) from None
        # The daemon restarted (or broke the stream): once more, on a new connection.
        conn = await self._open()
        try:
            return await self._exchange(conn, request, on_progress)
        except _Broken as broken:
            raise DaemonUnreachable(f"lost the connection to the daemon twice: {broken}; see its log") from None

    async def aclose(self) -> None:
        """Close the idle connections (calls in flight close their own)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        for conn in idle:
            with contextlib.suppress(OSError):
                await conn.writer.wait_closed()

    async def _exchange(
        self, conn: _Connection, request: Request, on_progress: ProgressHandler | None
    ) -> tuple[Result, Welcome]:
        limit = calls.reply_timeout(request, conn.welcome)
        reply = None
        try:
            async with asyncio.timeout(limit):
                reply = await self._ask(conn, request, on_progress)
        except TimeoutError:
            raise DaemonUnreachable(
                f"the daemon did not answer within {limit:.0f}s; it carries on, ask again"
            ) from None
        finally:
            # Anything but a whole reply (cancel, timeout, a broken stream)
            # leaves the stream mid-frame or a reply still to come: never reuse it.
            if reply is not None and len(self._idle) < MAX_IDLE and conn.usable():
                self._idle.append(conn)
            else:
                conn.close()
        return calls.result_of(request, reply), conn.welcome

    async def _ask(self, conn: _Connection, request: Request, on_progress: ProgressHandler | None) -> Reply:
        """The frame that ends the call (a result or an error); progress frames go to `on_progress`."""
        try:
            conn.writer.write(framing.encode(request))
            await conn.writer.drain()
        except OSError as err:
            # A Unix socket either takes the bytes for the peer or refuses
            # them (EPIPE: the daemon closed it): a refused request was never read.
            raise _Broken(str(err) or type(err).__name__, unread=True) from None
        try:
            while True:
                body = await framing.read_body(conn.reader)
                if body is None:
                    raise _Broken("the daemon closed the connection without answering")
                reply = framing.decode(framing.reply_decoder, body)
                if isinstance(reply, ErrorReply) and reply.code == CONNECTION_CLOSED:
                    # The daemon closed this connection while it was idle in
                    # our pool (to make room), before our request came.
                    raise _Broken(reply.message, unread=True)
                if not isinstance(reply, Progress):
                    return reply
                if on_progress is not None:
                    await on_progress(reply)
        except (OSError, FrameError) as err:
            raise _Broken(str(err) or type(err).__name__) from None

    async def _take(self) -> _Connection:
        while self._idle:
            conn = self._idle.pop()
            if conn.usable():
                return conn
            conn.close()
        return await self._open()

    async def _open(self) -> _Connection:
        try:
            return await self._handshake()
        except (FileNotFoundError, ConnectionRefusedError):
            if not self.autostart:
                raise autostart.not_listening(self.socket) from None
        async with self._starting:
            # Starting blocks on a lock file and the daemon's ready line: in a
            # thread, so other calls go on.  Rare: once per daemon lifetime.
            await asyncio.to_thread(autostart.start_daemon, self.socket)
        try:
            return await self._handshake()
        except OSError as err:
            raise DaemonUnreachable(
                f"started a daemon but cannot reach it on {self.socket} ({err}); see {paths.log_path(self.socket)}"
            ) from None

    async def _handshake(self) -> _Connection:
        """A new connection, welcomed; FileNotFoundError or ConnectionRefusedError when nobody listens."""
        paths.checked_socket(self.socket)  # SocketPathTooLong: no daemon can listen there
        try:
            async with asyncio.timeout(autostart.CONNECT_TIMEOUT_S):
                reader, writer = await asyncio.open_unix_connection(str(self.socket), limit=framing.MAX_FRAME)
        except (FileNotFoundError, ConnectionRefusedError):
            raise
        except OSError as err:  # TimeoutError included
            raise DaemonUnreachable(f"cannot connect to the daemon on {self.socket}: {err or 'timed out'}") from None
        try:
            async with asyncio.timeout(autostart.CONNECT_TIMEOUT_S):
                writer.write(framing.encode(calls.hello(self.name, self.settings)))
                await writer.drain()
                body = await framing.read_body(reader)
            if body is None:
                raise DaemonUnreachable("the daemon closed the connection during the handshake")
            return _Connection(reader, writer, calls.welcomed(framing.decode(framing.reply_decoder, body)))
        except (OSError, FrameError) as err:
            writer.close()
            raise DaemonUnreachable(f"the daemon did not complete the handshake: {err or 'timed out'}") from None
        except BaseException:
            writer.close()
            raise
