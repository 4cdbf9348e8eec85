"""Who may use a file's HOL server while a trial puts other text in it.

Ordinary calls share the server: each holds a `use` from syncing the file
until it has read its answer.  A trial (`try`) holds it alone: it waits for
the calls in flight to finish, and calls that come meanwhile wait for it,
so no answer is ever read off the trial's text and the trial's text is
never overwritten by the disk text half-way.  Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from holsrv.errors import ServerBusy, TrialRunning


class TrialGate:
    def __init__(self) -> None:
        self.users = 0  # ordinary calls between their sync and their answer
        self.trial: str = ""  # what the running trial is doing, "" when none
        self._changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def use(self, timeout: float, file: str) -> AsyncIterator[None]:
        """An ordinary call's use of the server; waits up to `timeout` for a trial to end."""
        async with self._changed:
            if not await _wait_for(self._changed, lambda: not self.trial, timeout):
                raise TrialRunning(
                    f"a trial (try) is running on {file} ({self.trial}); its server holds other text "
                    f"until it ends. Call again in a few seconds."
                )
            self.users += 1
        try:
            yield
        finally:
            async with self._changed:
                self.users -= 1
                self._changed.notify_all()

    @contextlib.asynccontextmanager
    async def exclusive(self, timeout: float, file: str) -> AsyncIterator[None]:
        """The trial's hold: no other trial, and no call in flight; waits up to `timeout`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout  # one bound for both waits
        async with self._changed:
            if not await _wait_for(self._changed, lambda: not self.trial, timeout):
                raise TrialRunning(f"another trial (try) is running on {file} ({self.trial}); call again when it ends.")
            # Set before waiting for the calls in flight: calls that come now
            # queue behind the trial rather than keep it waiting for ever.
            self.trial = "waiting for other calls to finish"
            if not await _wait_for(self._changed, lambda: self.users == 0, deadline - loop.time()):
                self.trial = ""
                self._changed.notify_all()
                raise ServerBusy(
                    f"other calls on {file} kept its server busy for {timeout:.0f}s (a diagnostics "
                    "waiting for slow proofs?), so the trial did not start; call try again when they finish."
                )
        try:
            yield
        finally:
            async with self._changed:
                self.trial = ""
                self._changed.notify_all()

    def doing(self, what: str) -> None:
        """Say what the trial does now (for the message of a call that waits on it)."""
        if self.trial:
            self.trial = what


async def _wait_for(cond: asyncio.Condition, predicate, timeout: float) -> bool:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(max(0.0, timeout)):
            await cond.wait_for(predicate)
    return bool(predicate())
