"""The word that a HOL server said something, and waits on it with a deadline.

Every notification, the server's exit and its being marked as stopping
wake every waiter at once; a waiter re-checks what it waits for.  Knows
nothing of LSP or files: what to re-check is the waiter's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable


class Changes:
    """Wakes waiters when something changes; `wait_until` re-checks a condition on each wake."""

    def __init__(self, clock: Callable[[], float], check: Callable[[], None]) -> None:
        self._clock = clock
        self._check = check  # raises when waiting can no longer succeed (the server is gone)
        self._event = asyncio.Event()

    def wake(self) -> None:
        """Wake everyone waiting now; later waits wait for the next change."""
        self._event.set()
        self._event = asyncio.Event()

    async def wait_change(self, timeout: float) -> None:
        """Return at the next change, or when `timeout` passes."""
        event = self._event
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, timeout)):
                await event.wait()

    async def wait_until(self, condition: Callable[[], bool], timeout: float) -> bool:
        """Wait for `condition` (re-checked at every change); False on timeout.

        Raises what `check` raises if it fails meanwhile.
        """
        deadline = self._clock() + timeout
        while not condition():
            self._check()
            if self._clock() >= deadline:
                return False
            await self.wait_change(deadline - self._clock())
        return True
