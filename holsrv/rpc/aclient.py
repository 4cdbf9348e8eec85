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
before its reply, or that the daemon refuses because it is restarting, is
sent once more on a new connection (starting a daemon if allowed) when that
is safe (`connecting.resend`): not a request that acts (`NOT_RESENT`) that
the daemon may have read.

The blocking helper (`holsrv.rpc.client`) stays for holctl, which must not
import asyncio; connecting, the hello, the welcome check and the decisions
on a restart are `connecting`'s (the I/O `aconnecting`'s), shared with it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from holsrv.errors import DaemonUnreachable, FrameError, HolsrvError, error_for_code
from holsrv.rpc import aconnecting, calls, connecting, framing, paths
from holsrv.rpc.messages import ErrorReply, Progress, Reply, Request, Result, Welcome

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


class _Switch(Exception):
    """The daemon refused the request because it is going away (`connecting.SWITCH_CODES`); it has
    closed the connection, or `deadline` passed waiting for it to."""

    def __init__(self, err: HolsrvError, deadline: float) -> None:
        super().__init__(str(err))
        self.err = err
        self.deadline = deadline


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
        refusal: HolsrvError | None = None  # the daemon's, if it refused the call as it went away
        conn = await self._take()
        try:
            return await self._exchange(conn, request, on_progress)
        except _Broken as broken:
            if connecting.acts(request) and not broken.unread:
                raise connecting.lost_during(request, broken) from None
            deadline = asyncio.get_running_loop().time() + connecting.switch_wait(None)
        except _Switch as switch:
            if not connecting.resend(request):
                raise connecting.not_resent(request, switch.err) from None
            refusal, deadline = switch.err, switch.deadline
        # The daemon restarted (or broke the stream): once more, on a new connection.
        try:
            conn = await self._reopen(deadline)
        except HolsrvError as err:
            if refusal is None:
                raise  # the connection broke, and no daemon is there now: what the dial found
            raise connecting.not_taken_again(request, refusal, err) from None
        try:
            return await self._exchange(conn, request, on_progress)
        except _Broken as broken:
            raise connecting.lost_twice(broken) from None
        except _Switch as switch:
            raise connecting.caught(request, switch.err, "refused twice") from None

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
            # leaves the stream mid-frame or a reply still to come: never reuse
            # it; nor one whose daemon said it is going away.
            if reply is not None and len(self._idle) < MAX_IDLE and conn.usable() and not _going(reply):
                self._idle.append(conn)
            elif not _going(reply):
                conn.close()
        if _going(reply):
            assert isinstance(reply, ErrorReply)
            refusal = error_for_code(reply.code, reply.message, reply.detail)
            deadline = asyncio.get_running_loop().time() + connecting.switch_wait(refusal)
            try:
                if connecting.resend(request):
                    # A connection made before the daemon closes ours could reach the one going away.
                    await aconnecting.gone_async(conn.reader, deadline)
            finally:
                conn.close()
            raise _Switch(refusal, deadline)
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
        return _Connection(*await aconnecting.open_async(
            self.socket, self.name, self.settings, autostart_daemon=self.autostart, start=self._start))

    async def _reopen(self, deadline: float) -> _Connection:
        """A new connection once a daemon takes one again (it restarted), by `deadline` (the loop's time)."""
        return _Connection(*await aconnecting.redial_async(
            self.socket, self.name, self.settings, autostart_daemon=self.autostart, deadline=deadline,
            start=self._start))

    async def _start(self, path: Path) -> None:
        async with self._starting:
            # Starting blocks on a lock file and the daemon's ready line: in a
            # thread, so other calls go on.  Rare: once per daemon lifetime.
            await aconnecting.start_in_thread(path)


def _going(reply: Reply | None) -> bool:
    """Whether `reply` is the daemon's word that it is going away and did not answer (connecting.SWITCH_CODES)."""
    return isinstance(reply, ErrorReply) and reply.code in connecting.SWITCH_CODES
