"""Periodic duties for the daemon's life (the idle reaper, the memory
sampler): each in a task of its own, a failure logged and not fatal."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class Duties:
    """The periodic tasks, started together and cancelled together."""

    def __init__(self) -> None:
        self._tasks: list[asyncio.Task] = []

    def every(self, period: float, duty: Callable[[], Awaitable[None]], name: str) -> None:
        """Run `duty` every `period` seconds until `cancel`."""
        self._tasks.append(asyncio.create_task(_every(period, duty), name=name))

    def cancel(self) -> None:
        for task in self._tasks:
            task.cancel()

    async def ended(self) -> None:
        """Until every cancelled duty has ended."""
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def _every(period: float, duty: Callable[[], Awaitable[None]]) -> None:
    while True:
        await asyncio.sleep(period)  # a periodic duty, not a synchronisation
        try:
            await duty()
        except Exception:
            log.exception("background duty %s failed; it runs again in %.1fs", duty.__name__, period)
