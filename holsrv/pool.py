"""Sessions by script: at most `max_servers` of them, LRU and idle eviction,
restart after death with backoff, memory watch, and no leftovers.

A server is *busy* while a call waits on it or a proof of its file is still
checking (a probably-looping proof does not count).  Busy servers are never
stopped to make room or for idleness.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from holsrv import ancestors, builds, files, looping, process, reaping, stepping
from holsrv.errors import DaemonStopping, HolsrvError, MemoryBudget, ServerBusy, ServerDied
from holsrv.files import content_hash
from holsrv.replacement import Replacer
from holsrv.rpc import messages as m
from holsrv.rpc import paths
from holsrv.session import Session
from holsrv.settings import Settings
from holsrv.unblocking import Unblocker

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
    # The content hash of the text the last server died on: a different text
    # (the user fixed the proof that crashed it) restarts at once.
    died_on: str = ""


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
        self._stopping: dict[asyncio.Task, Session] = {}  # evictions in progress
        self._record = reaping.ServerRecord(paths.servers_record(settings.socket))
        self.closing = False  # the daemon is shutting down: no new servers
        self.builds = builds.Builds(settings.holmake_timeout_s, settings.holmake_tail_lines, clock)
        self.replacer = Replacer(self)  # servers whose ancestors were rebuilt, replaced in the background
        self.unblocker = Unblocker(self)  # blocked servers whose missing ancestors were built, retried

    # -- leases ----------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lease(self, path: Path, client: str, content: str = "") -> AsyncIterator[Lease]:
        """The running session for `path` (started if needed), marked busy meanwhile.

        `content` is the hash of the text the caller is about to send.
        """
        lock = self._locks.setdefault(path, asyncio.Lock())
        async with lock:
            lease = await self._running(path, content)
            lease.session.waiting += 1
        session = lease.session
        session.clients.add(client)
        self.sessions.move_to_end(path)
        try:
            yield lease
        finally:
            session.waiting -= 1
            session.last_used = self.clock()
            self.replacer.released(session)

    async def _running(self, path: Path, content: str = "") -> Lease:
        session = self.sessions.get(path)
        if session is not None and session.alive:
            return Lease(session, "warm")
        promoted = self.replacer.promote(path)
        if promoted is not None:
            return promoted
        history = self._history.setdefault(path, _History())
        # Before forgetting the old session, so the call after the backoff
        # still says what happened to it.
        self._check_backoff(path, history, content)
        start, note, tail = "started", "", ""
        if session is not None:  # it died, or the daemon stopped it
            self.sessions.pop(path, None)
            start = "restarted"
            note = self._restart_note(session)
            tail = session.tail(10) if session.dead else ""
        if self.closing:
            raise DaemonStopping(
                f"the daemon is shutting down, so it starts no HOL server for {path.name}; call again in a "
                "few seconds: the next call starts a new daemon."
            )
        hol = self.settings.hol_command()  # no HOL: fail before stopping anyone for room
        heap = self.settings.max_heap_mb if history.max_heap_mb is None else history.max_heap_mb
        async with self._room_lock:
            await self._make_room(path, heap)
            session = self._new_session(path, heap, hol)
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
        if self._stopping:
            # An evicted server's memory is free only once it has exited
            # (each stop is bounded by its escalation).
            await asyncio.wait(set(self._stopping))
        try:
            await session.start()
        finally:
            self._write_record()
        # Open the file at once, so it compiles even if the caller that started
        # this server gave up waiting; the next call finds it further along.
        try:
            script = await stepping.sliced(files.read_steps(str(session.path)))
            await session.sync(script.data, script.text, script.hash)
        except (HolsrvError, OSError) as err:
            # The start itself succeeded; the next call syncs (or reports) the file.
            log.info("not opening %s in its new server: %s", session.path, err)

    def _restart_note(self, old: Session) -> str:
        if old.dead:
            return f"started a new HOL server: the previous one died ({old.exit_reason})"
        return f"started a new HOL server: the previous one was stopped ({old.stop_reason or 'by the daemon'})"

    def _check_backoff(self, path: Path, history: _History, content: str) -> None:
        if content and history.died_on and content != history.died_on and history.retry_at:
            log.info("%s changed since its server died: restarting without the backoff", path)
            history.fast_deaths, history.retry_at = 0, 0.0
        wait = history.retry_at - self.clock()
        if wait > 0:
            raise ServerDied(
                f"the HOL server for {path.name} died {history.fast_deaths} times in a row "
                f"soon after starting ({history.last_exit}); not restarting for another "
                f"{math.ceil(wait)}s. Read the stderr tail below and fix the cause: a changed file restarts at once.",
                detail=history.last_tail,
            )

    def _new_session(self, path: Path, heap: int, hol: str) -> Session:
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
        history.died_on = content_hash(session.data) if session.data is not None else ""
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

    async def _make_room(self, path: Path, heap_mb: int) -> None:
        """Room for one more server with heap cap `heap_mb`: at most max_servers, and
        within the memory budget; idle servers are stopped for it, least recently used first."""
        alive = self.live()
        if len(alive) >= self.settings.max_servers:
            victim = next((s for s in alive if not self.busy(s)), None)
            if victim is None:
                raise ServerBusy(
                    f"all {self.settings.max_servers} HOL servers are busy: "
                    f"{'; '.join(f'{s.path} ({self._why_busy(s)})' for s in alive)}. Ask again when one "
                    "finishes, or free one with `stop FILE` (its checks are abandoned; the next call about it "
                    "starts it again), or raise HOLSRV_MAX_SERVERS and restart the daemon."
                )
            self._evict(victim, f"to make room for another file: at most {self.settings.max_servers} servers "
                        "run at once")
        self._make_memory_room(path, heap_mb)

    def _make_memory_room(self, path: Path, heap_mb: int) -> None:
        budget = self.settings.memory_budget_mb
        if budget <= 0:
            return
        need = self._cap_mb(heap_mb)
        alive = self.live()
        busy = [s for s in alive if self.busy(s)]
        held_busy = sum(self.reserved_mb(s) for s in busy)
        # A lone server may always run: its own heap cap is what bounds it.
        if held_busy and held_busy + need > budget:
            raise MemoryBudget(
                f"starting a HOL server for {path.name} needs {need} MB (its heap cap) of the memory budget "
                f"of {budget} MB, but {held_busy:.0f} MB are held by busy servers: "
                + "; ".join(f"{s.path} ({self.reserved_mb(s):.0f} MB, {self._why_busy(s)})" for s in busy)
                + ". Free memory with `stop FILE` on one of them (its checks are abandoned), or give one a "
                "smaller heap with `restart FILE --max-heap-mb N`, or raise HOLSRV_MEMORY_BUDGET_MB and "
                "restart the daemon."
            )
        held = sum(self.reserved_mb(s) for s in alive)
        for victim in (s for s in alive if s not in busy):  # least recently used first
            if not held or held + need <= budget:
                return
            held -= self.reserved_mb(victim)
            self._evict(victim, f"to free memory for {path.name}: the memory budget is {budget} MB")

    def _evict(self, victim: Session, reason: str) -> None:
        log.info("stopping %s (pid %s) %s", victim.path, victim.pid, reason)
        # Counted as gone at once; stopped outside the caller's lock, since a
        # stuck server can take a while to stop.  The new server starts once
        # it has (see `_start`).
        victim.mark_stopping(reason)
        task = asyncio.create_task(self.stop_session(victim, reason))
        self._stopping[task] = victim
        task.add_done_callback(lambda t: self._stopping.pop(t, None))

    def _cap_mb(self, heap_mb: int) -> int:
        # A server without a heap cap is counted at the soft footprint (LARGE).
        return heap_mb if heap_mb > 0 else self.settings.soft_footprint_mb

    def reserved_mb(self, session: Session) -> float:
        """What a server counts against the memory budget: its heap cap, or its footprint when larger."""
        return max(float(self._cap_mb(session.max_heap_mb)), session.footprint or 0.0)

    def memory_held_mb(self) -> float:
        """The running servers' share of the memory budget, for status."""
        return sum(self.reserved_mb(s) for s in self.live())

    def live(self) -> list[Session]:
        """Every running server: the files' ones, and those replacing them or replaced (see `replacement`)."""
        return [s for s in (*self.sessions.values(), *self.replacer.sessions()) if s.alive]

    def _why_busy(self, session: Session) -> str:
        if session.starting:
            return "starting"
        if session.waiting:
            return f"{session.waiting} call(s) waiting on it"
        if session.phase == "compiling":
            return "compiling"
        return "checking " + ", ".join(e.name for e in session.file.checking())

    async def stop_session(self, session: Session, reason: str = "stopped by the daemon") -> None:
        if self.sessions.get(session.path) is session:
            await self.replacer.drop(session.path, reason)
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
            await self.replacer.drop(path, "restart requested")
            old = self.sessions.pop(path, None)
            old_pid = old.pid if old else None
            if old is not None:
                await self.stop_session(old, "restart requested")
            await self._running(path)
        return old_pid

    def last_words(self, path: Path) -> tuple[str, str]:
        """(how the file's last server died, the tail of its stderr); empty if none died."""
        history = self._history.get(path)
        return (history.last_exit, history.last_tail) if history is not None else ("", "")

    def restarts(self, path: Path) -> int:
        history = self._history.get(path)
        return history.restarts if history else 0

    # -- rebuilt ancestors (see `replacement`) ---------------------------------

    async def synced(self, session: Session, script: files.Script) -> None:
        """A call synced `script` to `session`: replace the server if its ancestors were rebuilt,
        retry its compile if it was blocked on ancestors built since."""
        await self.replacer.synced(session, script)
        if self.sessions.get(session.path) is session:
            self.unblocker.notice(session)

    def rebuilt_reasons(self, path: Path, session: Session | None = None) -> list[str]:
        """The part of `stale_reasons` about rebuilt ancestors, which diagnostics also lists among
        its warnings (with the advice: wait for the replacement, or restart)."""
        return self.replacer.stale_reasons(path, session)

    def stale_reasons(self, path: Path, session: Session | None = None) -> list[str]:
        """Why answers about the script `path` (from `session`, default its current server)
        may be stale, one sentence each.

        The one place that knows every such reason: an ancestor rebuilt after
        the server loaded it (being replaced in the background, or, without
        room for that, to restart), a build a blocked compile was missing whose
        retry is pending (`unblocking`), a Holmake running where its theories are built.
        """
        reasons = self.rebuilt_reasons(path, session)
        current = session or self.sessions.get(path)
        if current is not None:
            reasons += self.unblocker.reasons(current)
        if self.builds.running:  # the Holmakefile is read only while some Holmake runs
            for build in self.builds.running_in(ancestors.include_dirs(path.parent)):
                reasons.append(
                    f"Holmake running in {build.directory} (for {self.clock() - build.started:.0f}s): theories "
                    "this file loads may change under it; ask again when it has finished"
                )
        return reasons

    def snapshot(self, session: Session, now: float) -> m.SessionStatus:
        """`session` as status shows it, with its background replacement if one is under way."""
        return self.replacer.status(session, session.snapshot(now, self.restarts(session.path)), now)

    def status_rows(self, now: float) -> list[m.SessionStatus]:
        """Status's rows: the files' servers, but not those the daemon stopped, which hold nothing.

        A stopped session stays in `sessions` only so that the next call can say why it starts a new one.
        """
        stopped = process.ProcessState.STOPPED
        return [self.snapshot(s, now) for s in self.sessions.values() if s.proc.state is not stopped]

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
        for session in self.live():
            # On the loop, not in a thread: a few /proc reads, and the daemon
            # must stay single-threaded because children are spawned with a
            # preexec_fn (unsafe to fork from a process with threads).
            mb = session.footprint_mb()
            session.footprint = mb
            await asyncio.sleep(0)  # each server's /proc walk in a turn of its own: others are answered between
            if mb is not None and mb > self.settings.soft_footprint_mb:
                log.warning("SERVER LARGE: %s (pid %s) uses %.0f MB", session.path, session.pid, mb)
                if session.bloated_by_trial:
                    self.shed_bloat(session)

    def shed_bloat(self, session: Session, by_trial: bool = False) -> tuple[bool, str]:
        """The one decision: a server that a trial pushed past the soft footprint is
        replaced in the background once it is idle (Poly/ML never gives a grown heap
        back, so only a fresh server sheds it).  `by_trial`: the caller is the trial
        that may have done it; its footprint is sampled afresh.

        Returns whether a successor is on its way, and what an answer should say
        ("" when the server is not bloated).
        """
        if by_trial and session.alive:
            session.footprint = session.footprint_mb()
        mb, soft = session.footprint, self.settings.soft_footprint_mb
        if mb is None or mb <= soft or self.sessions.get(session.path) is not session or not session.alive:
            return False, ""
        if by_trial:
            session.bloated_by_trial = True
        if not session.bloated_by_trial:
            return False, ""  # large by its own file's proofs: a fresh server would grow the same
        grew = (f"This HOL server grew to {mb:.0f} MB during the trial, past the soft limit of {soft} MB "
                "(HOLSRV_SOFT_FOOTPRINT_MB), and HOL never gives memory back:")
        if self.replacer.running.get(session.path) is not None:
            return True, f"REPLACING: {grew} a fresh server is catching up in the background and takes over by itself."
        if not quiet(session):
            return False, (f"{grew} it is replaced in the background once its checks are done "
                    "(or call restart on the file).")
        why = self.replacer.shed(session, mb)
        if why:
            return False, f"{grew} it cannot be replaced in the background ({why}); call restart on the file."
        session.bloated_by_trial = False
        return True, (f"REPLACING: {grew} a fresh server is starting in the background and takes over by itself once "
                "it has caught up; nothing to do.")

    async def close(self, budget_s: float | None = None, force: asyncio.Event | None = None) -> None:
        """Stop every server in parallel, each with its escalation.

        With `budget_s`, all of it fits in that many seconds (each step gets a
        quarter), and what is left then is SIGKILLed; so is everything, at
        once, when `force` is set meanwhile (a second signal).
        """
        self.closing = True
        for task in self._tasks:
            task.cancel()
        await self.builds.close()
        await self.replacer.close()
        sessions = [*self.sessions.values(), *self.replacer.sessions(), *self._stopping.values()]
        if budget_s is not None:
            for session in sessions:
                session.proc.hurry(budget_s / 4)
        stops = {asyncio.ensure_future(s.stop("the daemon is shutting down")) for s in sessions}
        done = await wait_all({*stops, *self._stopping}, budget_s, force)
        if not done:
            why = "the daemon was told twice to stop" if force and force.is_set() else "the shutdown budget ran out"
            await asyncio.gather(*(s.proc.kill(why) for s in sessions), return_exceptions=True)
            await wait_all(stops, self.settings.stop_timeout_s)
        await asyncio.gather(*self._tasks, *stops, *self._stopping, return_exceptions=True)
        self.sessions.clear()
        self._write_record()

    # -- leftovers -------------------------------------------------------------

    def _write_record(self) -> None:
        """Record live servers for the next daemon (see `reaping`)."""
        self._record.write((*self.sessions.values(), *self.replacer.sessions()))

    def reap_leftovers(self) -> int:
        """Kill the servers a previous daemon on this socket left behind; returns how many."""
        killed = reaping.reap_leftovers(self._record)
        self._write_record()
        return killed


def quiet(session: Session) -> bool:
    """Nothing of its file's to do: compiled, and no proof checking."""
    return session.phase != "compiling" and not session.file.checking()


async def wait_all(
    tasks: Collection[asyncio.Future], timeout: float | None, interrupt: asyncio.Event | None = None
) -> bool:
    """True once every task is done; False if `timeout` passes or `interrupt` is set first."""
    if all(t.done() for t in tasks):
        return True
    racers: set[asyncio.Future] = {asyncio.ensure_future(asyncio.wait(tasks))}
    if interrupt is not None:
        racers.add(asyncio.ensure_future(interrupt.wait()))
    try:
        await asyncio.wait(racers, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for racer in racers:
            racer.cancel()  # not the tasks: asyncio.wait leaves what it waits on alone
    return all(t.done() for t in tasks)
