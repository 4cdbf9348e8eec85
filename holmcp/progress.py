"""MCP progress notifications for a tool call: the daemon's Progress frames, and a heartbeat between them.

The SDK's `report_progress` sends nothing unless the MCP client gave a
progress token, so the relay always runs; it costs a few frames a second.
While the daemon says nothing (a request that sends no progress frames: a
lookup waiting for a start, an eval) a heartbeat every HEARTBEAT_S says how
long the call has waited, so a host that resets its timeout on progress
does not give up on a long eval.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from holsrv.rpc.messages import Progress

HEARTBEAT_S = 5.0
# MCP requires every notification's progress to exceed the last one's.  The
# daemon's count (proofs done) stands still while its message changes
# ("loading the heap", "compiling"), so such a message moves it by this much.
NUDGE = 0.01

Report = Callable[[float, float | None, str | None], Awaitable[None]]


class ProgressRelay:
    """Turns progress frames into calls of `report(progress, total, message)` that always advance."""

    def __init__(self, report: Report, clock: Callable[[], float] = time.monotonic) -> None:
        self._report = report
        self._clock = clock
        self._started = clock()
        self._last_sent = self._started
        self._value = 0.0

    async def frame(self, frame: Progress) -> None:
        """Report one daemon Progress frame."""
        counted = f" ({frame.done}/{frame.total})" if frame.total else ""
        await self._send(float(frame.done), float(frame.total) if frame.total else None, frame.message + counted)

    async def beat(self) -> None:
        """Report that the call is still waiting, if nothing was reported for HEARTBEAT_S."""
        if self._clock() - self._last_sent >= HEARTBEAT_S:
            await self._send(self._value, None, f"waiting for the daemon ({self._clock() - self._started:.0f} s)")

    @contextlib.asynccontextmanager
    async def heartbeat(self) -> AsyncIterator[ProgressRelay]:
        """Beat every HEARTBEAT_S while the block runs.  A timer, not a task: most calls (a cached
        answer) end long before the first beat, and then cost no task to start and cancel."""
        loop = asyncio.get_running_loop()
        beats: set[asyncio.Task] = set()
        timer: asyncio.TimerHandle | None = None

        def later() -> None:
            nonlocal timer
            timer = loop.call_later(max(0.05, HEARTBEAT_S - (self._clock() - self._last_sent)), start)

        def start() -> None:
            task = loop.create_task(beating())
            beats.add(task)
            task.add_done_callback(beats.discard)
            task.add_done_callback(lambda t: t.cancelled() or t.exception())  # a beat that failed is no loss

        async def beating() -> None:
            await self.beat()
            later()

        later()
        try:
            yield self
        finally:
            assert timer is not None
            timer.cancel()
            for task in list(beats):
                task.cancel()
            await asyncio.gather(*beats, return_exceptions=True)

    async def _send(self, done: float, total: float | None, message: str) -> None:
        value = done if done > self._value else self._value + NUDGE
        if total is not None and value > total:
            total = None  # past the count it announced: a total would read as over 100 %
        self._value, self._last_sent = value, self._clock()
        await self._report(value, total, message)
