"""The daemon's life: lock, bind (or take systemd's socket), serve, drain, stop.

One daemon per socket, held by a lock file; the socket is made again if
its file is deleted, and the daemon steps aside if another file takes its
place.  It stops on SIGTERM/SIGINT, a shutdown request or, if asked, when
idle, draining calls in flight within `stop_timeout_s`.  What it serves is
`connections`' (who may connect, and each connection's requests) and
`dispatch`'s (which module answers a request).
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
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from holsrv import __version__
from holsrv.answers import diagnostics
from holsrv.answers.cache import AnswerCache
from holsrv.answers.common import Context
from holsrv.answers.goals.prefetch import Prefetches
from holsrv.config import metricslisten
from holsrv.config.settings import ConfigError, Settings
from holsrv.disk import files
from holsrv.dispatch import Dispatch
from holsrv.errors import AlreadyRunning, DaemonRestarting, DaemonStopping, RestartFailed, SocketPathTooLong
from holsrv.metrics.endpoint import Endpoint
from holsrv.pool import handover
from holsrv.pool.pool import Pool
from holsrv.pool.stopping import wait_all
from holsrv.rpc import messages as m
from holsrv.rpc import paths
from holsrv.serve.connection import RECEIVE_BUFFER
from holsrv.serve.connections import Connections
from holsrv.serve.editorchannel import serve

log = logging.getLogger(__name__)

# How often the daemon checks that its socket file is still there (someone may
# delete it; clients would then start a daemon that cannot run while we do).
SOCKET_CHECK_S = 2.0
# How often an idle-exit daemon looks whether it is idle (at most; a tiny
# idle_exit_s looks more often).
IDLE_CHECK_S = 5.0
# Restarting in place (docs/design.md, Handover): calls in flight get this long to finish (then they
# are answered `daemon_restarting`), and the HOL servers this long more to have no request to HOL in
# flight (a server still busy then is stopped, and its file's next call starts a fresh one).
RESTART_DRAIN_S = 5.0
RESTART_QUIET_S = 3.0


class Daemon:
    def __init__(self, settings: Settings, listener: socket.socket | None = None,
                 handover_fd: int | None = None) -> None:
        """`listener`: the listening socket systemd passed (socket activation); its path wins over settings'.
        `handover_fd`: the document of the daemon this process was before its `exec` (`restart-daemon`)."""
        # What this process was before its `exec`, if it was a daemon: read first, since systemd's socket,
        # if it passed one, is among what it kept (the variables that named it are gone).
        self._handed: tuple[handover.Document | None, str] | None = None
        self._inherited = handover.Inherited()
        if handover_fd is not None:
            document, why_not, self._inherited = handover.read(handover_fd)
            self._handed = (document, why_not)
            if self._inherited.systemd and self._inherited.listener is not None:
                listener = _inherited_socket(self._inherited.listener)
        self.settings = settings = _activated(settings, listener)
        # Under socket activation the socket file is systemd's: it made it, it
        # removes it, and it keeps listening between daemons.
        self._listener = listener
        # Each object gets what it needs when made, bottom up.  Three needs point up, and are given as
        # callbacks that look their object up when called (never during this constructor): the pool
        # computes an answer ahead with the answers (made on the pool) and times Holmake into the
        # metrics (made by the dispatch); the connections hand requests to the dispatch (made on the
        # connections, whose clients its metrics count).  Each pair needs the other, and the lower
        # one cannot import the upper.
        self.pool = Pool(settings, ahead=lambda session, script: diagnostics.ahead(self.answers, session, script),
                         holmake_timed=lambda seconds: self.dispatch.metrics.holmake_seconds.observe(seconds))
        self.cache = AnswerCache(settings.cache_entries)
        self.answers = Context(self.pool, self.cache, settings, files.Reader(vouch=self.pool.scriptwatch.vouch),
                               prefetches=Prefetches(settings.prefetch_per_pass))
        self.started = time.monotonic()
        self.stopping = asyncio.Event()
        self.connections = Connections(
            settings, lambda request, client, report: self.dispatch.answer(request, client, report), self.stopping,
            lambda request, client: self.dispatch.at_once(request, client), partial(serve, self.answers),
        )
        self.dispatch = Dispatch(self.answers, self.stopping, self.started, self.connections.clients,
                                 restart=self._restart_asked)
        self._server: asyncio.AbstractServer | None = None
        self.metrics_endpoint: Endpoint | None = None  # `/metrics` over HTTP, if metrics_listen says where
        self._force = asyncio.Event()  # a second signal: stop at once
        self._lock_fd: int | None = None
        self._socket_id: tuple[int, int] | None = None  # (device, inode) of the socket we bound
        self._watch: asyncio.Task | None = None
        self._idle: asyncio.Task | None = None
        # Restarting in place: asked (by `restart-daemon` or SIGHUP), and what this process was before.
        self.restarting = asyncio.Event()
        self._restart_began = 0.0
        self.restarts = 0
        self._hup_task: asyncio.Future | None = None

    async def start(self) -> None:
        """Take the socket's lock (refusing to start beside a live daemon), bind it, start duties."""
        path = self.settings.socket
        try:
            listen = metricslisten.parse(self.settings.metrics_listen)
            if self._listener is None:  # systemd's socket is bound already
                paths.checked_socket(path)
        except (ValueError, SocketPathTooLong) as err:
            raise ConfigError(str(err)) from None
        paths.private_dir(path.parent)
        self._lock_fd = self._inherited.lock if self._inherited.lock is not None else _lock(path)
        os.set_inheritable(self._lock_fd, False)
        try:
            if listen is not None:  # first: a port taken stops the start before any client can connect
                self.metrics_endpoint = Endpoint(listen, self.dispatch.metrics.text)
                await self.metrics_endpoint.start()
            if self._handed is not None and self._inherited.listener is not None:
                await self._adopt(*self._handed)
            else:
                await self._take_socket()
        except BaseException:
            if self.metrics_endpoint is not None:
                self.metrics_endpoint.close()
            self._unlock()
            raise
        self.pool.start_background()
        if self._listener is None:
            self._watch = asyncio.create_task(self._watch_socket(), name="socket-watch")
        if self.settings.idle_exit_s > 0:
            self._idle = asyncio.create_task(self._exit_when_idle(), name="idle-exit")
        how = " (socket from systemd)" if self._listener is not None else ""
        log.info("holsrv %s listening on %s%s (pid %d)", __version__, path, how, os.getpid())

    async def _take_socket(self) -> None:
        """With the lock held: clear a stale socket file, stop a dead daemon's HOL servers, bind."""
        path = self.settings.socket
        if self._listener is None:
            if _answers(path):  # a daemon too old to take the lock
                raise AlreadyRunning(f"a holsrv daemon is already listening on {path}")
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # stale: nobody holds the lock, nobody answered on it
        killed = self.pool.reap_leftovers()
        if killed:
            log.warning("stopped %d HOL servers left by a previous daemon", killed)
        await self._bind()

    async def _adopt(self, document: handover.Document | None, why_not: str) -> None:
        """This process was the daemon before its `exec`: adopt the servers it handed over, then serve
        the listening socket it kept (clients that connected meanwhile wait in its backlog)."""
        assert self._inherited.listener is not None
        sock = self._listener if self._listener is not None else _inherited_socket(self._inherited.listener)
        handover.test_stop("before-adoption")
        adoption = await handover.adopt(self.pool, document, why_not, self._inherited)
        # Before any child of ours starts: every child not adopted is the predecessor's, left over.
        handover.kill_strays({s.pid for s in adoption.adopted if s.pid is not None})
        self.restarts = self._inherited.restarts
        began = self._inherited.began
        took = time.monotonic() - began if began is not None else 0.0
        self.dispatch.last_restart = {"restarts": self.restarts, "at": time.time(), "took": took,
                                      "adopted": len(adoption.adopted), "not_adopted": len(adoption.notes)}
        log.info("restarted in place in %.2fs (holsrv %s -> %s): adopted %d HOL servers, %d start fresh",
                 took, adoption.from_version or "?", __version__, len(adoption.adopted), len(adoption.notes))
        if self._listener is not None:  # systemd's: serve it as before the restart
            await self._bind()
            return
        self._server = await asyncio.start_unix_server(self.connections.serve, sock=sock, limit=RECEIVE_BUFFER)
        with contextlib.suppress(OSError):
            info = os.lstat(self.settings.socket)
            self._socket_id = (info.st_dev, info.st_ino)

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    async def _bind(self) -> None:
        """Listen on the socket path (0600), replacing the listener we had, if any; or serve
        the listening socket systemd passed."""
        if self._listener is not None:
            # systemd set its mode (SocketMode=) and owns the file: serve only.
            server = await asyncio.start_unix_server(self.connections.serve, sock=self._listener, limit=RECEIVE_BUFFER)
            self._socket_id = None
            self._server = server
            return
        server = await self._listen()
        old, self._server = self._server, server
        if old is not None:
            old.close()  # bound to the deleted file: nobody can reach it any more

    async def _listen(self) -> asyncio.Server:
        """A server on a new socket file at the socket path, readable by us alone; remembers which file."""
        path = self.settings.socket
        # Bound and listening under a private name first, then linked into place:
        # a client that sees the socket file can connect at once (bind makes the
        # file before listen, and a client in between is refused), and a file
        # that appeared at the path meanwhile is never replaced.
        staging = path.with_name(f".{os.getpid()}.s")
        with contextlib.suppress(FileNotFoundError):
            staging.unlink()  # ours: the pid is this process's
        old_umask = os.umask(0o177)
        try:
            server = await asyncio.start_unix_server(self.connections.serve, path=str(staging), limit=RECEIVE_BUFFER)
        finally:
            os.umask(old_umask)
        try:
            os.chmod(staging, 0o600)
            os.link(staging, path)
        except OSError:
            server.close()
            raise
        finally:
            with contextlib.suppress(FileNotFoundError):
                staging.unlink()
        info = os.lstat(path)
        self._socket_id = (info.st_dev, info.st_ino)
        return server

    async def _watch_socket(self) -> None:
        """Make the socket again if its file is deleted (and the log file, if it went with it);
        stop if something else took the socket's place."""
        path = self.settings.socket
        while True:
            await asyncio.sleep(SOCKET_CHECK_S)  # a periodic duty: one stat, not a synchronisation
            _logs_made_again()  # first: what follows is logged where `holctl logs --daemon` looks
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                await self._make_again()
                continue
            except OSError:
                continue
            if (info.st_dev, info.st_ino) != self._socket_id:
                # Not ours to delete, and no client can reach us: hand over by stopping.
                log.warning("%s is no longer this daemon's socket (something replaced it): stopping", path)
                self.stopping.set()
                return

    async def _make_again(self) -> None:
        path = self.settings.socket
        log.warning("the socket %s was deleted: listening on a new one", path)
        try:
            await self._bind()
        except OSError as err:
            log.warning("cannot make the socket %s again (%s); trying again in %gs", path, err, SOCKET_CHECK_S)

    async def _exit_when_idle(self) -> None:
        """Stop once there has been no HOL server and no client connection for `idle_exit_s`."""
        limit = self.settings.idle_exit_s
        period = min(IDLE_CHECK_S, limit / 2)
        busy_at = time.monotonic()
        while True:
            await asyncio.sleep(period)  # a periodic duty, as the socket watch: not a synchronisation
            now = time.monotonic()
            # A dead server stays in `sessions` until its file's next call: it is no reason to stay.
            if self.connections or self.dispatch.jobs.running() or any(s.alive for s in self.pool.sessions.values()):
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
        `restart-daemon` or SIGHUP restarts it in place (`_restart`), which returns only if it failed.
        """
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._signalled, sig)
        loop.add_signal_handler(signal.SIGHUP, self._hup)
        if ready is not None:
            ready()
        try:
            while not self.stopping.is_set():
                stop = asyncio.ensure_future(self.stopping.wait())
                restart = asyncio.ensure_future(self.restarting.wait())
                await asyncio.wait({stop, restart}, return_when=asyncio.FIRST_COMPLETED)
                stop.cancel()
                restart.cancel()
                if self.restarting.is_set() and not self.stopping.is_set():
                    await self._restart()
            await self.close()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.remove_signal_handler(sig)

    def _signalled(self, sig: signal.Signals) -> None:
        if self.stopping.is_set():
            log.warning("%s again: stopping now (calls cancelled, HOL servers killed)", sig.name)
            self._force.set()
        else:
            log.info("%s: stopping", sig.name)
            self.stopping.set()

    # -- restarting in place (docs/design.md, Handover) ---------------------------

    def _hup(self) -> None:
        """SIGHUP (`systemctl --user reload holsrv`): restart in place, as `restart-daemon` does."""
        log.info("SIGHUP: restarting in place, keeping the HOL servers")

        async def restart() -> None:
            try:
                await self._restart_asked()
            except Exception as err:  # noqa: BLE001 - logged: nobody else would hear it
                log.warning("SIGHUP: not restarting: %s", err)

        self._hup_task = asyncio.ensure_future(restart())

    async def _restart_asked(self) -> m.RestartDaemonResult:
        """Check that the code now installed can start, then have `run` restart in place."""
        if self.stopping.is_set():
            raise DaemonStopping("the daemon is shutting down; it does not restart")
        if self.restarting.is_set():
            raise DaemonRestarting()
        began = time.monotonic()
        try:
            version = await handover.check_successor()
        except (RuntimeError, OSError) as err:
            log.warning("not restarting: %s; serving on", err)
            raise RestartFailed(f"the daemon did not restart and serves on as before: {err}") from None
        self._restart_began = began
        self.dispatch.restarting = True  # from now on new requests are told `daemon_restarting`
        self.restarting.set()
        servers = len(self.pool.live())
        return m.RestartDaemonResult(
            servers=servers, version=version, pid=os.getpid(), restarts=self.restarts,
            message=f"holsrv (pid {os.getpid()}) restarts in place as holsrv {version}, handing over {servers} "
                    "HOL servers",
        )

    async def _restart(self) -> None:
        """Drain, hand the servers over in a document, and `exec` this process anew.  Returns only if
        the `exec` failed, the daemon then serving on."""
        loop = asyncio.get_running_loop()
        log.info("restarting in place: %d connections, %d HOL servers", len(self.connections), len(self.pool.sessions))
        # New connections wait in the socket's backlog from now on, for the successor.
        sockets = getattr(self._server, "sockets", None) or []
        listening = self._listener if self._listener is not None else (sockets[0] if sockets else None)
        listener_fd = os.dup(listening.fileno()) if listening is not None else None
        if self._server is not None:
            self._server.close()
        for duty in (self._watch, self._idle):
            if duty is not None:
                duty.cancel()
        deadline = loop.time() + RESTART_DRAIN_S
        while (self.dispatch.in_flight or self.connections.answering()) and loop.time() < deadline:
            await asyncio.sleep(0.02)  # a bounded drain of the calls in flight, which end on their own
        self.pool.handing_over = True
        self.connections.close_all(m.ErrorReply(DaemonRestarting.code, (
            f"the daemon is restarting to hand its servers over and waited {RESTART_DRAIN_S:g}s for this call, "
            "which it stopped before its answer; ask again in a moment")))
        await wait_all(self.connections.tasks, 2.0)
        await self.dispatch.close(1.0)  # jobs still running: cancelled, their callers have gone
        await self.answers.prefetches.close()
        await self.pool.builds.close()
        self.pool.duties.cancel()
        await self.pool.replacer.close()
        extra = self.pool.replacer.sessions()
        await asyncio.gather(*(s.stop("the daemon restarted") for s in extra), return_exceptions=True)
        deadline = loop.time() + RESTART_QUIET_S
        while loop.time() < deadline and not all(
                s.lsp is None or s.lsp.quiet() for s in self.pool.sessions.values() if s.alive):
            await asyncio.sleep(0.02)  # a bounded wait for replies HOL still owes
        fresh: dict[str, str] = {}
        for session in [s for s in self.pool.sessions.values() if s.alive and s.lsp is not None
                        and not s.lsp.quiet()]:
            fresh[str(session.path)] = (f"it still had a request to HOL in flight after {RESTART_QUIET_S:g}s, "
                                        "so it was stopped")
            await self.pool.stop_session(session, "the daemon restarted while it was busy")
        for session in [s for s in self.pool.sessions.values() if s.alive and s.starting]:
            fresh[str(session.path)] = "it was still starting when the daemon restarted, so it was stopped"
            await self.pool.stop_session(session, "the daemon restarted while it started")
        if self.stopping.is_set():  # SIGTERM or shutdown during the drain: stop instead (`run` closes)
            log.info("told to stop while restarting: stopping instead")
            if listener_fd is not None:
                os.close(listener_fd)
            return
        # From here to the `exec`, nothing awaits: no byte is read from a server after its state is taken.
        self._exec(listener_fd, fresh)
        # The `exec` failed: serve on as before.
        self.dispatch.restarting = self.pool.handing_over = self.pool.builds.closing = False
        self.restarting.clear()
        if listener_fd is not None:
            self._server = await asyncio.start_unix_server(self.connections.serve, sock=_inherited_socket(listener_fd),
                                                           limit=RECEIVE_BUFFER)
        self.pool.start_background()
        if self._listener is None:
            self._watch = asyncio.create_task(self._watch_socket(), name="socket-watch")

    def _exec(self, listener_fd: int | None, fresh: dict[str, str]) -> None:
        """Write the handover document and `exec`; returns only if that failed (the servers handed back)."""
        inherited = handover.Inherited(listener_fd, self._listener is not None, self._lock_fd)
        live = [s for s in self.pool.sessions.values() if s.alive]
        document, handed = handover.document(live, self.pool.history, fresh, __version__, self._restart_began,
                                             inherited, self.restarts + 1)
        for session in live:
            if session not in handed and session.pid is not None:  # not quiet after all: not left behind
                with contextlib.suppress(OSError):  # the successor reaps it (`handover.kill_strays`)
                    os.killpg(session.pid, signal.SIGKILL)
        fd = None
        try:
            for held in (listener_fd, self._lock_fd):
                if held is not None:
                    os.set_inheritable(held, True)
            fd = handover.write(document)
            handover.test_kill(document)
            handover.test_stop("before-exec")
            argv = handover.successor_argv(fd, self.settings.idle_exit_s)
            log.info("handing over %d HOL servers (%d start fresh): exec %s", len(handed), len(document.fresh),
                     " ".join(argv))
            for handler in logging.getLogger().handlers:
                handler.flush()
            handover.test_exec_fails()
            os.execv(argv[0], argv)
        except OSError as err:
            log.error("could not restart in place (%s): serving on with the same servers", err)
            self.dispatch.failed_restarts += 1
            self.dispatch.restart_failed = f"the exec failed ({err}); the daemon served on with its servers"
            if fd is not None:
                os.close(fd)
            if self._lock_fd is not None:
                os.set_inheritable(self._lock_fd, False)
            for session in handed:
                session.handed_back()

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
        log.info("shutting down: %d connections, %d HOL servers", len(self.connections.tasks), len(self.pool.sessions))
        for duty in (self._watch, self._idle):
            if duty is not None and duty is not asyncio.current_task():
                duty.cancel()
        if self._server is not None:
            self._server.close()
        if self.metrics_endpoint is not None:
            self.metrics_endpoint.close()
        self.connections.close_idle()
        if not await wait_all(self.connections.tasks, budget / 2, self._force):
            self._cut_short(budget / 2)
        duties = [d for d in (self._watch, self._idle) if d is not None and d is not asyncio.current_task()]
        await asyncio.gather(*self.connections.tasks, *duties, self.dispatch.close(budget / 4), return_exceptions=True)
        await self.answers.prefetches.close()
        await self.answers.head_notes.close()
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
        log.warning("shutting down: ending %d calls still in flight with daemon_stopping",
                    len(self.connections.tasks))
        self.connections.cut_short(m.ErrorReply(DaemonStopping.code, message))


def _inherited_socket(fd: int) -> socket.socket:
    """The listening socket a daemon kept across its `exec`, no longer to be inherited."""
    sock = socket.socket(fileno=fd)
    os.set_inheritable(fd, False)
    sock.setblocking(False)
    return sock


def _logs_made_again() -> None:
    """Make the daemon's log file again if it was deleted under it (a socket directory deleted
    with the log in it, then made again): one fstat a check, and a line on what was lost."""
    for handler in logging.getLogger().handlers:
        make_again = getattr(handler, "make_again", None)  # `main._PrivateLog`: the --log-file
        if make_again is not None and make_again():
            log.warning("the log file %s was deleted while this daemon (pid %d) ran: made it again; "
                        "what was logged before is lost", getattr(handler, "baseFilename", "?"), os.getpid())


def _lock(socket_path: Path) -> int:
    """Take the socket's lock file, to hold for the daemon's whole life: one daemon per socket,
    even when its socket file is deleted.  Its file descriptor; closing it lets go."""
    lock = paths.lock_path(socket_path)
    fd = paths.open_private(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        raise AlreadyRunning(
            f"another holsrv daemon (pid {holder or 'unknown'}) holds {lock}, so it serves "
            f"{socket_path}; if that socket file was deleted, the daemon makes it again within "
            f"{SOCKET_CHECK_S:g}s. To replace the daemon, stop it first (`holctl shutdown`)."
        ) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _activated(settings: Settings, listener: socket.socket | None) -> Settings:
    """`settings` with the socket systemd passed, if it passed one at another path."""
    if listener is not None:
        named = Path(listener.getsockname())
        if named != settings.socket:
            settings = dataclasses.replace(settings, socket=named,
                                           sources={**settings.sources, "socket": "systemd socket activation"})
    return settings


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
