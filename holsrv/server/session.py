"""One `hol lsp --lsp-check-proofs` server for one script, for its whole life.

The session joins what one script's server is: its process and LSP client
(`holserver.HolServer`), what the server said about the file
(`filestate.FileState`, fed by `notifications.Notifications`), the file's
text as the server has it (`textsync.TextSync`) and waits on the server
(`changes.Changes`).  What the file is doing (compiling, checking, settled)
is derived from the file state, never stored.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Callable, Hashable
from pathlib import Path

from holsrv.config.projects import Project
from holsrv.config.settings import Settings
from holsrv.disk import ancestors
from holsrv.errors import ServerStopped
from holsrv.lsp import hol, replies, services
from holsrv.lsp.client import LspClient
from holsrv.process.process import ChildProcess, ProcessState
from holsrv.rpc import messages as m
from holsrv.server import sessionstatus
from holsrv.server.changes import Changes
from holsrv.server.holserver import HolServer
from holsrv.server.notifications import Notifications
from holsrv.server.runaway import Runaway
from holsrv.server.textsync import TextSync
from holsrv.server.trialgate import TrialGate
from holsrv.verdict.filestate import FileState, Phase

_ids = itertools.count(1)


class Session:
    """One HOL server process and what it has told us about its file."""

    def __init__(
        self,
        path: Path,
        settings: Settings,
        hol_cmd: str,
        max_heap_mb: int,
        *,
        on_exit: Callable[[Session], None] = lambda s: None,
        clock: Callable[[], float] = time.monotonic,
        project: Project | None = None,
    ) -> None:
        self.id = next(_ids)  # answers cached from this server carry it
        # Bumped when the server's view changes without the text changing (retryCompile).
        self._epoch = 0
        self.path = path
        self.uri = replies.uri_of(path)
        self.settings = settings
        self.hol_cmd = hol_cmd
        # The project file its settings came from, as read when it started (None: the user-wide settings).
        self.project = project
        self.max_heap_mb = max_heap_mb
        self.clock = clock
        self._on_exit = on_exit
        self.file = FileState(self.uri)
        self._changes = Changes(clock, self.check_alive)
        self._notified = Notifications(self.file, clock, self._changes.wake, self._resync_soon)
        self.server = HolServer(path.name, settings, self._notified, self._exited, self._during)
        self.proc: ChildProcess = self.server.proc
        self.started_at = self.last_used = clock()
        self.ancestors = ancestors.Watch()  # build times of what this server loaded
        self.waiting = 0
        self.footprint: float | None = None  # MB, last sample
        self.peak: float | None = None  # MB, the largest sample
        # Whether a sample was taken after HOL's first compile of the file
        # completed: before that the server is still loading its heap and
        # growing, so a sample says less than it will use (`Admission.counted_mb`).
        self.measured_warm = False
        self.last_verdict = ""  # of the last diagnostics answer, for status
        self.evals = sessionstatus.EvalUse()  # eval code run here: its changes to HOL's state are everyone's
        self.messages, self.fanout = self._notified.messages, self._notified.fanout  # for answers; for editors
        # Errors of failed goal-state walks: HOL publishes each as a diagnostic
        # of the file until a clean walk or an edit (docs/protocol.md#goal-state-walks).
        self.walk_errors: deque[str] = deque(maxlen=64)
        self._tally = sessionstatus.PoolTally(self.file, lambda: bool(self.trials.trial))
        self.clients: set[str] = set()
        self._text = TextSync(self.file, self.notify, self.wait_until, clock, settings.spill_wait_s)
        self.hol = hol.HolCalls(self.uri, self.request, self.notify)  # HOL's typed requests about this file
        # Which of HOL's services this server has, learnt when an answer comes back empty (`lsp.services`).
        self.services = services.Services()
        self.trials = TrialGate()  # a `try` holds the server alone while it has other text
        # A trial left it past the soft footprint: replaced once idle (`Pool.shed_bloat`).
        self.bloated_by_trial = False
        # Started to shed a predecessor's bloat and grew past the soft footprint
        # on its file alone: its proofs need the memory, so it is not shed again.
        self.keeps_large = False
        # Started in place of a runaway (`Pool.recover`): what the calls it serves are told.
        self.origin: Runaway | None = None

    # -- what callers ask ---------------------------------------------------

    @property
    def lsp(self) -> LspClient | None:
        return self.server.lsp

    @property
    def start_task(self) -> asyncio.Task | None:
        """The pool's task that runs `start` (stopping waits for it)."""
        return self.server.start_task

    @start_task.setter
    def start_task(self, task: asyncio.Task | None) -> None:
        self.server.start_task = task

    @property
    def stop_reason(self) -> str:
        """Why the daemon stopped it (eviction, idle, restart…)."""
        return self.server.stop_reason

    @property
    def pid(self) -> int | None:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return not self.proc.ending

    @property
    def dead(self) -> bool:
        """It exited on its own (or was killed as broken), not stopped by the daemon."""
        return self.proc.state is ProcessState.DEAD

    @property
    def hung(self) -> bool:
        """A request timed out with not a word from the server since (see `LspClient.hung`)."""
        return self.server.hung

    @property
    def starting(self) -> bool:
        """Not yet through the handshake: no file has been sent to it."""
        return self.alive and not self.server.handshaken

    @property
    def exit_reason(self) -> str:
        return self.proc.exit_reason

    @property
    def encoding(self) -> str:
        """The position encoding HOL negotiated ("utf-8" until the handshake says)."""
        return self.lsp.position_encoding if self.lsp else "utf-8"

    @property
    def holdir(self) -> str:
        """The HOL tree the server runs from, as it says in its handshake ("" if it did not)."""
        return str(self.lsp.server_info.get("holdir", "")) if self.lsp else ""

    @property
    def phase(self) -> Phase:
        """The file's compile phase."""
        return self.file.phase

    @property
    def state_name(self) -> sessionstatus.ServerState:
        """What status shows: the process's life, or, once running, what the file is doing."""
        return sessionstatus.state_name(self.server, self.file, self.data is not None)

    def cache_key(self, *question: Hashable, diagnostics: bool = True) -> tuple:
        """What a cached answer depends on: the server, and everything it has said.

        Anything the server says later (a failure moved to its step, an extra
        pass) makes a new answer, so its count of notifications is in the key
        (without its diagnostics if `diagnostics` is False: see `answers.cache.goal_key`).
        """
        return (self.id, self._epoch, self.file.events - (0 if diagnostics else self.file.publishes), *question)

    def snapshot(self, now: float, restarts: int) -> m.SessionStatus:
        """This server as `status` shows it."""
        return sessionstatus.row(self, self._tally.current(), now, restarts, self.settings.soft_footprint_mb)

    async def refresh_tally(self, before_trial: bool = False) -> None:
        """Bring the pool's tally up to date, in slices (see `sessionstatus.PoolTally`);
        `before_trial`: a trial holds the server but has not yet sent it a candidate."""
        await self._tally.refresh(before_trial)

    def tail(self, lines: int = 30) -> str:
        return self.proc.tail(lines)

    def stderr_mark(self) -> int:
        """A mark for `stderr_since`: what the server writes from now on."""
        return self.proc.stderr_seen

    def stderr_since(self, mark: int) -> str:
        return self.proc.stderr_since(mark)

    def footprint_mb(self) -> float | None:
        return self.proc.footprint_mb()

    def command(self) -> list[str]:
        # Poly/ML runtime options must come before the word `lsp` (docs/protocol.md#launch).
        heap = ["--maxheap", str(self.max_heap_mb)] if self.max_heap_mb > 0 else []
        return [self.hol_cmd, *heap, "lsp", "--lsp-check-proofs"]

    # -- life -----------------------------------------------------------------

    async def start(self) -> None:
        """Spawn the server in the script's directory and complete the handshake."""
        if not self.alive:  # stopped before its start task even ran
            raise ServerStopped(
                f"the HOL server for {self.path.name} was stopped ({self.stop_reason}) before it started"
            )
        self.started_at = self.clock()
        await self.server.start(self.command(), str(self.path.parent))

    async def wait_started(self, timeout: float) -> bool:
        """True once the handshake is done; False if `timeout` passes first (see `HolServer`)."""
        return await self.server.wait_started(timeout)

    # -- handover to a successor daemon (`holsrv.pool.handover`) ---------------

    def handover(self) -> dict | None:
        """What a successor daemon needs to adopt this server and answer from what it has seen,
        if it can be handed over now (see `HolServer.handover`); else None."""
        server = self.server.handover()
        if server is None:
            return None
        return {
            **server,
            "path": str(self.path), "hol_cmd": self.hol_cmd, "max_heap_mb": self.max_heap_mb,
            "started_at": self.started_at, "last_used": self.last_used,
            "footprint": self.footprint, "peak": self.peak, "measured_warm": self.measured_warm,
            "last_verdict": self.last_verdict, "messages": list(self.messages),
            "walk_errors": list(self.walk_errors), "evals": [self.evals.count, self.evals.last_at],
            "ancestors": dict(self.ancestors._loaded), "file": self.file.export(), "text": self._text.export(),
        }

    def handed_back(self) -> None:
        self.server.handed_back()

    async def adopt(self, entry: dict) -> None:
        """Become the server a predecessor daemon's `handover` describes: its process and LSP
        client taken over, what it said about the file and the text it has, as they were."""
        vars(self.file).update(vars(FileState.adopt(entry["file"])))
        self._text.adopt(entry["text"])
        self.started_at, self.last_used = float(entry["started_at"]), float(entry["last_used"])
        self.footprint, self.peak = entry["footprint"], entry["peak"]
        self.measured_warm, self.last_verdict = bool(entry["measured_warm"]), str(entry["last_verdict"])
        self.messages.extend(entry["messages"])
        self.walk_errors.extend(entry["walk_errors"])
        self.evals.count, self.evals.last_at = entry["evals"]
        self.ancestors.loaded(entry["ancestors"])
        await self.server.adopt(entry["process"], entry["lsp"])

    def _exited(self) -> None:
        self._changes.wake()
        self._on_exit(self)

    def mark_stopping(self, reason: str) -> None:
        """From now on this server counts as going; `stop()` does the stopping."""
        if self.server.mark_stopping(reason):
            self._changes.wake()

    async def stop(self, reason: str = "stopped by the daemon") -> None:
        """Stop the server: shutdown/exit, close stdin, SIGTERM the group, SIGKILL, reap.

        Idempotent: every caller awaits the one stop in progress.
        """
        self.mark_stopping(reason)
        await self.server.stop()

    # -- waiting --------------------------------------------------------------

    async def wait_until(self, condition: Callable[[], bool], timeout: float) -> bool:
        """Wait for `condition` (re-checked whenever the server speaks); False on timeout.

        Raises if the server dies or is stopped meanwhile.
        """
        return await self._changes.wait_until(condition, timeout)

    async def wait_change(self, timeout: float) -> None:
        """Return when the server says something, dies, or `timeout` passes."""
        await self._changes.wait_change(timeout)

    def check_alive(self) -> None:
        """Raise if this server can no longer answer: it died, or was stopped."""
        self.server.check_alive()

    def _during(self) -> str:
        checking = [f"{e.name} (line {e.line0 + 1})" for e in self.file.checking()]
        return f" while checking {', '.join(checking)}" if checking else ""

    # -- talking to HOL -------------------------------------------------------

    async def request(self, method: str, params: dict, timeout: float | None = None):
        return await self.server.request(method, params, timeout)

    async def notify(self, method: str, params: dict) -> None:
        await self.server.notify(method, params)

    # -- file sync ------------------------------------------------------------

    @property
    def data(self) -> bytes | None:
        """The bytes the server last got from us (None before the file is opened)."""
        return self._text.data

    @property
    def content_hash(self) -> str:
        """The content hash of `data`."""
        return self._text.digest

    def digest_of(self, version: object) -> str:
        """The content hash of the text this server was sent as `version` ("" if not known)."""
        return self._text.digest_of(version)

    async def sync(self, data: bytes, text: str, digest: str = "") -> None:
        """Make the server's copy equal `text`: didOpen first, then full-text didChange.
        `digest`: `data`'s content hash, if the caller has it."""
        self.check_alive()
        await self._text.sync(data, text, digest)

    def _resync_soon(self) -> None:
        self.server.background(self._resync(), name=f"resync-{self.pid}")

    async def _resync(self) -> None:
        if self.alive:
            await self._text.resync()

    async def retry_compile(self, wait: float) -> bool:
        """Ask HOL to retry a blocked compile; True once it answered with a new block or a pass."""
        return await self.retried(self.retrying(), wait)

    def retrying(self) -> int:
        """Mark a retry of the blocked compile as under way (cached answers no longer hold,
        the file counts as compiling) before it is sent; returns the mark for `retried`."""
        self._epoch += 1
        self.file.retried(self.clock())
        return self.file.attempts

    async def retried(self, mark: int, wait: float) -> bool:
        """Send the retry marked by `retrying`; True once HOL answered with a new block or a pass."""
        await self.hol.retry_compile()
        # HOL answers a retry with a new block or a compile pass (docs/protocol.md#blocked-files).
        return await self.wait_until(lambda: self.file.attempts != mark, wait)
