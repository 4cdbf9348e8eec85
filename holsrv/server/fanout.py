"""A server's notifications, handed to whoever listens (editors), each through a bounded outbox.

HOL's reader task calls `Fanout.publish` for every notification; a
listener must not block it, so each editor's frames go into its own
`Outbox`, which never grows past its bound: a slow editor loses progress
first (its oldest), then its oldest frames, and never delays the server's
reader, the daemon's answers or another client.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)

Listener = Callable[[str, Any], None]
T = TypeVar("T")

# What an editor may miss without losing a result: progress and log lines.
PROGRESS = frozenset({"$/progress", "$/compileProgress", "window/logMessage", "$/holdep", "$/eval/holdep"})


class Fanout:
    """The listeners to one server's notifications."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(method, params)` for every notification from now on; returns the unsubscribe."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def publish(self, method: str, params: Any) -> None:
        for listener in list(self._listeners):
            try:
                listener(method, params)
            except Exception:  # one listener's bug must not stop the server's reader
                log.exception("a listener failed on %s", method)


class Outbox(Generic[T]):
    """Frames for one slow reader, at most `limit`; progress is dropped first, oldest first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.dropped = 0  # frames dropped since it opened
        self._frames: deque[tuple[T, bool]] = deque()
        self._ready = asyncio.Event()

    def __len__(self) -> int:
        return len(self._frames)

    def put(self, frame: T, droppable: bool = False) -> None:
        """Queue `frame` (`droppable`: progress, the first to go when the outbox is full)."""
        if len(self._frames) >= self.limit:
            self._drop_one()
        self._frames.append((frame, droppable))
        self._ready.set()

    def _drop_one(self) -> None:
        self.dropped += 1
        for i, (_, droppable) in enumerate(self._frames):
            if droppable:
                del self._frames[i]
                return
        self._frames.popleft()

    async def get(self) -> T:
        """The oldest frame, once there is one."""
        while not self._frames:
            self._ready.clear()
            await self._ready.wait()
        return self._frames.popleft()[0]
