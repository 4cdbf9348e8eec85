"""One child process, on its own: spawn, exit watch, stop escalation; its stderr ring and footprint.

The child runs under a `watchdog`, our direct child, which leads the
child's own process group and kills that whole group when the daemon dies:
nothing the child starts outlives the daemon, even a `hol` that is a
wrapper script running the real server as its child and ignoring SIGTERM
and end of input.  The watchdog exits as the child does, so `pid` is the
watchdog's, which is also the group's id.  Knows nothing of
LSP or files; the session on top of it does.  Its stderr is kept by
`stderrring`, its memory measured by `footprint`.

A child may also be adopted (`ChildProcess.adopt`): one this process
spawned before it re-executed itself (`restart-daemon`), taken over with
its pipes (`pipes`) and watched by pid (`Adopted`).

Life, as supervisor's `ProcessStates` has it: STARTING (created, spawning)
→ RUNNING → STOPPING → STOPPED, or → DEAD when it exits on its own.  Every
transition is logged, and happens in `_become`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import enum
import logging
import os
import shutil
import signal
from collections import deque
from collections.abc import Awaitable, Callable

import psutil

from holsrv import facilities
from holsrv.process import footprint, pipes, watchdog
from holsrv.process.stderrring import StderrRing

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
# Every child gets this variable naming the daemon that started it, so a later
# daemon kills a leftover only when it can prove the process is one of ours.
OWNER_ENV = "HOLSRV_OWNER"
EXIT_POLL_S = 0.1  # how often a child's exit is looked for where there are no pidfds


def owner_marker(pid: int | None = None) -> str:
    """`<pid>:<start time>` of a daemon process (default: this one): its children's OWNER_ENV."""
    proc = psutil.Process(pid)
    return f"{proc.pid}:{proc.create_time():.2f}"


def owner_running(marker: str) -> bool:
    """True while the daemon process `marker` names still runs (same pid, same start time)."""
    try:
        pid, _, _ = marker.partition(":")
        return owner_marker(int(pid)) == marker
    except (ValueError, psutil.Error):
        return False


class ProcessState(enum.Enum):
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    DEAD = "dead"


ENDING = frozenset({ProcessState.STOPPING, ProcessState.STOPPED, ProcessState.DEAD})
GONE = frozenset({ProcessState.STOPPED, ProcessState.DEAD})
# Once going, a process only finishes going: a start that completes meanwhile
# must not bring it back.
_ALLOWED = {
    ProcessState.STARTING: {ProcessState.RUNNING, ProcessState.STOPPING, ProcessState.DEAD},
    ProcessState.RUNNING: {ProcessState.STOPPING, ProcessState.DEAD},
    ProcessState.STOPPING: GONE,
    ProcessState.STOPPED: set(),
    ProcessState.DEAD: set(),
}


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    # Linux only; elsewhere the watchdog sees its parent change within its poll.
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, watchdog.DEATH_SIGNAL)


def watched(argv: list[str], env: dict[str, str]) -> list[str]:
    """`argv` run under a watchdog; raises FileNotFoundError now if `argv[0]` cannot be run at all."""
    if shutil.which(argv[0], path=env.get("PATH", os.defpath)) is None:
        raise FileNotFoundError(2, "no such executable file", argv[0])
    return watchdog.command(argv)


async def _exit_of(proc: asyncio.subprocess.Process | Adopted) -> None:
    """Return once our child `proc` has exited (reaped or not), whoever holds its pipes.

    Where pidfds are missing (or in portable mode), the return code is polled:
    asyncio's child watcher sets it at the exit, while `wait()` would wait for
    the pipes too.
    """
    if not facilities.pidfd():
        while proc.returncode is None:
            await asyncio.sleep(EXIT_POLL_S)
        return
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        return  # already reaped
    except (AttributeError, OSError):
        await proc.wait()
        return
    loop = asyncio.get_running_loop()
    exited = loop.create_future()

    def readable() -> None:
        if not exited.done():
            exited.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await exited
    finally:
        loop.remove_reader(fd)
        os.close(fd)


