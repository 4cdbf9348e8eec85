"""One `hol lsp` child and the LSP client that talks to it: start, talk, stop.

Its life is the process's (STARTING → RUNNING → STOPPING → STOPPED, or
DEAD) plus whether the LSP handshake is done.  Knows nothing of the file
the server checks: the session on top of it does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from holsrv.config.settings import Settings
from holsrv.errors import RanAway, ServerDied, ServerStopped, ServerTimeout
from holsrv.lsp import replies
from holsrv.lsp.client import LspClient
from holsrv.process.process import ChildProcess, ProcessState
from holsrv.server.runaway import LEASHED, Runaway

log = logging.getLogger(__name__)

OnNotification = Callable[[str, Any], Awaitable[None] | None]


class HolServer:
    """A HOL server process with its LSP client, for the script `name` (for messages)."""

    def __init__(
        self, name: str, settings: Settings, on_notification: OnNotification, on_exit: Callable[[], None],
        during: Callable[[], str],
    ) -> None:
        self.name = name
        self.settings = settings
        self.proc = ChildProcess(name, settings.stderr_tail_lines, settings.stop_timeout_s, on_exit)
        self.lsp: LspClient | None = None
        self.stop_reason = ""  # why the daemon stopped it (eviction, idle, restart…)
        self.start_task: asyncio.Task | None = None
        self.handshaken = False  # `initialized` sent: LSP shutdown is allowed
        self._on_notification = on_notification
        self._during = during  # what the server was doing, for the message of its death
        self._tasks: list[asyncio.Task] = []
        self._stop_task: asyncio.Task | None = None
        # Why it was judged a runaway and replaced (`holsrv.server.runaway`): the
        # story calls that waited on it are told; it is killed, not asked to stop.
        self.runaway: Runaway | None = None

    @property
    def alive(self) -> bool:
        return not self.proc.ending

    @property
    def hung(self) -> bool:
        """A request timed out with not a word from the server since (see `LspClient.hung`)."""
        return self.lsp is not None and self.lsp.hung is not None

    def background(self, work: Coroutine[Any, Any, None], name: str) -> None:
        """Run `work` for as long as the server lives; stopping cancels it."""
        self._tasks.append(asyncio.create_task(work, name=name))

    # -- starting -------------------------------------------------------------

    async def start(self, argv: list[str], cwd: str) -> None:
        """Spawn the server in `cwd` and complete the handshake."""
        env = dict(os.environ)
        if self.settings.extra_path:
            env["PATH"] = os.pathsep.join([*self.settings.extra_path, env.get("PATH", "")])
        try:
            stdout, stdin = await self.proc.spawn(argv, cwd, env)
        except OSError:
            raise ServerDied(self.proc.exit_reason) from None
        self.lsp = LspClient(stdout, stdin, self._on_notification, hung_after=self.settings.request_timeout_s,
                             typed_params=replies.TYPED_PARAMS, letgo_s=self.settings.letgo_s,
                             leashed=LEASHED)
        self._tasks = [asyncio.create_task(self._read(), name=f"lsp-{self.proc.pid}")]
        try:
            if not self.alive:
                raise ServerStopped("stopped before its handshake")
            await self.lsp.initialize(self.settings.start_timeout_s, self.settings.position_encodings)
            self.handshaken = True
            if not self.alive:
                raise ServerStopped("stopped during its handshake")
        except Exception as err:  # any failure: an error reply, a garbled result, a timeout
            await self._failed_start(err)
        log.info("session %s (pid %s): ready", self.name, self.proc.pid)

    async def adopt(self, process: dict, lsp: dict) -> None:
        """Take over a server a predecessor daemon handed over (`handover`): no handshake, the LSP
        client going on where the predecessor's stopped."""
        taken = bytes(lsp.get("taken", b""))
        stdout, stdin = await self.proc.adopt(int(process["pid"]), tuple(process["fds"]),
                                              taken + bytes(process["stdout_left"]), bytes(process["stderr_left"]),
                                              list(process["stderr_tail"]))
        self.lsp = LspClient(stdout, stdin, self._on_notification, hung_after=self.settings.request_timeout_s,
                             typed_params=replies.TYPED_PARAMS, letgo_s=self.settings.letgo_s,
                             leashed=LEASHED)
        self.lsp.adopt(lsp)
        self.handshaken = True
        self._tasks = [asyncio.create_task(self._read(), name=f"lsp-{self.proc.pid}")]

    def handover(self) -> dict | None:
        """What a successor daemon needs to adopt this server, if it can be handed over now: running,
        through its handshake, and quiet (`LspClient.quiet`); else None.  Pauses its reading."""
        if not self.alive or not self.handshaken or self.lsp is None or self.runaway is not None \
                or not self.lsp.quiet():
            return None
        process = self.proc.handover()
        if process is None:
            return None
        lsp = self.lsp.export()
        process["stdout_left"] = lsp.pop("taken") + process["stdout_left"]
        return {"process": process, "lsp": {**lsp, "taken": b""}}

    def handed_back(self) -> None:
        """The handover failed: read the server as before."""
        self.proc.handed_back()

    async def _failed_start(self, err: Exception) -> None:
        if self.proc.state in (ProcessState.STOPPING, ProcessState.STOPPED):
            # The daemon stopped it (restart, eviction, shutdown): not a death.
            await self.proc.kill(f"stopped while starting ({self.stop_reason})")
            raise ServerStopped(
                f"the HOL server for {self.name} was stopped ({self.stop_reason}) while it "
                "started; call again to use its successor."
            ) from None
        # Killed, not stopped: a failed start is a death, backoff and all.
        await self.proc.kill(f"it did not complete the handshake: {err}")
        raise ServerDied(
            f"the HOL server for {self.name} did not start: {self.proc.exit_reason or err}",
            detail=self.proc.tail(),
        ) from None

    async def wait_started(self, timeout: float) -> bool:
        """True once the handshake is done; False if `timeout` passes first.

        Raises the start's error if it failed.  Giving up does not stop the
        start: the next call finds the server further along.
        """
        task = self.start_task
        if task is None:
            return not (self.alive and not self.handshaken)
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

    # -- stopping -------------------------------------------------------------

    def mark_stopping(self, reason: str) -> bool:
        """From now on this server counts as going; False if it already was."""
        if not self.alive:
            return False
        self.stop_reason = reason
        self.proc.mark_stopping()
        return True

    async def stop(self) -> None:
        """Stop the server: shutdown/exit, close stdin, SIGTERM the group, SIGKILL, reap.

        Idempotent: every caller awaits the one stop in progress.
        """
        if self._stop_task is None:
            self._stop_task = asyncio.create_task(self._stop(), name=f"stop-{self.name}")
        await asyncio.shield(self._stop_task)

    async def _stop(self) -> None:
        if self.start_task is not None and not self.start_task.done():
            # The start sees the state and kills what it spawned; end of input
            # ends a handshake that is under way (docs/protocol.md#shutdown-and-exit).
            self.proc.close_input()
            await asyncio.wait({self.start_task}, timeout=self.settings.stop_timeout_s)
        # Before `initialized`, any other message kills HOL with a protocol
        # error (docs/protocol.md#handshake); closing its input then ends it cleanly.
        goodbye = self._goodbye if self.lsp is not None and self.handshaken else None
        # A hung server would let the goodbye and each polite step time out;
        # a runaway holds on to its work, so it is killed at once.
        await self.proc.stop(goodbye, hung=self.hung, kill=self.runaway is not None)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _goodbye(self) -> None:
        assert self.lsp
        await self.lsp.shutdown(self.settings.stop_timeout_s)

    # -- talking to HOL -------------------------------------------------------

    def check_alive(self) -> None:
        """Raise if this server can no longer answer: it died, was stopped, or was replaced as a runaway."""
        if self.runaway is not None:
            raise RanAway(self.runaway.story(), self.runaway)
        if self.proc.state is ProcessState.DEAD:
            raise ServerDied(
                f"the HOL server for {self.name} died{self._during()}: {self.proc.exit_reason}. "
                "The next call starts a new one.",
                detail=self.proc.tail(),
            )
        if not self.alive:
            raise ServerStopped(
                f"the HOL server for {self.name} was stopped ({self.stop_reason}) while this "
                "call waited on it; call again to use its successor."
            )

    async def request(self, method: str, params: dict, timeout: float | None = None):
        self.check_alive()
        assert self.lsp is not None
        if self.lsp.hung is not None:
            raise ServerTimeout(self.lsp.hung_message(f"the HOL server for {self.name} (pid {self.proc.pid})"))
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
