"""A bounded memo of a computation over a text, kept by the text itself.

Keyed by the text: its hash is computed once and kept by the string, a
file read again unchanged yields the same string object (`files.Reader`),
and an equal copy is recognised by comparing contents, so two texts never
share an entry unless they are equal.  The computation is given in steps
(`stepping`): at once for a small text or a caller off the loop, in slices
for a large one on the loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from holsrv.text import stepping

T = TypeVar("T")


class Memo(Generic[T]):
    """`compute(text)`'s result for the last `max_entries` texts asked about."""

    def __init__(self, compute: Callable[[str], stepping.Steps[T]], max_entries: int, slice_from: int) -> None:
        """`slice_from`: the size below which a text is computed at once even on the loop."""
        self.max_entries = max_entries
        self.computed = 0  # texts computed: for tests and the benchmark
        self._compute = compute
        self._slice_from = slice_from
        self._entries: OrderedDict[str, T] = OrderedDict()
        # One computation in flight per text and event loop (tests run several daemons at once).
        self._pending: dict[tuple[int, str], asyncio.Future[T]] = {}
        self._lock = threading.Lock()  # a shared memo, as lru_cache is: safe from any thread

    def of(self, text: str) -> T:
        """The result for `text`, computed now if not known."""
        with self._lock:
            known = self._entries.get(text)
            if known is not None:
                self._entries.move_to_end(text)
                return known
        return self._keep(text, stepping.run(self._compute(text)))

    async def prepare(self, text: str) -> T:
        """The result for `text`; a new large text is computed in slices, with the
        event loop free between them.  Concurrent callers share one computation."""
        if text in self._entries or len(text) < self._slice_from:
            return self.of(text)
        key = (id(asyncio.get_running_loop()), text)
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = asyncio.ensure_future(self._sliced(text))
            pending.add_done_callback(lambda _: self._pending.pop(key, None))
        return await asyncio.shield(pending)

    async def _sliced(self, text: str) -> T:
        return self._keep(text, await stepping.sliced(self._compute(text)))

    def _keep(self, text: str, value: T) -> T:
        with self._lock:
            known = self._entries.get(text)
            if known is not None:  # another caller computed it meanwhile: keep one
                return known
            self._entries[text] = value
            self.computed += 1
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
            return value
