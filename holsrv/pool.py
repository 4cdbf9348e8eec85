"""Sessions by script: at most `max_servers` of them, LRU and idle eviction,
restart after death with backoff, memory watch, and no leftovers.

A server is *busy* while a call waits on it or a proof of its file is still
checking (a probably-looping proof does not count).  Busy servers are never
stopped to make room or for idleness.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import signal
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from holsrv import files, looping
from holsrv.errors import HolsrvError, ServerBusy, ServerDied
from holsrv.rpc import paths
from holsrv.session import Session
from holsrv.settings import Settings

log = logging.getLogger(__name__)

# A server that dies sooner than this after starting counts as a fast death.
FAST_DEATH_S = 30.0


@dataclass
class Lease:
    """A session handed to one call, with how it came to be running."""

    session: Session
    start: str  # "warm" | "started" | "restarted"
    note: str = ""
    stderr_tail: str = ""  # of the previous server, when it died


@dataclass
class _History:
    """What the pool remembers about a file across its sessions."""

    max_heap_mb: int | None = None
    fast_deaths: int = 0
    retry_at: float = 0.0
    last_exit: str = ""
    last_tail: str = ""
    restarts: int = 0


class Pool:
    def __init__(self, settings: Settings, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.clock = clock
        self.sessions: OrderedDict[Path, Session] = OrderedDict()
        self._history: dict[Path, _History] = {}
        self._locks: dict[Path, asyncio.Lock] = {}
        # Held while counting servers and adding one, so two files cannot both
        # take the last free place.
        self._room_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task] = []
        self._stopping: set[asyncio.Task] = set()  # evictions in progress
        self._record = paths.servers_record(settings.socket)

    # -- leases ----------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lease(self, path: Path, client: str) -> AsyncIterator[Lease]:
        """The running session for `path` (started if needed), marked busy meanwhile."""
        lock = self._locks.setdefault(path, asyncio.Lock())
        async with lock:
            lease = await self._running(path)
            lease.session.waiting += 1
        session = lease.session
        session.clients.add(client)
        self.sessions.move_to_end(path)
        try:
            yield lease
        finally:
            session.waiting -= 1
            session.last_used = self.clock()

    async def _running(self, path: Path) -> Lease:
        session = self.sessions.get(path)
        if session is not None and session.alive:
            return Lease(session, "warm")
        history = self._history.setdefault(path, _History())
        # Before forgetting the old session, so the call after the backoff
        # still says what happened to it.
        self._check_backoff(path, history)
        start, note, tail = "started", "", ""
        if session is not None:  # it died, or the daemon stopped it
            self.sessions.pop(path, None)
            start = "restarted"
            note = self._restart_note(session)
            tail = session.tail(10) if session.dead else ""
        hol = self.settings.hol_command()  # no HOL: fail before stopping anyone for room
        async with self._room_lock:
            await self._make_room()
            session = self._new_session(path, history, hol)
            self.sessions[path] = session
        # The start runs on its own: a caller whose wait ends first gives up
        # waiting, not the start (loading a heap can take minutes).
        session.start_task = asyncio.create_task(self._start(session), name=f"start-{path.name}")
        # Whoever waits sees a failed start; this keeps an unwatched one from
        # being logged as "never retrieved".
        session.start_task.add_done_callback(lambda t: t.cancelled() or t.exception())
        history.restarts += start == "restarted"
        return Lease(session, start, note, tail)

    async def _start(self, session: Session) -> None:
        try:
            await session.start()
        finally:
            self._write_record()
        # Open the file at once, so it compiles even if the caller that started
        # this server gave up waiting; the next call finds it further along.
        try:
            script = files.read(str(session.path))
            await session.sync(script.data, script.text)
        except (HolsrvError, OSError) as err:
            # The start itself succeeded; the next call syncs (or reports) the file.
            log.info("not opening %s in its new server: %s", session.path, err)

    def _restart_note(self, old: Session) -> str:
        if old.dead:
            return f"started a new HOL server: the previous one died ({old.exit_reason})"
        return f"started a new HOL server: the previous one was stopped ({old.stop_reason or 'by the daemon'})"

    def _check_backoff(self, path: Path, history: _History) -> None:
        wait = history.retry_at - self.clock()
        if wait > 0:
            raise ServerDied(
                f"the HOL server for {path.name} died {history.fast_deaths} times in a row "
                f"soon after starting ({history.last_exit}); not restarting for another "
                f"{math.ceil(wait)}s. Read the stderr tail below, fix the cause, then ask again.",
                detail=history.last_tail,
            )

    def _new_session(self, path: Path, history: _History, hol: str) -> Session:
        heap = self.settings.max_heap_mb if history.max_heap_mb is None else history.max_heap_mb
        return Session(
            path,
            self.settings,
            hol,
            heap,
            on_exit=self._exited,
            clock=self.clock,
        )

    def _exited(self, session: Session) -> None:
        """Called the moment a server process exits, for whatever reason."""
        self._write_record()
        if not session.dead:
            return
        history = self._history.setdefault(session.path, _History())
        history.last_exit, history.last_tail = session.exit_reason, session.tail()
        if self.clock() - session.started_at < FAST_DEATH_S:
            history.fast_deaths += 1
            # The first death restarts at once; repeats back off exponentially.
            if history.fast_deaths > 1:
                delay = min(
                    self.settings.restart_backoff_max_s,
                    self.settings.restart_backoff_s * 2 ** (history.fast_deaths - 2),
                )
                history.retry_at = self.clock() + delay
        else:
            history.fast_deaths = 0

    # -- limits ------------------------------------------------------------------

    def busy(self, session: Session) -> bool:
        if session.waiting > 0 or session.starting:
            return True
        now = self.clock()
        file = session.file
        # A compile that has gone silent for this long is not coming back.
        if file.phase == "compiling" and now - file.last_event < self.settings.compile_silence_s:
            return True
        return any(
            not looping.probably_looping(session.file, entry, now, self.settings)
            for entry in session.file.checking()
        )

    async def _make_room(self) -> None:
        alive = [s for s in self.sessions.values() if s.alive]
        if len(alive) < self.settings.max_servers:
            return
        for victim in alive:  # least recently used first
            if not self.busy(victim):
                log.info("stopping %s (pid %s) to make room", victim.path, victim.pid)
                # Counted as gone at once; stopped outside the caller's lock,
                # since a stuck server can take a while to stop.
                victim.mark_stopping("to make room for another file: at most "
                                     f"{self.settings.max_servers} servers run at once")
                task = asyncio.create_task(self.stop_session(victim, victim.stop_reason))
                self._stopping.add(task)
                task.add_done_callback(self._stopping.discard)
                return
        raise ServerBusy(
            f"all {self.settings.max_servers} HOL servers are busy "
            f"({', '.join(s.path.name for s in alive)}); ask again when one finishes, free one "
            "with `restart FILE` (or by fixing a proof that loops), or raise HOLSRV_MAX_SERVERS"
        )

    async def stop_session(self, session: Session, reason: str = "stopped by the daemon") -> None:
        await session.stop(reason)
        self._write_record()

    async def restart(self, path: Path, max_heap_mb: int | None) -> int | None:
        """Stop `path`'s server (if any) and start a fresh one; returns the old pid."""
        history = self._history.setdefault(path, _History())
        if max_heap_mb is not None:
            history.max_heap_mb = max_heap_mb
        history.fast_deaths, history.retry_at = 0, 0.0
        lock = self._locks.setdefault(path, asyncio.Lock())
        async with lock:
            old = self.sessions.pop(path, None)
            old_pid = old.pid if old else None
            if old is not None:
                await self.stop_session(old, "restart requested")
            await self._running(path)
        return old_pid

    def restarts(self, path: Path) -> int:
        history = self._history.get(path)
        return history.restarts if history else 0

    # -- background duties ---------------------------------------------------

    def start_background(self) -> None:
        idle_period = max(0.05, min(self.settings.idle_timeout_s / 4, 30.0))
        self._tasks = [
            asyncio.create_task(self._every(idle_period, self._reap_idle), name="idle-reaper"),
            asyncio.create_task(self._every(self.settings.memory_sample_s, self._sample_memory), name="memory"),
        ]

    async def _every(self, period: float, duty: Callable[[], Awaitable[None]]) -> None:
        """Run `duty` every `period` seconds for the daemon's life; a failure is logged, not fatal."""
        while True:
            await asyncio.sleep(period)  # a periodic duty, not a synchronisation
            try:
                await duty()
            except Exception:
                log.exception("background duty %s failed; it runs again in %.1fs", duty.__name__, period)

    async def _reap_idle(self) -> None:
        now = self.clock()
        for session in list(self.sessions.values()):
            idle = now - session.last_used
            if session.alive and idle >= self.settings.idle_timeout_s and not self.busy(session):
                log.info("stopping %s (pid %s): idle for %.0fs", session.path, session.pid, idle)
                await self.stop_session(session, f"idle for {idle:.0f}s")

    async def _sample_memory(self) -> None:
        for session in list(self.sessions.values()):
            # On the loop, not in a thread: a few /proc reads, and the daemon
            # must stay single-threaded because children are spawned with a
            # preexec_fn (unsafe to fork from a process with threads).
            mb = session.footprint_mb()
            session.footprint = mb
            if mb is not None and mb > self.settings.soft_footprint_mb:
                log.warning("SERVER LARGE: %s (pid %s) uses %.0f MB", session.path, session.pid, mb)

    async def close(self) -> None:
        """Stop every server (in parallel, each with its own escalation)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._stopping, return_exceptions=True)
        await asyncio.gather(
            *(s.stop("the daemon is shutting down") for s in self.sessions.values()), return_exceptions=True
        )
        self.sessions.clear()
        self._write_record()

    # -- leftovers -------------------------------------------------------------

    def _write_record(self) -> None:
        """Record live servers' pids with their start times, for the next daemon."""
        entries = []
        for session in self.sessions.values():
            created = session.proc.create_time()
            if created is not None:
                entries.append({"pid": session.pid, "create_time": created})
        tmp = self._record.with_suffix(".tmp")
        with contextlib.suppress(OSError):
            tmp.write_text(json.dumps(entries))
            os.replace(tmp, self._record)

    def reap_leftovers(self) -> int:
        """Kill servers a previous daemon on this socket left behind; returns how many."""
        try:
            entries = json.loads(self._record.read_text())
        except (OSError, ValueError):
            return 0
        killed = 0
        for entry in entries:
            try:
                proc = psutil.Process(int(entry["pid"]))
                # A reused pid has another start time: never kill that.
                if abs(proc.create_time() - float(entry["create_time"])) > 0.01:
                    continue
                log.warning("stopping HOL server pid %d left by a previous daemon", proc.pid)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                killed += 1
            except (psutil.Error, KeyError, ValueError, TypeError):
                continue
        self._write_record()
        return killed
