"""Sessions by script and their leases: at most `max_servers` of them, LRU
and idle eviction, restart after death with backoff (`history`).

A server is *busy* while a call waits on it, an editor holds it (`holds`),
or a proof of its file is still checking (a probably-looping proof does not
count).  Busy servers are never stopped to make room or for idleness.

The pool is the top of its house and owns the rest: which servers may start
and which make room (`admission`), making and starting them (`launch`),
stopping them (`stopping`), the record of them for the next daemon and the
leftovers of the last (`leftovers`), successors for servers whose ancestors
were rebuilt (`replacement`, `successor`), retried compiles (`unblocking`),
builds noticed with no call (`buildwatch`), scripts synced when written
(`scriptwatch`), the text a sync with no call sends (`buffers`), the
holds that are not calls (`holds`) and why answers may be stale
(`staleness`).  Those below see the pool only as `servers.Servers`.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

from holsrv.config.projects import Projects
from holsrv.config.settings import Settings
from holsrv.disk import files
from holsrv.errors import DaemonStopping, HolsrvError
from holsrv.pool import leftovers
from holsrv.pool.admission import Admission
from holsrv.pool.buildwatch import BuildWatch
from holsrv.pool.diagnosticsahead import Compute
from holsrv.pool.duties import Duties
from holsrv.pool.history import History, restart_note
from holsrv.pool.holds import Holds, Moved
from holsrv.pool.launch import Launcher
from holsrv.pool.replacement import Replacer
from holsrv.pool.scriptwatch import ScriptWatch
from holsrv.pool.staleness import Staleness
from holsrv.pool.stopping import Stops
from holsrv.pool.unblocking import Unblocker
from holsrv.process import builds, process
from holsrv.rpc import messages as m
from holsrv.rpc import paths
from holsrv.server import runaway
from holsrv.server.buffers import Buffers
from holsrv.server.session import Session
from holsrv.verdict import looping
from holsrv.verdict.filestate import Phase

log = logging.getLogger(__name__)

class Start(enum.StrEnum):
    """How the server that answers a call came to be running (`ServerNote.start`)."""

    WARM = "warm"  # already running
    STARTED = "started"  # this call started it
    RESTARTED = "restarted"  # its last server died or was stopped, and this call started a new one
    NONE = "none"  # the answer needed no server, so none was started


@dataclass
class Lease:
    """A session handed to one call, with how it came to be running."""

    session: Session
    start: Start
    note: str = ""
    stderr_tail: str = ""  # of the previous server, when it died


class Pool:
    """The files' servers by path, least recently used first, and the leases calls hold on them."""

    def __init__(self, settings: Settings, *, clock: Callable[[], float] = time.monotonic,
                 ahead: Compute | None = None, holmake_timed: Callable[[float], None] | None = None) -> None:
        """`ahead`: the answer computed about a script once a write to it is synced (`diagnosticsahead`);
        `holmake_timed`: told each Holmake run's seconds (the metrics).  Both are the daemon's, above the pool."""
        self.settings = settings
        self.clock = clock
        self.sessions: OrderedDict[Path, Session] = OrderedDict()
        self.history = History(settings, clock)
        self.projects = Projects()  # the project files beside the scripts (`holsrv.toml`)
        self._locks: dict[Path, asyncio.Lock] = {}
        # Held while counting servers and adding one, so two files cannot both
        # take the last free place.
        self._room_lock = asyncio.Lock()
        self.duties = Duties()  # the idle reaper and the memory sampler
        self.stops = Stops(settings, self.stop_session)  # evictions in progress
        self.texts = Buffers()  # an editor's buffer, else the disk: what a sync with no call sends
        self.holds = Holds()  # editors' open documents: not calls, and followed across a replacement
        self.launcher = Launcher(settings, clock, self.stops, on_exit=self._exited, started=self._write_record,
                                 texts=self.texts)
        self._record = leftovers.ServerRecord(paths.servers_record(settings.socket))
        self.closing = False  # the daemon is shutting down: no new servers
        self.handing_over = False  # the daemon restarts in place (`handover`): editors' texts stay in their servers
        self.builds = builds.Builds(settings.holmake_timeout_s, settings.holmake_tail_lines, clock, holmake_timed)
        # The pool owns these and gives them itself as `servers.Servers`: they never import it.
        self.watch = BuildWatch(self.serving, self._look_again)  # builds noticed with no call
        self.replacer = Replacer(self, self.watch)  # servers whose ancestors were rebuilt, replaced in the background
        self.unblocker = Unblocker(self, self.watch)  # blocked servers whose missing ancestors were built, retried
        # Scripts synced when written, with no call (while their server lives).
        self.scriptwatch = ScriptWatch(self.sessions.get, self.synced, settings.sync_debounce_s,
                                       settings.trial_wait_s, editor_holds=self.texts.holds, ahead=ahead)
        self.admission = Admission(settings, busy=self.busy, current=self.sessions.get, shedder=self.replacer)
        self.staleness = Staleness(self.replacer, self.unblocker, self.builds, clock, self.sessions.get)
        self.loops = runaway.Loops()  # proofs known to loop, per file, across its servers
        self.evictions = 0  # idle servers stopped to make room (count or memory), for the metrics
        self.runaways = 0  # servers replaced as runaways, and the last one's story, for status
        self.last_runaway = ""
        # Files whose server the daemon could not keep across its last restart, and why (`handover`).
        self._not_adopted: dict[Path, str] = {}

    # -- leases ----------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lease(self, path: Path, client: str, content: str = "", moved: Moved | None = None,
                    ) -> AsyncIterator[Lease]:
        """The running session for `path` (started if needed), marked busy meanwhile.

        `content` is the hash of the text the caller is about to send; with `moved`, a hold, not a call (`holds`).
        """
        lock = self._locks.setdefault(path, asyncio.Lock())
        async with lock:
            lease = await self._running(path, content)
            let_go = self.holds.take(lease.session, moved)
        session = lease.session
        session.clients.add(client)
        self.sessions.move_to_end(path)
        try:
            yield lease
        finally:
            let_go()
            session.last_used = self.clock()
            self.replacer.released(session)

    async def _running(self, path: Path, content: str = "") -> Lease:
        session = self.sessions.get(path)
        if session is not None and session.alive:
            return Lease(session, Start.WARM, self._told(session))
        promoted = self.replacer.promote(path)
        if promoted is not None:
            return Lease(promoted[0], Start.WARM, promoted[1])
        # Before forgetting the old session, so the call after the backoff
        # still says what happened to it.
        self.history.check(path, content)
        start, note, tail = Start.STARTED, "", ""
        if session is not None:  # it died, or the daemon stopped it
            self.sessions.pop(path, None)
            start = Start.RESTARTED
            note = restart_note(session)
            tail = session.tail(10) if session.dead else ""
        elif path in self._not_adopted:
            start = Start.RESTARTED
            note = (f"the daemon restarted and could not adopt this file's server ({self._not_adopted.pop(path)}): "
                    "started a fresh one")
        if self.closing:
            raise DaemonStopping(
                f"the daemon is shutting down, so it starts no HOL server for {path.name}; call again in a "
                "few seconds: the next call starts a new daemon."
            )
        # The file's project file over the user-wide settings (a bad one refuses this file alone).
        settings, project = self.projects.settings_for(path, self.settings)
        hol = settings.hol_command()  # no HOL: fail before stopping anyone for room
        heap = self.history.heap_mb(path, settings.max_heap_mb)
        async with self._room_lock:
            self._make_room(path, heap, hol)
            session = self.launcher.session(path, heap, hol, settings, project)
            self.sessions[path] = session
        self.launcher.begin(session)
        self.scriptwatch.watch(path)
        self.history.started(path, start == Start.RESTARTED)
        return Lease(session, start, note, tail)

    def _told(self, session: Session) -> str:
        """What the calls served by a runaway's successor are told: while the proof that looped is
        still in its text as it was, every call; else the first call only."""
        why = session.origin
        if why is None:
            return ""
        if why.loop is None or why.loop.name not in self.loops.known(session.path, session.file.text):
            session.origin = None
        return why.story(session.pid)

    def _exited(self, session: Session) -> None:
        """Called the moment a server process exits, for whatever reason."""
        self._write_record()
        self.history.exited(session)
        current = self.sessions.get(session.path)
        if current is None or current is session or not current.alive:
            self.scriptwatch.forget(session.path)  # its last server: the file needs no watch

    # -- limits ------------------------------------------------------------------

    def busy(self, session: Session) -> bool:
        if session.waiting > 0 or session.starting or self.holds.held(session):
            return True
        now = self.clock()
        file = session.file
        # A compile that has gone silent for this long is not coming back.
        if file.phase == Phase.COMPILING and now - file.last_event < self.settings.compile_silence_s:
            return True
        return any(
            not looping.probably_looping(session.file, entry, now, self.settings)
            for entry in session.file.checking()
        )

    def _make_room(self, path: Path, heap_mb: int, hol: str = "") -> None:
        """Room for one more server with heap cap `heap_mb`: at most max_servers, and
        within the memory budget; idle servers are stopped for it, least recently used first."""
        victim = self.admission.over_count(self.live())
        if victim is not None:
            self._evict(victim, f"to make room for another file: at most {self.settings.max_servers} servers "
                        "run at once")
        budget = self.settings.memory_budget_mb
        for victim in self.admission.over_budget(path, heap_mb, self.live(), hol):
            self._evict(victim, f"to free memory for {path.name}: the memory budget is {budget} MB")

    def _evict(self, victim: Session, reason: str) -> None:
        log.info("stopping %s (pid %s) %s", victim.path, victim.pid, reason)
        self.evictions += 1
        self.stop_later(victim, reason)

    def stop_later(self, session: Session, reason: str, name: str | None = None) -> None:
        """Count `session` as gone at once and stop it in a task of its own."""
        # Outside the caller's lock, since a stuck server can take a while to
        # stop.  A new server starts once it has (see `launch`).
        self.stops.later(session, reason, name)

    def memory_held_mb(self) -> float:
        """What the running servers use (measured; expected for those not yet measured), for status."""
        return self.admission.held_mb(self.live())

    # -- what replacement and unblocking may do (`servers.Servers`) -------------

    def current(self, path: Path) -> Session | None:
        return self.sessions.get(path)

    def serving(self) -> list[Session]:
        return list(self.sessions.values())

    def spawn(self, path: Path, heap_mb: int, hol: str, like: Session | None = None) -> Session:
        """A server for `path` beside the map, starting in the background (a successor: see `replacement`),
        with the settings and project file of `like` (the server it replaces): a replacement changes
        the server, not its settings, which only a restart takes up again."""
        session = self.launcher.session(path, heap_mb, hol, like.settings if like is not None else None,
                                        like.project if like is not None else None)
        self.launcher.begin(session)
        return session

    def install(self, path: Path, session: Session) -> None:
        self.sessions[path] = session  # in place: it keeps the file's LRU position
        self._write_record()

    def live(self) -> list[Session]:
        """Every running server: the files' ones, and those replacing them or replaced (see `replacement`)."""
        return [s for s in (*self.sessions.values(), *self.replacer.sessions()) if s.alive]

    async def stop_session(self, session: Session, reason: str = "stopped by the daemon") -> None:
        if self.sessions.get(session.path) is session:
            await self.replacer.drop(session.path, reason)
        await session.stop(reason)
        self._write_record()

    async def restart(self, path: Path, max_heap_mb: int | None) -> int | None:
        """Stop `path`'s server (if any) and start a fresh one; returns the old pid."""
        self.history.forgive(path, max_heap_mb)
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
        return self.history.last_words(path)

    # -- rebuilt ancestors (see `replacement`) ---------------------------------

    async def synced(self, session: Session, script: files.Script) -> None:
        """A call synced `script` to `session`: replace the server if its ancestors were rebuilt,
        retry its compile if it was blocked on ancestors built since."""
        await self.replacer.synced(session, script)
        if self.sessions.get(session.path) is session:
            self.unblocker.notice(session)

    def _look_again(self, session: Session) -> None:
        """A build went quiet: replace `session` if it loaded an ancestor rebuilt since;
        a blocked server loaded nothing, so a build it waited for is retried, not replaced."""
        self.replacer.consider(session)
        self.unblocker.notice(session)

    def rebuilt_reasons(self, path: Path, session: Session | None = None) -> list[str]:
        """The part of `stale_reasons` about rebuilt ancestors, which diagnostics also lists among
        its warnings (with the advice: wait for the replacement, or restart), and a replacement
        for the memory the server took, which is not stale but is said."""
        return self.replacer.stale_reasons(path, session) + self.replacer.memory_notes(path, session)

    def stale_reasons(self, path: Path, session: Session | None = None) -> list[str]:
        """Why answers about the script `path` (from `session`, default its current server)
        may be stale, one sentence each (see `staleness`)."""
        return self.staleness.reasons(path, session) + self.project_reasons(path, session)

    def project_reasons(self, path: Path, session: Session | None = None, *, recent: bool = False) -> list[str]:
        """Whether the server of `path` runs with the project settings its project file now says: an
        edited, added or removed project file is taken up only by a restart (docs/design.md, Projects).
        `recent`: as the project file was at most `projects.RECENT_S` ago (the fast path's look)."""
        session = session or self.sessions.get(path)
        if session is None or not session.alive:
            return []
        try:
            now = self.projects.recent(path) if recent else self.projects.of(path)
        except OSError:
            return []
        had = session.project
        if (had and (had.file, had.stamp)) == (now and (now.file, now.stamp)):
            return []
        if now is None:
            what = f"its project file {had.file if had else ''} is gone"
        elif had is None:
            what = f"the project file {now.file} appeared"
        elif had.file != now.file:
            what = f"its project file is now {now.file}, not {had.file}"
        else:
            what = f"its project file {now.file} changed"
        broken = f" (and as it stands it is refused: {now.error})" if now is not None and now.error else ""
        return [f"project settings changed: the HOL server for {path.name} (pid {session.pid}) runs with older "
                f"project settings: {what} since it started{broken}; `restart` the file to apply them"]

    def snapshot(self, session: Session, now: float) -> m.SessionStatus:
        """`session` as status shows it, with its background replacement if one is under way."""
        row = session.snapshot(now, self.history.restarts(session.path))
        row.hol, row.holdir = session.hol_cmd, session.holdir
        row.project = str(session.project.file) if session.project is not None else ""
        if session.alive and not session.measured_warm:
            row.counted_mb = round(self.admission.counted_mb(session), 1)
        return self.replacer.status(session, row, now)

    def status_rows(self, now: float) -> list[m.SessionStatus]:
        """Status's rows: the files' servers, but not those the daemon stopped, which hold nothing.

        A stopped session stays in `sessions` only so that the next call can say why it starts a new one.
        """
        stopped = process.ProcessState.STOPPED
        return [self.snapshot(s, now) for s in self.sessions.values() if s.proc.state is not stopped]

    # -- runaways (see `runaway`) ------------------------------------------------

    async def _watch_runaways(self) -> None:
        now = self.clock()
        for session in self.live():
            why = runaway.judge(session, now, session.settings)  # its project's letgo_s and footprint limit
            if why is not None:
                await self.recover(session, why)

    async def recover(self, session: Session, why: runaway.Runaway) -> None:
        """Replace the runaway `session` at once: (if it was its file's server) a fresh server
        started on the current text, the disk's or an editor's buffer, which an editor's
        document follows; then the runaway killed.

        Nothing waits for the runaway's work to end: it never does.  Calls that
        waited on it are told why (`errors.RanAway`), and the next calls on the
        fresh server too (`_told`); the proof that looped is remembered (`loops`).
        """
        path = session.path
        log.warning("HOL server pid %s for %s is a runaway: %s", session.pid, path.name, why.reason)
        session.server.runaway = why  # before it counts as stopping: waiting calls are told why
        if why.loop is not None:
            self.loops.mark(path, why.loop)
        self.runaways += 1
        self.last_runaway = f"{path.name}: {why.reason}"
        async with self._locks.setdefault(path, asyncio.Lock()):
            if self.sessions.get(path) is session and not self.closing:
                # Out of the map first, so that the fresh one starts (its start waits for the kill below).
                self.sessions.pop(path)
                try:
                    fresh = (await self._running(path)).session
                except HolsrvError as err:  # no room, no HOL: the next call says so
                    log.warning("no fresh server for %s after its runaway: %s", path.name, err)
                else:
                    fresh.origin = why
                    self.holds.switched(session, fresh)  # an editor's document follows, as after a replacement
            self.stop_later(session, f"a runaway: {why.reason}", name=f"runaway-{session.pid}")

    # -- background duties ---------------------------------------------------

    def start_background(self) -> None:
        idle_period = max(0.05, min(self.settings.idle_timeout_s / 4, 30.0))
        self.duties.every(idle_period, self._reap_idle, "idle-reaper")
        self.duties.every(self.settings.memory_sample_s, self._sample_memory, "memory")
        self.duties.every(runaway.watch_period(self.settings), self._watch_runaways, "runaways")

    async def _reap_idle(self) -> None:
        now = self.clock()
        for session in list(self.sessions.values()):
            idle = now - session.last_used
            if session.alive and idle >= self.settings.idle_timeout_s and not self.busy(session):
                log.info("stopping %s (pid %s): idle for %.0fs", session.path, session.pid, idle)
                await self.stop_session(session, f"idle for {idle:.0f}s")

    async def _sample_memory(self) -> None:
        budget, pct = self.settings.memory_budget_mb, self.settings.memory_pressure_pct
        victims = await self.admission.sample(self.live())
        held = self.memory_held_mb()
        for victim in victims:
            self._evict(victim, f"to free memory: the servers used {held:.0f} MB, past {pct}% of the "
                        f"memory budget of {budget} MB (the constant memory_pressure_pct)")

    def shed_bloat(self, session: Session, by_trial: bool = False) -> tuple[bool, str]:
        """See `Admission.shed_bloat`: for a trial that may have bloated `session`."""
        return self.admission.shed_bloat(session, by_trial)

    def make_room_beside(self, old: Session) -> str:
        """Room for a second server for `old`'s file: idle servers are stopped for it, least
        recently used first; why there is none even then ("" once there is)."""
        why, victims = self.admission.beside(old, self.live())
        for victim in victims:
            self._evict(victim, f"to make room for a fresh server for {old.path.name} beside its old one")
        return why

    async def close(self, budget_s: float | None = None, force: asyncio.Event | None = None) -> None:
        """Stop every server in parallel, each with its escalation (see `Stops.everything`)."""
        self.closing = True
        self.duties.cancel()
        await self.builds.close()
        self.watch.close()
        await self.scriptwatch.close()
        await self.replacer.close()
        await self.stops.everything([*self.sessions.values(), *self.replacer.sessions()], budget_s, force)
        await self.duties.ended()
        self.sessions.clear()
        self._write_record()

    # -- handover to a successor daemon (`handover`) -----------------------------

    def adopted(self, session: Session) -> None:
        """`session` was handed over by the daemon this one replaced: it is its file's server."""
        self.sessions[session.path] = session
        self.scriptwatch.watch(session.path)
        self._write_record()

    def note_adopted(self, notes: dict[Path, str]) -> None:
        """The files whose servers the handover could not keep: their next answer says why."""
        self._not_adopted.update(notes)

    # -- leftovers -------------------------------------------------------------

    def _write_record(self) -> None:
        """Record live servers for the next daemon (see `leftovers`)."""
        self._record.write((*self.sessions.values(), *self.replacer.sessions()))

    def reap_leftovers(self) -> int:
        """Kill the servers a previous daemon on this socket left behind; returns how many."""
        killed = leftovers.reap_leftovers(self._record)
        self._write_record()
        return killed
