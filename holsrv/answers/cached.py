"""The fast path: an answer already in the cache, given with nothing awaited.

A cached answer's key holds the server, everything it has said and the
content hash of the text (`cache`).  When the file on disk is unchanged
since it was last read (one `os.stat`: the freshness check), is the very
text its running server has, and nothing may have made that server's
answers stale (`staleness`, which keeps a server's clean bill only until a
build file is written), the key is made and looked up at once: no lease
(nothing is awaited, so nothing can stop or evict the server under the
call), no sync (the server has this text), no re-read for the freshness
stamp (the stat was just taken).  Anything else (no server, another text, a
trial holding the server, a rebuilt ancestor, whose replacement the ordinary
path's look starts, a miss) goes the ordinary way, which answers it the same.

A goalState at one position and a diagnostics are cached (hover, definition
and the other lookups are asked of HOL each time).  A diagnostics also goes
the ordinary way when its wait could differ there: a request that waits for
a change or may become a job, or a blocked compile (a retry may be due).
"""

from __future__ import annotations

from holsrv.answers import diagnostics
from holsrv.answers.common import Context, answer_settled, freshness, note, replace
from holsrv.answers.goals import goals
from holsrv.disk import files
from holsrv.pool.pool import Lease, Start
from holsrv.rpc import messages as m
from holsrv.server.session import Session
from holsrv.verdict.filestate import Phase


def answer(ctx: Context, request: m.Request, client: str) -> m.Reply | None:
    """The stamped reply to `request` if it is a cached goalState or diagnostics, else None."""
    if type(request) is m.GoalState:  # `type is`, not a match: the cheapest test, and no subclass is either
        return _goal_state(ctx, request, client)
    if type(request) is m.Diagnostics:
        return _diagnostics(ctx, request, client)
    return None


def _goal_state(ctx: Context, request: m.GoalState, client: str) -> m.Reply | None:
    if request.positions is not None:  # a batch: `goalbatch`
        return None
    served = _serving(ctx, request.file)
    if served is None:
        return None
    script, session = served
    key = goals.cache_key(session, script.hash, request.line, request.column)
    reply = _given(ctx, script, session, key, client, request.expect_hash)
    if reply is not None:
        ctx.prefetches.used(key)
    return reply


def _diagnostics(ctx: Context, request: m.Diagnostics, client: str) -> m.Reply | None:
    if request.changed_since or request.defer_after is not None:  # a wait, or a job: `diagnostics`, `jobs`
        return None
    served = _serving(ctx, request.file)
    if served is None:
        return None
    script, session = served
    if session.phase == Phase.BLOCKED:  # the ordinary path looks for a retry first
        return None
    # Keyed by its staleness reasons, as the ordinary path keys it: there are none.
    return _given(ctx, script, session, diagnostics.cache_key(session, script.hash, ()), client, request.expect_hash)


def _serving(ctx: Context, file: str) -> tuple[files.Script, Session] | None:
    """The file, unchanged on disk, and its running server, which has that very text and
    answers that cannot be stale; else None."""
    script = ctx.scripts.unchanged(file)
    if script is None:
        return None
    session = ctx.pool.sessions.get(script.path)
    if (session is None or not session.alive or session.starting or session.trials.trial
            or session.data is None or session.content_hash != script.hash
            or not ctx.pool.staleness.fresh(script.path, session)):
        return None
    return script, session


def _given(ctx: Context, script: files.Script, session: Session, key: tuple, client: str,
           expect_hash: str) -> m.Reply | None:
    """The answer cached under `key`, stamped as the ordinary path stamps it; None on a miss."""
    cached = ctx.cache.get(key, count_miss=False)
    if cached is None:
        return None
    # No lease, but a use all the same: least recently used order, idleness, status's clients.
    session.clients.add(client)
    ctx.pool.sessions.move_to_end(script.path)
    session.last_used = ctx.clock()
    # As `stamp` would: the file is `script`, just stat'ed, and its server has no staleness
    # reason (`_serving` just asked, and nothing has been awaited since).
    fresh = freshness(ctx, script, cached.content_hash, settled=answer_settled(cached, session),
                      age_s=ctx.cache.age(key), expect_hash=expect_hash, stale=[])
    return replace(cached, cached=True, server=note(Lease(session, Start.WARM)), freshness=fresh)
