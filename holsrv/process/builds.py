"""Holmake runs: at most one per directory, bounded in time, in a process group of their own
under a watchdog (`holsrv.process.watchdog`), so none outlives the daemon.

A second caller for a directory where Holmake already runs joins that run
and gets its outcome (two Holmakes writing one `.hol/objs` would corrupt
each other's output).  Holmake's output (stdout and stderr together) is read
as it comes: the last lines are kept, bounded, and every line wakes the
callers following the run.  Nothing of it reaches a client unasked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from holsrv.process.process import _die_with_parent, watched

log = logging.getLogger(__name__)

MAX_LINE_CHARS = 2000  # of one output line kept
# How long a killed Holmake's group gets between SIGTERM and SIGKILL.
KILL_GRACE_S = 2.0
# "fooTheory    (0s)   [1/2]     CHEATED": built, but with a cheated proof.
_CHEATED = re.compile(r"^\s*(\S+?)(?:Theory)?\s.*\bCHEATED\s*$")
_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # colours, when Holmake thinks it writes to a terminal


@dataclass
class Outcome:
    """How one Holmake run ended."""

    exit_code: int | None  # None: killed, or never started
    timed_out: bool = False
    stopped: str = ""  # why the daemon killed it (shutdown), or why it could not start
    elapsed_s: float = 0.0


@dataclass(eq=False)
class Build:
    """One Holmake run in one directory, and what it has printed so far."""

    directory: Path
    command: list[str]
    started: float
    tail: deque[str]
    lines_seen: int = 0
    # Theories it reported CHEATED, from every line (the tail may have lost them).
    cheated: list[str] = field(default_factory=list)
    task: asyncio.Task[Outcome] | None = None
    pid: int | None = None
    stopped: str = ""  # why it was stopped before its end (a cancelled job), for its outcome
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def last_line(self) -> str:
        return self.tail[-1] if self.tail else ""

    def keep(self, line: str) -> None:
        cheated = _CHEATED.match(_ESCAPE.sub("", line[:MAX_LINE_CHARS]))
        if cheated and cheated.group(1) not in self.cheated:
            self.cheated.append(cheated.group(1))
        self.tail.append(line[:MAX_LINE_CHARS])
        self.lines_seen += 1
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_change(self, timeout: float) -> None:
        """Return when Holmake prints a line or ends, or `timeout` passes."""
        assert self.task is not None
        event = self._changed
        waiters = {asyncio.ensure_future(event.wait()), self.task}
        try:
            await asyncio.wait(waiters, timeout=max(0.0, timeout), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                if waiter is not self.task:
                    waiter.cancel()


class Builds:
    """The Holmake runs in progress, by directory."""

    def __init__(self, timeout_s: float, tail_lines: int, clock: Callable[[], float],
                 observe: Callable[[float], None] | None = None) -> None:
        self.timeout_s = timeout_s
        self.tail_lines = tail_lines
        self.clock = clock
        self.running: dict[Path, Build] = {}
        self.closing = False
        self.observe = observe  # told each run's seconds when it ends (the metrics' histogram), if given

    def running_in(self, directories: list[Path]) -> list[Build]:
        """The runs in progress in any of `directories`."""
        return [b for d in directories if (b := self.running.get(d)) is not None]

    def start(self, directory: Path, command: list[str], env: dict[str, str], timeout_s: float | None = None,
              ) -> tuple[Build, bool]:
        """The run in `directory`: the one in progress (joined: True), else a new one of `command` in `env`,
        killed after `timeout_s` (default the daemon's: a project file may set its own)."""
        build = self.running.get(directory)
        if build is not None:
            return build, True
        build = Build(directory, command, self.clock(), deque(maxlen=self.tail_lines))
        build.task = asyncio.create_task(self._run(build, env, timeout_s or self.timeout_s),
                                         name=f"holmake-{directory.name}")
        self.running[directory] = build
        build.task.add_done_callback(lambda _: self._ended(build))
        return build, False

    def _ended(self, build: Build) -> None:
        if self.running.get(build.directory) is build:
            del self.running[build.directory]
        build._wake()
        if self.observe is not None:
            self.observe(max(0.0, self.clock() - build.started))

    async def _run(self, build: Build, env: dict[str, str], timeout_s: float) -> Outcome:
        log.info("running %s in %s", " ".join(build.command), build.directory)
        try:
            proc = await asyncio.create_subprocess_exec(
                *watched(build.command, env), cwd=str(build.directory), stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_parent, env=env,
            )
        except OSError as err:
            return Outcome(None, stopped=f"could not start {build.command[0]}: {err}")
        build.pid = proc.pid
        try:
            async with asyncio.timeout(timeout_s):
                await self._read(proc, build)
                code = await proc.wait()
        except TimeoutError:
            await _kill_group(proc)
            log.warning("Holmake in %s ran past %gs: killed", build.directory, timeout_s)
            return Outcome(None, timed_out=True, elapsed_s=self.clock() - build.started)
        except asyncio.CancelledError:
            await _kill_group(proc)
            if build.stopped:  # stopped on request: an outcome its callers read, not a shutdown
                log.info("Holmake in %s was stopped: %s", build.directory, build.stopped)
                return Outcome(None, stopped=build.stopped, elapsed_s=self.clock() - build.started)
            raise
        log.info("Holmake in %s exited with status %d", build.directory, code)
        return Outcome(code, elapsed_s=self.clock() - build.started)

    async def _read(self, proc: asyncio.subprocess.Process, build: Build) -> None:
        assert proc.stdout is not None
        partial = b""
        while chunk := await proc.stdout.read(1 << 16):
            *lines, partial = (partial + chunk).split(b"\n")
            for line in lines:
                build.keep(line.decode("utf-8", "replace").rstrip("\r"))
            if len(partial) > MAX_LINE_CHARS * 4:  # a line without end: keep its start
                build.keep(partial.decode("utf-8", "replace") + " …(cut)")
                partial = b""
        if partial:
            build.keep(partial.decode("utf-8", "replace"))

    async def stop(self, directory: Path, why: str) -> None:
        """Kill the run in `directory`, if one runs, with its process group; its callers are told `why`."""
        build = self.running.get(directory)
        if build is None or build.task is None:
            return
        build.stopped = why
        build.task.cancel()
        await asyncio.wait({build.task}, timeout=3 * KILL_GRACE_S)

    async def close(self) -> None:
        """Kill every run in progress (the daemon is stopping) and wait for them to go."""
        self.closing = True
        tasks = [b.task for b in self.running.values() if b.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM Holmake's process group (Holmake and the builds it spawned), then SIGKILL, then reap."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(KILL_GRACE_S):
                await proc.wait()
                break
    # Whatever Holmake left in its group goes too: Linux hands out no pid that
    # is still some group's id, so while anyone is left the group is ours.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
