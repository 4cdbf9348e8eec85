"""One `hol lsp --lsp-check-proofs` server for one script, for its whole life.

The session speaks LSP to its child process (`process.ChildProcess`), keeps
what the server said about the file (`filestate.FileState`), syncs the file's
text and lets calls wait on the server.  Its life is the process's
(STARTING → RUNNING → STOPPING → STOPPED, or DEAD) plus whether the LSP
handshake is done; what the file is doing (compiling, checking, settled) is
derived from the file state, never stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from pathlib import Path
from typing import Any

from holsrv import ancestors, stepping, tally
from holsrv.errors import ServerDied, ServerStopped, ServerTimeout
from holsrv.filestate import FileState
from holsrv.lsp import hol, replies
from holsrv.lsp.client import LspClient
from holsrv.process import ChildProcess, ProcessState
from holsrv.rpc import messages as m
from holsrv.settings import Settings
from holsrv.textsync import TextSync
from holsrv.trialgate import TrialGate

log = logging.getLogger(__name__)

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
    ) -> None:
        self.id = next(_ids)  # answers cached from this server carry it
        # Bumped when the server's view changes without the text changing (retryCompile).
        self._epoch = 0
        self.path = path
        self.uri = replies.uri_of(path)
        self.settings = settings
        self.hol_cmd = hol_cmd
        self.max_heap_mb = max_heap_mb
        self.clock = clock
        self._on_exit = on_exit
        self.proc = ChildProcess(path.name, settings.stderr_tail_lines, settings.stop_timeout_s, self._exited)
        self.file = FileState(self.uri)
        self.lsp: LspClient | None = None
        self.started_at = self.last_used = clock()
        self.ancestors = ancestors.Watch()  # build times of what this server loaded
        self.waiting = 0
        self.footprint: float | None = None  # MB, last sample
        self.last_verdict = ""  # of the last diagnostics answer, for status
        self.messages: deque[str] = deque(maxlen=10)  # HOL's window/showMessage texts
        # Errors of failed goal-state walks: HOL publishes each as a diagnostic
        # of the file until a clean walk or an edit (PROTOCOL.md §0, §11).
        self.walk_errors: deque[str] = deque(maxlen=64)
        self._tally_memo: tuple[tuple[int, int], m.Tally] | None = None
        self.clients: set[str] = set()
        self._changed = asyncio.Event()
        self._text = TextSync(self.file, self.notify, self.wait_until, clock, settings.spill_wait_s)
        self._tasks: list[asyncio.Task] = []
        self.stop_reason = ""  # why the daemon stopped it (eviction, idle, restart…)
        self.start_task: asyncio.Task | None = None
        self._stop_task: asyncio.Task | None = None
        self._handshaken = False  # `initialized` sent: LSP shutdown is allowed
        self.hol = hol.HolCalls(self.uri, self.request, self.notify)  # HOL's typed requests about this file
        self.trials = TrialGate()  # a `try` holds the server alone while it has other text
        # A trial left it past the soft footprint: replaced once idle (`Pool.shed_bloat`).
        self.bloated_by_trial = False

    # -- what callers ask ---------------------------------------------------

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
        return self.lsp is not None and self.lsp.hung is not None

    @property
    def starting(self) -> bool:
        """Not yet through the handshake: no file has been sent to it."""
        return self.alive and not self._handshaken

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
    def phase(self) -> str:
        """The file's compile phase: "compiling", "completed" or "blocked"."""
        return self.file.phase

    @property
    def state_name(self) -> str:
        """What status shows: the process's life, or, once running, what the file is doing."""
        if self.proc.ending:
            return self.proc.state.value
        if self.proc.pid is None:
            return "new"
        if not self._handshaken:
            return "starting"
        if self.hung:
            return "hung"
        if self.data is None:
            return "ready"
        if self.file.phase == "compiling":
            return "compiling"
        return "checking" if self.file.checking() else "settled"

    def cache_key(self, *question: Hashable) -> tuple:
        """What a cached answer depends on: the server, and everything it has said.

        Anything the server says later (a failure moved to its step, an extra
        pass) makes a new answer, so its count of notifications is in the key.
        """
        return (self.id, self._epoch, self.file.events, *question)

    def snapshot(self, now: float, restarts: int) -> m.SessionStatus:
        """This server as `status` shows it."""
        # The pool's last sample: measuring here walks /proc for every process
        # on the machine, on the request path (None until the first sample).
        footprint = self.footprint
        return m.SessionStatus(
            file=str(self.path),
            pid=self.pid,
            state=self.state_name,
            uptime_s=round(now - self.started_at, 1),
            idle_s=round(now - self.last_used, 1),
            footprint_mb=round(footprint, 1) if footprint is not None else None,
            max_heap_mb=self.max_heap_mb,
            tally=self._pool_tally(),
            waiting_calls=self.waiting,
            clients=sorted(self.clients),
            restarts=restarts,
            hol_version=str(self.lsp.server_info.get("version", "")) if self.lsp else "",
            last_verdict=self.last_verdict,
            large=footprint is not None and footprint > self.settings.soft_footprint_mb,
        )

    def _pool_tally(self) -> m.Tally:
        # The tally `refresh_tally` made last (status refreshes it first): the
        # pool's word changes only with a notification or a new text, so status
        # costs one tally per change, not one per call and session.
        if self._tally_memo is None:
            self._tally_memo = ((self.file.events, self.file.version), tally.of_pool(self.file))
        return self._tally_memo[1]

    async def refresh_tally(self) -> None:
        """Bring the pool's tally up to date, in slices: for a file of 30,000 proofs it
        takes tens of milliseconds, which other clients must not wait for."""
        key = (self.file.events, self.file.version)
        if self._tally_memo is None or self._tally_memo[0] != key:
            self._tally_memo = (key, await stepping.sliced(tally.pool_steps(self.file)))

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
        # Poly/ML runtime options must come before the word `lsp` (§1.1).
        heap = ["--maxheap", str(self.max_heap_mb)] if self.max_heap_mb > 0 else []
        return [self.hol_cmd, *heap, "lsp", "--lsp-check-proofs"]

    # -- starting -------------------------------------------------------------

    async def start(self) -> None:
        """Spawn the server in the script's directory and complete the handshake."""
        if not self.alive:  # stopped before its start task even ran
            raise ServerStopped(
                f"the HOL server for {self.path.name} was stopped ({self.stop_reason}) before it started"
            )
        self.started_at = self.clock()
        env = dict(os.environ)
        if self.settings.extra_path:
            env["PATH"] = os.pathsep.join([*self.settings.extra_path, env.get("PATH", "")])
        try:
            stdout, stdin = await self.proc.spawn(self.command(), str(self.path.parent), env)
        except OSError:
            raise ServerDied(self.proc.exit_reason) from None
        self.lsp = LspClient(stdout, stdin, self._notified, hung_after=self.settings.request_timeout_s,
                             typed_params=replies.TYPED_PARAMS)
        self._tasks = [asyncio.create_task(self._read(), name=f"lsp-{self.pid}")]
        try:
            if not self.alive:
                raise ServerStopped("stopped before its handshake")
            await self.lsp.initialize(self.settings.start_timeout_s, self.settings.position_encodings)
            self._handshaken = True
            if not self.alive:
                raise ServerStopped("stopped during its handshake")
        except Exception as err:  # any failure: an error reply, a garbled result, a timeout
            await self._failed_start(err)
        log.info("session %s (pid %s): ready", self.path.name, self.pid)

    async def _failed_start(self, err: Exception) -> None:
        if self.proc.state in (ProcessState.STOPPING, ProcessState.STOPPED):
            # The daemon stopped it (restart, eviction, shutdown): not a death.
            await self.proc.kill(f"stopped while starting ({self.stop_reason})")
            raise ServerStopped(
                f"the HOL server for {self.path.name} was stopped ({self.stop_reason}) while it "
                "started; call again to use its successor."
            ) from None
        # Killed, not stopped: a failed start is a death, backoff and all.
        await self.proc.kill(f"it did not complete the handshake: {err}")
        raise ServerDied(
            f"the HOL server for {self.path.name} did not start: {self.proc.exit_reason or err}",
            detail=self.tail(),
        ) from None

    async def wait_started(self, timeout: float) -> bool:
        """True once the handshake is done; False if `timeout` passes first.

        Raises the start's error if it failed.  Giving up does not stop the
        start: the next call finds the server further along.
        """
        task = self.start_task
        if task is None:
            return not self.starting
        if not task.done():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, timeout)):
                    await asyncio.shield(task)
        if not task.done():
            return False
        task.result()
        return True

    async def _read(self) -> None:
        assert self.lsp
        await self.lsp.run()
        # A dying server closes its output first; give it a moment to exit.
        if not await self.proc.wait_exit(1.0) and self.alive:
            # Output ended or broke while the process lives on: it can no
            # longer be talked to, so it is as good as dead.
            await self.proc.kill(str(self.lsp.closed_reason or "its output ended"))

    def _exited(self) -> None:
        self._wake()
        self._on_exit(self)

    # -- stopping -------------------------------------------------------------

    def mark_stopping(self, reason: str) -> None:
        """From now on this server counts as going; `stop()` does the stopping."""
        if self.alive:
            self.stop_reason = reason
            self.proc.mark_stopping()
            self._wake()

    async def stop(self, reason: str = "stopped by the daemon") -> None:
        """Stop the server: shutdown/exit, close stdin, SIGTERM the group, SIGKILL, reap.

        Idempotent: every caller awaits the one stop in progress.
        """
        self.mark_stopping(reason)
        if self._stop_task is None:
            self._stop_task = asyncio.create_task(self._stop(), name=f"stop-{self.path.name}")
        await asyncio.shield(self._stop_task)

    async def _stop(self) -> None:
        if self.start_task is not None and not self.start_task.done():
            # The start sees the state and kills what it spawned; end of input
            # ends a handshake that is under way (§15).
            self.proc.close_input()
            await asyncio.wait({self.start_task}, timeout=self.settings.stop_timeout_s)
        # Before `initialized`, any other message kills HOL with a protocol
        # error (§4.1); closing its input then ends it cleanly.
        goodbye = self._goodbye if self.lsp is not None and self._handshaken else None
        # A hung server would let the goodbye and each polite step time out.
        await self.proc.stop(goodbye, hung=self.hung)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _goodbye(self) -> None:
        assert self.lsp
        await self.lsp.shutdown(self.settings.stop_timeout_s)

    # -- notifications and waiting -----------------------------------------

    def _notified(self, method: str, params: Any) -> Awaitable[None] | None:
        """Fold a notification in; a large proof batch is folded in slices (awaited
        by the reader before the next message)."""
        if _large(params):
            return self._fold(method, params)
        if method == "window/showMessage":
            # HOL's word to the user (a heap it could not load, a second
            # script): the agent is the user here, so it is kept for answers.
            self.messages.append(str(params.get("message", ""))[:2000])
        if method == "$/progress" and (params.get("value") or {}).get("kind") == "begin":
            self.file.pass_began(self.clock())  # one server, one file: it is ours
            self._wake()
        if method == "$/hol/desync" and params.get("uri") == self.uri:
            # We only send whole-document changes, so this should never come;
            # if it does, resend the whole text (PROTOCOL.md §13).
            self._tasks.append(asyncio.create_task(self._resync(), name=f"resync-{self.pid}"))
        if self.file.apply(method, params, self.clock()):
            self._wake()
        return None

    async def _fold(self, method: str, params: Any) -> None:
        if await stepping.sliced(self.file.apply_steps(method, params, self.clock())):
            self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(self, condition: Callable[[], bool], timeout: float) -> bool:
        """Wait for `condition` (re-checked whenever the server speaks); False on timeout.

        Raises if the server dies or is stopped meanwhile.
        """
        deadline = self.clock() + timeout
        while not condition():
            self.check_alive()
            if self.clock() >= deadline:
                return False
            await self.wait_change(deadline - self.clock())
        return True

    async def wait_change(self, timeout: float) -> None:
        """Return when the server says something, dies, or `timeout` passes."""
        event = self._changed
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, timeout)):
                await event.wait()

    def check_alive(self) -> None:
        """Raise if this server can no longer answer: it died, or was stopped."""
        if self.dead:
            checking = [f"{e.name} (line {e.line0 + 1})" for e in self.file.checking()]
            during = f" while checking {', '.join(checking)}" if checking else ""
            raise ServerDied(
                f"the HOL server for {self.path.name} died{during}: {self.exit_reason}. "
                "The next call starts a new one.",
                detail=self.tail(),
            )
        if not self.alive:
            raise ServerStopped(
                f"the HOL server for {self.path.name} was stopped ({self.stop_reason}) while this "
                "call waited on it; call again to use its successor."
            )

    # -- file sync ------------------------------------------------------------

    @property
    def data(self) -> bytes | None:
        """The bytes the server last got from us (None before the file is opened)."""
        return self._text.data

    @property
    def content_hash(self) -> str:
        """The content hash of `data`."""
        return self._text.digest

    async def sync(self, data: bytes, text: str, digest: str = "") -> None:
        """Make the server's copy equal `text`: didOpen first, then full-text didChange.
        `digest`: `data`'s content hash, if the caller has it."""
        self.check_alive()
        await self._text.sync(data, text, digest)

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
        # HOL answers a retry with a new block or a compile pass (§9.4).
        return await self.wait_until(lambda: self.file.attempts != mark, wait)

    # -- talking to HOL -------------------------------------------------------

    async def request(self, method: str, params: dict, timeout: float | None = None):
        self.check_alive()
        assert self.lsp is not None
        if self.lsp.hung is not None:
            raise ServerTimeout(self.lsp.hung_message(f"the HOL server for {self.path.name} (pid {self.pid})"))
        try:
            return await self.lsp.request(method, params, timeout or self.settings.request_timeout_s)
        except ServerDied as err:
            await self._explain_death(err)
            raise

    async def notify(self, method: str, params: dict) -> None:
        self.check_alive()
        assert self.lsp is not None
        try:
            await self.lsp.notify(method, params, self.settings.request_timeout_s)
        except ServerDied as err:
            await self._explain_death(err)
            raise

    async def _explain_death(self, err: ServerDied) -> None:
        """Raise the death with its exit status and stderr tail, once the process is gone.

        A server that broke the protocol or stopped reading is killed first:
        it could not answer anyone again.
        """
        if not await self.proc.wait_exit(1.0):  # a dying server is gone within this
            await self.proc.kill(str(err))
        self.check_alive()


def _large(params: Any) -> bool:
    """A notification to fold in slices: a proof batch or a census of thousands."""
    if isinstance(params, replies.ProofStates):
        return len(params.states) > stepping.ITEMS_PER_STEP
    return isinstance(params, dict) and len(params.get("declared") or ()) > stepping.ITEMS_PER_STEP
