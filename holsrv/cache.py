"""Settled answers, shared by every client, keyed by what makes them true.

A key always holds the session's identity (a new server invalidates) and the
content hash of the file (an edit invalidates), plus the question itself.
Only answers about a settled file go in: an answer that may still change is
never served twice.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable


class AnswerCache:
    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, object] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable):
        value = self._entries.get(key)
        if value is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(key)
        return value

    def put(self, key: Hashable, value: object) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