class Adopted:
    """A child this daemon did not spawn but inherited across `exec` (see `ChildProcess.adopt`):
    what the exit watch asks of an `asyncio.subprocess.Process`, read with `waitpid`, since
    the loop's child watcher does not know it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._code: int | None = None

    @property
    def returncode(self) -> int | None:
        if self._code is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped already (never by us): its status is lost
                self._code = -1
            else:
                if pid == self.pid:
                    self._code = os.waitstatus_to_exitcode(status)
        return self._code

    async def wait(self) -> int:
        while (code := self.returncode) is None:
            await asyncio.sleep(EXIT_POLL_S)
        return code


class ChildProcess:
    """A child with piped stdin/stdout, its stderr kept as a bounded ring of lines."""

    def __init__(
        self, name: str, stderr_lines: int, stop_timeout_s: float, on_exit: Callable[[], None] = lambda: None
    ) -> None:
        self.name = name  # for logs
        self.state = ProcessState.STARTING
        self.stop_timeout_s = stop_timeout_s
        self.exit_reason = ""
        self._stderr = StderrRing(stderr_lines)
        self._on_exit = on_exit
        self._proc: asyncio.subprocess.Process | Adopted | None = None
        self.pipes: pipes.Pipes | None = None  # our ends of its stdin, stdout and stderr
        self.adopted = False  # taken over from the daemon this one replaced (`holsrv.pool.handover`)
        self._tasks: list[asyncio.Task] = []
        self._exited = asyncio.Event()
        self._broken = ""  # why we killed it, when we did

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def ending(self) -> bool:
        return self.state in ENDING

    @property
    def exited(self) -> bool:
        return self._exited.is_set()

    def _become(self, state: ProcessState) -> None:
        if state is not self.state and state in _ALLOWED[self.state]:
            log.info("%s (pid %s): %s -> %s", self.name, self.pid, self.state.value, state.value)
            self.state = state

    async def spawn(self, argv: list[str], cwd: str, env: dict[str, str]) -> tuple[asyncio.StreamReader,
                                                                                 asyncio.StreamWriter]:
        """Start the child; its stdout and stdin.  Raises OSError if it cannot be started."""
        env = {**env, OWNER_ENV: owner_marker()}
        # Pipes of our own, not asyncio's: their descriptors can be handed to a successor daemon.
        ends, ours = pipes.make()
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *watched(argv, env), cwd=cwd, env=env,
                stdin=ends.stdin, stdout=ends.stdout, stderr=ends.stderr,
                start_new_session=True,
                preexec_fn=_die_with_parent if facilities.death_signal() else None,
            )
        except OSError as err:
            ends.close()
            ours.close()
            self.exit_reason = f"could not start {argv[0]}: {err}"
            self._become(ProcessState.DEAD)
            self._exited.set()
            self._on_exit()
            raise
        ends.close()
        log.info("started %s for %s (pid %d)", " ".join(argv), self.name, self._proc.pid)
        return await self._running(ours)

    async def adopt(self, pid: int, fds: tuple[int, int, int], stdout_left: bytes = b"",
                    stderr_left: bytes = b"", stderr_tail: list[str] | None = None) -> tuple[asyncio.StreamReader,
                                                                                            asyncio.StreamWriter]:
        """Take over our child `pid` (a watchdog a predecessor daemon started, this process before
        its `exec`) with our ends of its pipes `fds` (stdin, stdout, stderr); `*_left`: what the
        predecessor read from them and had not yet taken."""
        self._proc = Adopted(pid)
        self.adopted = True
        for line in stderr_tail or ():
            self._stderr.tail.append(line)
        ours = pipes.Pipes(*fds)
        ours.inheritable(False)
        log.info("adopted the HOL server for %s (pid %d)", self.name, pid)
        return await self._running(ours, stdout_left, stderr_left)

    async def _running(self, ours: pipes.Pipes, stdout_left: bytes = b"", stderr_left: bytes = b"",
                       ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        self.pipes = await pipes.connect(ours, stdout_left, stderr_left)
        self._become(ProcessState.RUNNING)
        assert ours.reader is not None and ours.writer is not None and ours.errors is not None
        self._tasks = [
            asyncio.create_task(self._stderr.drain(ours.errors), name=f"stderr-{self.pid}"),
            asyncio.create_task(self._watch(), name=f"watch-{self.pid}"),
        ]
        return ours.reader, ours.writer

    def handover(self) -> dict | None:
        """What a successor needs to adopt this child: its pid, our pipe ends (made inheritable) and
        what was read from them but not taken; None if it is not running.  Reading is paused first
        (`pipes.Pipes.pause`): call it with the loop not running in between, right before `exec`."""
        if self._proc is None or self.pipes is None or self.state is not ProcessState.RUNNING or self.exited:
            return None
        self.pipes.pause()
        self.pipes.inheritable()
        return {"pid": self._proc.pid, "fds": list(self.pipes.fds),
                "stdout_left": pipes.unread(self.pipes.reader), "stderr_left": pipes.unread(self.pipes.errors),
                "stderr_tail": list(self._stderr.tail)}

    def handed_back(self) -> None:
        """The `exec` failed: the child is ours again, read as before."""
        if self.pipes is not None:
            self.pipes.inheritable(False)
            self.pipes.resume()

    # -- stderr -----------------------------------------------------------------

    @property
    def stderr_tail(self) -> deque[str]:
        """The last lines the child wrote to stderr."""
        return self._stderr.tail

    @property
    def stderr_seen(self) -> int:
        """Lines ever read from stderr, to cut out what one call caused."""
        return self._stderr.seen

    def stderr_since(self, mark: int) -> str:
        """What the child wrote to stderr after `stderr_seen` was `mark` (as much as is kept)."""
        return self._stderr.since(mark)

    def tail(self, lines: int = 30) -> str:
        return self._stderr.last(lines)

    # -- exit ---------------------------------------------------------------------

    async def _watch(self) -> None:
        assert self._proc
        # The watchdog's own exit, not `wait()`, which also waits for the
        # pipes: a watchdog killed on its own leaves the server holding them.
        await _exit_of(self._proc)
        # What it left in its group goes with it.  Until it is reaped, the
        # watchdog holds the group id, and after that any member left does:
        # either way no other process can have it.
        self._signal_group(signal.SIGKILL)
        code = await self._proc.wait()
        # Let stderr finish so the tail holds the last words.
        await asyncio.wait(self._tasks[:1], timeout=1.0)
        if self.pipes is not None:  # what it wrote is read (or given up on): the pipes are done with
            await self.pipes.ended(1.0)
            self.pipes.close()
        if self.state is not ProcessState.STOPPING:
            self.exit_reason = self._broken or f"the HOL server (pid {self._proc.pid}) exited with status {code}"
            log.warning("%s for %s; stderr tail:\n%s", self.exit_reason, self.name, self.tail(20))
            self._become(ProcessState.DEAD)
        else:
            self._become(ProcessState.STOPPED)
        self._exited.set()
        self._on_exit()

    async def wait_exit(self, timeout: float) -> bool:
        """True once the child has exited; False if `timeout` passes first."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, timeout)):
                await self._exited.wait()
        return self._exited.is_set()

    async def kill(self, why: str) -> None:
        """End a child that cannot be used any more; it then counts as dead for `why`."""
        if self._proc is None or self._exited.is_set():
            return
        self._broken = self._broken or why
        log.warning("HOL server pid %d for %s: %s; killing it", self._proc.pid, self.name, why)
        self._signal_group(signal.SIGKILL)
        await self.wait_exit(self.stop_timeout_s)

    # -- stopping -----------------------------------------------------------------

    def hurry(self, step_s: float) -> None:
        """Give each step of stopping at most `step_s` from now on (the daemon's shutdown budget)."""
        self.stop_timeout_s = min(self.stop_timeout_s, step_s)

    def mark_stopping(self) -> None:
        """From now on this child counts as going; `stop()` does the stopping."""
        self._become(ProcessState.STOPPING)

    async def stop(
        self, goodbye: Callable[[], Awaitable[None]] | None = None, *, hung: bool = False, kill: bool = False
    ) -> None:
        """`goodbye` (the protocol's own shutdown), close stdin, SIGTERM the group, SIGKILL, reap.

        Each step gets `stop_timeout_s`.  A `hung` child, which answers
        nothing, gets one step: SIGTERM (with its input closed), then SIGKILL;
        one to `kill` (a runaway, which holds on to its work) gets SIGKILL at once.
        A child that exited long ago may have had its pid (and group id)
        reused: only a group that was running when the stop began is signalled.
        """
        self.mark_stopping()
        running = self._proc is not None and not self._exited.is_set()
        if running:
            # Each step reads the grace afresh: `hurry` may shorten it meanwhile.
            if goodbye is not None and not hung and not kill:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.stop_timeout_s):
                        await goodbye()
            self.close_input()
            steps = ((signal.SIGKILL,) if kill else (signal.SIGTERM, signal.SIGKILL) if hung
                     else (None, signal.SIGTERM, signal.SIGKILL))
            for sig in steps:
                if sig is None:
                    log.info("closed the input of pid %s; waiting %.1fs for it to exit", self.pid, self.stop_timeout_s)
                else:
                    self._signal_group(sig)
                if await self.wait_exit(self.stop_timeout_s):
                    break
            # Anything the child left in its process group goes too.
            self._signal_group(signal.SIGKILL)
        self._become(ProcessState.STOPPED)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.pipes is not None:
            self.pipes.close()

    def close_input(self) -> None:
        if self.pipes is not None and self.pipes.writer is not None:
            with contextlib.suppress(Exception):
                self.pipes.writer.close()

    def _signal_group(self, sig: int) -> None:
        assert self._proc
        with contextlib.suppress(ProcessLookupError, PermissionError):
            log.info("sending %s to the process group of pid %d", signal.Signals(sig).name, self._proc.pid)
            os.killpg(self._proc.pid, sig)

    # -- resources ------------------------------------------------------------------

    def footprint_mb(self) -> float | None:
        """Resident plus swapped memory of the child and its descendants, MB."""
        if self._proc is None or self.ending:
            return None
        return footprint.footprint_mb(self._proc.pid)

    def create_time(self) -> float | None:
        """The child's start time as the OS records it (for the leftovers record)."""
        if self._proc is None or self.state in GONE:
            return None
        try:
            return psutil.Process(self._proc.pid).create_time()
        except psutil.Error:
            return None

