"""The open connections: who may connect, room for a newcomer, and ending them all at shutdown.

Connections from any other user are refused (defence in depth behind the
socket's 0600).  One client process keeps at most `max_idle_per_peer` idle
connections, and at `max_connections` the oldest idle connection makes
room, told why in a frame.  Each connection is then served on its own
(`connection`), so a client waiting on a slow file never delays another.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time

from holsrv import facilities
from holsrv.config.settings import Settings
from holsrv.errors import FrameError, HolsrvError, PeerRefused, ServerBusy
from holsrv.rpc import framing
from holsrv.rpc import messages as m
from holsrv.serve.connection import RECEIVE_BUFFER, Answer, AtOnce, Attach, Connection, Unresponsive

log = logging.getLogger(__name__)


class Connections:
    """Every open connection, by the task serving it; `serve` is the server's callback for a new one.

    `answer` answers a request (`at_once` first, if given: a reply with nothing awaited, or None);
    `stopping` set: each ends after the reply it is working on.
    """

    def __init__(
        self, settings: Settings, answer: Answer, stopping: asyncio.Event,
        at_once: AtOnce | None = None, attach: Attach | None = None,
    ) -> None:
        self.settings = settings
        self._answer = answer
        self._at_once = at_once
        self._attach = attach  # serves an editor's channel (`holctl lsp`)
        self._stopping = stopping
        self._tasks: set[asyncio.Task] = set()  # every connection's, until it ends
        self._open: dict[asyncio.Task, Connection] = {}  # less those closed to make room
        self._frames = framing.Budget(settings.frame_budget_mb * 1024 * 1024)
        # Connections from any other user are refused (defence in depth
        # behind the socket's 0600); a test may pretend to be someone else.
        self.owner_uid = os.getuid()

    def __len__(self) -> int:
        return len(self._open)

    def clients(self) -> list[str]:
        """The name each welcomed connection's hello gave (`holctl`, `holmcp`, `holctl lsp`, ...)."""
        return [conn.client for conn in self._open.values() if conn.client is not None]

    @property
    def tasks(self) -> set[asyncio.Task]:
        """The tasks serving connections, those closed to make room included until they end."""
        return set(self._tasks)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn = self._open[task] = Connection(reader, writer, self.settings, self._frames, self._stopping,
                                             self._at_once)
        try:
            if await self._admitted(task, conn):
                await conn.converse(self._answer, self._attach)
        except Unresponsive as err:
            conn.warn("dropped a connection: %s", err)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away; whatever it started carries on
        except asyncio.CancelledError:
            # The drain (`cut_short`) cancels a connection, and so does its caller hanging up
            # mid-call (`_caller_gone`).  Ending normally keeps asyncio's
            # stream callback from logging the cancellation as an error.
            pass
        except Exception:
            log.exception("connection failed")
        finally:
            self._tasks.discard(task)
            self._open.pop(task, None)
            conn.close()

    def close_idle(self) -> None:
        """Close every connection waiting for a request: there is nothing to answer on it."""
        for conn in list(self._open.values()):
            if conn.idle_since is not None:
                conn.writer.close()

    def cut_short(self, reply: m.ErrorReply) -> None:
        """Send `reply` on every connection still open and cancel the call it is working on."""
        frame = framing.encode(reply)
        for task in list(self._tasks):
            conn = self._open.get(task)
            if conn is not None:
                with contextlib.suppress(Exception):  # a transport already closing
                    conn.writer.write(frame)
            task.cancel()

    def answering(self) -> int:
        """Connections working on a request (not idle between requests, not an editor's channel)."""
        return sum(1 for conn in self._open.values() if conn.idle_since is None and not conn.editor)

    def close_all(self, reply: m.ErrorReply) -> None:
        """End every connection (the daemon restarts in place): an idle one or an editor's closed,
        one still working on a request sent `reply` and its call cancelled.  A client whose
        connection closes opens a new one, which waits in the socket's backlog for the successor."""
        for task in list(self._tasks):
            conn = self._open.get(task)
            if conn is None or conn.editor or conn.idle_since is not None:
                if conn is not None:
                    conn.writer.close()
                continue
            with contextlib.suppress(Exception):  # a transport already closing
                conn.writer.write(framing.encode(reply))
            task.cancel()

    # -- admission -------------------------------------------------------------

    async def _admitted(self, task: asyncio.Task, conn: Connection) -> bool:
        """True if the connection may go on to its hello; if not, it was told why."""
        if await self._refused_peer(conn):
            return False
        self._limit_peer(task, conn)
        if len(self._open) > self.settings.max_connections and not self._close_oldest_idle(task):
            err = ServerBusy(
                f"the daemon has {len(self._open) - 1} connections open (HOLSRV_MAX_CONNECTIONS="
                f"{self.settings.max_connections}), all busy with requests; try again in a moment"
            )
            await self._refuse(conn, err)
            return False
        return True

    async def _refused_peer(self, conn: Connection) -> bool:
        """True, after an error frame and a WARNING line, if the peer runs as another user."""
        peer = _peer_credentials(conn.writer)
        conn.peer = None if peer is None else peer[0]
        if peer is None or peer[1] == self.owner_uid:
            return False
        pid, uid = peer
        log.warning("refused a connection from pid %s, uid %d: this daemon serves uid %d only",
                    "unknown" if pid is None else pid, uid, self.owner_uid)
        await conn.send(m.ErrorReply(PeerRefused.code, (
            f"this holsrv daemon belongs to uid {self.owner_uid} and serves no other user (you are uid {uid}). "
            "Use a daemon of your own: leave HOLSRV_SOCKET unset, or point it at a path in a directory of yours."
        )))
        # Take the hello the client is sending: closing with it unread would
        # reset the connection, and the client might never read why.
        with contextlib.suppress(TimeoutError, OSError):
            async with asyncio.timeout(self.settings.hello_timeout_s):
                await conn.reader.read(RECEIVE_BUFFER)
        return True

    async def _refuse(self, conn: Connection, err: HolsrvError) -> None:
        """Answer the hello with `err`: an error sent before the client wrote its hello could
        reach it as a broken pipe instead."""
        conn.idle_since = None  # not a connection to close for room: it is leaving
        log.warning("refused a connection: %s", err)
        with contextlib.suppress(FrameError, TimeoutError):
            async with asyncio.timeout(self.settings.hello_timeout_s):
                await framing.read_body(conn.reader, budget=self._frames)
        await conn.send(m.ErrorReply(err.code, str(err)))

    def _limit_peer(self, newcomer: asyncio.Task, conn: Connection) -> None:
        """Keep the newcomer's process within its idle connections, closing its own oldest idle one."""
        if conn.peer is None:
            return
        now = time.monotonic()
        idle = sum(
            1 for t, c in self._open.items() if t is not newcomer and c.peer == conn.peer and _closable_idle(c, now)
        )
        if idle >= self.settings.max_idle_per_peer:
            self._close_oldest_idle(newcomer, peer=conn.peer)

    def _close_oldest_idle(self, newcomer: asyncio.Task, peer: int | None = None) -> bool:
        """Close the connection idle longest (of process `peer`, if given), with a frame saying
        why, to make room; False if none is idle."""
        # A process's own limit spares its connections in use a moment ago; the daemon's
        # takes any idle one rather than refuse the newcomer.
        now, grace = time.monotonic(), peer is not None
        idle = [
            (c.idle_since, t) for t, c in self._open.items()
            if t is not newcomer and c.idle_since is not None and (peer is None or c.peer == peer)
            and (not grace or _closable_idle(c, now))
        ]
        if not idle:
            return False
        since, task = min(idle, key=lambda pair: pair[0] or 0.0)
        conn = self._open.pop(task)
        limit = (
            f"{self.settings.max_idle_per_peer} idle connections per client process" if peer is not None
            else f"{self.settings.max_connections} connections at most"
        )
        message = (
            f"the daemon closed this connection, idle for {time.monotonic() - since:.0f}s, to make room for a new "
            f"one ({limit}): open a new connection for the next call"
        )
        log.info("%s", message)
        with contextlib.suppress(HolsrvError):
            conn.writer.write(framing.encode(m.ErrorReply("connection_closed", message)))
        conn.writer.close()  # its task then sees the end of the stream and ends
        return True


def _closable_idle(conn: Connection, now: float) -> bool:
    """Idle, and so closable to make room for a newcomer of its own process: waiting for its next
    request for `idle_grace_s` or more.  A client busy on many connections at once leaves each idle
    for a moment between a reply and its next request (or its welcome and its first): that one is in use."""
    return conn.idle_since is not None and now - conn.idle_since >= conn.settings.idle_grace_s


def _peer_credentials(writer: asyncio.StreamWriter) -> tuple[int | None, int] | None:
    """(pid, uid) of the process at the other end (`facilities.peer_credentials`); None where unknown."""
    sock = writer.get_extra_info("socket")
    return None if sock is None else facilities.peer_credentials(sock)
