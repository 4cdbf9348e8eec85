"""Settled answers, shared by every client, keyed by what makes them true.

A key always holds the session's identity (a new server invalidates) and the
content hash of the file (an edit invalidates), plus the question itself.
Only answers about a settled file go in: an answer that may still change is
never served twice.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable


class AnswerCache:
    def __init__(self, max_entries: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, object] = OrderedDict()
        self.clock = clock
        self._born: dict[Hashable, float] = {}  # when each entry was put: a cached answer's age
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, *, count_miss: bool = True):
        """The answer under `key`, or None; `count_miss` False: a look that a full one
        follows on a miss (the fast path's) does not count the miss twice."""
        value = self._entries.get(key)
        if value is None:
            self.misses += count_miss
            return None
        self.hits += 1
        self._entries.move_to_end(key)
        return value

    def __contains__(self, key: Hashable) -> bool:
        """Whether `key` has an answer (neither a hit nor a miss)."""
        return key in self._entries

    def put(self, key: Hashable, value: object) -> None:
        self._entries[key] = value
        self._born[key] = self.clock()
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            old, _ = self._entries.popitem(last=False)
            self._born.pop(old, None)

    def age(self, key: Hashable) -> float:
        """Seconds since `key`'s answer was computed and put here (0 if it is not here)."""
        born = self._born.get(key)
        return max(0.0, self.clock() - born) if born is not None else 0.0
