"""One `hol lsp --lsp-check-proofs` child serving one script, for its whole life.

Life: starting → ready → (compiling → checking → settled, again on each edit)
→ stopping → stopped, or → dead
when the process exits on its own.  Every transition is logged.  The child
runs in its own process group with a parent-death signal, and its stdin is a
pipe only we hold, so it cannot outlive the daemon: the real server exits on
end of input, and SIGKILL of the daemon closes that pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import itertools
import logging
import os
import signal
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import psutil

from holsrv import ancestors, script
from holsrv.errors import ServerDied, ServerStopped
from holsrv.filestate import FileState
from holsrv.lsp.client import LspClient
from holsrv.settings import Settings

log = logging.getLogger(__name__)

_ENDING = ("stopping", "stopped", "dead")
_PR_SET_PDEATHSIG = 1
MAX_STDERR_LINE = 4096  # characters of one stderr line kept
_ids = itertools.count(1)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    # Linux only; elsewhere the closed stdin pipe is what ends the child.
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


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
        self.epoch = 0
        self.path = path
        # HOL turns a file URI into a path by stripping the prefix, without
        # percent-decoding (PROTOCOL.md §5.1), so the raw path is what it needs.
        self.uri = "file://" + str(path)
        self.settings = settings
        self.hol_cmd = hol_cmd
        self.max_heap_mb = max_heap_mb
        self.clock = clock
        self._on_exit = on_exit
        self.file = FileState(self.uri)
        self.stderr_tail: deque[str] = deque(maxlen=settings.stderr_tail_lines)
        self.stderr_seen = 0  # lines ever read, to cut out what one call caused
        self.proc: asyncio.subprocess.Process | None = None
        self.lsp: LspClient | None = None
        self.state = "new"
        self.exit_reason = ""
        self.started_at = self.last_used = clock()
        self.ancestors = ancestors.Watch()  # build times of what this server loaded
        self.waiting = 0
        self.footprint: float | None = None  # MB, last sample
        self.last_verdict = ""  # of the last diagnostics answer, for status
        self.messages: deque[str] = deque(maxlen=10)  # HOL's window/showMessage texts
        # Errors of failed goal-state walks: HOL publishes each as a diagnostic
        # of the file until a clean walk or an edit (PROTOCOL.md §0, §11).
        self.walk_errors: deque[str] = deque(maxlen=64)
        self.clients: set[str] = set()
        self.data: bytes | None = None  # the bytes the server last got from us
        self._changed = asyncio.Event()
        self._sync_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task] = []
        self._exited = asyncio.Event()
        self._broken = ""  # why we killed a server whose output broke
        self.stop_reason = ""  # why the daemon stopped it (eviction, idle, restart…)
        self.start_task: asyncio.Task | None = None
        self._stop_task: asyncio.Task | None = None
        self._handshaken = False  # `initialized` sent: LSP shutdown is allowed

    # -- lifecycle ----------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def alive(self) -> bool:
        return self.state not in _ENDING

    @property
    def starting(self) -> bool:
        """Not yet through the handshake: no file has been sent to it."""
        return self.state in ("new", "starting")

    def _set_state(self, state: str) -> None:
        # Once going, a session only finishes going: a start or a sync that
        # completes meanwhile must not bring it back.
        if self.state in _ENDING and state not in ("stopped", "dead"):
            return
        if state != self.state:
            log.info("session %s (pid %s): %s -> %s", self.path.name, self.pid, self.state, state)
            self.state = state

    def command(self) -> list[str]:
        # Poly/ML runtime options must come before the word `lsp` (§1.1).
        heap = ["--maxheap", str(self.max_heap_mb)] if self.max_heap_mb > 0 else []
        return [self.hol_cmd, *heap, "lsp", "--lsp-check-proofs"]

    async def start(self) -> None:
        """Spawn the server in the script's directory and complete the handshake."""
        if not self.alive:  # stopped before its start task even ran
            raise ServerStopped(
                f"the HOL server for {self.path.name} was stopped ({self.stop_reason}) before it started"
            )
        self._set_state("starting")
        self.started_at = self.clock()
        env = dict(os.environ)
        if self.settings.extra_path:
            env["PATH"] = os.pathsep.join([*self.settings.extra_path, env.get("PATH", "")])
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.command(),
                cwd=str(self.path.parent),
                env=env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                preexec_fn=_die_with_parent,
                limit=1 << 20,
            )
        except OSError as err:
            self.exit_reason = f"could not start {self.hol_cmd}: {err}"
            self._set_state("dead")
            self._on_exit(self)
            raise ServerDied(self.exit_reason) from None
        log.info("started %s for %s (pid %d)", " ".join(self.command()), self.path, self.proc.pid)
        self.lsp = LspClient(self.proc.stdout, self.proc.stdin, self._notified)
        self._tasks = [
            asyncio.create_task(self._read(), name=f"lsp-{self.pid}"),
            asyncio.create_task(self._drain_stderr(), name=f"stderr-{self.pid}"),
            asyncio.create_task(self._watch(), name=f"watch-{self.pid}"),
        ]
        try:
            if not self.alive:
                raise ServerStopped("stopped before its handshake")
            await self.lsp.initialize(self.settings.start_timeout_s, self.settings.position_encodings)
            self._handshaken = True
            if not self.alive:
                raise ServerStopped("stopped during its handshake")
        except Exception as err:  # any failure: an error reply, a garbled result, a timeout
            if self.state in ("stopping", "stopped"):
                # The daemon stopped it (restart, eviction, shutdown): not a death.
                await self._kill(f"stopped while starting ({self.stop_reason})")
                raise ServerStopped(
                    f"the HOL server for {self.path.name} was stopped ({self.stop_reason}) while it "
                    "started; call again to use its successor."
                ) from None
            # Killed, not stopped: a failed start is a death, backoff and all.
            await self._kill(f"it did not complete the handshake: {err}")
            raise ServerDied(
                f"the HOL server for {self.path.name} did not start: {self.exit_reason or err}",
                detail=self.tail(),
            ) from None
        self._set_state("ready")

    async def wait_started(self, timeout: float) -> bool:
        """True once the handshake is done; False if `timeout` passes first.

        Raises the start's error if it failed.  Giving up does not stop the
        start: the next call finds the server further along.
        """
        if self.start_task is None:
            return not self.starting
        done, _ = await asyncio.wait({self.start_task}, timeout=max(0.0, timeout))
        if not done:
            return False
        self.start_task.result()
        return True

    async def _read(self) -> None:
        assert self.lsp and self.proc
        await self.lsp.run()
        # A dying server closes its output first; give it a moment to exit.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await self.proc.wait()
        if self.alive and self.proc.returncode is None:
            # Output ended or broke while the process lives on: it can no
            # longer be talked to, so it is as good as dead.
            await self._kill(str(self.lsp.closed_reason or "its output ended"))

    async def _kill(self, why: str) -> None:
        """End a server that cannot be used any more; it then counts as dead for `why`."""
        if self.proc is None or self._exited.is_set():
            return
        self._broken = self._broken or why
        log.warning("HOL server pid %d for %s: %s; killing it", self.proc.pid, self.path, why)
        self._signal_group(signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.settings.stop_timeout_s):
                await self._exited.wait()

    async def _drain_stderr(self) -> None:
        # The server blocks if nobody reads its stderr (PROTOCOL.md §1.1), so
        # read in chunks: readline() gives up on a line longer than its limit.
        assert self.proc and self.proc.stderr
        partial, skipping = b"", False  # skipping: the rest of a line already kept, cut
        while chunk := await self.proc.stderr.read(1 << 16):
            *lines, partial = (partial + chunk).split(b"\n")
            for line in lines:
                if not skipping:
                    self._keep_stderr(line)
                skipping = False
            if len(partial) > MAX_STDERR_LINE:
                if not skipping:
                    self._keep_stderr(partial)
                partial, skipping = b"", True
        if partial and not skipping:
            self._keep_stderr(partial)

    def _keep_stderr(self, line: bytes) -> None:
        text = line[:MAX_STDERR_LINE].decode("utf-8", "replace")
        if len(line) > MAX_STDERR_LINE:
            text += " …(cut)"
        self.stderr_tail.append(text)
        self.stderr_seen += 1

    async def _watch(self) -> None:
        assert self.proc
        code = await self.proc.wait()
        # Let the readers finish so the stderr tail holds the last words.
        await asyncio.wait(self._tasks[:2], timeout=1.0)
        if self.state not in ("stopping", "stopped"):
            self.exit_reason = self._broken or f"the HOL server (pid {self.proc.pid}) exited with status {code}"
            log.warning("%s for %s; stderr tail:\n%s", self.exit_reason, self.path, self.tail(20))
            self._set_state("dead")
        else:
            self._set_state("stopped")
        self._exited.set()
        self._wake()
        self._on_exit(self)

    def stderr_since(self, mark: int) -> str:
        """What the server wrote to stderr after `stderr_seen` was `mark` (as much as is kept)."""
        count = min(self.stderr_seen - mark, len(self.stderr_tail))
        return "\n".join(list(self.stderr_tail)[len(self.stderr_tail) - count:]) if count > 0 else ""

    def tail(self, lines: int = 30) -> str:
        return "\n".join(list(self.stderr_tail)[-lines:])

    def mark_stopping(self, reason: str) -> None:
        """From now on this server counts as going; `stop()` does the stopping."""
        if self.alive:
            self.stop_reason = reason
            self._set_state("stopping")
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
        grace = self.settings.stop_timeout_s
        # A server that exited long ago may have had its pid (and group id)
        # reused: only a group that was running when the stop began is signalled.
        running = self.proc is not None and not self._exited.is_set()
        if self.start_task is not None and not self.start_task.done():
            # The start sees the state and kills what it spawned; end of input
            # ends a handshake that is under way (§15).
            self._close_input()
            await asyncio.wait({self.start_task}, timeout=grace)
        if self.proc is not None and not self._exited.is_set():
            if self.lsp is not None and self._handshaken:
                # Before `initialized`, any other message kills HOL with a
                # protocol error (§4.1); closing its input ends it cleanly.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(grace):
                        await self.lsp.shutdown(grace)
            self._close_input()
            for sig in (None, signal.SIGTERM, signal.SIGKILL):
                if sig is not None:
                    self._signal_group(sig)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(grace):
                        await self._exited.wait()
                    break
        if running:
            # Anything the server left in its process group goes too.
            self._signal_group(signal.SIGKILL)
        self._set_state("stopped" if self.state != "dead" else "dead")
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _close_input(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            with contextlib.suppress(Exception):
                self.proc.stdin.close()

    def _signal_group(self, sig: int) -> None:
        assert self.proc
        with contextlib.suppress(ProcessLookupError, PermissionError):
            log.info("sending %s to the process group of pid %d", signal.Signals(sig).name, self.proc.pid)
            os.killpg(self.proc.pid, sig)

    # -- notifications and waiting -----------------------------------------

    def _notified(self, method: str, params: dict) -> None:
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
            if self.state in ("ready", "compiling", "checking", "settled"):
                self._set_state(self._activity())
            self._wake()

    def _activity(self) -> str:
        if self.file.phase == "compiling":
            return "compiling"
        return "checking" if self.file.checking() else "settled"

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
        if self.state == "dead":
            checking = [f"{e.name} (line {e.line0 + 1})" for e in self.file.checking()]
            during = f" while checking {', '.join(checking)}" if checking else ""
            raise ServerDied(
                f"the HOL server for {self.path.name} died{during}: {self.exit_reason}. "
                "The next call starts a new one.",
                detail=self.tail(),
            )
        if self.state in ("stopping", "stopped"):
            raise ServerStopped(
                f"the HOL server for {self.path.name} was stopped ({self.stop_reason}) while this "
                "call waited on it; call again to use its successor."
            )

    # -- file sync ------------------------------------------------------------

    async def sync(self, data: bytes, text: str) -> None:
        """Make the server's copy equal `text`: didOpen first, then full-text didChange."""
        async with self._sync_lock:
            self.check_alive()
            if data == self.data:
                return
            assert self.lsp is not None
            if self.data is None:
                await self._send_open(text)
            else:
                spill = script.spilling_proof(self.file.text, text)
                if spill is not None:
                    await self._send_statement_edit(text, spill)
                await self._send_change(text)
            self.data = data

    async def _send_statement_edit(self, text: str, spill: script.ProofBlock) -> None:
        """Send `text` with a blank line before `spill`, and let HOL act on it.

        HOL would take an edit that starts in `spill`'s body as confined to
        it, and leave the checks of the proofs it runs into going on stale
        text.  A blank line before the theorem is a statement edit: HOL drops
        every proof from there on, and a pass that follows cancelled proofs
        re-checks them all.  Its attempt must start before the real text
        goes, or the debounce folds the two edits into one.
        """
        seen = self.file.attempts
        await self._send_change(text[: spill.start] + "\n" + text[spill.start:])
        if not await self.wait_until(lambda: self.file.attempts != seen, self.settings.spill_wait_s):
            log.warning(
                "HOL did not act on the interim text for %s within %.1fs; the edit may be taken as "
                "confined to proof %s", self.path, self.settings.spill_wait_s, spill.name,
            )

    async def _send_open(self, text: str) -> None:
        version = 1
        self.file.sent(version, text, self.clock())
        await self.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": self.uri, "languageId": "holscript", "version": version, "text": text}},
        )
        self._set_state("compiling")

    async def _send_change(self, text: str) -> None:
        version = self.file.version + 1
        self.file.sent(version, text, self.clock())
        await self.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": self.uri, "version": version}, "contentChanges": [{"text": text}]},
        )
        self._set_state("compiling")

    async def _resync(self) -> None:
        async with self._sync_lock:
            if self.alive and self.data is not None:
                log.warning("HOL server for %s reported a desync; resending the whole text", self.path)
                await self._send_change(self.file.text)

    async def request(self, method: str, params: dict, timeout: float | None = None):
        self.check_alive()
        assert self.lsp is not None
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
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):  # a dying server is gone within this
                await self._exited.wait()
        if not self._exited.is_set():
            await self._kill(str(err))
        self.check_alive()

    # -- resources ------------------------------------------------------------

    def footprint_mb(self) -> float | None:
        """Resident plus swapped memory of the server's process group, MB."""
        if self.proc is None or not self.alive:
            return None
        try:
            root = psutil.Process(self.proc.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return None
        total = 0
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                info = proc.memory_full_info()
                total += info.rss + getattr(info, "swap", 0)
        return total / (1024 * 1024)
