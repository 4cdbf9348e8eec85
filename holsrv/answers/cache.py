"""Settled answers, shared by every client, keyed by what makes them true: the one
place the rules of a cached answer are written.

Both ways an answer is given from the cache use these rules: the ordinary
path (`goals`, `diagnostics`: leased, synced, then looked up) and the fast
path (`fastpath`: looked up with nothing awaited).  So a rule is written once:

* the key (`goal_key`, `diagnostics_key`): always the session's identity and
  everything its server has said (a new server, or news from it,
  invalidates), the content hash of the file (an edit invalidates), plus the
  question itself;
* what may be stored (`AnswerCache.keep`): only an answer about a settled
  file goes in, so an answer that may still change is never served twice;
* a look (`AnswerCache.hit`, `AnswerCache.look` and `given`): the answer
  marked as cached, with the server that gives it and its freshness (on the
  ordinary path only its age, the rest stamped as every answer's is);
* when a look needs nothing awaited (`serving`): the file is unchanged on
  disk since it was last read (one `os.stat`), is the very text its running
  server has, and nothing may have made that server's answers stale.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import msgspec

from holsrv.disk import files, gitrefs
from holsrv.pool.pool import Pool
from holsrv.rpc import messages as m
from holsrv.server.session import Session


def goal_key(session: Session, content: str, line: int, column: int | None) -> tuple:
    """Where a goal state of `content` at (line, column) is cached.  The diagnostics HOL publishes
    once the compile is done (a failure moved to its step, a walk's own failure) change no goal
    state, so they are not in it: asking at a failing step is then cached like anywhere else."""
    return session.cache_key("goalState", content, line, column, diagnostics=False)


def diagnostics_key(session: Session, content: str, stale: list[str] | tuple[str, ...]) -> tuple:
    """Where a diagnostics answer of `session` about content `content` is cached: keyed by its
    staleness reasons too, which the answer lists, and by the commit git's HEAD names (read from
    `.git`'s files, no child), as its note of statements changed since HEAD is (`statementcheck`)."""
    return session.cache_key("diagnostics", content, tuple(stale), gitrefs.head_key(session.path.parent))


def serving(scripts: files.Reader, pool: Pool, file: str) -> tuple[files.Script, Session] | None:
    """The file, unchanged on disk, and its running server, which has that very text and
    answers that cannot be stale, its project file unchanged as last looked (at most a second
    ago: `Projects.recent`); else None (the ordinary path leases, syncs and says why)."""
    script = scripts.unchanged(file)
    if script is None:
        return None
    session = pool.sessions.get(script.path)
    if (session is None or not session.alive or session.starting or session.trials.trial
            or session.data is None or session.content_hash != script.hash
            or not pool.staleness.fresh(script.path, session)
            or pool.project_reasons(script.path, session, recent=True)):
        return None
    return script, session


def given(cached: Any, server: m.ServerNote, freshness: m.Freshness) -> Any:
    """The answer `cached` as a reply: marked cached, from `server` (the one giving it now,
    not the one that first did), with `freshness`.  A copy: the cache keeps its answer as put."""
    return msgspec.structs.replace(cached, cached=True, server=server, freshness=freshness)


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

    def hit(self, key: Hashable, server: m.ServerNote) -> Any:
        """The answer under `key` as a cached reply (`given`, with its age as its freshness:
        the rest is stamped as any answer's), or None on a miss."""
        cached = self.get(key)
        if cached is None:
            return None
        return given(cached, server, m.Freshness(cached.content_hash, age_s=self.age(key)))

    def look(self, key: Hashable) -> tuple[Any, float] | None:
        """The answer under `key` and its age, for a caller that stamps it whole itself (the
        fast path, which then makes it `given`); None on a miss, not counted as one: the
        ordinary path's look follows it."""
        cached = self.get(key, count_miss=False)
        return None if cached is None else (cached, self.age(key))

    def __contains__(self, key: Hashable) -> bool:
        """Whether `key` has an answer (neither a hit nor a miss)."""
        return key in self._entries

    def keep(self, key: Hashable, answer: object, *, settled: bool) -> bool:
        """Put `answer` under `key` if it is `settled` (it can no longer change: HOL's pass is
        over and it said all it will); an unsettled answer is never stored.  True if stored."""
        if settled:
            self.put(key, answer)
        return settled

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
