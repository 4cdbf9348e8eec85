"""Retrying a blocked compile once a build has produced what it was missing.

A server whose compile blocked (`$/compileBlocked`) never loaded the modules
the block names, and the real server does not look again by itself: an
identical text sent after the build only repeats the block (transcript
`blocked-then-built`); `$/hol/retryCompile` or an edit to the header does.
So when a build produces every module a blocked server was missing, the
daemon sends that server `$/hol/retryCompile` itself, whoever ran the build:

    holmake   the daemon's own run, once it has ended (`after_build`), whose
              answer then names the files it unblocked
    a call    any call about the file that finds the modules built (`notice`)
    the watch a build outside the daemon, seen by the directory watch
              (`buildwatch`) of the ancestors' build files, once it has gone quiet

This is not `replacement`'s business, and must stay apart from it: a server
that *loaded* an ancestor cannot load a rebuilt one (HOL loads a theory once
per process), so it needs a successor; a blocked server loaded nothing, so a
retry on the same server is right, and cheap.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import weakref
from pathlib import Path

from holsrv.disk import ancestors
from holsrv.pool.buildwatch import BUILD_QUIET_S, BuildWatch
from holsrv.pool.servers import Servers
from holsrv.server.session import Session
from holsrv.verdict.filestate import Phase

log = logging.getLogger(__name__)


class Unblocker:
    """The retries the daemon sends for blocked servers whose missing modules were built."""

    def __init__(self, pool: Servers, watch: BuildWatch) -> None:
        self.pool = pool  # only what `Servers` offers: the pool owns this, not the reverse
        self.watch = watch  # told to look again once a build written moments ago is quiet
        # The build times a retry was sent for, per server: a retry that blocks
        # again (the build was not what HOL needed) is not repeated until they change.
        self._tried: weakref.WeakKeyDictionary[Session, dict[str, float]] = weakref.WeakKeyDictionary()
        self._retries: dict[Session, asyncio.Task[bool]] = {}

    def pending(self, session: Session) -> bool:
        """A retry the daemon sent has not been answered yet."""
        return session in self._retries

    def notice(self, session: Session) -> None:
        """Retry `session`'s compile if it is blocked and everything it was missing is built now,
        and the build is finished: a Holmake of the daemon's there retries when it ends, and
        files written moments ago are looked at again once left alone."""
        built = self._ready(session)
        if built is None or self.pool.builds.running_in(ancestors.include_dirs(session.path.parent)):
            return
        if time.time() - max(built.values(), default=0.0) < BUILD_QUIET_S:  # wall clock: file times are
            self.watch.recheck_in(BUILD_QUIET_S)  # a build still being written would block again
            return
        self._start(session, built)

    async def after_quiet(self, session: Session, deadline: float) -> None:
        """`notice`, waiting (until `deadline` on the pool's clock) for a build written moments
        ago to be left alone first: an answer then waits for the retry, not a stale BLOCKED."""
        while (built := self._ready(session)) is not None:
            if self.pool.builds.running_in(ancestors.include_dirs(session.path.parent)):
                return  # the daemon's Holmake retries when it ends; the answer says it may be stale
            left = BUILD_QUIET_S - (time.time() - max(built.values(), default=0.0))
            if left <= 0:
                self._start(session, built)
                return
            if self.pool.clock() + left > deadline:
                return
            await session.wait_change(left)  # the quiet period, or the server saying something

    async def after_build(self, wait: float) -> list[Session]:
        """A Holmake run ended: retry every blocked server it gave what it was missing, wait
        (up to `wait`) for HOL's answers, and return the servers that are no longer blocked."""
        retries: dict[Session, asyncio.Task[bool]] = {}
        for session in self.pool.serving():
            built = self._ready(session)
            if built is not None:
                retries[session] = self._start(session, built)
            elif session in self._retries:  # a call or the watch got there first
                retries[session] = self._retries[session]
        if retries:
            await asyncio.wait([asyncio.shield(t) for t in retries.values()], timeout=max(0.0, wait))
        return [s for s in retries if s.alive and s.phase != Phase.BLOCKED]

    def reasons(self, session: Session) -> list[str]:
        """Why an answer from `session` may be stale because of a build it has not seen yet."""
        blocked = session.file.blocked or {}
        modules = ", ".join(blocked.get("modules", ())) or "its missing ancestors"
        if self.pending(session):
            return [f"UNBLOCKING: {modules} built since this file blocked; the daemon asked HOL to compile "
                    "it again (retryCompile) and HOL has not answered yet. Ask again shortly."]
        if self._ready(session) is not None:
            return [f"UNBLOCKING: {modules} built since this file blocked; the daemon retries its compile "
                    f"once the build has finished and been left alone for {BUILD_QUIET_S:.0f}s. Ask again shortly."]
        return []

    def _ready(self, session: Session) -> dict[str, float] | None:
        """The build times of every module `session`'s block names, when all are built and no
        retry was sent for these builds; else None."""
        if session.phase != Phase.BLOCKED or not session.alive or session.starting or session in self._retries:
            return None
        modules = list((session.file.blocked or {}).get("modules", ()))
        if not modules:
            return None
        built = _built(modules, session.path.parent)
        if not all(built.values()) or self._tried.get(session) == built:
            return None
        return built

    def _start(self, session: Session, built: dict[str, float]) -> asyncio.Task[bool]:
        self._tried[session] = built
        mark = session.retrying()  # at once: a cached BLOCKED answer is void from here on
        log.info("retrying the blocked compile of %s (pid %s): %s built", session.path, session.pid,
                 ", ".join(built))
        task = asyncio.create_task(session.retried(mark, self.pool.settings.lookup_wait_s),
                                   name=f"unblock-{session.path.name}")
        self._retries[session] = task

        def done(finished: asyncio.Task[bool]) -> None:
            if self._retries.get(session) is finished:
                del self._retries[session]
            if not finished.cancelled() and finished.exception() is not None:  # the server died or stopped
                log.info("the retry of %s ended: %s", session.path, finished.exception())

        task.add_done_callback(done)
        return task


def _built(modules: list[str], script_dir: Path) -> dict[str, float]:
    """For each module (`fooTheory`, or a library `fooLib`), the newest time one of its
    build files was written where Holmake puts them for `script_dir`'s scripts (0: none)."""
    theories = [name.removesuffix("Theory") for name in modules if name.endswith("Theory")]
    times = {f"{name}Theory": t for name, t in ancestors.shared.times(theories, script_dir).items()}
    libraries = [name for name in modules if not name.endswith("Theory")]
    if libraries:
        dirs = ancestors.include_dirs(script_dir)
        for name in libraries:
            times[name] = max((_mtime(d / sub / f"{name}.uo") for d in dirs for sub in ("", ".hol/objs")),
                              default=0.0)
    return {name: times[name] for name in modules}


def _mtime(path: Path) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
