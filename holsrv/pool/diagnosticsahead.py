"""Answers computed ahead of any call: after a write was synced with no call,
the daemon's diagnostics answer about the new text, once the file settles.

One task per script at a time (a newer text cancels the one about the older);
what is computed is the daemon's (`compute`, given by it: the pool knows no
answers), and a failure only means the next call computes its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from holsrv.disk import files
from holsrv.errors import HolsrvError
from holsrv.server.session import Session

# The answer about a script just synced to a session; True if it left one in the cache.
Compute = Callable[[Session, files.Script], Awaitable[bool]]

log = logging.getLogger(__name__)


class Ahead:
    """The background answers about scripts' newest synced texts."""

    def __init__(self, compute: Compute | None = None) -> None:
        self.compute = compute  # None: nothing is computed ahead
        self._tasks: dict[Path, asyncio.Task] = {}
        self.answered = 0  # answers left in the cache (for tests and the benchmark)

    def start(self, session: Session, script: files.Script) -> None:
        """Compute the answer about `script`, just synced to `session`, in the background."""
        if self.compute is None:
            return
        self.cancel(session.path)  # about an older text
        task = asyncio.get_running_loop().create_task(self._run(session, script),
                                                      name=f"answer-ahead-{session.path.name}")
        self._tasks[session.path] = task
        task.add_done_callback(lambda done: self._done(session.path, done))

    def cancel(self, path: Path) -> None:
        task = self._tasks.pop(path, None)
        if task is not None:
            task.cancel()

    def close(self) -> None:
        for path in list(self._tasks):
            self.cancel(path)

    def _done(self, path: Path, task: asyncio.Task) -> None:
        if self._tasks.get(path) is task:
            del self._tasks[path]

    async def _run(self, session: Session, script: files.Script) -> None:
        assert self.compute is not None
        try:
            self.answered += await self.compute(session, script)
        except HolsrvError as e:  # the server went, a trial began: the next call computes its answer
            log.debug("no answer ahead for %s: %s", session.path, e)
        except Exception:  # a background task: log it, the next call computes its answer anyway
            log.exception("computing the answer ahead for %s failed", session.path)
