"""Waits on a server's word: woken by every change, bounded by a deadline, ended by a failed check."""

from __future__ import annotations

import asyncio
import time

import pytest

from holsrv.errors import ServerStopped
from holsrv.server.changes import Changes


class Looked:
    """A condition that says when the waiter has looked at it (it then waits for the next change)."""

    def __init__(self, holds) -> None:
        self.holds = holds
        self.looked = asyncio.Event()

    def __call__(self) -> bool:
        self.looked.set()
        return self.holds()

    async def waiting(self) -> None:
        await asyncio.wait_for(self.looked.wait(), 60.0)
        self.looked.clear()


@pytest.mark.asyncio
async def test_a_wait_ends_at_the_change_that_makes_its_condition_true():
    changes = Changes(time.monotonic, lambda: None)
    state = {"n": 0}
    condition = Looked(lambda: state["n"] == 2)
    waiter = asyncio.create_task(changes.wait_until(condition, 60.0))
    for n in (1, 2):
        await condition.waiting()
        state["n"] = n
        changes.wake()
    assert await asyncio.wait_for(waiter, 60.0) is True


@pytest.mark.asyncio
async def test_a_wait_whose_deadline_passes_says_so_without_raising():
    changes = Changes(time.monotonic, lambda: None)
    assert await asyncio.wait_for(changes.wait_until(lambda: False, 0.01), 60.0) is False


@pytest.mark.asyncio
async def test_a_wait_raises_what_the_check_raises_once_woken():
    gone = {"now": False}

    def check() -> None:
        if gone["now"]:
            raise ServerStopped("stopped")

    changes = Changes(time.monotonic, check)
    condition = Looked(lambda: False)
    waiter = asyncio.create_task(changes.wait_until(condition, 60.0))
    await condition.waiting()
    gone["now"] = True
    changes.wake()
    with pytest.raises(ServerStopped):
        await asyncio.wait_for(waiter, 60.0)
