"""Launching a HOL server: making its session, and starting it in a task of
its own once the servers stopped to make room for it have gone, then
opening its file at once (with the editor's buffer if an editor holds it:
`buffers`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from holsrv.config.projects import Project
from holsrv.config.settings import Settings
from holsrv.errors import HolsrvError
from holsrv.pool.stopping import Stops
from holsrv.server.buffers import Buffers
from holsrv.server.session import Session

log = logging.getLogger(__name__)


class Launcher:
    """Makes sessions and starts them in the background."""

    def __init__(
        self,
        settings: Settings,
        clock: Callable[[], float],
        stops: Stops,
        *,
        on_exit: Callable[[Session], None],
        started: Callable[[], None],
        texts: Buffers,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self._stops = stops  # evictions to wait for: their memory is free only once they have exited
        self._on_exit = on_exit  # the moment a server's process exits, for whatever reason
        self._started = started  # a start ended, well or not (the pool rewrites its record)
        self._texts = texts  # the text a server opens: an editor's buffer, else the disk's

    def session(self, path: Path, heap_mb: int, hol: str, settings: Settings | None = None,
                project: Project | None = None) -> Session:
        """A new session for `path`, not yet started, with `settings` (its project's; default the daemon's)
        and the `project` file they came from (None: the user-wide settings)."""
        return Session(path, settings or self.settings, hol, heap_mb, on_exit=self._on_exit, clock=self.clock,
                       project=project)

    def begin(self, session: Session) -> None:
        """Start `session` in a task of its own (`session.start_task`)."""
        # The start runs on its own: a caller whose wait ends first gives up
        # waiting, not the start (loading a heap can take minutes).
        session.start_task = asyncio.create_task(self._start(session), name=f"start-{session.path.name}")
        # Whoever waits sees a failed start; this keeps an unwatched one from
        # being logged as "never retrieved".
        session.start_task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _start(self, session: Session) -> None:
        await self._stops.settled()
        try:
            await session.start()
        finally:
            self._started()
        # Open the file at once, so it compiles even if the caller that started
        # this server gave up waiting; the next call finds it further along.
        try:
            script = await self._texts.read(session.path)
            await session.sync(script.data, script.text, script.hash)
        except (HolsrvError, OSError) as err:
            # The start itself succeeded; the next call syncs (or reports) the file.
            log.info("not opening %s in its new server: %s", session.path, err)
