"""Memory admission: whether another HOL server may start, which idle ones
are stopped to make room for it, and what to do with one that grew too large.

Requests and limits, as Kubernetes has them.  A running server counts
against `memory_budget_mb` with its measured footprint (sampled every
`memory_sample_s`); a new one with what it is expected to use: the peak of
the last server started with the same heap cap, or `start_footprint_mb`
before any was measured.  A server still warming up (not yet measured after
its first compile completed) counts as the larger of the two: a sample taken
while Poly/ML loads its heap is a fraction of what the server will hold, and
admitting on it lets in servers that do not fit.  The heap cap (`--maxheap`)
is the limit, which Poly/ML enforces on each server.  When the measured footprint passes
`memory_pressure_pct` of the budget, idle servers are stopped, least
recently used first.  Busy servers are never stopped for room; when only
busy ones hold the budget, the start is refused with what holds it.

This module decides; the pool acts (stops the victims it names, starts the
server).  It knows the pool only through the callables it is given, and the
replacer only through `Shedder`, so the dependency points one way: the pool
imports this, never the reverse.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from holsrv.config.settings import Settings
from holsrv.errors import MemoryBudget, ServerBusy
from holsrv.server.session import Session
from holsrv.verdict import looping
from holsrv.verdict.filestate import Phase

log = logging.getLogger(__name__)


class Shedder(Protocol):
    """What admission needs of the background replacement (`replacement.Replacer`)."""

    def replacing(self, path: Path) -> bool: ...

    def shed(self, session: Session, footprint_mb: float) -> str: ...


class Admission:
    """The budget: what servers use, room for one more, and shedding a bloated one."""

    def __init__(
        self,
        settings: Settings,
        *,
        busy: Callable[[Session], bool],
        current: Callable[[Path], Session | None],
        shedder: Shedder,
    ) -> None:
        self.settings = settings
        self._busy = busy  # never stopped for room
        self._current = current  # the file's server in the pool's map
        self._shedder = shedder
        # (`hol`, heap cap) -> (id of the last server started with both that was measured, its peak, MB):
        # two HOLs (projects) load heaps of their own sizes.
        self._usual: dict[tuple[str, int], tuple[int, float]] = {}

    # -- what a server holds ---------------------------------------------------

    def _last(self, heap_mb: int, hol: str | None) -> tuple[int, float] | None:
        """The last measured server with heap cap `heap_mb` and `hol` (None: of any HOL)."""
        if hol is not None:
            return self._usual.get((hol, heap_mb))
        return max((v for (_, cap), v in self._usual.items() if cap == heap_mb), default=None)

    def expected_mb(self, heap_mb: int, hol: str | None = None) -> float:
        """What a new server of `hol` (None: any) with heap cap `heap_mb` is expected to use."""
        usual = self._last(heap_mb, hol)
        return usual[1] if usual is not None else float(self.settings.start_footprint_mb)

    def basis(self, heap_mb: int, hol: str | None = None) -> str:
        """Where `expected_mb(heap_mb, hol)` comes from, in words."""
        if self._last(heap_mb, hol) is not None:
            of = f" of {hol}" if hol else ""
            return f"what the last server{of} started with a heap cap of {heap_mb} MB used"
        return "no server has been measured yet: HOLSRV_START_FOOTPRINT_MB"

    def counted_mb(self, session: Session) -> float:
        """What a server counts against the budget: its footprint once measured warm;
        until then the larger of any sample and what a server is expected to use."""
        if session.footprint is not None and session.measured_warm:
            return session.footprint
        return max(session.footprint or 0.0, self.expected_mb(session.max_heap_mb, session.hol_cmd))

    def held_mb(self, alive: list[Session]) -> float:
        return sum(self.counted_mb(s) for s in alive)

    def fit(self, alive: list[Session], heap_mb: int) -> int:
        """How many more servers with heap cap `heap_mb` fit, in the budget and under max_servers."""
        by_count = max(0, self.settings.max_servers - len(alive))
        budget = self.settings.memory_budget_mb
        if budget <= 0:
            return by_count
        room = budget - self.held_mb(alive)
        return max(0, min(by_count, int(room // max(1.0, self.expected_mb(heap_mb)))))

    # -- room for one more -----------------------------------------------------

    def over_count(self, alive: list[Session]) -> Session | None:
        """The idle server (least recently used first) to stop so that one more fits under
        max_servers; None if one more fits already."""
        if len(alive) < self.settings.max_servers:
            return None
        victim = next((s for s in alive if not self._busy(s)), None)
        if victim is None:
            raise ServerBusy(
                f"all {self.settings.max_servers} HOL servers are busy: "
                f"{'; '.join(f'{s.path} ({why_busy(s)})' for s in alive)}. Ask again when one "
                "finishes, or free one with `stop FILE` (its checks are abandoned; the next call about it "
                "starts it again), or raise HOLSRV_MAX_SERVERS and restart the daemon."
            )
        return victim

    def over_budget(self, path: Path, heap_mb: int, alive: list[Session], hol: str | None = None) -> list[Session]:
        """The idle servers (least recently used first) to stop so that a server for `path`
        with heap cap `heap_mb` fits in the memory budget."""
        budget = self.settings.memory_budget_mb
        if budget <= 0:
            return []
        need = self.expected_mb(heap_mb, hol)
        busy = [s for s in alive if self._busy(s)]
        held_busy = self.held_mb(busy)
        # A lone server may always run: its own heap cap is what bounds it.
        if held_busy and held_busy + need > budget:
            raise MemoryBudget(
                f"starting a HOL server for {path.name} needs {need:.0f} MB ({self.basis(heap_mb, hol)}) of the "
                f"memory budget of {budget} MB, but {held_busy:.0f} MB are used by busy servers: "
                + "; ".join(f"{s.path} ({self.counted_mb(s):.0f} MB, {why_busy(s)})" for s in busy)
                + ". Free memory with `stop FILE` on one of them (its checks are abandoned), or `restart FILE` "
                "one that a runaway proof grew (a fresh server gives that memory back), or raise "
                "HOLSRV_MEMORY_BUDGET_MB and restart the daemon."
            )
        held, victims = self.held_mb(alive), []
        for victim in (s for s in alive if s not in busy):  # least recently used first
            if not held or held + need <= budget:
                break
            held -= self.counted_mb(victim)
            victims.append(victim)
        return victims

    def beside(self, old: Session, alive: list[Session]) -> tuple[str, list[Session]]:
        """Room for a second server for `old`'s file beside it: the idle servers (least recently
        used first, never `old`) to stop for it, or why there is none even then."""
        settings, name = self.settings, old.path.name
        idle = [s for s in alive if s is not old and not self._busy(s) and self._current(s.path) is s]
        victims: list[Session] = []
        while len(alive) - len(victims) + 1 > settings.max_servers:
            if not idle:
                return (f"no room: a second server for {name} beside the old one would pass the limit of "
                        f"{settings.max_servers} HOL servers (HOLSRV_MAX_SERVERS), and none is idle to stop: "
                        + self._holders(old, alive)), []
            victims.append(idle.pop(0))
        budget, need = settings.memory_budget_mb, self.expected_mb(old.max_heap_mb, old.hol_cmd)
        held = self.held_mb(alive) - self.held_mb(victims)
        while budget > 0 and held + need > budget:
            if not idle:
                basis = self.basis(old.max_heap_mb, old.hol_cmd)
                return (f"no room: a second server for {name} needs {need:.0f} MB ({basis}) "
                        f"while the old one answers, but {held:.0f} MB of the memory budget of {budget} MB are "
                        "held (HOLSRV_MEMORY_BUDGET_MB), and none is idle to stop: "
                        + self._holders(old, [s for s in alive if s not in victims])), []
            victim = idle.pop(0)
            victims.append(victim)
            held -= self.counted_mb(victim)
        return "", victims

    def _holders(self, old: Session, alive: list[Session]) -> str:
        return "; ".join(
            f"{s.path.name} ({self.counted_mb(s):.0f} MB, "
            f"{'the server being replaced' if s is old else why_busy(s) if self._busy(s) else 'replacing or replaced'})"
            for s in alive
        )

    def pressed(self, alive: list[Session]) -> list[Session]:
        """The idle servers (least recently used first) to stop because the fleet's measured
        footprint is past `memory_pressure_pct` of the budget; [] when it is not."""
        budget = self.settings.memory_budget_mb
        if budget <= 0:
            return []
        limit = budget * self.settings.memory_pressure_pct / 100
        held, victims = self.held_mb(alive), list[Session]()
        for victim in alive:
            if held <= limit or len(alive) - len(victims) <= 1:  # a lone server is bounded by its heap cap
                break
            if self._busy(victim) or self._current(victim.path) is not victim or self._shedder.replacing(victim.path):
                continue
            held -= self.counted_mb(victim)
            victims.append(victim)
        return victims

    # -- measured use ----------------------------------------------------------

    async def sample(self, alive: list[Session]) -> list[Session]:
        """Measure every server's footprint; shed one that stays past the soft limit while idle.
        Returns the idle servers to stop for memory pressure (see `pressed`)."""
        for session in alive:
            # On the loop, not in a thread: a few /proc reads, and the daemon
            # must stay single-threaded because children are spawned with a
            # preexec_fn (unsafe to fork from a process with threads).
            self._measured(session, session.footprint_mb())
            await asyncio.sleep(0)  # each server's /proc walk in a turn of its own: others are answered between
            mb = session.footprint
            if mb is not None and mb > self.settings.soft_footprint_mb:
                log.warning("SERVER LARGE: %s (pid %s) uses %.0f MB", session.path, session.pid, mb)
                if session.bloated_by_trial or (quiet(session) and not self._busy(session)):
                    self.shed_bloat(session)
        return self.pressed([s for s in alive if s.alive])

    def _measured(self, session: Session, mb: float | None) -> None:
        session.footprint = mb
        if mb is None:
            return
        session.peak = max(session.peak or 0.0, mb)
        session.measured_warm = session.measured_warm or session.file.phase == Phase.COMPLETED
        if not session.measured_warm:
            return  # a heap still loading says nothing of what the next server will use
        key = (session.hol_cmd, session.max_heap_mb)
        last = self._usual.get(key)
        if last is None or last[0] <= session.id:
            # Capped at the soft limit: a runaway's peak must not make every later start look huge.
            self._usual[key] = (session.id, min(session.peak, float(self.settings.soft_footprint_mb)))

    def shed_bloat(self, session: Session, by_trial: bool = False) -> tuple[bool, str]:
        """The one decision: a server past the soft footprint with nothing of its file
        checking (after a runaway proof or candidate) is replaced in the background once
        it is idle (Poly/ML never gives a grown heap back, so only a fresh server sheds
        it).  `by_trial`: the caller is the trial that may have done it; its footprint is
        sampled afresh.

        Returns whether a successor is on its way, and what an answer should say
        ("" when the server is not bloated).
        """
        if by_trial and session.alive:
            self._measured(session, session.footprint_mb())
        mb, soft = session.footprint, self.settings.soft_footprint_mb
        if mb is None or mb <= soft or self._current(session.path) is not session or not session.alive:
            return False, ""
        if by_trial:
            session.bloated_by_trial = True
        if session.keeps_large and not session.bloated_by_trial:
            return False, ""  # a fresh server grew as large on its file alone: its proofs need it
        during = " during the trial" if session.bloated_by_trial else ""
        grew = (f"This HOL server grew to {mb:.0f} MB{during}, past the soft limit of {soft} MB "
                "(HOLSRV_SOFT_FOOTPRINT_MB), and HOL never gives memory back:")
        if self._shedder.replacing(session.path):
            return True, f"REPLACING: {grew} a fresh server is catching up in the background and takes over by itself."
        if not quiet(session):
            now = session.clock()
            looping_ = [e for e in session.file.checking() if looping.suspicious(session.file, e, now, self.settings)]
            if looping_:  # its checks may never be done: promise nothing the daemon will not do
                named = ", ".join(f"{e.name} (line {e.line0 + 1})" for e in looping_[:3])
                return False, (f"{grew} it would be replaced in the background once its checks are done, but "
                               f"{named} may loop: edit that proof, or call restart on the file.")
            return False, (f"{grew} it is replaced in the background once its checks are done "
                    "(or call restart on the file).")
        why = self._shedder.shed(session, mb)
        if why:
            return False, f"{grew} it cannot be replaced in the background ({why}); call restart on the file."
        session.bloated_by_trial = False
        return True, (f"REPLACING: {grew} a fresh server is starting in the background and takes over by itself once "
                "it has caught up; nothing to do.")


def why_busy(session: Session) -> str:
    """Why `session` may not be stopped for room, in words."""
    if session.starting:
        return "starting"
    if session.waiting:
        return f"{session.waiting} call(s) waiting on it"
    if session.phase == Phase.COMPILING:
        return "compiling"
    checking = session.file.checking()
    return "checking " + ", ".join(e.name for e in checking) if checking else "open in an editor"


def quiet(session: Session) -> bool:
    """Nothing of its file's to do: compiled, and no proof checking."""
    return session.phase != Phase.COMPILING and not session.file.checking()
