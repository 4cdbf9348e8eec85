"""The daemon: a Unix-socket server that hands each request to the dispatch table.

One connection may carry many requests, answered in order, one at a time;
connections are independent, so a client waiting on a slow file never
delays another.

No client can hold the others up: the loop yields between the requests of
one connection, a connection's unread input is bounded (the stream limit,
then the kernel's buffer pushes back on the client), a frame begun must be
finished within `frame_timeout_s`, a reply taken within `send_timeout_s`,
and at `max_connections` the oldest idle connection makes room.  A
malformed connection is logged once, at WARNING, in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import logging
import os
import signal
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path

from holsrv import __version__
from holsrv.answers.common import Context
from holsrv.cache import AnswerCache
from holsrv.connection import RECEIVE_BUFFER, Connection, Unresponsive
from holsrv.dispatch import Dispatch
from holsrv.errors import (
    AlreadyRunning,
    DaemonStopping,
    FrameError,
    HolsrvError,
    PeerRefused,
    ServerBusy,
)
from holsrv.pool import Pool, wait_all
from holsrv.rpc import framing, paths
from holsrv.rpc import messages as m
from holsrv.settings import Settings

log = logging.getLogger(__name__)

# How often the daemon checks that its socket file is still there (someone may
# delete it; clients would then start a daemon that cannot run while we do).
SOCKET_CHECK_S = 2.0
# How often an idle-exit daemon looks whether it is idle (at most; a tiny
# idle_exit_s looks more often).
IDLE_CHECK_S = 5.0


class Daemon:
    def __init__(self, settings: Settings, listener: socket.socket | None = None) -> None:
        """`listener`: the listening socket systemd passed (socket activation); its path wins over settings'."""
        if listener is not None:
            named = Path(listener.getsockname())
            if named != settings.socket:
                settings = dataclasses.replace(settings, socket=named,
                                               sources={**settings.sources, "socket": "systemd socket activation"})
        self.settings = settings
        # Under socket activation the socket file is systemd's: it made it, it
        # removes it, and it keeps listening between daemons.
        self._listener = listener
        self.pool = Pool(settings)
        self.cache = AnswerCache(settings.cache_entries)
        self.answers = Context(self.pool, self.cache, settings)
        self.started = time.monotonic()
        self.stopping = asyncio.Event()
        self.dispatch = Dispatch(self.answers, self.stopping, self.started)
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task] = set()
        self._open: dict[asyncio.Task, Connection] = {}
        self._frames = framing.Budget(settings.frame_budget_mb * 1024 * 1024)
        # Connections from any other user are refused (defence in depth
        # behind the socket's 0600); a test may pretend to be someone else.
        self.owner_uid = os.getuid()
        self._force = asyncio.Event()  # a second signal: stop at once
        self._lock_fd: int | None = None
        self._socket_id: tuple[int, int] | None = None  # (device, inode) of the socket we bound
        self._watch: asyncio.Task | None = None
        self._idle: asyncio.Task | None = None

    async def start(self) -> None:
        """Take the socket's lock (refusing to start beside a live daemon), bind it, start duties."""
        path = self.settings.socket
        paths.private_dir(path.parent)
        self._lock()
        try:
            if self._listener is None:
                if _answers(path):  # a daemon too old to take the lock
                    raise AlreadyRunning(f"a holsrv daemon is already listening on {path}")
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()  # stale: nobody holds the lock, nobody answered on it
            killed = self.pool.reap_leftovers()
            if killed:
                log.warning("stopped %d HOL servers left by a previous daemon", killed)
            await self._bind()
        except BaseException:
            self._unlock()
            raise
        self.pool.start_background()
        if self._listener is None:
            self._watch = asyncio.create_task(self._watch_socket(), name="socket-watch")
        if self.settings.idle_exit_s > 0:
            self._idle = asyncio.create_task(self._exit_when_idle(), name="idle-exit")
        how = " (socket from systemd)" if self._listener is not None else ""
        log.info("holsrv %s listening on %s%s (pid %d)", __version__, path, how, os.getpid())

    def _lock(self) -> None:
        """Hold the socket's lock file for the daemon's whole life: one daemon per socket,
        even when its socket file is deleted."""
        lock = paths.lock_path(self.settings.socket)
        fd = paths.open_private(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            raise AlreadyRunning(
                f"another holsrv daemon (pid {holder or 'unknown'}) holds {lock}, so it serves "
                f"{self.settings.socket}; if that socket file was deleted, the daemon makes it again within "
                f"{SOCKET_CHECK_S:g}s. To replace the daemon, stop it first (`holctl shutdown`)."
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    async def _bind(self) -> None:
        """Listen on the socket path (0600), replacing the listener we had, if any; or serve
        the listening socket systemd passed."""
        path = self.settings.socket
        if self._listener is not None:
            # systemd set its mode (SocketMode=) and owns the file: serve only.
            server = await asyncio.start_unix_server(self._serve, sock=self._listener, limit=RECEIVE_BUFFER)
            self._socket_id = None
            self._server = server
            return
        old_umask = os.umask(0o177)
        try:
            server = await asyncio.start_unix_server(self._serve, path=str(path), limit=RECEIVE_BUFFER)
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)
        info = os.lstat(path)
        self._socket_id = (info.st_dev, info.st_ino)
        old, self._server = self._server, server
        if old is not None:
            old.close()  # bound to the deleted file: nobody can reach it any more

    async def _watch_socket(self) -> None:
        """Make the socket again if its file is deleted; stop if something else took its place."""
        path = self.settings.socket
        while True:
            await asyncio.sleep(SOCKET_CHECK_S)  # a periodic duty: one stat, not a synchronisation
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                log.warning("the socket %s was deleted: listening on a new one", path)
                try:
                    await self._bind()
                except OSError as err:
                    log.warning("cannot make the socket %s again (%s); trying again in %gs", path, err,
                                SOCKET_CHECK_S)
                continue
            except OSError:
                continue
            if (info.st_dev, info.st_ino) != self._socket_id:
                # Not ours to delete, and no client can reach us: hand over by stopping.
                log.warning("%s is no longer this daemon's socket (something replaced it): stopping", path)
                self.stopping.set()
                return

    async def _exit_when_idle(self) -> None:
        """Stop once there has been no HOL server and no client connection for `idle_exit_s`."""
        limit = self.settings.idle_exit_s
        period = min(IDLE_CHECK_S, limit / 2)
        busy_at = time.monotonic()
        while True:
            await asyncio.sleep(period)  # a periodic duty, as the socket watch: not a synchronisation
            now = time.monotonic()
            # A dead server stays in `sessions` until its file's next call: it is no reason to stay.
            if self._open or any(s.alive for s in self.pool.sessions.values()):
                busy_at = now
            elif now - busy_at >= limit:
                log.info("no HOL server and no client for %gs (idle_exit_s): exiting", limit)
                self.stopping.set()
                return

    async def run(self, ready: Callable[[], None] | None = None) -> None:
        """Serve until SIGTERM/SIGINT or a shutdown request, then drain and stop everything.

        A second signal while stopping cuts the drain short and kills the HOL servers.
        `ready` is called once the signals are caught: a SIGTERM sent as soon as
        the daemon says it is ready then stops it cleanly instead of killing it.
        """
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._signalled, sig)
        if ready is not None:
            ready()
        try:
            await self.stopping.wait()
            await self.close()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)

    def _signalled(self, sig: signal.Signals) -> None:
        if self.stopping.is_set():
            log.warning("%s again: stopping now (calls cancelled, HOL servers killed)", sig.name)
            self._force.set()
        else:
            log.info("%s: stopping", sig.name)
            self.stopping.set()

    async def close(self) -> None:
        """Drain, then stop, all within `stop_timeout_s` (uvicorn's graceful shutdown).

        No new connection or server is accepted; idle connections are closed;
        calls in flight get up to half the budget to finish, then are told
        `daemon_stopping`; the HOL servers get the rest.
        """
        loop = asyncio.get_running_loop()
        budget = self.settings.stop_timeout_s
        deadline = loop.time() + budget
        self.stopping.set()  # connections end after the reply they are working on
        self.pool.closing = True
        log.info("shutting down: %d connections, %d HOL servers", len(self._connections), len(self.pool.sessions))
        for duty in (self._watch, self._idle):
            if duty is not None and duty is not asyncio.current_task():
                duty.cancel()
        if self._server is not None:
            self._server.close()
        for conn in list(self._open.values()):
            if conn.idle_since is not None:
                conn.writer.close()  # waiting for a request: nothing to answer
        if not await wait_all(set(self._connections), budget / 2, self._force):
            self._cut_short(budget / 2)
        duties = [d for d in (self._watch, self._idle) if d is not None and d is not asyncio.current_task()]
        await asyncio.gather(*self._connections, *duties, return_exceptions=True)
        await self.pool.close(max(0.0, deadline - loop.time()), self._force)
        with contextlib.suppress(OSError):
            info = os.lstat(self.settings.socket)
            if (info.st_dev, info.st_ino) == self._socket_id:  # never another's file, nor systemd's
                self.settings.socket.unlink()
        self._unlock()
        log.info("stopped")

    def _cut_short(self, drained_s: float) -> None:
        """Tell every call still in flight that the daemon is stopping, and cancel it."""
        how = "was told twice to stop" if self._force.is_set() else f"waited {drained_s:g}s for calls to finish"
        message = (
            f"the daemon (pid {os.getpid()}) is shutting down and {how}, so it stopped this call before its "
            "answer. Nothing was lost on disk; call again: the next call starts a daemon (or reaches the "
            "one systemd restarts)."
        )
        log.warning("shutting down: ending %d calls still in flight with daemon_stopping", len(self._connections))
        frame = framing.encode(m.ErrorReply(DaemonStopping.code, message))
        for task in list(self._connections):
            conn = self._open.get(task)
            if conn is not None:
                with contextlib.suppress(Exception):  # a transport already closing
                    conn.writer.write(frame)
            task.cancel()

    # -- connections -----------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        conn = self._open[task] = Connection(reader, writer, self.settings, self._frames, self.stopping)
        try:
            if await self._admitted(task, conn):
                await conn.converse(self.dispatch.answer)
        except Unresponsive as err:
            conn.warn("dropped a connection: %s", err)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away; whatever it started carries on
        except asyncio.CancelledError:
            # close() cancels a connection, and so does its caller hanging up
            # mid-call (`_caller_gone`).  Ending normally keeps asyncio's
            # stream callback from logging the cancellation as an error.
            pass
        except Exception:
            log.exception("connection failed")
        finally:
            self._connections.discard(task)
            self._open.pop(task, None)
            conn.close()

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
        log.warning("refused a connection from pid %d, uid %d: this daemon serves uid %d only",
                    pid, uid, self.owner_uid)
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
        idle = sum(
            1 for t, c in self._open.items() if t is not newcomer and c.peer == conn.peer and c.idle_since is not None
        )
        if idle >= self.settings.max_idle_per_peer:
            self._close_oldest_idle(newcomer, peer=conn.peer)

    def _close_oldest_idle(self, newcomer: asyncio.Task, peer: int | None = None) -> bool:
        """Close the connection idle longest (of process `peer`, if given), with a frame saying
        why, to make room; False if none is idle."""
        idle = [
            (c.idle_since, t) for t, c in self._open.items()
            if t is not newcomer and c.idle_since is not None and (peer is None or c.peer == peer)
        ]
        if not idle:
            return False
        since, task = min(idle, key=lambda pair: pair[0])
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


def _peer_credentials(writer: asyncio.StreamWriter) -> tuple[int, int] | None:
    """(pid, uid) of the process at the other end (Linux SO_PEERCRED); None where unknown."""
    sock = writer.get_extra_info("socket")
    option = getattr(socket, "SO_PEERCRED", None)
    if sock is None or option is None:
        return None
    try:
        pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    except OSError:
        return None
    return pid, uid


def _answers(path) -> bool:
    """True if something accepts connections on `path` (a live daemon)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(2.0)
    try:
        sock.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        sock.close()
