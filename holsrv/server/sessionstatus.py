"""What `status` shows of one session: its row, the name of its state, and the pool's tally kept per change."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from holsrv.lsp.client import LspClient
from holsrv.lsp.services import Services
from holsrv.rpc import messages as m
from holsrv.server.holserver import HolServer
from holsrv.text import stepping
from holsrv.verdict import tally
from holsrv.verdict.filestate import FileState, Phase


class ServerState(enum.StrEnum):
    """A server's state as `status` names it (`SessionStatus.state`, docs/holctl.md#server-states)."""

    NEW = "new"  # not yet spawned
    STARTING = "starting"  # spawned, loading its heap: no handshake yet
    HUNG = "hung"  # a request timed out and it has said nothing since
    READY = "ready"  # running, its file's text not yet sent
    COMPILING = "compiling"
    CHECKING = "checking"  # compiled, proofs still checking
    SETTLED = "settled"  # compiled, no proof checking
    # The process's own, once it is going (`process.ProcessState`).
    STOPPING = "stopping"
    STOPPED = "stopped"
    DEAD = "dead"


@dataclass
class EvalUse:
    """How often eval code ran in one server, and when last (the session's clock): what it
    changed in HOL's global state lasts, for every caller about the file, until it stops."""

    count: int = 0
    last_at: float | None = None

    def ran(self, now: float) -> None:
        self.count += 1
        self.last_at = now


class Described(Protocol):
    """What a status row reads of a session (the session itself: this module sits below it)."""

    path: Path
    max_heap_mb: int
    started_at: float
    last_used: float
    footprint: float | None  # MB, the pool's last sample
    peak: float | None  # MB, the largest sample
    waiting: int
    clients: set[str]
    last_verdict: str
    evals: EvalUse
    services: Services

    @property
    def pid(self) -> int | None: ...
    @property
    def state_name(self) -> ServerState: ...
    @property
    def lsp(self) -> LspClient | None: ...


def row(s: Described, pool_tally: m.Tally, now: float, restarts: int, soft_footprint_mb: float) -> m.SessionStatus:
    """The session as `status` shows it."""
    # The pool's last sample, not a new measurement on the request path
    # (None until the first sample).
    footprint = s.footprint
    return m.SessionStatus(
        file=str(s.path),
        pid=s.pid,
        state=s.state_name,
        uptime_s=round(now - s.started_at, 1),
        idle_s=round(now - s.last_used, 1),
        footprint_mb=round(footprint, 1) if footprint is not None else None,
        max_heap_mb=s.max_heap_mb,
        tally=pool_tally,
        waiting_calls=s.waiting,
        clients=sorted(s.clients),
        restarts=restarts,
        hol_version=str(s.lsp.server_info.get("version", "")) if s.lsp else "",
        last_verdict=s.last_verdict,
        large=footprint is not None and footprint > soft_footprint_mb,
        peak_mb=round(s.peak, 1) if s.peak is not None else None,
        evals=s.evals.count,
        last_eval_s=round(now - s.evals.last_at, 1) if s.evals.last_at is not None else None,
        services=s.services.shown(),
    )


def state_name(server: HolServer, file: FileState, opened: bool) -> ServerState:
    """The process's life, or, once running, what the file is doing (`opened`: its text was sent)."""
    proc = server.proc
    if proc.ending:
        return ServerState(proc.state.value)
    if proc.pid is None:
        return ServerState.NEW
    if not server.handshaken:
        return ServerState.STARTING
    if server.hung:
        return ServerState.HUNG
    if not opened:
        return ServerState.READY
    if file.phase == Phase.COMPILING:
        return ServerState.COMPILING
    return ServerState.CHECKING if file.checking() else ServerState.SETTLED


class PoolTally:
    """The pool's word on a file's proofs, computed once per notification or text.

    Status reads the tally `refresh` made last (status refreshes it first):
    so status costs one tally per change, not one per call and session.
    While a trial (`try`) holds the server (`in_trial`), the pool's word is
    about a candidate's text, not the file's: the tally made before it stands,
    so a failed candidate never shows as a failed proof of the file.
    """

    def __init__(self, file: FileState, in_trial: Callable[[], bool] = lambda: False) -> None:
        self.file = file
        self._in_trial = in_trial
        self._memo: tuple[tuple[int, int], m.Tally] | None = None

    def current(self) -> m.Tally:
        if self._memo is None:
            # Nothing before the trial to keep: no proof is counted rather than a candidate's.
            made = m.Tally() if self._in_trial() else tally.of_pool(self.file)
            self._memo = ((self.file.events, self.file.version), made)
        return self._memo[1]

    async def refresh(self, before_trial: bool = False) -> None:
        """Bring it up to date, in slices: for a file of 30,000 proofs it takes tens
        of milliseconds, which other clients must not wait for.  `before_trial`:
        the trial holds the server but has sent no candidate yet (its tally is the file's)."""
        key = (self.file.events, self.file.version)
        if self._in_trial() and not before_trial:
            return
        if self._memo is None or self._memo[0] != key:
            self._memo = (key, await stepping.sliced(tally.pool_steps(self.file)))
