"""Memory admission: whether another HOL server may start, which idle ones
are stopped to make room for it, and what to do with one that grew too large.

Every server counts against `memory_budget_mb` with what it reserves: its
heap cap, or its measured footprint when larger (sampled every
`memory_sample_s`).  Busy servers are never stopped for room; when only
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

from holsrv.errors import MemoryBudget, ServerBusy
from holsrv.session import Session
from holsrv.settings import Settings

log = logging.getLogger(__name__)


class Shedder(Protocol):
    """What admission needs of the background replacement (`replacement.Replacer`)."""

    def replacing(self, path: Path) -> bool: ...

    def shed(self, session: Session, footprint_mb: float) -> str: ...


class Admission:
    """The budget: servers' reserved memory, room for one more, and shedding a bloated one."""

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

    # -- what a server holds ---------------------------------------------------

    def cap_mb(self, heap_mb: int) -> int:
        # A server without a heap cap is counted at the soft footprint (LARGE).
        return heap_mb if heap_mb > 0 else self.settings.soft_footprint_mb

    def reserved_mb(self, session: Session) -> float:
        """What a server counts against the memory budget: its heap cap, or its footprint when larger."""
        return max(float(self.cap_mb(session.max_heap_mb)), session.footprint or 0.0)

    def held_mb(self, alive: list[Session]) -> float:
        return sum(self.reserved_mb(s) for s in alive)

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

    def over_budget(self, path: Path, heap_mb: int, alive: list[Session]) -> list[Session]:
        """The idle servers (least recently used first) to stop so that a server for `path`
        with heap cap `heap_mb` fits in the memory budget."""
        budget = self.settings.memory_budget_mb
        if budget <= 0:
            return []
        need = self.cap_mb(heap_mb)
        busy = [s for s in alive if self._busy(s)]
        held_busy = self.held_mb(busy)
        # A lone server may always run: its own heap cap is what bounds it.
        if held_busy and held_busy + need > budget:
            raise MemoryBudget(
                f"starting a HOL server for {path.name} needs {need} MB (its heap cap) of the memory budget "
                f"of {budget} MB, but {held_busy:.0f} MB are held by busy servers: "
                + "; ".join(f"{s.path} ({self.reserved_mb(s):.0f} MB, {why_busy(s)})" for s in busy)
                + ". Free memory with `stop FILE` on one of them (its checks are abandoned), or give one a "
                "smaller heap with `restart FILE --max-heap-mb N`, or raise HOLSRV_MEMORY_BUDGET_MB and "
                "restart the daemon."
            )
        held, victims = self.held_mb(alive), []
        for victim in (s for s in alive if s not in busy):  # least recently used first
            if not held or held + need <= budget:
                break
            held -= self.reserved_mb(victim)
            victims.append(victim)
        return victims

    def beside(self, old: Session, alive: list[Session]) -> str:
        """Why a second server for `old`'s file cannot run beside it ("" if it can): none is stopped for it."""
        settings, name = self.settings, old.path.name
        if len(alive) + 1 > settings.max_servers:
            return (f"no room: a second server for {name} beside the old one would pass the limit of "
                    f"{settings.max_servers} HOL servers (HOLSRV_MAX_SERVERS)")
        budget = settings.memory_budget_mb
        held = self.held_mb(alive)
        need = self.cap_mb(old.max_heap_mb)
        if budget > 0 and held + need > budget:
            return (f"no room: a second server for {name} needs {need} MB (its heap cap) while the old one "
                    f"answers, but {held:.0f} MB of the memory budget of {budget} MB are held "
                    "(HOLSRV_MEMORY_BUDGET_MB)")
        return ""

    # -- measured use ----------------------------------------------------------

    async def sample(self, alive: list[Session]) -> None:
        """Measure every server's footprint; a server a trial bloated is shed."""
        for session in alive:
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
        if mb is None or mb <= soft or self._current(session.path) is not session or not session.alive:
            return False, ""
        if by_trial:
            session.bloated_by_trial = True
        if not session.bloated_by_trial:
            return False, ""  # large by its own file's proofs: a fresh server would grow the same
        grew = (f"This HOL server grew to {mb:.0f} MB during the trial, past the soft limit of {soft} MB "
                "(HOLSRV_SOFT_FOOTPRINT_MB), and HOL never gives memory back:")
        if self._shedder.replacing(session.path):
            return True, f"REPLACING: {grew} a fresh server is catching up in the background and takes over by itself."
        if not quiet(session):
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
    if session.phase == "compiling":
        return "compiling"
    return "checking " + ", ".join(e.name for e in session.file.checking())


def quiet(session: Session) -> bool:
    """Nothing of its file's to do: compiled, and no proof checking."""
    return session.phase != "compiling" and not session.file.checking()
