"""Goal states asked for before an agent asks: which, how many, and when.

Once a verdict has settled with a proof failing at a located step, the
agent's usual next call is goalState at that step.  The daemon asks HOL for
it in the background (`start`) and caches the answer, so that call is a hit.

Bounded: at most `per_pass` failures of one text of one server (0: none),
each asked as holctl and holmcp ask it (the line, and the line at the
failure's column), one walk at a time.  Never ahead of a real call: each
walk waits until no call's own walk is in flight on the server (`real`),
so a real call waits behind at most the one walk already sent, which HOL
runs from the state it kept after each tactic.  Dropped when the text
changes: before each walk the server must still have the text the verdict
was about, no trial may hold it, and it must be running.

Counted for status: the walks asked ahead (`asked`), and the answers asked
ahead that a call was then given (`hits`, each answer once: a hit says the
walk was worth it, not how often the agent asked).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable

from holsrv.errors import HolsrvError
from holsrv.server.session import Session
from holsrv.verdict.filestate import Phase

log = logging.getLogger(__name__)

# (line, column) as a client asks: 1-based, column None for the whole line.
Question = tuple[int, int | None]
# Asks one question of the server about the text and caches the answer.
Ask = Callable[[int, int | None], Awaitable[object]]
# The cache keys of answers asked ahead that no call has been given yet, at most: a few per pass.
MAX_KEPT = 256


class Dropped(Exception):
    """A prefetch gave way: its text changed, or real calls kept the server busy."""


class Prefetches:
    """Prefetches in progress, by server; how many walks were asked ahead (`asked`) and how
    many of their answers a call was given (`hits`)."""

    def __init__(self, per_pass: int, wait_s: float = 60.0) -> None:
        self.per_pass = per_pass
        self.wait_s = wait_s  # the longest a prefetch waits for a real call's walks to end
        self._planned: dict[int, str] = {}  # server id -> the content hash its prefetch was planned for
        self._in_flight: dict[int, int] = {}  # server id -> real calls walking now
        self._clear: dict[int, asyncio.Event] = {}  # server id -> set while none is
        self._tasks: set[asyncio.Task] = set()
        self.asked = 0
        self.hits = 0
        self._kept: OrderedDict[Hashable, bool] = OrderedDict()  # cache keys of answers asked ahead, unused

    @property
    def running(self) -> int:
        """Prefetches under way."""
        return len(self._tasks)

    def plan(self, session: Session, content: str, failures: list[tuple[int, int]]) -> list[Question]:
        """What to ask ahead about `session`'s text `content`, whose verdict shows a failure
        at each of `failures` (line, column): nothing if that text's were planned already."""
        if self.per_pass <= 0 or self._planned.get(session.id) == content or not failures:
            return []
        self._planned[session.id] = content
        chosen = list(dict.fromkeys(failures))[: self.per_pass]
        return [question for line, column in chosen for question in ((line, None), (line, column))]

    def start(self, session: Session, content: str, questions: list[Question], ask: Ask) -> None:
        """Ask `questions` in the background, in order, while `session` still has `content`."""
        if not questions:
            return
        task = asyncio.create_task(self._run(session, content, questions, ask), name=f"prefetch-{session.pid}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def kept(self, key: Hashable) -> None:
        """An answer asked ahead was cached under `key`."""
        self._kept[key] = True
        while len(self._kept) > MAX_KEPT:  # answers of old texts, long gone from the cache
            self._kept.popitem(last=False)

    def used(self, key: Hashable) -> None:
        """A call was given the cached answer under `key`: a hit, the first time, if it was asked ahead."""
        if self._kept and self._kept.pop(key, False):
            self.hits += 1

    @contextlib.asynccontextmanager
    async def real(self, session: Session) -> AsyncIterator[None]:
        """Around a call's own walks on `session`: no prefetch walk is sent meanwhile."""
        self._in_flight[session.id] = self._in_flight.get(session.id, 0) + 1
        self._clear.setdefault(session.id, asyncio.Event()).clear()
        try:
            yield
        finally:
            left = self._in_flight[session.id] - 1
            if left:
                self._in_flight[session.id] = left
            else:
                del self._in_flight[session.id]
                self._clear.pop(session.id).set()

    async def close(self) -> None:
        """Cancel the prefetches in progress (the daemon is stopping)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def turn(self, session: Session, content: str) -> None:
        """Before each walk asked ahead: wait until no real call walks on `session`; `Dropped`
        if that took over `wait_s`, or `session` no longer has `content` as the verdict saw it."""
        clear = self._clear.get(session.id)
        if clear is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.wait_s):
                    await clear.wait()
        if session.id in self._in_flight or not _current(session, content):
            raise Dropped(f"the server for {session.path.name} is busy, or no longer has the text of the verdict")
        self.asked += 1

    async def _run(self, session: Session, content: str, questions: list[Question], ask: Ask) -> None:
        for line, column in questions:
            try:
                await ask(line, column)
            except Dropped as why:
                log.debug("prefetch dropped: %s", why)
                return
            except (HolsrvError, ConnectionError) as err:  # stopped, died, hung: the real call will say
                log.debug("prefetch for %s gave up: %s", session.path.name, err)
                return


def _current(session: Session, content: str) -> bool:
    """`session` can answer about `content` as the verdict saw it: running, that text, no trial."""
    return (session.alive and not session.starting and session.content_hash == content
            and not session.trials.trial and session.phase == Phase.COMPLETED)
