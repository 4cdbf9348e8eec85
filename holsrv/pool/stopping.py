"""Servers on their way out: those stopped in tasks of their own (to make
room, retired after a replacement), waiting until they have gone, and
stopping every server at shutdown within a budget.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Coroutine

from holsrv.config.settings import Settings
from holsrv.server.session import Session


class Stops:
    """The stops in progress, and the shutdown of them all."""

    def __init__(self, settings: Settings, stop: Callable[[Session, str], Coroutine[object, object, None]]) -> None:
        self.settings = settings
        self._stop = stop  # the pool's: it forgets the server and rewrites the record
        self._pending: dict[asyncio.Task, Session] = {}

    def later(self, session: Session, reason: str, name: str | None = None) -> None:
        """Count `session` as gone at once, and stop it in a task of its own."""
        session.mark_stopping(reason)
        task = asyncio.create_task(self._stop(session, reason), name=name)
        self._pending[task] = session
        task.add_done_callback(lambda t: self._pending.pop(t, None))

    async def settled(self) -> None:
        """Until every stop in progress has ended (each is bounded by its escalation)."""
        if self._pending:
            await asyncio.wait(set(self._pending))

    async def everything(self, sessions: list[Session], budget_s: float | None, force: asyncio.Event | None) -> None:
        """Stop `sessions` and those being stopped in parallel, each with its escalation.

        With `budget_s`, all of it fits in that many seconds (each step gets a
        quarter), and what is left then is SIGKILLed; so is everything, at
        once, when `force` is set meanwhile (a second signal).
        """
        sessions = [*sessions, *self._pending.values()]
        if budget_s is not None:
            for session in sessions:
                session.proc.hurry(budget_s / 4)
        stops = {asyncio.ensure_future(s.stop("the daemon is shutting down")) for s in sessions}
        done = await wait_all({*stops, *self._pending}, budget_s, force)
        if not done:
            why = "the daemon was told twice to stop" if force and force.is_set() else "the shutdown budget ran out"
            await asyncio.gather(*(s.proc.kill(why) for s in sessions), return_exceptions=True)
            await wait_all(stops, self.settings.stop_timeout_s)
        await asyncio.gather(*stops, *self._pending, return_exceptions=True)


async def wait_all(
    tasks: Collection[asyncio.Future], timeout: float | None, interrupt: asyncio.Event | None = None
) -> bool:
    """True once every task is done; False if `timeout` passes or `interrupt` is set first."""
    if all(t.done() for t in tasks):
        return True
    racers: set[asyncio.Future] = {asyncio.ensure_future(asyncio.wait(tasks))}
    if interrupt is not None:
        racers.add(asyncio.ensure_future(interrupt.wait()))
    try:
        await asyncio.wait(racers, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for racer in racers:
            racer.cancel()  # not the tasks: asyncio.wait leaves what it waits on alone
    return all(t.done() for t in tasks)
